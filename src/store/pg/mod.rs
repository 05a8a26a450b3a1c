//! A shared PostgreSQL results store that many hosts upload their runs to (`runs push`).
//!
//! Runs keep the columns of the SQLite store, keyed by the UUID the saving host gave them, so
//! an upload that is retried (or run by two processes at once) inserts each run once: the run
//! row goes in with `ON CONFLICT (uuid) DO NOTHING` and its tests in the same transaction.
//! The schema is versioned in `tacho_schema`; only `tacho store init` creates or migrates it
//! (`schema`), and every other connection checks its version and changes nothing.
//!
//! The connection URL may carry a password: every message shows it through [`redact`], and
//! it is sent only over TLS or a Unix socket (`connect`).

mod connect;
pub mod history;
mod pgpass;
mod runs;
pub mod schema;

use super::{RawRun, Store};
use crate::kernel::SysRoot;
use anyhow::{Result, anyhow, bail};
use connect::Target;
pub use connect::redact;
use postgres::Client;

/// An open connection to a shared store whose schema is at the version this tacho reads.
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
    /// Connects to `url` and checks that the schema is there and current (it changes nothing:
    /// `store init` does); errors are one line naming the fix. `root` is where this machine's
    /// /proc is.
    pub fn connect(url: &str, root: SysRoot) -> Result<PgStore> {
        let (mut client, shown) = Target::parse(url)?.connect()?;
        schema::check(&mut client, &shown)?;
        Ok(PgStore {
            client,
            shown,
            root,
        })
    }

    /// `tacho store init`: connects as an administrator, creates or migrates the schema and
    /// returns what it did with the schema the tables are in (for the grants).
    pub fn init(url: &str) -> Result<(schema::Initialised, String, String)> {
        let (mut client, shown) = Target::parse(url)?.connect()?;
        let done = schema::init(&mut client).map_err(|e| {
            anyhow!(
                "cannot set up the tables in {shown} ({}); store init needs a role that may \
                 create tables and functions in the database (its owner or a superuser)",
                error_chain(&e)
            )
        })?;
        let in_schema: String = client
            .query_one("SELECT current_schema()", &[])
            .map_err(|e| anyhow!("shared store {shown}: {}", error_chain(&e)))?
            .get(0);
        Ok((done, in_schema, shown))
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
                extra_json, machine_id, labels)
             VALUES ($1::TEXT::UUID, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                     $12::TEXT::JSONB ->> 'machine_id', coalesce($12::TEXT::JSONB -> 'labels', '{}'))
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

impl PgStore {
    /// Drops the history's day partitions whose day ended before `cutoff`, oldest first, and
    /// returns their days (`YYYY-MM-DD`). Only the tables' owner may drop them.
    pub fn prune_history(&mut self, cutoff: chrono::DateTime<chrono::Utc>) -> Result<Vec<String>> {
        let shown = self.shown.clone();
        let fail = |e: postgres::Error| match e.code() {
            Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) => anyhow!(
                "shared store {shown}: dropping history needs its administrator's role (the \
                 tables' owner); host roles may only add rows"
            ),
            _ => anyhow!("shared store {shown}: {}", error_chain(&e)),
        };
        let mut tx = self.client.transaction().map_err(fail)?;
        // Only the tables' owner (or a member of its role, or a superuser) may drop: refused
        // up front, also when there happens to be nothing to drop.
        let owner: bool = tx
            .query_one(
                "SELECT pg_has_role(current_user, c.relowner, 'USAGE')
                 FROM pg_class c WHERE c.oid = 'tacho_intervals'::REGCLASS",
                &[],
            )
            .map_err(fail)?
            .get(0);
        if !owner {
            bail!(
                "shared store {shown}: dropping history needs its administrator's role (the \
                 tables' owner); host roles may only add rows"
            );
        }
        let names: Vec<String> = tx
            .query(
                "SELECT c.relname::TEXT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'tacho_intervals'::REGCLASS",
                &[],
            )
            .map_err(fail)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut days: Vec<(chrono::NaiveDate, String)> = names
            .into_iter()
            .filter_map(|name| {
                let day = name.strip_prefix("tacho_intervals_")?;
                let day = chrono::NaiveDate::parse_from_str(day, "%Y%m%d").ok()?;
                let end = day.succ_opt()?.and_hms_opt(0, 0, 0)?.and_utc();
                (end <= cutoff).then_some((day, name))
            })
            .collect();
        days.sort();
        for (_, name) in &days {
            tx.batch_execute(&format!("DROP TABLE \"{name}\""))
                .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(days
            .iter()
            .map(|(d, _)| d.format("%Y-%m-%d").to_string())
            .collect())
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

/// The error and its causes on one line (the crate's top level says only "error connecting").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
