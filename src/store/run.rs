//! A run as the store holds it: what goes in (`NewRun`, from a `tacho.bench.v1` document, a
//! cpu/mem/time document or fio's JSON) and what comes out (`StoredRun`, which turns back into
//! the same document), and the checks every run passes before it is stored.

use super::figures::Figures;
use super::stored::{DocumentView, Field, RunView, SuiteView, view};
use super::test_text::{COLUMNS, NAME_LIMIT};
use crate::bench::result::SCHEMA;
use crate::text::json_kind;
use serde_json::{Map, Value, json};

/// Top-level fields of a `tacho.bench.v1` document that the store keeps in their own columns;
/// every other field is kept verbatim in `extra`. The suite has columns for its name and
/// version and is kept whole in `extra` too: whether the method was standard, the repeats
/// and what options changed are part of what a run measured.
const OWN_COLUMNS: [&str; 6] = ["schema", "tool_version", "run", "host", "target", "tests"];

/// Why a document cannot be stored: what is wrong with it, naming the field or the test
/// (`"tests" must be an array`, `test 3: has no "name"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(why: String) -> Invalid {
        Invalid(why)
    }
}

impl From<&str> for Invalid {
    fn from(why: &str) -> Invalid {
        Invalid(why.into())
    }
}

/// A run about to be saved.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// What was benchmarked.
    pub kind: RunKind,
    /// Where the run came from.
    pub source: RunSource,
    /// The run's `--label`, if given.
    pub label: Option<String>,
    /// When the run happened, as RFC 3339 UTC; `None` means now.
    pub created_at: Option<String>,
    /// When the run happened, in seconds since the epoch (fio's `timestamp`).
    pub created_unix: Option<i64>,
    /// `Finished` or `Interrupted` (`Running` while a benchmark saves test by test).
    pub status: RunStatus,
    /// The tacho (or fio) version that wrote the document, when it says.
    pub tool_version: Option<String>,
    /// The suite's name and version; `None` for a custom test or a non-disk run.
    pub suite: Option<(String, i64)>,
    /// The document's `host` object, as written.
    pub host: Value,
    /// The document's `target` object, as written (`null` where the kind has none).
    pub target: Value,
    /// Every other top-level field of the document (tunables, warnings, ...).
    pub extra: Map<String, Value>,
    /// The tests, in document order.
    pub tests: Vec<NewTest>,
    /// The run id the host that made the run gave it, when the document carries one (an
    /// export): importing it again finds it there. `None`: a new run, given a new id.
    pub uuid: Option<String>,
}

/// A test about to be saved: its JSON object as compact text. Held as text rather than as a
/// `Value`, which takes several times the memory, so a run of many tests imports in little
/// more memory than its file.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTest(String);

impl NewTest {
    /// The test's JSON object as compact text, as it is stored.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The test's JSON object.
    pub fn value(&self) -> Value {
        // Always our own serialisation of a `Value`, so it parses.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl NewTest {
    /// A test built from typed parts (serialized as a `Value` of them would be).
    pub fn of(test: &impl serde::Serialize) -> Result<NewTest, Invalid> {
        serde_json::to_string(test)
            .map(NewTest)
            .map_err(|e| Invalid(e.to_string()))
    }

    /// A test from its compact text, as `Value::to_string` writes it (the caller checked it).
    pub(super) fn compact(text: String) -> NewTest {
        NewTest(text)
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
    /// The run's id in the store (rowid).
    pub id: i64,
    /// When the run happened, as RFC 3339 UTC.
    pub created_at: String,
    /// The run's `--label`, if given.
    pub label: Option<String>,
    /// What was benchmarked.
    pub kind: RunKind,
    /// Running, finished, interrupted, failed or abandoned.
    pub status: RunStatus,
    /// Measured here, or imported from a tacho document or from fio.
    pub source: RunSource,
    /// The version that wrote the document, when it says.
    pub tool_version: Option<String>,
    /// The suite's name and version; `None` for a custom test or a non-disk run.
    pub suite: Option<(String, i64)>,
    /// The document's `host` object.
    pub host: Value,
    /// The document's `target` object.
    pub target: Value,
    /// Every other top-level field of the document (tunables, warnings, …).
    pub extra: Map<String, Value>,
    /// The tests, in the order they were saved.
    pub tests: Vec<StoredTest>,
    /// The run id made on the host that saved it, the same in every store it is copied to.
    pub uuid: Option<String>,
}

/// What takes a run's tests one at a time as a store reads them (`Results::each_test`): each
/// test's name, its JSON text and its figures.
pub type EachTest<'a> =
    dyn FnMut(String, &str, Vec<super::figures::Figures>) -> anyhow::Result<()> + 'a;

/// A run read test by test with its tests kept: `each_test` (a store's, for one run) hands
/// each test to the closure it is given, whose JSON text `parse` turns into the test's value.
pub(crate) fn collected(
    each_test: impl FnOnce(&mut EachTest<'_>) -> anyhow::Result<StoredRun>,
    parse: impl Fn(&str) -> Value,
) -> anyhow::Result<StoredRun> {
    let mut tests = Vec::new();
    let mut run = each_test(&mut |name, json, figures| {
        tests.push(StoredTest {
            name,
            json: parse(json),
            figures,
        });
        Ok(())
    })?;
    run.tests = tests;
    Ok(run)
}

/// A test read back from the store: its full JSON object and its indexed figures.
#[derive(Debug, Clone)]
pub struct StoredTest {
    /// The test's name (`SEQ1M Q8T1 read`, a CPU kernel's id, a timed command).
    pub name: String,
    /// The test's JSON object, as the document held it.
    pub json: Value,
    /// Its indexed figures, per sample and direction.
    pub figures: Vec<Figures>,
}

impl NewRun {
    /// Splits a `tacho.bench.v1` document into the store's columns.
    pub fn from_bench_doc(doc: &Value, source: RunSource) -> Result<NewRun, Invalid> {
        let mut obj = doc
            .as_object()
            .ok_or("a tacho.bench.v1 document must be a JSON object")?
            .clone();
        let tests = match obj.remove("tests") {
            Some(Value::Array(tests)) => tests,
            Some(_) => return Err(Invalid("\"tests\" must be an array".into())),
            None => Vec::new(),
        };
        for (i, test) in tests.iter().enumerate() {
            check_test(i, test)?;
        }
        Self::from_parts(obj, tests.iter().map(NewTest::from).collect(), source)
    }

    /// A run from a document's fields other than `tests`, and its checked tests.
    pub(super) fn from_parts(
        obj: Map<String, Value>,
        tests: Vec<NewTest>,
        source: RunSource,
    ) -> Result<NewRun, Invalid> {
        // Only objects are read as objects (serde would read an array field by field).
        let object = |key: &str| obj.get(key).filter(|v| v.is_object());
        let doc = DocumentView {
            tool_version: obj.get("tool_version").map_or(Field::Absent, view),
            run: object("run").map_or(Field::Absent, view),
            suite: object("suite").map_or(Field::Absent, view),
            interrupted: obj.get("interrupted").map_or(Field::Absent, view),
        };
        let run = doc.run.get();
        let text = |f: fn(&RunView) -> &Field<String>| run.and_then(|r| f(r).get()).cloned();
        let word = text(|r| &r.kind).unwrap_or_else(|| "disk".into());
        let Some(kind) = RunKind::parse(&word) else {
            let words: Vec<&str> = RunKind::ALL.iter().map(|k| k.as_str()).collect();
            return Err(Invalid(format!(
                "run.kind is {word:?}; it must be one of {}",
                words.join(", ")
            )));
        };
        let suite = doc
            .suite
            .get()
            .and_then(|s| Some((s.name.get()?.clone(), i64::from(*s.version.get()?))));
        for key in ["host", "target"] {
            if let Some(v) = obj.get(key).filter(|v| !v.is_object()) {
                return Err(Invalid(format!(
                    "\"{key}\" is {}; it must be an object",
                    json_kind(v)
                )));
            }
        }
        let interrupted = doc.interrupted.get() == Some(&true);
        let uuid = text(|r| &r.uuid);
        if let Some(u) = uuid
            .as_deref()
            .filter(|u| uuid::Uuid::parse_str(u).is_err())
        {
            return Err(Invalid(format!(
                "run.uuid {u:?} is not a run id; remove it to import the run as a new one"
            )));
        }
        Ok(NewRun {
            uuid,
            kind,
            source,
            label: text(|r| &r.label),
            created_at: text(|r| &r.created_at),
            created_unix: None,
            status: if interrupted {
                RunStatus::Interrupted
            } else {
                RunStatus::Finished
            },
            tool_version: doc.tool_version.get().cloned(),
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
        let run = RunView {
            id: Field::Set(self.id),
            label: self.label.clone().into(),
            created_at: Field::Set(self.created_at.clone()),
            kind: Field::Set(self.kind.to_string()),
            status: Field::Set(self.status.to_string()),
            source: Field::Set(self.source.to_string()),
            uuid: self.uuid.clone().into(),
        };
        doc.insert("run".into(), json!(run));
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

/// The suite of a run's extra fields, as far as it was recorded.
fn suite(extra: &Map<String, Value>) -> SuiteView {
    extra
        .get("suite")
        .filter(|s| s.is_object())
        .map_or_else(SuiteView::default, view)
}

/// `suite.standard` of a run's extra fields.
pub fn suite_standard(extra: &Map<String, Value>) -> Option<bool> {
    suite(extra).standard.get().copied()
}

/// What made a run's suite non-standard, as saved (`runtime 1s`); empty when not recorded.
pub fn suite_changes(extra: &Map<String, Value>) -> Vec<String> {
    let changed = suite(extra).changed;
    let changed = changed.get().map_or(&[][..], Vec::as_slice);
    changed.iter().filter_map(Field::get).cloned().collect()
}

/// A closed set of words stored in a column and written in documents, as a type: the
/// compiler then sees every place that must handle a new one.
macro_rules! stored_word {
    ($(#[$doc:meta])* $name:ident ($noun:literal) { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word stored in the database and written in documents.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            pub fn parse(word: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|k| k.as_str() == word)
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                let word = value.as_str()?;
                $name::parse(word).ok_or_else(|| {
                    rusqlite::types::FromSqlError::Other(
                        format!(
                            "a run with {} {word:?}, which this tacho does not know (a newer \
                             one saved it)",
                            $noun
                        )
                        .into(),
                    )
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

stored_word! {
    /// What a run measured: the command that made it.
    RunKind ("kind") {
        Disk = "disk",
        Cpu = "cpu",
        Mem = "mem",
        Time = "time",
        /// `tacho check --save`: the settings audit, whole.
        Check = "check",
        /// `tacho snapshot --save`: the configuration, whole.
        Snapshot = "snapshot",
        /// One side of `tacho experiment` (baseline or changed): its rounds as one test's
        /// repeats.
        Experiment = "experiment",
        /// `tacho load`: an HTTP service under a rate or a ramp, a test per step.
        Load = "load",
    }
}

stored_word! {
    /// Where a run came from.
    RunSource ("source") {
        /// Measured by tacho on this machine.
        Bench = "bench",
        /// A tacho document imported (`runs import`), from here or another machine.
        Import = "import",
        /// fio's JSON output, imported.
        Fio = "fio",
    }
}

stored_word! {
    /// Where a run stands.
    RunStatus ("status") {
        /// Saved test by test and still being saved.
        Running = "running",
        Finished = "finished",
        /// Stopped by a signal: it holds the tests that finished.
        Interrupted = "interrupted",
        /// Stopped by an error.
        Failed = "failed",
        /// Still marked running, but the process saving it is gone (killed, or a reboot).
        Abandoned = "abandoned",
    }
}

/// Refuses, by name, a test whose figures cannot be real: a figure that is not a number,
/// negative, or not finite; a block size, queue depth or job count out of any device's range.
pub fn check_test(index: usize, test: &Value) -> Result<(), Invalid> {
    let at = |what: String| Invalid(format!("test {}: {what}", index + 1));
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
    let at = |what: String| Invalid(format!("test {} ({name:?}): {what}", index + 1));
    for (key, max) in COLUMNS {
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
            json_kind(rw)
        )));
    }
    check_sample(obj, "").map_err(|e| at(e.0))?;
    match obj.get("repeats") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(repeats)) => repeats.iter().enumerate().try_for_each(|(i, r)| {
            let r = r
                .as_object()
                .ok_or_else(|| at(format!("repeat {} must be a JSON object", i + 1)))?;
            check_sample(r, &format!("repeat {}: ", i + 1)).map_err(|e| at(e.0))
        }),
        Some(other) => Err(at(format!(
            "\"repeats\" is {}; it must be an array",
            json_kind(other)
        ))),
    }
}

/// The figures of one sample (the reported one or a repeat): every direction the store
/// indexes, with its rates and latencies.
fn check_sample(obj: &Map<String, Value>, prefix: &str) -> Result<(), Invalid> {
    for dir in super::figures::DIRECTIONS {
        let Some(d) = obj.get(dir).filter(|v| !v.is_null()) else {
            continue;
        };
        let d = d.as_object().ok_or_else(|| {
            format!(
                "{prefix}\"{dir}\" is {}; it must be an object",
                json_kind(d)
            )
        })?;
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
                return Err(Invalid(format!(
                    "{prefix}{dir}.lat_ns is {}; it must be an object",
                    json_kind(other)
                )));
            }
        }
    }
    Ok(())
}

/// A figure is absent, null, or a finite number of at least zero.
fn figure(value: Option<&Value>, name: &str) -> Result<(), Invalid> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
            _ => Err(Invalid(format!(
                "{name} is {n}; figures cannot be negative"
            ))),
        },
        Some(other) => Err(Invalid(format!(
            "{name} is {}; it must be a number",
            json_kind(other)
        ))),
    }
}
