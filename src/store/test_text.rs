//! One test's JSON read in one pass, without a tree of `Value`s: its compact text (the bytes
//! `Value::to_string` would write for it), the columns the `tests` table keeps and its
//! figures. Importing and saving runs of many tests spent most of their time building an
//! `IndexMap` per object to check each test, write it compact and read its figures.
//!
//! The pass answers only for the plain case: every object's keys distinct and every field
//! [`check_test`](super::run::check_test) looks at of the type it accepts. Anything else
//! (a check that fails, a key written twice, which a `Value` keeps once) is left to the
//! `Value` path, which says what is wrong exactly as before.

use super::figures::{DIRECTIONS, Figures, LATENCY_KEYS};
use serde::Serializer as _;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Longest test name accepted (a timed command's name is the whole command line).
pub(super) const NAME_LIMIT: usize = 4096;

/// The whole-number fields a test keeps in columns, with the largest value each accepts.
pub(super) const COLUMNS: [(&str, u64); 3] = [
    ("bs_bytes", 1 << 32),
    ("iodepth", 1 << 16),
    ("numjobs", 1 << 16),
];

/// What one pass over a test found, and its compact text in [`Walker::text`].
#[derive(Debug, Default)]
pub(super) struct Walked {
    /// Every key distinct in its object and every checked field of an accepted type: the
    /// text, columns and figures are exactly those of the `Value` path.
    pub plain: bool,
    /// Its name; `None` when it has none (then it is not plain).
    pub name: Option<String>,
    pub rw: Option<String>,
    /// `bs_bytes`, `iodepth` and `numjobs`.
    pub columns: [Option<i64>; 3],
    /// In the order `figures::of_test` gives them: by sample, then by direction.
    pub figures: Vec<Figures>,
}

/// Reads tests one after another, keeping its buffers between them.
#[derive(Default)]
pub(super) struct Walker {
    out: Vec<u8>,
    /// Whether the compact text is written (else `out` holds only the keys, to compare them).
    write: bool,
    /// The keys of the objects being read, as ranges of `out`, innermost object last.
    keys: Vec<(usize, usize)>,
    found: Walked,
}

impl Walker {
    /// The compact text of the test last read.
    pub fn text(&self) -> &str {
        // Only serde_json's serializer and ASCII punctuation wrote it.
        std::str::from_utf8(&self.out).unwrap_or_default()
    }

    /// Reads one test from `d`, writing its compact text when `write`; a syntax error is
    /// `d`'s own, at the same place as a `Value`'s.
    fn read<'de, D: Deserializer<'de>>(&mut self, d: D, write: bool) -> Result<Walked, D::Error> {
        self.write = write;
        self.out.clear();
        self.keys.clear();
        self.found = Walked {
            plain: true,
            ..Walked::default()
        };
        Seed {
            w: self,
            role: Role::Test,
        }
        .deserialize(d)?;
        let mut found = std::mem::take(&mut self.found);
        found.plain &= found.name.is_some();
        found.figures.sort_by_key(|f| {
            let dir = DIRECTIONS.iter().position(|d| *d == f.direction);
            (f.sample, dir)
        });
        Ok(found)
    }

    /// Reads a test's stored text for its columns and figures; `None` when it does not parse.
    /// Keys written twice are looked for only where the columns and figures are read.
    pub fn read_text(&mut self, text: &str) -> Option<Walked> {
        let mut de = serde_json::Deserializer::from_str(text);
        let found = self.read(&mut de, false).ok()?;
        de.end().ok()?;
        Some(found)
    }

    fn scalar(&mut self, role: Role, ok: bool) {
        if !ok && role != Role::Any {
            self.found.plain = false;
        }
    }

    fn number(&mut self, role: Role, x: f64, whole: Option<u64>) {
        match role {
            Role::Any => {}
            Role::Figure(i, slot) if x.is_finite() && x >= 0.0 => {
                let f = &mut self.found.figures[i];
                match slot {
                    Slot::Iops => f.iops = Some(x),
                    Slot::Bw => f.bw_bytes_per_s = Some(x),
                    Slot::Ops => f.ops_per_s = Some(x),
                    Slot::Lat(k) => f.lat_ns[k] = Some(x),
                }
            }
            Role::Column(c) => match whole.filter(|n| *n <= COLUMNS[c].1) {
                Some(n) => self.found.columns[c] = i64::try_from(n).ok(),
                None => self.found.plain = false,
            },
            _ => self.found.plain = false,
        }
    }

    /// Writes punctuation or a literal, when writing.
    fn put(&mut self, bytes: &[u8]) {
        if self.write {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Writes a value as serde_json does, when writing.
    fn put_as<T: serde::Serialize + ?Sized>(&mut self, v: &T) {
        if self.write {
            // Writing to a Vec cannot fail.
            let _ = v.serialize(&mut serde_json::Serializer::new(&mut self.out));
        }
    }

    fn string(&mut self, role: Role, s: &str) {
        self.put_as(s);
        match role {
            Role::Any => {}
            Role::Name if s.len() <= NAME_LIMIT => self.found.name = Some(s.to_owned()),
            Role::Rw => self.found.rw = Some(s.to_owned()),
            _ => self.found.plain = false,
        }
    }
}

/// Reads the next test of a stream (`SeqAccess::next_element_seed`).
impl<'de> DeserializeSeed<'de> for &mut Walker {
    type Value = Walked;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Walked, D::Error> {
        self.read(d, true)
    }
}

/// What a value is to the check and the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The test object.
    Test,
    /// A repeat object (sample N).
    Sample(u32),
    /// A direction of sample N (`read`, …).
    Direction(u32, &'static str),
    /// `lat_ns` of figures number I.
    Latency(usize),
    /// One figure of figures number I.
    Figure(usize, Slot),
    /// `repeats`.
    Repeats,
    Name,
    Rw,
    /// A whole-number column, by its index in [`COLUMNS`].
    Column(usize),
    /// Anything else: written, not looked at.
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Iops,
    Bw,
    Ops,
    Lat(usize),
}

impl Role {
    /// The role of the value under `key` in an object of this role.
    fn of_key(self, key: &str, w: &mut Walker) -> Role {
        let direction = |sample| {
            DIRECTIONS
                .iter()
                .find(|d| **d == key)
                .map(|d| Role::Direction(sample, d))
        };
        match self {
            Role::Test => match key {
                "name" => Role::Name,
                "rw" => Role::Rw,
                "repeats" => Role::Repeats,
                _ => COLUMNS
                    .iter()
                    .position(|(k, _)| *k == key)
                    .map(Role::Column)
                    .or_else(|| direction(0))
                    .unwrap_or(Role::Any),
            },
            Role::Sample(n) => direction(n).unwrap_or(Role::Any),
            Role::Direction(..) => {
                let Some(i) = w.found.figures.len().checked_sub(1) else {
                    return Role::Any;
                };
                match key {
                    "iops" => Role::Figure(i, Slot::Iops),
                    "bw_bytes_per_s" => Role::Figure(i, Slot::Bw),
                    "ops_per_s" => Role::Figure(i, Slot::Ops),
                    "lat_ns" => Role::Latency(i),
                    _ => Role::Any,
                }
            }
            Role::Latency(i) => LATENCY_KEYS
                .iter()
                .position(|(k, _)| *k == key)
                .map_or(Role::Any, |k| Role::Figure(i, Slot::Lat(k))),
            _ => Role::Any,
        }
    }
}

struct Seed<'w> {
    w: &'w mut Walker,
    role: Role,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        // Reading a stored text for its columns and figures, what nothing looks at is skipped
        // (the store wrote the text, so it parses).
        if self.role == Role::Any && !self.w.write {
            return d.deserialize_ignored_any(IgnoredAny).map(|_| ());
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.w.put(if b { b"true" } else { b"false" });
        self.w.scalar(self.role, false);
        Ok(())
    }

    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.w.put_as(&n);
        self.w.number(self.role, n as f64, u64::try_from(n).ok());
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.w.put_as(&n);
        self.w.number(self.role, n as f64, Some(n));
        Ok(())
    }

    fn visit_f64<E>(self, x: f64) -> Result<(), E> {
        let at = self.w.out.len();
        self.w.put_as(&x);
        // A figure is stored as a read of the compact text gives it, which is not always `x`:
        // serde_json's parse of the digits written for `x` may be one unit in the last place
        // away (it parses without `float_roundtrip`).
        let x = match self.role {
            Role::Figure(..) if self.w.write => {
                serde_json::from_slice(&self.w.out[at..]).unwrap_or(x)
            }
            _ => x,
        };
        self.w.number(self.role, x, None);
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.w.string(self.role, s);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.w.put(b"null");
        // Null is "not recorded" everywhere the check looks, except for the test itself, a
        // repeat and the name.
        let ok = !matches!(self.role, Role::Test | Role::Sample(_) | Role::Name);
        self.w.scalar(self.role, ok);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let w = self.w;
        w.scalar(self.role, self.role == Role::Repeats);
        w.put(b"[");
        let mut n = 0u32;
        loop {
            let role = match self.role {
                Role::Repeats => Role::Sample(n.saturating_add(1)),
                _ => Role::Any,
            };
            let at = w.out.len();
            if n > 0 {
                w.put(b",");
            }
            if seq.next_element_seed(Seed { w: &mut *w, role })?.is_none() {
                // The comma written for an element that was not there.
                w.out.truncate(at);
                break;
            }
            n = n.saturating_add(1);
        }
        w.put(b"]");
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let w = self.w;
        let role = match self.role {
            Role::Test | Role::Sample(_) | Role::Latency(_) | Role::Any => self.role,
            Role::Direction(sample, direction) => {
                w.found.figures.push(Figures {
                    sample,
                    direction,
                    iops: None,
                    bw_bytes_per_s: None,
                    ops_per_s: None,
                    lat_ns: [None; 7],
                });
                self.role
            }
            _ => {
                w.found.plain = false;
                Role::Any
            }
        };
        w.put(b"{");
        let first = w.keys.len();
        while let Some(child) = map.next_key_seed(Key {
            w: &mut *w,
            role,
            first,
        })? {
            w.put(b":");
            map.next_value_seed(Seed {
                w: &mut *w,
                role: child,
            })?;
        }
        w.keys.truncate(first);
        w.put(b"}");
        Ok(())
    }
}

/// A key of an object of role `role`: written (after a comma but for the first), checked
/// against the object's other keys (those on the stack from `first`), and answered with its
/// value's role.
struct Key<'w> {
    w: &'w mut Walker,
    role: Role,
    first: usize,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Role;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Role, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Role;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Role, E> {
        let w = self.w;
        if w.keys.len() > self.first {
            w.put(b",");
        }
        let start = w.out.len();
        let _ = serde_json::Serializer::new(&mut w.out).serialize_str(key);
        let end = w.out.len();
        let this = &w.out[start..end];
        if w.keys[self.first..]
            .iter()
            .any(|&(s, e)| &w.out[s..e] == this)
        {
            w.found.plain = false;
        }
        w.keys.push((start, end));
        Ok(self.role.of_key(key, w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::figures;
    use crate::store::run::check_test;
    use proptest::prelude::*;
    use serde_json::Value;

    /// A JSON value as text, objects possibly with a key twice (which a `Value` keeps once).
    #[derive(Debug, Clone)]
    enum J {
        Null,
        Bool(bool),
        Int(i64),
        Float(f64),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    impl J {
        fn text(&self, out: &mut String) {
            match self {
                J::Null => out.push_str("null"),
                J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                J::Int(n) => out.push_str(&n.to_string()),
                // Written as people and other tools write them, not as serde_json would.
                J::Float(x) => out.push_str(&format!("{x:e}")),
                J::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
                J::Arr(items) => {
                    out.push_str("[ ");
                    for (i, v) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        v.text(out);
                    }
                    out.push(']');
                }
                J::Obj(entries) => {
                    out.push_str("{\n");
                    for (i, (k, v)) in entries.iter().enumerate() {
                        if i > 0 {
                            out.push_str(",\n");
                        }
                        out.push_str(&serde_json::to_string(k).unwrap());
                        out.push_str(": ");
                        v.text(out);
                    }
                    out.push('}');
                }
            }
        }

        fn has_twice(&self) -> bool {
            match self {
                J::Arr(items) => items.iter().any(J::has_twice),
                J::Obj(entries) => entries.iter().enumerate().any(|(i, (k, v))| {
                    v.has_twice() || entries[..i].iter().any(|(other, _)| other == k)
                }),
                _ => false,
            }
        }
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => prop::sample::select(vec![
                "name", "rw", "bs_bytes", "iodepth", "numjobs", "read", "write", "sync", "run",
                "repeats", "iops", "bw_bytes_per_s", "ops_per_s", "lat_ns", "mean", "p99", "max",
            ])
            .prop_map(String::from),
            1 => "[a-z\\\\\"\u{0}é\u{1f}/]{0,3}",
        ]
    }

    fn value() -> impl Strategy<Value = J> {
        let leaf = prop_oneof![
            Just(J::Null),
            any::<bool>().prop_map(J::Bool),
            (0i64..70_000).prop_map(J::Int),
            any::<i64>().prop_map(J::Int),
            (0.0f64..1e7).prop_map(J::Float),
            (-1e300f64..1e300).prop_map(J::Float),
            "[a-z\\\\\"\u{0}é\u{7f}]{0,6}".prop_map(J::Str),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
                prop::collection::vec((key(), inner), 0..6).prop_map(J::Obj),
            ]
        })
    }

    /// A test: an object with a name, most of the time.
    fn test() -> impl Strategy<Value = J> {
        (
            prop::option::weighted(0.9, "[a-z ]{1,8}"),
            prop::collection::vec((key(), value()), 0..8),
        )
            .prop_map(|(name, mut entries)| {
                if let Some(n) = name {
                    entries.insert(0, ("name".into(), J::Str(n)));
                }
                J::Obj(entries)
            })
    }

    proptest::proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Whatever the test, the pass answers as the `Value` path would: the same error for
        /// text that does not parse; for a plain test the same compact text, a passing check,
        /// the same columns and figures; and a test is plain exactly when its check passes and
        /// no object has a key twice.
        #[test]
        fn one_pass_answers_as_the_value_path(t in test(), cut in 0usize..4) {
            let mut text = String::new();
            t.text(&mut text);
            // Sometimes cut short: not valid JSON.
            if cut == 0 {
                let at = text.len() / 2;
                text.truncate(text.floor_char_boundary(at));
            }
            let mut walker = Walker::default();
            let mut de = serde_json::Deserializer::from_str(&text);
            let walked = walker.read(&mut de, true).and_then(|w| de.end().map(|()| w));
            let value = serde_json::from_str::<Value>(&text);
            match (walked, value) {
                (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                (Ok(w), Ok(v)) => {
                    let checked = check_test(0, &v).is_ok();
                    prop_assert_eq!(w.plain, checked && !t.has_twice());
                    if w.plain {
                        let compact = v.to_string();
                        prop_assert_eq!(walker.text(), compact.as_str());
                        prop_assert_eq!(w.name.as_deref(), v["name"].as_str());
                        prop_assert_eq!(w.rw.as_deref(), v.get("rw").and_then(Value::as_str));
                        for (i, (key, _)) in COLUMNS.iter().enumerate() {
                            prop_assert_eq!(w.columns[i], v.get(*key).and_then(Value::as_i64));
                        }
                        // The figures are those the `Value` path reads from the compact text
                        // (as stored), which are not always those of `v`: serde_json's parse
                        // (without `float_roundtrip`, whose exact parse would change the
                        // figures of stored runs) may give a float it prints back as digits
                        // that parse one unit in the last place away (seen: 6.2024593662143266e299).
                        let stored = figures::of_test_text(&compact);
                        prop_assert_eq!(&w.figures, &stored);
                        let again = walker.read_text(&compact).unwrap();
                        prop_assert!(again.plain);
                        prop_assert_eq!(again.figures, stored);
                    }
                }
                (a, b) => prop_assert!(false, "{a:?} against {b:?}"),
            }
        }
    }
}
