//! Random and adversarial SQLite histories (schema variants, views, huge and negative values,
//! bombs, values over the 16 MiB cap) through every reader of the built binary (issue 28):
//! `top --replay` as text and JSON, `top --from … --to …` as text and JSON, and
//! `report disk --history` as text and JSON. Each reads the file (exit 0) or refuses it in one
//! line (exit 2); none panics, is killed by a signal, runs past its time or holds more than
//! [`RSS_BOUND`]. The library's own property test (src/history/store/hostile_tests.rs) calls
//! the readers directly; this one sees what a user of the command sees.

use crate::common::*;
use proptest::prelude::*;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The history file's marks, as tacho writes them.
const APPLICATION_ID: i32 = 0x7468_7374;
const VERSION: i64 = 1;
/// Most a reader may hold, whatever the file: a few decoded samples at their bound.
const RSS_BOUND: u64 = 256 << 20;
/// Longest a reader may take on one file.
const TIME_BOUND: Duration = Duration::from_secs(30);

/// What `samples` is in the file.
#[derive(Debug, Clone)]
enum Schema {
    /// The table tacho makes, with the generated rows.
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
    /// A real record whose numbers at these positions are replaced by hostile numbers of
    /// their own kind (the second of the pair picks which), so the row still decodes and the
    /// readers' arithmetic meets them.
    Typed(Vec<(usize, usize)>),
    /// Bytes that are not zlib.
    Raw(Vec<u8>),
    /// zlib of bytes that are not JSON.
    Zlib(Vec<u8>),
    /// zlib of 8 MiB of spaces: inflates a thousandfold.
    Bomb,
    /// zlib of JSON nested deeper than any parser's stack should go.
    Deep,
    /// A real 20 MiB value, over the history connection's 16 MiB cap.
    Huge,
    /// Text where a blob belongs.
    Text(String),
}

/// Offsets from the real sample's time, and the times a hostile row may claim instead.
#[derive(Debug, Clone, Copy)]
enum Time {
    After(u32),
    Absolute(f64),
}

fn time() -> impl Strategy<Value = Time> {
    prop_oneof![
        4 => (0u32..50).prop_map(Time::After),
        1 => prop::sample::select(vec![-1e30, -1.0, 0.0, 1e10 + 1.0, 1e300, f64::MAX])
            .prop_map(Time::Absolute),
    ]
}

/// Times as [`time`] makes them, with the hostile ones as likely as the real: a time that
/// converts to no duration (−1e30 before the others, 1e300 after) must be met in a few cases.
fn edge_time() -> impl Strategy<Value = Time> {
    prop_oneof![
        1 => (0u32..50).prop_map(Time::After),
        1 => prop::sample::select(vec![-1e30, -1.0, 0.0, 1e10 + 1.0, 1e300, f64::MAX])
            .prop_map(Time::Absolute),
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

/// A real record with a few of its numbers replaced.
fn mutated() -> impl Strategy<Value = Data> {
    prop::collection::vec((0usize..4000, adversarial_number()), 0..6).prop_map(Data::Mutated)
}

/// Hostile numbers of the kind of `old`: an unsigned count (up to u64::MAX: the model cuts
/// a process's difference over an interval to `MAX_DELTA` and saturates its sums), a signed
/// one, or a float.
fn same_kind(old: &Value, pick: usize) -> Value {
    let choices = if old.is_u64() {
        vec![
            serde_json::json!(0),
            serde_json::json!(4_294_967_295u64),
            serde_json::json!(u64::MAX),
        ]
    } else if old.is_i64() {
        vec![serde_json::json!(-1), serde_json::json!(i64::MIN)]
    } else {
        vec![
            serde_json::json!(1e300),
            serde_json::json!(-1e300),
            serde_json::json!(1e-300),
            serde_json::json!(-1.0),
        ]
    };
    choices[pick % choices.len()].clone()
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![
        8 => mutated(),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Data::Raw),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Data::Zlib),
        1 => Just(Data::Bomb),
        1 => Just(Data::Deep),
        1 => Just(Data::Huge),
        1 => ".{0,16}".prop_map(Data::Text),
    ]
}

fn schema() -> impl Strategy<Value = Schema> {
    prop_oneof![
        8 => Just(Schema::Tacho),
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

/// A record this machine's recorder wrote, as JSON, with its time: recorded once.
fn real_record() -> &'static (Value, f64) {
    static RECORD: OnceLock<(Value, f64)> = OnceLock::new();
    RECORD.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let history = dir.path().join("history.db");
        let o = run(&[
            "record",
            "--count",
            "1",
            "--history",
            history.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let (t, blob): (f64, Vec<u8>) = rusqlite::Connection::open(&history)
            .unwrap()
            .query_row("SELECT unix_s, data FROM samples", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        // A recorder's first row is a whole sample (a key row: a zstd frame).
        let json = zstd::decode_all(&blob[..]).unwrap();
        (serde_json::from_slice(&json).unwrap(), t)
    })
}

/// Replaces the `n`th number (in document order, wrapping) of `v` by `new(the number)`.
fn replace_number(v: &mut Value, n: usize, new: impl FnOnce(&Value) -> Value) {
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
        *slot = new(slot);
    }
}

/// The row's value for `data`, stamped `t` where it is a real record.
fn row_value(d: &Data, t: f64) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    match d {
        Data::Mutated(edits) => {
            let mut v = real_record().0.clone();
            v["sample"]["unix_time_s"] = serde_json::json!(t);
            for (n, new) in edits {
                replace_number(&mut v, *n, |_| new.clone());
            }
            Sql::Blob(zlib(&serde_json::to_vec(&v).unwrap()))
        }
        Data::Typed(edits) => {
            let mut v = real_record().0.clone();
            v["sample"]["unix_time_s"] = serde_json::json!(t);
            for &(n, pick) in edits {
                replace_number(&mut v, n, |old| same_kind(old, pick));
            }
            Sql::Blob(zlib(&serde_json::to_vec(&v).unwrap()))
        }
        Data::Raw(b) => Sql::Blob(b.clone()),
        Data::Zlib(b) => Sql::Blob(zlib(b)),
        Data::Bomb => Sql::Blob(zlib(&vec![b' '; 8 << 20])),
        Data::Deep => Sql::Blob(zlib(&vec![b'['; 1 << 20])),
        Data::Huge => {
            // Not compressible, so the file really holds 20 MiB.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            Sql::Blob(
                (0..20 << 20)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect(),
            )
        }
        Data::Text(s) => Sql::Text(s.clone()),
    }
}

/// Writes the file the way an attacker would, with tacho's marks on it.
fn build(path: &Path, schema: &Schema, rows: &[(Time, Data)]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let ddl = match schema {
        Schema::Tacho => {
            "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s REAL NOT NULL, data BLOB NOT NULL);
             CREATE INDEX samples_time ON samples(unix_s)"
        }
        Schema::Recursive => {
            "CREATE VIEW samples AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 \
             FROM n) SELECT i AS id, 1.7e9 + i AS unix_s, x'00' AS data FROM n"
        }
        Schema::Zeroblob => {
            "CREATE TABLE t (i); INSERT INTO t VALUES (1), (2); CREATE VIEW samples AS SELECT \
             i AS id, 1.7e9 + i AS unix_s, zeroblob(900000000) AS data FROM t"
        }
        Schema::Generated => {
            "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s REAL NOT NULL, \
             data BLOB AS (zeroblob(900000000))); INSERT INTO samples (unix_s) VALUES (1.7e9)"
        }
        Schema::Columns => "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s TEXT, data TEXT)",
        Schema::Missing => "CREATE TABLE other (x)",
    };
    conn.execute_batch(&format!(
        "{ddl}; PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {VERSION};"
    ))
    .unwrap();
    if matches!(schema, Schema::Tacho) {
        let base = real_record().1;
        for (t, d) in rows {
            let t = match *t {
                Time::After(s) => base + f64::from(s),
                Time::Absolute(t) => t,
            };
            conn.execute(
                "INSERT INTO samples (unix_s, data) VALUES (?1, ?2)",
                rusqlite::params![t, row_value(d, t)],
            )
            .unwrap();
        }
    }
}

/// Every reader of the binary over `history`: each exits 0 or refuses in one line (exit 2),
/// within [`TIME_BOUND`] and [`RSS_BOUND`].
fn read_with_every_reader(history: &Path) -> Result<(), TestCaseError> {
    let h = history.to_str().unwrap();
    let from = [
        "--from",
        "1970-01-01T00:00:00Z",
        "--to",
        "2200-01-01T00:00:00Z",
    ];
    let readers: [&[&str]; 6] = [
        &["top", "--replay", "--batch"],
        &["top", "--replay", "--json"],
        &["top", from[0], from[1], from[2], from[3]],
        &["top", from[0], from[1], from[2], from[3], "--json"],
        &["report", "disk"],
        &["report", "disk", "--json"],
    ];
    for reader in readers {
        let mut args = reader.to_vec();
        args.extend(["--history", h]);
        let (o, rss) = run_measured_within(&args, TIME_BOUND);
        match o.status.code() {
            Some(0) => {}
            Some(2) => {
                assert_error(&o);
            }
            other => prop_assert!(
                false,
                "{reader:?}: exit {other:?} (101 a panic, over 128 a signal, 1 past {TIME_BOUND:?}): {}",
                stderr(&o)
            ),
        }
        prop_assert!(rss < RSS_BOUND, "{reader:?}: {} MiB resident", rss >> 20);
    }
    Ok(())
}

proptest! {
    // Each case runs six readers of a debug build: about a second.
    #![proptest_config(ProptestConfig::with_cases(10))]

    #[test]
    fn any_history_is_read_or_refused_by_every_reader_of_the_binary_in_bounded_time_and_memory(
        schema in schema(),
        rows in prop::collection::vec((time(), data()), 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        build(&path, &schema, &rows);
        read_with_every_reader(&path)?;
    }
}

proptest! {
    // The rows' values alone, in tacho's own table: each case holds two to five real records
    // with hostile times and numbers of the right kinds, so the rows decode and the readers'
    // arithmetic on them is reached (with the first property's mix, most such rows are
    // refused as damaged, and a time that converts to no duration panicked a reader without
    // its checks in one run of three).
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn any_times_and_figures_in_real_records_are_read_or_refused_by_every_reader(
        rows in prop::collection::vec(
            (edge_time(), prop::collection::vec((0usize..4000, 0usize..12), 0..6).prop_map(Data::Typed)),
            2..6,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        build(&path, &Schema::Tacho, &rows);
        read_with_every_reader(&path)?;
    }
}
