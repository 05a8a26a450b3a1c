//! A shared PostgreSQL results store that many hosts upload their runs to (`runs push`).
//!
//! Runs keep the columns of the SQLite store, keyed by the UUID the saving host gave them, so
//! an upload that is retried (or run by two processes at once) inserts each run once: the run
//! row goes in with `ON CONFLICT (uuid) DO NOTHING` and its tests in the same transaction.
//! The schema is versioned in `tacho_schema` and migrated in one transaction holding an
//! advisory lock, so hosts that connect to a new database at the same moment migrate it once.
//!
//! The connection URL may carry a password: every message shows it through [`redact`], and
//! it is sent only over TLS or a Unix socket (`connect`).

mod connect;
mod pgpass;
mod runs;

use super::{RawRun, Store};
use crate::kernel::SysRoot;
use anyhow::{Result, anyhow, bail};
use connect::Target;
pub use connect::redact;
use postgres::Client;

/// The advisory lock key migrations hold ("tachoSCH" in ASCII), so they never run twice at once.
const MIGRATION_LOCK: i64 = 0x7461_6368_6f53_4348;

/// Schema 1 of the shared store: the SQLite store's runs and tests, with the host-made UUID as
/// the identity of a run across hosts.
const PG_SCHEMA_1: &str = "
CREATE TABLE runs (
    id            BIGSERIAL PRIMARY KEY,
    uuid          UUID NOT NULL UNIQUE,
    created_at    TEXT NOT NULL,
    label         TEXT,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    source        TEXT NOT NULL,
    tool_version  TEXT,
    suite_name    TEXT,
    suite_version BIGINT,
    hostname      TEXT,
    target_path   TEXT,
    host_json     TEXT NOT NULL,
    target_json   TEXT NOT NULL,
    extra_json    TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created_at);
CREATE INDEX runs_hostname ON runs(hostname);
CREATE TABLE tests (
    run_id   BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    name     TEXT NOT NULL,
    rw       TEXT,
    bs_bytes BIGINT,
    iodepth  BIGINT,
    numjobs  BIGINT,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Schema 2: the process saving a `running` run (`boot-id pid start-ticks`), as in the SQLite
/// store, so a reader on that machine can tell a run whose process is gone.
const PG_SCHEMA_2: &str = "ALTER TABLE runs ADD COLUMN owner TEXT;";

/// Schema steps in order; the database records how many it has applied.
const PG_MIGRATIONS: &[&str] = &[PG_SCHEMA_1, PG_SCHEMA_2];

/// An open connection to a shared store, migrated to the latest schema.
pub struct PgStore {
    client: Client,
    /// The URL without its password, for messages.
    shown: String,
    /// Where this machine's /proc is (given by the caller): a `running` run is marked with
    /// the process saving it, and one saved from here is `abandoned` once that process is gone.
    root: SysRoot,
}

/// What `runs push` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PushCounts {
    /// Runs the server did not have.
    pub new: usize,
    /// Runs the server already had (an earlier or concurrent push).
    pub present: usize,
    /// Runs still being saved locally, left for a later push.
    pub running: usize,
    /// Runs that could not be uploaded (local id, why), left out while the others went.
    pub failed: Vec<(i64, String)>,
}

impl PgStore {
    /// Connects to `url` and migrates the schema; errors are one line naming the fix. `root`
    /// is where this machine's /proc is.
    pub fn connect(url: &str, root: SysRoot) -> Result<PgStore> {
        let (mut client, shown) = Target::parse(url)?.connect()?;
        migrate(&mut client).map_err(|e| {
            anyhow!(
                "cannot set up the tables in {shown} ({}); the user needs CREATE on the database",
                error_chain(&e)
            )
        })?;
        Ok(PgStore {
            client,
            shown,
            root,
        })
    }

    /// The server's URL without its password, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Uploads every finished run of `local` the server does not have yet, one transaction per
    /// run, so an interrupted push leaves only whole runs and the next one carries on. A run
    /// the server refuses is counted in [`PushCounts::failed`] and the rest still go: one bad
    /// run must not hold back every later one.
    pub fn push(&mut self, local: &Store) -> Result<PushCounts> {
        let mut counts = PushCounts::default();
        for run in local.raw_runs()? {
            if run.status == "running" {
                counts.running += 1;
                continue;
            }
            if let Some(why) = unsendable(&run) {
                counts.failed.push((run.id, why));
                continue;
            }
            match self.insert(&run) {
                Ok(true) => counts.new += 1,
                Ok(false) => counts.present += 1,
                // Without a connection no later run can go either.
                Err(e) if e.is_closed() => bail!(
                    "upload to {} failed after {} new run(s): {}; push again to carry on",
                    self.shown,
                    counts.new,
                    error_chain(&e)
                ),
                Err(e) => counts.failed.push((run.id, error_chain(&e))),
            }
        }
        Ok(counts)
    }

    /// Inserts one run with its tests; `false` when a run with its UUID is already there.
    fn insert(&mut self, run: &RawRun) -> Result<bool, postgres::Error> {
        let mut tx = self.client.transaction()?;
        let row = tx.query_opt(
            "INSERT INTO runs (uuid, created_at, label, kind, status, source, tool_version,
                suite_name, suite_version, hostname, target_path, host_json, target_json,
                extra_json)
             VALUES ($1::TEXT::UUID, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
             ON CONFLICT (uuid) DO NOTHING RETURNING id",
            &[
                &run.uuid,
                &run.created_at,
                &run.label,
                &run.kind,
                &run.status,
                &run.source,
                &run.tool_version,
                &run.suite_name,
                &run.suite_version,
                &run.hostname,
                &run.target_path,
                &run.host_json,
                &run.target_json,
                &run.extra_json,
            ],
        )?;
        let Some(row) = row else {
            return Ok(false);
        };
        let id: i64 = row.get(0);
        let stmt = tx.prepare(
            "INSERT INTO tests (run_id, seq, name, rw, bs_bytes, iodepth, numjobs, json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )?;
        for t in &run.tests {
            tx.execute(
                &stmt,
                &[
                    &id,
                    &t.seq,
                    &t.name,
                    &t.rw,
                    &t.bs_bytes,
                    &t.iodepth,
                    &t.numjobs,
                    &t.json,
                ],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }
}

/// Why a local run cannot be uploaded as it is, found before it is sent: a run id edited by
/// hand, or a NUL character in a text column (PostgreSQL stores none; older tacho versions
/// imported such runs).
fn unsendable(run: &RawRun) -> Option<String> {
    if uuid::Uuid::parse_str(&run.uuid).is_err() {
        return Some(format!(
            "it has no valid run id ({}); it was edited by hand: export and re-import it",
            crate::text::Escaped(&run.uuid)
        ));
    }
    let texts = [
        ("label", run.label.as_deref()),
        ("host name", run.hostname.as_deref()),
        ("target", run.target_path.as_deref()),
        ("tool version", run.tool_version.as_deref()),
        ("suite", run.suite_name.as_deref()),
        ("date", Some(run.created_at.as_str())),
    ];
    let column = texts
        .iter()
        .find(|(_, t)| t.is_some_and(|t| t.contains('\0')))
        .map(|(what, _)| (*what).to_owned())
        .or_else(|| {
            let i = run.tests.iter().position(|t| {
                t.name.contains('\0') || t.rw.as_deref().is_some_and(|r| r.contains('\0'))
            })?;
            Some(format!("test {}'s name", i + 1))
        })?;
    Some(format!(
        "its {column} holds a NUL character, which PostgreSQL cannot store; remove the run \
         (tacho runs rm {id}) or export it, edit the file and import it again",
        id = run.id
    ))
}

/// Applies the missing schema steps in one transaction under an advisory lock.
fn migrate(client: &mut Client) -> Result<(), postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS tacho_schema (version BIGINT NOT NULL)")?;
    let version: i64 = tx
        .query_opt("SELECT version FROM tacho_schema", &[])?
        .map_or(0, |r| r.get(0));
    let latest = PG_MIGRATIONS.len() as i64;
    if version > latest {
        // Written by a newer tacho: leave it alone; the columns used here still exist.
        return tx.commit();
    }
    for step in &PG_MIGRATIONS[version as usize..] {
        tx.batch_execute(step)?;
    }
    if version == 0 {
        tx.execute("INSERT INTO tacho_schema (version) VALUES ($1)", &[&latest])?;
    } else if version < latest {
        tx.execute("UPDATE tacho_schema SET version = $1", &[&latest])?;
    }
    tx.commit()
}

/// The error and its causes on one line (the crate's top level says only "error connecting").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
