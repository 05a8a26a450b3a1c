//! The database layout and its migrations.
//!
//! `PRAGMA user_version` holds the number of migrations applied; `PRAGMA application_id` marks
//! the file as tacho's, so a foreign SQLite file is refused instead of altered. Migrations only
//! ever append: a released step never changes, so every older database upgrades the same way.

use rusqlite::{Connection, TransactionBehavior};

use super::figures;

/// "tach" in ASCII: SQLite's header field for telling which program owns a file.
pub const APPLICATION_ID: i32 = 0x7461_6368;

/// Schema 1: runs with their documents, tests with their full JSON.
///
/// Each run keeps the parts of its `tacho.bench.v1` document separately (host, target, and
/// every other top-level field in `extra_json`), and each test its whole JSON object, so
/// fields later tacho versions add survive a round trip through the store unchanged.
pub const SCHEMA_1: &str = "
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at    TEXT NOT NULL,
    label         TEXT,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    source        TEXT NOT NULL,
    tool_version  TEXT,
    suite_name    TEXT,
    suite_version INTEGER,
    hostname      TEXT,
    target_path   TEXT,
    host_json     TEXT NOT NULL,
    target_json   TEXT NOT NULL,
    extra_json    TEXT NOT NULL
);
CREATE TABLE tests (
    run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    name     TEXT NOT NULL,
    rw       TEXT,
    bs_bytes INTEGER,
    iodepth  INTEGER,
    numjobs  INTEGER,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Schema 2: the figures `compare` works on, one row per test, sample and direction, so
/// statistics are one query away. Sample 0 is the figure the test reported; samples 1..N are
/// its repeats. Filled for existing runs from the stored test JSON.
pub const SCHEMA_2: &str = "
CREATE TABLE figures (
    run_id         INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    sample         INTEGER NOT NULL,
    direction      TEXT NOT NULL,
    iops           REAL,
    bw_bytes_per_s REAL,
    lat_mean_ns    REAL,
    lat_p50_ns     REAL,
    lat_p90_ns     REAL,
    lat_p99_ns     REAL,
    lat_p99_9_ns   REAL,
    lat_p99_99_ns  REAL,
    lat_max_ns     REAL,
    PRIMARY KEY (run_id, seq, sample, direction),
    FOREIGN KEY (run_id, seq) REFERENCES tests(run_id, seq) ON DELETE CASCADE
);
CREATE INDEX runs_created ON runs(created_at);
";

/// Schema 3: CPU kernels' operations per second, for runs of `bench cpu` (memory and timed
/// commands fit the existing columns: bandwidth, and wall time as latency).
pub const SCHEMA_3: &str = "ALTER TABLE figures ADD COLUMN ops_per_s REAL;";

/// Schema 4: the process saving a `running` run (`boot-id pid start-ticks`), so a run whose
/// process was killed or whose machine rebooted shows as `abandoned`, not `running` forever.
pub const SCHEMA_4: &str = "ALTER TABLE runs ADD COLUMN owner TEXT;";

/// Schema 5: a random run id (UUID v4) made on the host that saved the run, so the same run
/// uploaded twice to a shared store (a retried `runs push`) is recognised and kept once.
/// Existing runs get one each here, built in SQL from `randomblob` in the v4 layout.
pub const SCHEMA_5: &str = "
ALTER TABLE runs ADD COLUMN uuid TEXT;
UPDATE runs SET uuid = lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
    || substr(lower(hex(randomblob(2))), 2) || '-'
    || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2)
    || '-' || lower(hex(randomblob(6)));
CREATE UNIQUE INDEX runs_uuid ON runs(uuid);
";

/// Schema version this tacho writes.
pub const LATEST: i64 = 5;

/// Brings the database to [`LATEST`] inside one write transaction, so two processes opening a
/// new file at once migrate it once.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 1 {
        tx.execute_batch(SCHEMA_1)?;
        tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
    }
    if version < 2 {
        tx.execute_batch(SCHEMA_2)?;
    }
    if version < 3 {
        tx.execute_batch(SCHEMA_3)?;
    }
    if version < 4 {
        tx.execute_batch(SCHEMA_4)?;
    }
    if version < 5 {
        tx.execute_batch(SCHEMA_5)?;
    }
    if version < 2 {
        // After every column exists: the backfill writes all of them.
        figures::backfill(&tx)?;
    }
    if version < LATEST {
        tx.execute_batch(&format!("PRAGMA user_version = {LATEST}"))?;
    }
    tx.commit()
}
