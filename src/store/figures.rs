//! The per-direction figures of a test, taken from its JSON object: the reported figure
//! (sample 0) and, when the test was repeated, each repeat (samples 1..N).
//!
//! Read through a typed view whose every field may be absent ([`Field`]), so tests written by
//! any tacho version (and by fio import) index the same way; absent fields are `None`, never
//! zero.

use super::stored::{Field, view};
use rusqlite::Transaction;
use serde::Deserialize;
use serde_json::Value;

/// The latency percentiles stored per direction, as (JSON key, column) pairs.
pub const LATENCY_KEYS: [(&str, &str); 7] = [
    ("mean", "lat_mean_ns"),
    ("p50", "lat_p50_ns"),
    ("p90", "lat_p90_ns"),
    ("p99", "lat_p99_ns"),
    ("p99_9", "lat_p99_9_ns"),
    ("p99_99", "lat_p99_99_ns"),
    ("max", "lat_max_ns"),
];

/// Where a test's figures sit in its JSON object: disk tests have `read` and `write`, and
/// `sync` (fsync/fdatasync latency) when they flush; memory tests also `copy`; CPU kernels
/// `run` (ops/s); timed commands `wall` (wall-clock time of each run, kept as latency); an
/// experiment judged by a workload's CPU time `cpu_time` (its seconds, kept as latency; `cpu`
/// is taken: a disk test's CPU use).
pub const DIRECTIONS: [&str; 7] = ["read", "write", "sync", "copy", "run", "wall", "cpu_time"];

/// The `&'static` direction named `name`; `None` for a name tacho does not write.
pub fn direction(name: &str) -> Option<&'static str> {
    DIRECTIONS.iter().copied().find(|d| *d == name)
}

/// One direction of one sample of a test.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// 0 for the figure the test reported, 1..N for each repeat.
    pub sample: u32,
    /// One of [`DIRECTIONS`].
    pub direction: &'static str,
    /// Operations per second of this direction, when the test recorded them.
    pub iops: Option<f64>,
    /// Bytes per second of this direction, when the test recorded them.
    pub bw_bytes_per_s: Option<f64>,
    /// Operations per second of a CPU kernel.
    pub ops_per_s: Option<f64>,
    /// In the order of [`LATENCY_KEYS`].
    pub lat_ns: [Option<f64>; 7],
}

/// The figures of a test or of one of its repeats, by direction (written from
/// `bench::result::{TestResult, DirectionResult}`, and by `store::kinds` and `store::fio`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SampleView {
    read: Field<DirectionView>,
    write: Field<DirectionView>,
    sync: Field<DirectionView>,
    copy: Field<DirectionView>,
    run: Field<DirectionView>,
    wall: Field<DirectionView>,
    cpu_time: Field<DirectionView>,
    /// The test's repeats (a repeat's own are not read).
    repeats: Field<Vec<Field<SampleView>>>,
}

impl SampleView {
    /// The sample's directions, in the order of [`DIRECTIONS`].
    fn directions(&self) -> [(&'static str, &Field<DirectionView>); 7] {
        let [read, write, sync, copy, run, wall, cpu_time] = DIRECTIONS;
        [
            (read, &self.read),
            (write, &self.write),
            (sync, &self.sync),
            (copy, &self.copy),
            (run, &self.run),
            (wall, &self.wall),
            (cpu_time, &self.cpu_time),
        ]
    }
}

/// One direction's figures.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DirectionView {
    iops: Field<f64>,
    bw_bytes_per_s: Field<f64>,
    ops_per_s: Field<f64>,
    lat_ns: Field<LatencyView>,
}

/// `lat_ns`, by the keys of [`LATENCY_KEYS`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LatencyView {
    mean: Field<f64>,
    p50: Field<f64>,
    p90: Field<f64>,
    p99: Field<f64>,
    p99_9: Field<f64>,
    p99_99: Field<f64>,
    max: Field<f64>,
}

impl LatencyView {
    /// In the order of [`LATENCY_KEYS`].
    fn in_order(&self) -> [Option<f64>; 7] {
        [
            &self.mean,
            &self.p50,
            &self.p90,
            &self.p99,
            &self.p99_9,
            &self.p99_99,
            &self.max,
        ]
        .map(|f| f.get().copied())
    }
}

/// Every sample and direction present in a test object.
pub fn of_test(test: &Value) -> Vec<Figures> {
    of_sample(&view(test))
}

/// As [`of_test`], from the test's JSON text.
pub fn of_test_text(test: &str) -> Vec<Figures> {
    of_sample(&crate::store::stored::view_text(test))
}

fn of_sample(test: &SampleView) -> Vec<Figures> {
    let mut out = directions(test, 0);
    if let Some(repeats) = test.repeats.get() {
        for (i, repeat) in repeats.iter().enumerate() {
            if let Some(repeat) = repeat.get() {
                out.extend(directions(repeat, u32::try_from(i + 1).unwrap_or(u32::MAX)));
            }
        }
    }
    out
}

fn directions(sample: &SampleView, n: u32) -> Vec<Figures> {
    sample
        .directions()
        .into_iter()
        .filter_map(|(direction, d)| {
            let d = d.get()?;
            let none = LatencyView::default();
            Some(Figures {
                sample: n,
                direction,
                iops: d.iops.get().copied(),
                bw_bytes_per_s: d.bw_bytes_per_s.get().copied(),
                ops_per_s: d.ops_per_s.get().copied(),
                lat_ns: d.lat_ns.get().unwrap_or(&none).in_order(),
            })
        })
        .collect()
}

/// Writes the figures of test `seq` of run `run_id`.
pub fn insert(tx: &Transaction, run_id: i64, seq: i64, test: &Value) -> rusqlite::Result<()> {
    insert_all(tx, run_id, seq, of_test(test))
}

/// Saves a test's figures (of [`of_test`] or [`of_test_text`]), up to [`ROWS_AT_ONCE`] rows a
/// statement: a run of many tests has four or more rows a test, and each statement run has a
/// cost of its own.
pub fn insert_all(
    tx: &rusqlite::Connection,
    run_id: i64,
    seq: i64,
    figures: Vec<Figures>,
) -> rusqlite::Result<()> {
    for rows in figures.chunks(ROWS_AT_ONCE) {
        let mut stmt = tx.prepare_cached(insert_sql(rows.len()))?;
        let mut at = 0;
        let mut bind = |v: &dyn rusqlite::ToSql| {
            at += 1;
            stmt.raw_bind_parameter(at, v)
        };
        for f in rows {
            let l = f.lat_ns;
            bind(&run_id)?;
            bind(&seq)?;
            bind(&f.sample)?;
            bind(&f.direction)?;
            bind(&f.iops)?;
            bind(&f.bw_bytes_per_s)?;
            for v in l {
                bind(&v)?;
            }
            bind(&f.ops_per_s)?;
        }
        stmt.raw_execute()?;
    }
    Ok(())
}

/// The most figure rows one statement writes.
const ROWS_AT_ONCE: usize = 8;

/// The statement that writes `rows` figure rows (1 to [`ROWS_AT_ONCE`]).
fn insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        (1..=ROWS_AT_ONCE)
            .map(|n| {
                let row = |r: usize| {
                    let p: Vec<String> = (1..=14).map(|i| format!("?{}", r * 14 + i)).collect();
                    format!("({})", p.join(", "))
                };
                let values: Vec<String> = (0..n).map(row).collect();
                format!(
                    "INSERT INTO figures (run_id, seq, sample, direction, iops, bw_bytes_per_s,
                        lat_mean_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_p99_9_ns,
                        lat_p99_99_ns, lat_max_ns, ops_per_s)
                     VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    &all[rows.clamp(1, ROWS_AT_ONCE) - 1]
}

/// Fills `figures` from every stored test (the step that created the table).
pub fn backfill(tx: &Transaction) -> rusqlite::Result<()> {
    let rows: Vec<(i64, i64, String)> = {
        let mut stmt = tx.prepare("SELECT run_id, seq, json FROM tests")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    for (run_id, seq, json) in rows {
        // A test whose JSON does not parse keeps no figures rather than blocking the upgrade.
        if let Ok(test) = serde_json::from_str::<Value>(&json) {
            insert(tx, run_id, seq, &test)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reported_figure_and_repeats() {
        let test = json!({
            "name": "RND4K Q1T1",
            "read": {"iops": 100.0, "bw_bytes_per_s": 409600.0,
                     "lat_ns": {"mean": 10, "p50": 9, "p99": 20, "max": 30}},
            "repeats": [
                {"read": {"iops": 90.0, "bw_bytes_per_s": 1.0, "lat_ns": {"p99": 21}}},
                {"read": {"iops": 110.0}, "write": {"iops": 5.0}},
                "garbage"
            ]
        });
        let f = of_test(&test);
        assert_eq!(f.len(), 4);
        assert_eq!(
            (f[0].sample, f[0].direction, f[0].iops),
            (0, "read", Some(100.0))
        );
        assert_eq!(f[0].lat_ns[3], Some(20.0));
        assert_eq!(f[0].lat_ns[2], None, "absent p90 stays absent");
        assert_eq!((f[1].sample, f[1].lat_ns[3]), (1, Some(21.0)));
        assert_eq!((f[3].sample, f[3].direction), (2, "write"));
    }

    #[test]
    fn non_objects_give_nothing() {
        assert!(of_test(&json!(null)).is_empty());
        assert!(of_test(&json!({"read": 5, "repeats": 3})).is_empty());
    }
}
