//! Files of runs: `runs import` reads them (tacho's documents, fio's JSON, with whatever text
//! surrounds them) into [`NewRun`]s, each checked before it is returned.

use super::fio;
use super::run::Invalid;
use super::run::{NewRun, NewTest, RunSource, check_test};
use super::test_text::{Walked, Walker};
use super::version::{DocKind, Schema, SchemaError};
use crate::bench::result::SCHEMA;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Why the runs of a file cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// What is wrong with the file (`document 2: "tests" must be an array`).
    #[error("{0}")]
    Invalid(#[from] Invalid),
    /// Document N names a version of its schema newer than this tacho reads.
    #[error("document {0}: {1}")]
    Newer(usize, SchemaError),
}

/// The largest file `runs import` reads. A tacho run of the largest suite is under 1 MiB
/// and fio's json+ output with full latency histograms about 120 KiB per job, so this holds
/// an export of hundreds of full runs or thousands of fio jobs; a file above it is refused
/// before it is read, so an import never needs more memory than about twice this.
pub const IMPORT_LIMIT: u64 = 512 << 20;

/// Every run in `path` (see [`parse_documents`]), the tests of each `tacho.bench.v1` document
/// handed to `sink` as they are read when it takes them; a file over [`IMPORT_LIMIT`] is
/// refused unread.
pub(super) fn read_into(
    path: &std::path::Path,
    sink: &mut dyn TestSink,
) -> anyhow::Result<Vec<Parsed>> {
    use anyhow::Context;
    use std::io::Read;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let size = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if size > IMPORT_LIMIT {
        anyhow::bail!(
            "{} is {}; tacho imports files up to {}: split it (one run per file, e.g. tacho runs \
             export ID -o FILE)",
            path.display(),
            crate::units::format_bytes_approx(size),
            crate::units::format_bytes_approx(IMPORT_LIMIT)
        );
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // A file that grows while read is cut at the limit and then fails to parse.
    file.take(IMPORT_LIMIT + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    parse_into(&bytes, sink).map_err(|e| match e {
        Failed::Store(e) => e,
        // The fix is a newer tacho, not another file.
        Failed::Unreadable(e @ Unreadable::Newer(..)) => {
            anyhow::anyhow!("{} cannot be imported: {e}", path.display())
        }
        Failed::Unreadable(Unreadable::Invalid(e)) => anyhow::anyhow!(
            "{} cannot be imported: {e}; give tacho.bench.v1 JSON (tacho runs export, tacho bench \
             --json), the --json output of bench cpu, bench mem or time, or fio \
             --output-format=json output",
            path.display()
        ),
    })
}

/// Where the tests of a `tacho.bench.v1` document go as they are read: `runs import` stores
/// each at once, inside its transaction, so a run of many tests is never held whole.
pub(super) trait TestSink {
    /// A bench document's `tests` begin (`fields`: its other fields read so far). `Ok(true)`:
    /// each test goes to [`TestSink::test`] instead of into the run.
    fn begin(&mut self, fields: &Map<String, Value>) -> anyhow::Result<bool>;
    /// Test `seq` (from 0) of the tests begun last, checked: its compact text and, when it
    /// was read in one pass, what that pass found.
    fn test(&mut self, seq: usize, text: &str, found: Option<Walked>) -> anyhow::Result<()>;
    /// The tests begun last are dropped: the document has `tests` again, and its last list
    /// is the one kept (as a `Value` keeps a key written twice).
    fn discard(&mut self) -> anyhow::Result<()>;
}

/// A sink that takes no test: every test is held in its run.
struct Hold;

impl TestSink for Hold {
    fn begin(&mut self, _: &Map<String, Value>) -> anyhow::Result<bool> {
        Ok(false)
    }
    fn test(&mut self, _: usize, _: &str, _: Option<Walked>) -> anyhow::Result<()> {
        Ok(())
    }
    fn discard(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A run of a file, checked, and how many of its tests went to the sink (`None`: they are
/// in the run).
pub(super) struct Parsed {
    pub run: NewRun,
    pub sent: Option<usize>,
}

/// Why reading a file's runs stopped: the file, or the sink (the store's own error).
enum Failed {
    Unreadable(Unreadable),
    Store(anyhow::Error),
}

impl<T: Into<Unreadable>> From<T> for Failed {
    fn from(e: T) -> Failed {
        Failed::Unreadable(e.into())
    }
}

/// The sink of a file being read, and the error it stopped on (the parse then stops with a
/// placeholder error of its own, which this one replaces).
struct Ctx<'s> {
    sink: &'s mut dyn TestSink,
    failed: Option<anyhow::Error>,
}

impl Ctx<'_> {
    fn check<T, E: serde::de::Error>(&mut self, r: anyhow::Result<T>) -> Result<T, E> {
        r.map_err(|e| {
            self.failed = Some(e);
            E::custom("the store failed")
        })
    }
}

/// Every run in a file: one or more `tacho.bench.v1` documents (as `runs export` writes them,
/// one after another) or fio's `--output-format=json` output. A UTF-8 byte-order mark, CRLF
/// line ends and text around the JSON (fio's notes before it, `--output-format=json,normal`
/// after it) are skipped; every run is checked (see [`check_test`]) before it is returned.
pub fn parse_documents(bytes: impl AsRef<[u8]>) -> Result<Vec<NewRun>, Unreadable> {
    match parse_into(bytes.as_ref(), &mut Hold) {
        Ok(runs) => Ok(runs.into_iter().map(|p| p.run).collect()),
        Err(Failed::Unreadable(e)) => Err(e),
        // `Hold` takes nothing, so it never fails.
        Err(Failed::Store(e)) => Err(Invalid(e.to_string()).into()),
    }
}

/// [`parse_documents`], handing the tests of bench documents to `sink` when it takes them.
fn parse_into(bytes: &[u8], sink: &mut dyn TestSink) -> Result<Vec<Parsed>, Failed> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut ctx = Ctx { sink, failed: None };
    let mut runs = Vec::new();
    let mut at = json_line(bytes, 0).ok_or(Invalid("no JSON document found".into()))?;
    let mut documents = 0;
    while at < bytes.len() {
        let mut de = serde_json::Deserializer::from_slice(&bytes[at..]);
        let value = match TopSeed(&mut ctx).deserialize(&mut de) {
            Ok(value) => value,
            Err(e) => {
                if let Some(failed) = ctx.failed.take() {
                    return Err(Failed::Store(failed));
                }
                // serde counts lines from `at`; say where in the file.
                let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + e.line();
                let text = e.to_string();
                let what = text
                    .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
                    .unwrap_or(&text);
                return Err(match e.classify() {
                    serde_json::error::Category::Data => Invalid(format!("line {line}: {what}")),
                    _ => Invalid(format!("not valid JSON at line {line}: {what}")),
                }
                .into());
            }
        };
        let docs = match value {
            Top::Many(docs) => docs,
            Top::One(doc) => vec![doc],
        };
        for doc in docs {
            documents += 1;
            runs.push(parse_one(doc, documents)?);
        }
        // Whatever follows on the value's own line and any lines of text after it are skipped
        // up to the next line that opens a JSON value.
        let end = after_value(&bytes[at..], de.end()).map_or(bytes.len(), |n| at + n);
        at = json_line(bytes, end).unwrap_or(bytes.len());
    }
    if runs.is_empty() {
        return Err(Invalid("no runs in it".into()).into());
    }
    Ok(runs)
}

/// Where the first character after a JSON value read from `text` is, from the answer of the
/// deserializer's `end` (the plain deserializer tells no offset, but the "trailing
/// characters" error it gives for that character says its line and column, 1-based, in
/// bytes); `None` when only blanks follow.
fn after_value(text: &[u8], end: serde_json::Result<()>) -> Option<usize> {
    let e = end.err()?;
    let line_start = match e.line() {
        0 | 1 => 0,
        n => text
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(n - 2)
            .map_or(text.len(), |(i, _)| i + 1),
    };
    Some((line_start + e.column().saturating_sub(1)).min(text.len()))
}

/// The offset of the first line at or after `from` (a line start, or the end of a JSON
/// value) whose first non-blank character opens a JSON object or array.
fn json_line(bytes: &[u8], from: usize) -> Option<usize> {
    let mut start = from;
    while start < bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |n| start + n);
        let line = &bytes[start..end];
        if let Some(first) = line.iter().position(|b| !b.is_ascii_whitespace())
            && matches!(line[first], b'{' | b'[')
        {
            return Some(start + first);
        }
        start = end + 1;
    }
    None
}

/// One top-level JSON value: a document, or an array of them.
enum Top {
    One(Document),
    Many(Vec<Document>),
}

/// Reads a [`Top`], handing tests to the context's sink.
struct TopSeed<'c, 's>(&'c mut Ctx<'s>);

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = Top;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Top, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = Top;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or an array of objects")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Top, A::Error> {
        Document::visit(map, self.0).map(Top::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        let mut docs = Vec::new();
        while let Some(doc) = seq.next_element_seed(DocumentSeed(&mut *self.0))? {
            docs.push(doc);
        }
        Ok(Top::Many(docs))
    }
}

/// A document's fields as read: `tests` already as compact text, one test at a time, so a
/// run of 200,000 tests never exists as one tree of `Value`s (which takes ten times the
/// file's size), or handed to the sink and not held at all.
struct Document {
    fields: Map<String, Value>,
    tests: Option<Tests>,
}

/// A document's tests: held, or handed to the sink.
enum Tests {
    Held(Vec<NewTest>),
    /// How many went to the sink, and the first holding a NUL character.
    Sent {
        count: usize,
        nul: Option<usize>,
    },
}

impl Document {
    fn visit<'de, A: MapAccess<'de>>(mut map: A, ctx: &mut Ctx) -> Result<Document, A::Error> {
        let mut fields = Map::new();
        let mut tests = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "tests" {
                if let Some(Tests::Sent { .. }) = tests {
                    let discarded = ctx.sink.discard();
                    ctx.check(discarded)?;
                }
                let bench = fields
                    .get("schema")
                    .and_then(Value::as_str)
                    .map(Schema::parse);
                let send = match bench {
                    Some(Ok(Schema {
                        kind: DocKind::Bench,
                        ..
                    })) => {
                        let began = ctx.sink.begin(&fields);
                        ctx.check(began)?
                    }
                    _ => false,
                };
                tests = Some(map.next_value_seed(TestList {
                    ctx: &mut *ctx,
                    send,
                })?);
            } else if key == "schema" && matches!(tests, Some(Tests::Sent { .. })) {
                // The tests went to the sink as those of the schema read before them.
                return Err(serde::de::Error::custom(
                    "\"schema\" is written twice in a document; give it once",
                ));
            } else {
                let value = map.next_value()?;
                fields.insert(key, value);
            }
        }
        Ok(Document { fields, tests })
    }
}

/// Reads a [`Document`], handing tests to the context's sink.
struct DocumentSeed<'c, 's>(&'c mut Ctx<'s>);

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_, '_> {
    type Value = Document;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Document, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_, '_> {
    type Value = Document;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Document, A::Error> {
        Document::visit(map, self.0)
    }
}

/// `tests`: checked and turned into compact text element by element, in one pass over each
/// (see [`Walker`]), then held or (`send`) handed to the sink.
struct TestList<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    send: bool,
}

impl<'de> DeserializeSeed<'de> for TestList<'_, '_> {
    type Value = Tests;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Tests, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TestList<'_, '_> {
    type Value = Tests;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of test objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tests, A::Error> {
        let mut tests = Vec::new();
        let mut count = 0;
        let mut nul = None;
        let mut walker = Walker::default();
        while let Some(found) = seq.next_element_seed(&mut walker)? {
            let (text, found) = if found.plain {
                (Cow::Borrowed(walker.text()), Some(found))
            } else {
                // A check that fails, or a key written twice: the `Value` of the same text
                // says what is wrong, or keeps the key once.
                let test: Value =
                    serde_json::from_str(walker.text()).map_err(serde::de::Error::custom)?;
                check_test(count, &test).map_err(serde::de::Error::custom)?;
                (Cow::Owned(test.to_string()), None)
            };
            if nul.is_none() && nul_in_text(&text) {
                nul = Some(count);
            }
            if self.send {
                let sent = self.ctx.sink.test(count, &text, found);
                self.ctx.check(sent)?;
            } else {
                tests.push(NewTest::compact(text.into_owned()));
            }
            count += 1;
        }
        Ok(if self.send {
            Tests::Sent { count, nul }
        } else {
            Tests::Held(tests)
        })
    }
}

/// Document `n` of a file as a run.
fn parse_one(doc: Document, n: usize) -> Result<Parsed, Unreadable> {
    let schema = doc
        .fields
        .get("schema")
        .and_then(Value::as_str)
        .map(Schema::parse);
    let schema = match schema {
        Some(Err(newer @ SchemaError::Newer { .. })) => return Err(Unreadable::Newer(n, newer)),
        Some(Err(SchemaError::Unknown(other))) => Some(Err(other)),
        Some(Ok(schema)) => Some(Ok(schema)),
        None => None,
    };
    let at = |e: Invalid| Invalid(format!("document {n}: {e}"));
    let (sent, nul) = match &doc.tests {
        Some(Tests::Sent { count, nul }) => (Some(*count), *nul),
        _ => (None, None),
    };
    let run = parse_kind(doc, schema).map_err(at)?;
    refuse_nul(&run, nul).map_err(at)?;
    Ok(Parsed { run, sent })
}

/// A document as a run, by its schema (`None`: it names none; `Err`: one tacho does not store).
fn parse_kind(doc: Document, schema: Option<Result<Schema, String>>) -> Result<NewRun, Invalid> {
    let Document { mut fields, tests } = doc;
    let tests = match tests {
        Some(Tests::Held(tests)) => Some(tests),
        // Sent only for a bench schema, and the schema cannot change after.
        Some(Tests::Sent { .. }) => Some(Vec::new()),
        None => None,
    };
    let run = match schema {
        Some(Ok(Schema {
            kind: DocKind::Bench,
            ..
        })) => {
            return NewRun::from_parts(fields, tests.unwrap_or_default(), RunSource::Import);
        }
        Some(Ok(_)) => {
            if let Some(tests) = tests {
                fields.insert("tests".into(), tests.iter().map(NewTest::value).collect());
            }
            super::kinds::to_run(&Value::Object(fields), RunSource::Import)?
        }
        Some(Err(other)) => {
            return Err(Invalid(format!(
                "schema {other:?} cannot be imported (expected {SCHEMA}, tacho.cpu.v1, \
                 tacho.mem.v1, tacho.time.v1 or fio JSON)"
            )));
        }
        None if fields.contains_key("fio version") => fio::to_run(&Value::Object(fields))?,
        None => {
            return Err(Invalid(format!(
                "neither a {SCHEMA} document nor fio JSON output (fio --output-format=json)"
            )));
        }
    };
    for (i, test) in run.tests.iter().enumerate() {
        check_test(i, &test.value())?;
    }
    Ok(run)
}

/// Refuses a run with a NUL character in any string or key. PostgreSQL stores no NUL in text
/// (`invalid byte sequence for encoding "UTF8": 0x00`), so such a run could be kept here but
/// never pushed to or imported into a shared store; no real tool writes one. `sent_nul`: the
/// first test holding one of those handed to the sink rather than held in the run.
fn refuse_nul(run: &NewRun, sent_nul: Option<usize>) -> Result<(), Invalid> {
    let texts = [
        ("label", run.label.as_deref()),
        ("created_at", run.created_at.as_deref()),
        ("tool_version", run.tool_version.as_deref()),
        ("suite", run.suite.as_ref().map(|s| s.0.as_str())),
    ];
    let mut found = texts
        .into_iter()
        .find(|(_, t)| t.is_some_and(|t| t.contains('\0')))
        .map(|(what, _)| what.to_owned());
    found = found
        .or_else(|| nul_in(&run.host).then(|| "host".into()))
        .or_else(|| nul_in(&run.target).then(|| "target".into()))
        .or_else(|| {
            run.extra
                .iter()
                .find(|(k, v)| k.contains('\0') || nul_in(v))
                .map(|(k, _)| crate::text::escape(k).into_owned())
        })
        .or_else(|| {
            run.tests
                .iter()
                .position(|t| nul_in_text(t.text()))
                .or(sent_nul)
                .map(|i| format!("test {}", i + 1))
        });
    match found {
        None => Ok(()),
        Some(at) => Err(Invalid(format!(
            "{at} holds a NUL character (\\u0000), which no results store can keep as text \
             (PostgreSQL refuses it); remove it from the file"
        ))),
    }
}

/// Whether a NUL character is in any string or key of a compact JSON text (serde_json writes
/// one only as the escape `\u0000`; a backslash that is itself escaped starts no escape).
fn nul_in_text(json: &str) -> bool {
    // Most texts have no `\u0000` at all; the search for it is much faster than the walk.
    if !json.contains("\\u0000") {
        return false;
    }
    let mut bytes = json.as_bytes().iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            continue;
        }
        // `\\`, `\"`, `\n`, …: the escaped character is consumed, so an escaped backslash
        // starts no escape.
        if bytes.next() == Some(&b'u') && bytes.by_ref().take(4).eq(b"0000") {
            return true;
        }
    }
    false
}

/// Whether a NUL character is in any string or key of `v`.
fn nul_in(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(nul_in),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || nul_in(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A test's text holds a NUL exactly when its value does, whatever else its strings
        /// and keys hold (backslashes, `\u0000` written out, control characters).
        #[test]
        fn nul_in_the_text_is_nul_in_the_value(
            key in "(\\\\|u|0|\\PC|\u{0}){0,12}",
            text in "(\\\\|u|0|\\PC|\u{0}){0,12}",
        ) {
            let v = serde_json::json!({ key: text });
            proptest::prop_assert_eq!(nul_in_text(&v.to_string()), nul_in(&v));
        }
    }
    use crate::store::run::{StoredRun, StoredTest};
    use serde_json::json;

    #[test]
    fn bench_doc_round_trips_unknown_fields() {
        let doc = json!({
            "schema": SCHEMA, "tool_version": "0.1.0",
            "host": {"hostname": "a"}, "target": {"path": "/x"},
            "suite": {"name": "quick", "version": 1},
            "tunables": {"thp_enabled": "never"},
            "future_field": [1, 2],
            "tests": [{"name": "t", "repeats": [{"read": {"iops": 1.0}}]}],
            "warnings": [], "interrupted": true,
        });
        let run = NewRun::from_bench_doc(&doc, RunSource::Import).unwrap();
        assert_eq!(run.status, crate::store::RunStatus::Interrupted);
        assert_eq!(run.suite, Some(("quick".into(), 1)));
        assert!(run.extra.contains_key("future_field"));
        assert!(!run.extra.contains_key("host"));
        let stored = StoredRun {
            uuid: None,
            id: 7,
            created_at: "2026-01-01T00:00:00Z".into(),
            label: Some("x".into()),
            kind: run.kind,
            status: run.status,
            source: run.source,
            tool_version: run.tool_version,
            suite: run.suite,
            host: run.host,
            target: run.target,
            extra: run.extra,
            tests: run
                .tests
                .iter()
                .map(|t| StoredTest {
                    name: "t".into(),
                    json: t.value(),
                    figures: Vec::new(),
                })
                .collect(),
        };
        let back = stored.to_document();
        for key in [
            "host",
            "target",
            "suite",
            "tunables",
            "future_field",
            "tests",
        ] {
            assert_eq!(back[key], doc[key], "{key}");
        }
        assert_eq!(back["run"]["label"], "x");
        let again = NewRun::from_bench_doc(&back, RunSource::Import).unwrap();
        assert_eq!(again.label.as_deref(), Some("x"));
        assert_eq!(again.created_at.as_deref(), Some("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn parse_documents_errors_say_what_is_wrong() {
        assert!(
            parse_documents("")
                .unwrap_err()
                .to_string()
                .contains("no JSON")
        );
        assert!(
            parse_documents("{")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        assert!(
            parse_documents(r#"{"schema": "tacho.top.v1"}"#)
                .unwrap_err()
                .to_string()
                .contains("cannot be imported")
        );
        assert!(
            parse_documents(r#"{"schema": "tacho.time.v1"}"#)
                .unwrap_err()
                .to_string()
                .contains("\"results\" must be an array")
        );
        assert!(
            parse_documents(r#"{"a": 1}"#)
                .unwrap_err()
                .to_string()
                .contains("neither")
        );
        let bad_test = format!(r#"{{"schema": "{SCHEMA}", "tests": [{{}}]}}"#);
        assert!(
            parse_documents(bad_test)
                .unwrap_err()
                .to_string()
                .contains("no \"name\"")
        );
        let two = format!(
            "note: fio said something\n{{\"schema\": \"{SCHEMA}\"}}\n{{\"schema\": \"{SCHEMA}\"}}"
        );
        assert_eq!(parse_documents(two).unwrap().len(), 2);
    }
}
