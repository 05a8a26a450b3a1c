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
    pub tests: Vec<Value>,
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
        let obj = doc
            .as_object()
            .ok_or("a tacho.bench.v1 document must be a JSON object")?;
        let tests = match obj.get("tests") {
            Some(Value::Array(tests)) => tests.clone(),
            Some(_) => return Err("\"tests\" must be an array".into()),
            None => Vec::new(),
        };
        for (i, test) in tests.iter().enumerate() {
            if !test.get("name").is_some_and(Value::is_string) {
                return Err(format!("test {} has no \"name\"", i + 1));
            }
        }
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let run = obj.get("run");
        let suite = obj.get("suite").and_then(|s| {
            Some((
                s.get("name")?.as_str()?.to_string(),
                s.get("version")?.as_i64()?,
            ))
        });
        let interrupted = obj.get("interrupted").and_then(Value::as_bool) == Some(true);
        Ok(NewRun {
            kind: text(run.and_then(|r| r.get("kind"))).unwrap_or_else(|| "disk".into()),
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

/// Every run in a file: one or more `tacho.bench.v1` documents (as `runs export` writes them,
/// one after another) or fio's `--output-format=json` output.
pub fn parse_documents(text: &str) -> Result<Vec<NewRun>, String> {
    // fio prints notes ("note: both iodepth >= 1 and synchronous I/O engine ...") on stdout
    // before its JSON; skip any lines before the first one that opens a JSON value.
    let start = text
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.starts_with('{') || line.starts_with('['))
        .map(|(at, _)| at)
        .ok_or("no JSON document found")?;
    let mut runs = Vec::new();
    for (i, value) in serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .enumerate()
    {
        let value = value.map_err(|e| format!("not valid JSON: {e}"))?;
        let docs = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        for doc in docs {
            runs.push(parse_one(&doc).map_err(|e| format!("document {}: {e}", i + 1))?);
        }
    }
    if runs.is_empty() {
        return Err("no runs in it".into());
    }
    Ok(runs)
}

fn parse_one(doc: &Value) -> Result<NewRun, String> {
    match doc.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => NewRun::from_bench_doc(doc, "import"),
        Some(other) if super::kinds::kind_of_schema(other).is_some() => {
            super::kinds::to_run(doc, "import")
        }
        Some(other) => Err(format!(
            "schema {other:?} cannot be imported (expected {SCHEMA}, tacho.cpu.v1, \
             tacho.mem.v1, tacho.time.v1 or fio JSON)"
        )),
        None if doc.get("fio version").is_some() => fio::to_run(doc),
        None => Err(format!(
            "neither a {SCHEMA} document nor fio JSON output (fio --output-format=json)"
        )),
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
                    json: t.clone(),
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
            parse_documents(&bad_test)
                .unwrap_err()
                .contains("no \"name\"")
        );
        let two = format!(
            "note: fio said something\n{{\"schema\": \"{SCHEMA}\"}}\n{{\"schema\": \"{SCHEMA}\"}}"
        );
        assert_eq!(parse_documents(&two).unwrap().len(), 2);
    }
}
