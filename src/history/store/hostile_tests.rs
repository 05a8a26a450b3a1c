//! Random and adversarial SQLite files fed to every reader of the history (the replay's
//! recent samples, the `--from/--to` summary, `report disk`'s day totals and writers): each
//! either reads or refuses the file, never panics, and finishes in bounded time.

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;

use super::tests::record;
use super::*;
use crate::history::{days, summary};

/// What `samples` is in the file.
#[derive(Debug, Clone)]
enum Schema {
    /// The table tacho makes, with `rows`.
    Tacho,
    /// An endless recursive view.
    Recursive,
    /// A view of 900 MB blobs.
    Zeroblob,
    /// The table with `data` generated as a 900 MB blob.
    Generated,
    /// Other columns.
    Columns,
    /// No table at all.
    Missing,
}

/// A row's `data`.
#[derive(Debug, Clone)]
enum Data {
    /// A real record whose numbers at these positions are replaced by these values.
    Mutated(Vec<(usize, Value)>),
    /// Bytes that are not zlib.
    Raw(Vec<u8>),
    /// zlib of bytes that are not JSON.
    Zlib(Vec<u8>),
    /// zlib of 8 MiB of spaces: inflates a thousandfold.
    Bomb,
    /// zlib of JSON that is not a record.
    Json(Value),
    /// Text where a blob belongs.
    Text(String),
}

/// A base time in 2026, and the times a hostile row may claim instead.
const BASE: f64 = 1_795_000_000.0;

fn time() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (0u32..50).prop_map(|i| BASE + f64::from(i)),
        1 => prop::sample::select(vec![-1e30, -1.0, 0.0, 1e10, 1e300, f64::MAX, f64::MIN_POSITIVE]),
    ]
}

fn adversarial_number() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        serde_json::json!(0),
        serde_json::json!(-1),
        serde_json::json!(u64::MAX),
        serde_json::json!(i64::MIN),
        serde_json::json!(1e300),
        serde_json::json!(-1e300),
        serde_json::json!(1e-300),
        serde_json::json!(4_294_967_295u64),
    ])
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::hash_map("[a-z_]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        6 => prop::collection::vec((0usize..4000, adversarial_number()), 0..6).prop_map(Data::Mutated),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Data::Raw),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Data::Zlib),
        1 => Just(Data::Bomb),
        1 => json().prop_map(Data::Json),
        1 => ".{0,16}".prop_map(Data::Text),
    ]
}

fn schema() -> impl Strategy<Value = Schema> {
    prop_oneof![
        10 => Just(Schema::Tacho),
        1 => Just(Schema::Recursive),
        1 => Just(Schema::Zeroblob),
        1 => Just(Schema::Generated),
        1 => Just(Schema::Columns),
        1 => Just(Schema::Missing),
    ]
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

/// A real record as JSON, and the bomb: made once.
fn material() -> &'static (Value, Vec<u8>) {
    static MATERIAL: OnceLock<(Value, Vec<u8>)> = OnceLock::new();
    MATERIAL.get_or_init(|| {
        let rec = serde_json::to_value(record(BASE)).unwrap();
        (rec, zlib(&vec![b' '; 8 << 20]))
    })
}

/// Replaces the `n`th number (in document order, wrapping) of `v` by `new`.
fn replace_number(v: &mut Value, n: usize, new: Value) {
    fn numbers<'a>(v: &'a mut Value, out: &mut Vec<&'a mut Value>) {
        match v {
            Value::Number(_) => out.push(v),
            Value::Array(a) => a.iter_mut().for_each(|x| numbers(x, out)),
            Value::Object(o) => o.values_mut().for_each(|x| numbers(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    numbers(v, &mut all);
    let count = all.len();
    if let Some(slot) = all.into_iter().nth(n % count.max(1)) {
        *slot = new;
    }
}

/// The row's value for `data`, stamped `t` where it is a real record.
fn row_value(d: &Data, t: f64) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    let (rec, bomb) = material();
    match d {
        Data::Mutated(edits) => {
            let mut v = rec.clone();
            v["sample"]["unix_time_s"] = serde_json::json!(t);
            for (n, new) in edits {
                replace_number(&mut v, *n, new.clone());
            }
            Sql::Blob(zlib(&serde_json::to_vec(&v).unwrap()))
        }
        Data::Raw(b) => Sql::Blob(b.clone()),
        Data::Zlib(b) => Sql::Blob(zlib(b)),
        Data::Bomb => Sql::Blob(bomb.clone()),
        Data::Json(v) => Sql::Blob(zlib(&serde_json::to_vec(v).unwrap())),
        Data::Text(s) => Sql::Text(s.clone()),
    }
}

/// Writes the file the way an attacker would, with tacho's marks on it.
fn build(path: &Path, schema: &Schema, rows: &[(f64, Data)]) {
    let conn = Connection::open(path).unwrap();
    let ddl = match schema {
        Schema::Tacho => {
            "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s REAL NOT NULL, data BLOB NOT NULL)"
        }
        Schema::Recursive => {
            "CREATE VIEW samples AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 \
             FROM n) SELECT i AS id, 1.795e9 + i AS unix_s, x'00' AS data FROM n"
        }
        Schema::Zeroblob => {
            "CREATE TABLE t (i); INSERT INTO t VALUES (1), (2); CREATE VIEW samples AS SELECT \
             i AS id, 1.795e9 + i AS unix_s, zeroblob(900000000) AS data FROM t"
        }
        Schema::Generated => {
            "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s REAL NOT NULL, \
             data BLOB AS (zeroblob(900000000))); INSERT INTO samples (unix_s) VALUES (1.795e9)"
        }
        Schema::Columns => "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s TEXT, data TEXT)",
        Schema::Missing => "CREATE TABLE other (x)",
    };
    conn.execute_batch(&format!(
        "{ddl}; PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {VERSION};"
    ))
    .unwrap();
    if matches!(schema, Schema::Tacho) {
        for (t, d) in rows {
            conn.execute(
                "INSERT INTO samples (unix_s, data) VALUES (?1, ?2)",
                params![t, row_value(d, *t)],
            )
            .unwrap();
        }
    }
}

/// Every reader over the file: errors are fine, panics are not. Each reader is tried whether
/// or not the others refused the file: `top --from/--to` reads through `scan` alone, and a
/// file `times()` refuses can still reach it.
fn read_everything(path: &Path) {
    let Ok(h) = History::open(path) else { return };
    // The times the readers start from: the file's, else the span the generator stamps rows
    // in (with the hostile times around it).
    let times = h.times().unwrap_or_default();
    let (first, last) = match (times.first(), times.last()) {
        (Some(&first), Some(&last)) => (first, last),
        _ => (BASE, BASE + 50.0),
    };
    let _ = summary::summarise(&h, first - 1.0, last + 1.0, 5);
    let _ = summary::summarise(&h, -1e30, 1e300, 5);
    // The replay: each moment judged after the ones before it.
    let ends: Vec<f64> = if times.is_empty() {
        vec![last, f64::MAX]
    } else {
        times.iter().rev().take(3).copied().collect()
    };
    for t in ends {
        if let Ok(records) = h.recent(t, 61) {
            let mut pipeline = crate::diagnose::live::Pipeline::new(false);
            for pair in records.windows(2) {
                summary::judged(&pair[0], &pair[1], &mut pipeline, 10, SortKey::Io);
            }
        }
    }
    use chrono::TimeZone;
    if let Some(now) = chrono::Local.timestamp_opt(last as i64, 0).single() {
        let _ = days::day_totals(&h, 3, now);
        let _ = days::day_writers(&h, 3, 5, now);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_history_is_read_or_refused_without_a_panic_or_a_hang(
        schema in schema(),
        rows in prop::collection::vec((time(), data()), 0..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        build(&path, &schema, &rows);
        // On its own thread, so a hang fails the test instead of stalling the suite.
        let (done, finished) = std::sync::mpsc::channel();
        let reader = path.clone();
        let worker = std::thread::spawn(move || {
            read_everything(&reader);
            let _ = done.send(());
        });
        match finished.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => {}
            // The reader panicked before it could answer: report its panic.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                std::panic::resume_unwind(worker.join().unwrap_err())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                prop_assert!(false, "the readers took over a minute on {:?}", schema)
            }
        }
    }
}

#[test]
fn a_bomb_a_view_and_an_impossible_time_are_each_one_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let refusal = |name: &str, schema: Schema, rows: Vec<(f64, Data)>| {
        let path = dir.path().join(name);
        build(&path, &schema, &rows);
        let got = History::open(&path).and_then(|h| {
            h.times()?;
            summary::summarise(&h, 0.0, 1e10, 5).map(drop)
        });
        format!("{:#}", got.expect_err(name))
    };
    let e = refusal("bomb.db", Schema::Tacho, vec![(BASE, Data::Bomb)]);
    assert!(e.contains("decompression bomb"), "{e}");
    let e = refusal("view.db", Schema::Recursive, Vec::new());
    assert!(e.contains("a view"), "{e}");
    let e = refusal(
        "time.db",
        Schema::Tacho,
        vec![(-1e30, Data::Mutated(Vec::new()))],
    );
    assert!(e.contains("not a sample time"), "{e}");
}
