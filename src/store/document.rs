//! Runs as documents: what goes into the store (`NewRun`, from a `tacho.bench.v1` document or
//! fio's JSON) and what comes out (`StoredRun`, which turns back into the same document).

use super::figures::Figures;
use super::fio;
use crate::bench::result::SCHEMA;
use serde_json::{Map, Value, json};

/// Top-level fields of a `tacho.bench.v1` document that the store keeps in their own columns;
/// every other field is kept verbatim in `extra`. The suite has columns for its name and
/// version and is kept whole in `extra` too: whether the method was standard, the repeats
/// and what options changed are part of what a run measured.
const OWN_COLUMNS: [&str; 6] = ["schema", "tool_version", "run", "host", "target", "tests"];

/// A run about to be saved.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// What was benchmarked: `disk`, `cpu`, `mem` or `time`.
    pub kind: String,
    /// Where the run came from: `bench` (this machine), `import` (a tacho export), `fio`.
    pub source: String,
    pub label: Option<String>,
    /// When the run happened, as RFC 3339 UTC; `None` means now.
    pub created_at: Option<String>,
    /// When the run happened, in seconds since the epoch (fio's `timestamp`).
    pub created_unix: Option<i64>,
    /// `finished` or `interrupted` (`running` while a benchmark saves test by test).
    pub status: String,
    pub tool_version: Option<String>,
    pub suite: Option<(String, i64)>,
    pub host: Value,
    pub target: Value,
    /// Every other top-level field of the document (tunables, warnings, ...).
    pub extra: Map<String, Value>,
    pub tests: Vec<NewTest>,
}

/// A test about to be saved: its JSON object as compact text. Held as text rather than as a
/// `Value`, which takes several times the memory, so a run of many tests imports in little
/// more memory than its file.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTest(String);

impl NewTest {
    /// The test's JSON object.
    pub fn value(&self) -> Value {
        // Always our own serialisation of a `Value`, so it parses.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl From<&Value> for NewTest {
    fn from(test: &Value) -> NewTest {
        NewTest(test.to_string())
    }
}

/// A run read back from the store.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub id: i64,
    pub created_at: String,
    pub label: Option<String>,
    pub kind: String,
    pub status: String,
    pub source: String,
    pub tool_version: Option<String>,
    pub suite: Option<(String, i64)>,
    pub host: Value,
    pub target: Value,
    pub extra: Map<String, Value>,
    pub tests: Vec<StoredTest>,
}

/// A test read back from the store: its full JSON object and its indexed figures.
#[derive(Debug, Clone)]
pub struct StoredTest {
    pub name: String,
    pub json: Value,
    pub figures: Vec<Figures>,
}

impl NewRun {
    /// Splits a `tacho.bench.v1` document into the store's columns.
    pub fn from_bench_doc(doc: &Value, source: &str) -> Result<NewRun, String> {
        let mut obj = doc
            .as_object()
            .ok_or("a tacho.bench.v1 document must be a JSON object")?
            .clone();
        let tests = match obj.remove("tests") {
            Some(Value::Array(tests)) => tests,
            Some(_) => return Err("\"tests\" must be an array".into()),
            None => Vec::new(),
        };
        for (i, test) in tests.iter().enumerate() {
            check_test(i, test)?;
        }
        Self::from_parts(obj, tests.iter().map(NewTest::from).collect(), source)
    }

    /// A run from a document's fields other than `tests`, and its checked tests.
    fn from_parts(
        obj: Map<String, Value>,
        tests: Vec<NewTest>,
        source: &str,
    ) -> Result<NewRun, String> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let run = obj.get("run");
        let kind = text(run.and_then(|r| r.get("kind"))).unwrap_or_else(|| "disk".into());
        if !KINDS.contains(&kind.as_str()) {
            return Err(format!(
                "run.kind is {kind:?}; it must be one of {}",
                KINDS.join(", ")
            ));
        }
        let suite = obj.get("suite").and_then(|s| {
            Some((
                s.get("name")?.as_str()?.to_string(),
                s.get("version")?.as_i64()?,
            ))
        });
        for key in ["host", "target"] {
            if let Some(v) = obj.get(key).filter(|v| !v.is_object()) {
                return Err(format!("\"{key}\" is {}; it must be an object", kind_of(v)));
            }
        }
        let interrupted = obj.get("interrupted").and_then(Value::as_bool) == Some(true);
        Ok(NewRun {
            kind,
            source: source.to_string(),
            label: text(run.and_then(|r| r.get("label"))),
            created_at: text(run.and_then(|r| r.get("created_at"))),
            created_unix: None,
            status: if interrupted {
                "interrupted"
            } else {
                "finished"
            }
            .into(),
            tool_version: text(obj.get("tool_version")),
            suite,
            host: obj.get("host").cloned().unwrap_or_else(|| json!({})),
            target: obj.get("target").cloned().unwrap_or_else(|| json!({})),
            extra: obj
                .iter()
                .filter(|(k, _)| !OWN_COLUMNS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            tests,
        })
    }
}

impl StoredRun {
    /// The run as a `tacho.bench.v1` document, with a `run` object saying where it came from.
    pub fn to_document(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("schema".into(), json!(SCHEMA));
        if let Some(v) = &self.tool_version {
            doc.insert("tool_version".into(), json!(v));
        }
        doc.insert(
            "run".into(),
            json!({
                "id": self.id,
                "label": self.label,
                "created_at": self.created_at,
                "kind": self.kind,
                "status": self.status,
                "source": self.source,
            }),
        );
        doc.insert("host".into(), self.host.clone());
        doc.insert("target".into(), self.target.clone());
        if let Some((name, version)) = &self.suite {
            doc.insert("suite".into(), json!({"name": name, "version": version}));
        }
        // A whole suite object kept in `extra` replaces the two columns' summary.
        doc.extend(self.extra.clone());
        doc.insert(
            "tests".into(),
            Value::Array(self.tests.iter().map(|t| t.json.clone()).collect()),
        );
        Value::Object(doc)
    }

    /// The suite's `standard` flag: `Some(false)` when options changed its method; `None`
    /// for runs without a suite or saved before the flag was kept.
    pub fn standard(&self) -> Option<bool> {
        suite_standard(&self.extra)
    }

    /// The label if there is one, else `run N`.
    pub fn title(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| format!("run {}", self.id))
    }
}

/// `suite.standard` of a run's extra fields.
pub fn suite_standard(extra: &Map<String, Value>) -> Option<bool> {
    extra.get("suite")?.get("standard")?.as_bool()
}

/// What made a run's suite non-standard, as saved (`runtime 1s`); empty when not recorded.
pub fn suite_changes(extra: &Map<String, Value>) -> Vec<String> {
    extra
        .get("suite")
        .and_then(|s| s.get("changed"))
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The largest file `runs import` reads. A tacho run of the largest suite is under 1 MiB
/// and fio's json+ output with full latency histograms about 120 KiB per job, so this holds
/// an export of hundreds of full runs or thousands of fio jobs; a file above it is refused
/// before it is read, so an import never needs more memory than about twice this.
pub const IMPORT_LIMIT: u64 = 512 << 20;

/// Every run in `path` (see [`parse_documents`]); a file over [`IMPORT_LIMIT`] is refused
/// unread.
pub fn read_documents(path: &std::path::Path) -> anyhow::Result<Vec<NewRun>> {
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
    parse_documents(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} cannot be imported: {e}; give tacho.bench.v1 JSON (tacho runs export, tacho bench \
             --json), the --json output of bench cpu, bench mem or time, or fio \
             --output-format=json output",
            path.display()
        )
    })
}

/// Every run in a file: one or more `tacho.bench.v1` documents (as `runs export` writes them,
/// one after another) or fio's `--output-format=json` output. A UTF-8 byte-order mark, CRLF
/// line ends and text around the JSON (fio's notes before it, `--output-format=json,normal`
/// after it) are skipped; every run is checked (see [`check_test`]) before it is returned.
pub fn parse_documents(bytes: impl AsRef<[u8]>) -> Result<Vec<NewRun>, String> {
    let bytes = bytes.as_ref();
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut runs = Vec::new();
    let mut at = json_line(bytes, 0).ok_or("no JSON document found")?;
    let mut documents = 0;
    while at < bytes.len() {
        let mut stream = serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<Top>();
        let value = match stream.next() {
            Some(Ok(value)) => value,
            Some(Err(e)) => {
                // serde counts lines from `at`; say where in the file.
                let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + e.line();
                let text = e.to_string();
                let what = text
                    .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
                    .unwrap_or(&text);
                return Err(match e.classify() {
                    serde_json::error::Category::Data => format!("line {line}: {what}"),
                    _ => format!("not valid JSON at line {line}: {what}"),
                });
            }
            None => break,
        };
        let docs = match value {
            Top::Many(docs) => docs,
            Top::One(doc) => vec![doc],
        };
        for doc in docs {
            documents += 1;
            runs.push(parse_one(doc).map_err(|e| format!("document {documents}: {e}"))?);
        }
        // Whatever follows on the value's own line and any lines of text after it are skipped
        // up to the next line that opens a JSON value.
        at = json_line(bytes, at + stream.byte_offset()).unwrap_or(bytes.len());
    }
    if runs.is_empty() {
        return Err("no runs in it".into());
    }
    Ok(runs)
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

impl<'de> serde::Deserialize<'de> for Top {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Top;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object or an array of objects")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Top, A::Error> {
                Document::visit(map).map(Top::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
                let mut docs = Vec::new();
                while let Some(doc) = seq.next_element()? {
                    docs.push(doc);
                }
                Ok(Top::Many(docs))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A document's fields as read: `tests` already as compact text, one test at a time, so a
/// run of 200,000 tests never exists as one tree of `Value`s (which takes ten times the
/// file's size).
struct Document {
    fields: Map<String, Value>,
    tests: Option<Vec<NewTest>>,
}

impl Document {
    fn visit<'de, A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Document, A::Error> {
        let mut fields = Map::new();
        let mut tests = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "tests" {
                tests = Some(map.next_value::<TestList>()?.0);
            } else {
                let value = map.next_value()?;
                fields.insert(key, value);
            }
        }
        Ok(Document { fields, tests })
    }
}

impl<'de> serde::Deserialize<'de> for Document {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Document;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Document, A::Error> {
                Document::visit(map)
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `tests`: checked and turned into compact text element by element.
struct TestList(Vec<NewTest>);

impl<'de> serde::Deserialize<'de> for TestList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = TestList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of test objects")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<TestList, A::Error> {
                let mut tests = Vec::new();
                while let Some(test) = seq.next_element::<Value>()? {
                    check_test(tests.len(), &test).map_err(serde::de::Error::custom)?;
                    tests.push(NewTest::from(&test));
                }
                Ok(TestList(tests))
            }
        }
        d.deserialize_seq(Visit)
    }
}

fn parse_one(doc: Document) -> Result<NewRun, String> {
    let Document { mut fields, tests } = doc;
    let run = match fields.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {
            return NewRun::from_parts(fields, tests.unwrap_or_default(), "import");
        }
        Some(other) if super::kinds::kind_of_schema(other).is_some() => {
            if let Some(tests) = tests {
                fields.insert("tests".into(), tests.iter().map(NewTest::value).collect());
            }
            super::kinds::to_run(&Value::Object(fields), "import")?
        }
        Some(other) => {
            return Err(format!(
                "schema {other:?} cannot be imported (expected {SCHEMA}, tacho.cpu.v1, \
                 tacho.mem.v1, tacho.time.v1 or fio JSON)"
            ));
        }
        None if fields.contains_key("fio version") => fio::to_run(&Value::Object(fields))?,
        None => {
            return Err(format!(
                "neither a {SCHEMA} document nor fio JSON output (fio --output-format=json)"
            ));
        }
    };
    for (i, test) in run.tests.iter().enumerate() {
        check_test(i, &test.value())?;
    }
    Ok(run)
}

/// The kinds of run the store holds.
pub const KINDS: [&str; 4] = ["disk", "cpu", "mem", "time"];

/// Longest test name accepted (a timed command's name is the whole command line).
const NAME_LIMIT: usize = 4096;

/// Refuses, by name, a test whose figures cannot be real: a figure that is not a number,
/// negative, or not finite; a block size, queue depth or job count out of any device's range.
pub fn check_test(index: usize, test: &Value) -> Result<(), String> {
    let at = |what: String| format!("test {}: {what}", index + 1);
    let obj = test
        .as_object()
        .ok_or_else(|| at("must be a JSON object".into()))?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| at("has no \"name\"".into()))?;
    if name.len() > NAME_LIMIT {
        return Err(at(format!(
            "its name is {} bytes long (at most {NAME_LIMIT})",
            name.len()
        )));
    }
    let at = |what: String| format!("test {} ({name:?}): {what}", index + 1);
    for (key, max) in [
        ("bs_bytes", 1u64 << 32),
        ("iodepth", 1 << 16),
        ("numjobs", 1 << 16),
    ] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some_and(|n| n <= max) => {}
            Some(v) => {
                return Err(at(format!(
                    "\"{key}\" is {v}; it must be a whole number from 0 to {max}"
                )));
            }
        }
    }
    if let Some(rw) = obj.get("rw").filter(|v| !v.is_null() && !v.is_string()) {
        return Err(at(format!(
            "\"rw\" is {}; it must be a string",
            kind_of(rw)
        )));
    }
    check_sample(obj, "").map_err(&at)?;
    match obj.get("repeats") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(repeats)) => repeats.iter().enumerate().try_for_each(|(i, r)| {
            let r = r
                .as_object()
                .ok_or_else(|| at(format!("repeat {} must be a JSON object", i + 1)))?;
            check_sample(r, &format!("repeat {}: ", i + 1)).map_err(&at)
        }),
        Some(other) => Err(at(format!(
            "\"repeats\" is {}; it must be an array",
            kind_of(other)
        ))),
    }
}

/// The figures of one sample (the reported one or a repeat): every direction the store
/// indexes, with its rates and latencies.
fn check_sample(obj: &Map<String, Value>, prefix: &str) -> Result<(), String> {
    for dir in super::figures::DIRECTIONS {
        let Some(d) = obj.get(dir).filter(|v| !v.is_null()) else {
            continue;
        };
        let d = d
            .as_object()
            .ok_or_else(|| format!("{prefix}\"{dir}\" is {}; it must be an object", kind_of(d)))?;
        for key in ["iops", "bw_bytes_per_s", "ops_per_s"] {
            figure(d.get(key), &format!("{prefix}{dir}.{key}"))?;
        }
        match d.get("lat_ns") {
            None | Some(Value::Null) => {}
            Some(Value::Object(lat)) => {
                for (key, _) in super::figures::LATENCY_KEYS {
                    figure(lat.get(key), &format!("{prefix}{dir}.lat_ns.{key}"))?;
                }
            }
            Some(other) => {
                return Err(format!(
                    "{prefix}{dir}.lat_ns is {}; it must be an object",
                    kind_of(other)
                ));
            }
        }
    }
    Ok(())
}

/// A figure is absent, null, or a finite number of at least zero.
fn figure(value: Option<&Value>, name: &str) -> Result<(), String> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
            _ => Err(format!("{name} is {n}; figures cannot be negative")),
        },
        Some(other) => Err(format!("{name} is {}; it must be a number", kind_of(other))),
    }
}

/// What a JSON value is, for messages (the value itself may be long or hostile).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let run = NewRun::from_bench_doc(&doc, "import").unwrap();
        assert_eq!(run.status, "interrupted");
        assert_eq!(run.suite, Some(("quick".into(), 1)));
        assert!(run.extra.contains_key("future_field"));
        assert!(!run.extra.contains_key("host"));
        let stored = StoredRun {
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
        let again = NewRun::from_bench_doc(&back, "import").unwrap();
        assert_eq!(again.label.as_deref(), Some("x"));
        assert_eq!(again.created_at.as_deref(), Some("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn parse_documents_errors_say_what_is_wrong() {
        assert!(parse_documents("").unwrap_err().contains("no JSON"));
        assert!(parse_documents("{").unwrap_err().contains("not valid JSON"));
        assert!(
            parse_documents(r#"{"schema": "tacho.top.v1"}"#)
                .unwrap_err()
                .contains("cannot be imported")
        );
        assert!(
            parse_documents(r#"{"schema": "tacho.time.v1"}"#)
                .unwrap_err()
                .contains("\"results\" must be an array")
        );
        assert!(
            parse_documents(r#"{"a": 1}"#)
                .unwrap_err()
                .contains("neither")
        );
        let bad_test = format!(r#"{{"schema": "{SCHEMA}", "tests": [{{}}]}}"#);
        assert!(
            parse_documents(bad_test)
                .unwrap_err()
                .contains("no \"name\"")
        );
        let two = format!(
            "note: fio said something\n{{\"schema\": \"{SCHEMA}\"}}\n{{\"schema\": \"{SCHEMA}\"}}"
        );
        assert_eq!(parse_documents(two).unwrap().len(), 2);
    }
}
