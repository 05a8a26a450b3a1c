//! Saving, listing, loading and removing runs in the shared store: the same operations, with
//! the same meaning, as the SQLite store's (`store::runs`).
//!
//! The shared store keeps no figures table: a test's figures are taken from its JSON when it
//! is loaded ([`figures::of_test`]), which is what the SQLite store's table holds too.

use super::{PgStore, error_chain};
use crate::kernel::{SysRoot, process};
use crate::store::figures;
use crate::store::run::{NewRun, RunKind, RunSource, RunStatus, StoredRun};
use crate::store::runs::{ListText, RawRun, RunSummary, hostname, target_path};
use anyhow::{Result, anyhow, bail};
use postgres::Row;
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use serde_json::Value;
use std::borrow::Cow;

/// The run columns [`raw`] reads by position, first in every query of runs.
const RUN_COLUMNS: &str = "id, uuid::TEXT, created_at, label, kind, status, source, \
    tool_version, suite_name, suite_version, hostname, target_path, host_json, target_json, \
    extra_json, owner";

impl PgStore {
    /// All runs, oldest first, each handed to `each` as the server sends it (`query_raw`
    /// streams rows: one is held at a time), with its label and target read as `text` says;
    /// stops at `each`'s first error.
    pub fn list_each(
        &mut self,
        text: ListText,
        mut each: impl FnMut(&RunSummary) -> Result<()>,
    ) -> Result<()> {
        let sql = format!(
            "SELECT id, created_at, {}, kind, status, source, suite_name, suite_version,
                    extra_json, owner, hostname, {},
                    (SELECT count(*) FROM tests t WHERE t.run_id = r.id), machine_id,
                    labels::TEXT
             FROM runs r ORDER BY id",
            text.column("label"),
            text.column("target_path"),
        );
        let shown = self.shown.clone();
        let mut rows = self
            .client
            .query_raw(&sql, std::iter::empty::<&str>())
            .map_err(|e| fail(&shown, &e))?;
        while let Some(row) = rows.next().map_err(|e| fail(&shown, &e))? {
            each(&summary(&self.root, &row)?)?;
        }
        Ok(())
    }

    /// As [`crate::store::Store::latest_per_host`].
    pub fn latest_per_host(
        &mut self,
        kind: RunKind,
        suite: Option<&str>,
        since: Option<&str>,
        labels: &crate::labels::Labels,
    ) -> Result<Vec<(String, i64)>> {
        let rows = self
            .client
            .query(
                "SELECT DISTINCT ON (hostname, machine_id) hostname, machine_id, id, labels::TEXT
                 FROM runs
                 WHERE kind = $1 AND status = 'finished' AND hostname IS NOT NULL
                   AND ($2::TEXT IS NULL OR suite_name = $2)
                   AND ($3::TEXT IS NULL OR created_at >= $3)
                 ORDER BY hostname, machine_id, id DESC",
                &[&kind.as_str(), &suite, &since],
            )
            .map_err(|e| self.fail(&e))?;
        let rows = rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    r.get(1),
                    r.get(2),
                    crate::store::runs::labels_of(r.get(3)),
                )
            })
            .collect();
        Ok(crate::store::runs::per_host(rows, labels))
    }

    /// The run with `id`, its tests and their figures.
    pub fn load(&mut self, id: i64) -> Result<StoredRun> {
        self.load_upto(id, usize::MAX)
    }

    /// As [`PgStore::load`], with only the first `max_tests` tests (see
    /// [`crate::store::Store::load_summary`]).
    pub fn load_upto(&mut self, id: i64, max_tests: usize) -> Result<StoredRun> {
        crate::store::run::collected(
            |each| self.each_test(id, max_tests, each),
            |json| serde_json::from_str(json).unwrap_or(Value::Null),
        )
    }

    /// As [`crate::store::Store::each_test`]: the run without its tests, each of its first
    /// `max_tests` handed to `each` as the server sends it (`query_raw` streams rows), with
    /// its figures taken from its JSON.
    pub fn each_test(
        &mut self,
        id: i64,
        max_tests: usize,
        each: &mut crate::store::EachTest<'_>,
    ) -> Result<StoredRun> {
        // LIMIT NULL is no limit.
        let limit = i64::try_from(max_tests).ok();
        let shown = self.shown.clone();
        let mut tx = self.client.transaction().map_err(|e| fail(&shown, &e))?;
        let row = tx
            .query_opt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
                &[&id],
            )
            .map_err(|e| fail(&shown, &e))?;
        let Some(row) = row else {
            bail!("no run {id} in {shown} (tacho runs list shows the stored ones)");
        };
        let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&id, &limit];
        let mut tests = tx
            .query_raw(
                "SELECT name, json FROM tests WHERE run_id = $1 ORDER BY seq LIMIT $2",
                params,
            )
            .map_err(|e| fail(&shown, &e))?;
        while let Some(t) = tests.next().map_err(|e| fail(&shown, &e))? {
            let json: &str = t.get(1);
            let figures = figures::of_test_text(json);
            each(t.get(0), json, figures)?;
        }
        drop(tests);
        tx.commit().map_err(|e| fail(&shown, &e))?;
        let run = raw(&row);
        run.stored(status(&self.root, &run), Vec::new())
    }

    /// Saves a whole run in one transaction unless a run with its run id is already here:
    /// `(id, true)` for a new run, `(id of the one here, false)` for one uploaded before (a
    /// retried import, or a run pushed earlier).
    pub fn import_run(&mut self, run: &NewRun) -> Result<(i64, bool)> {
        let shown = self.shown.clone();
        let fail = |e: postgres::Error| fail(&shown, &e);
        let mut tx = self.client.transaction().map_err(fail)?;
        let Some(id) = insert_row(&mut tx, run, None).map_err(fail)? else {
            // Only a run id can conflict: the run is there.
            let uuid = run.uuid.as_deref().unwrap_or_default();
            let row = tx
                .query_one("SELECT id FROM runs WHERE uuid = $1::TEXT::UUID", &[&uuid])
                .map_err(fail)?;
            return Ok((row.get(0), false));
        };
        // One statement, prepared once: a statement given as text is prepared again for every
        // test, a round trip more each.
        let insert = tx.prepare(INSERT_TEST).map_err(fail)?;
        for (seq, test) in run.tests.iter().enumerate() {
            insert_test(&mut tx, &insert, id, seq as i64, &test.value()).map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok((id, true))
    }

    /// Starts a run whose tests arrive one by one ([`PgStore::add_test`]), marked with this
    /// process so a reader on this machine can tell an abandoned run from a running one.
    pub fn begin_run(&mut self, run: &NewRun) -> Result<i64> {
        let mut run = run.clone();
        run.tests.clear();
        run.status = RunStatus::Running;
        let owner = process::identity(&self.root, std::process::id());
        let shown = self.shown.clone();
        let mut tx = self.client.transaction().map_err(|e| fail(&shown, &e))?;
        let id = insert_row(&mut tx, &run, owner.as_deref()).map_err(|e| fail(&shown, &e))?;
        tx.commit().map_err(|e| fail(&shown, &e))?;
        id.ok_or_else(|| anyhow!("shared store {shown}: a run with this run id is already there"))
    }

    /// Saves test number `seq` of a run begun with [`PgStore::begin_run`].
    pub fn add_test(&mut self, run_id: i64, seq: usize, test: &Value) -> Result<()> {
        let shown = self.shown.clone();
        let mut tx = self.client.transaction().map_err(|e| fail(&shown, &e))?;
        insert_test(&mut tx, INSERT_TEST, run_id, seq as i64, test)
            .map_err(|e| fail(&shown, &e))?;
        tx.commit().map_err(|e| fail(&shown, &e))
    }

    /// Records how a run ended and its final document fields.
    pub fn finish_run(&mut self, run_id: i64, run: &NewRun) -> Result<()> {
        self.client
            .execute(
                "UPDATE runs SET status = $2, host_json = $3, target_json = $4, extra_json = $5,
                 hostname = $6, target_path = $7, machine_id = $3::TEXT::JSONB ->> 'machine_id',
                 labels = coalesce($3::TEXT::JSONB -> 'labels', '{}') WHERE id = $1",
                &[
                    &run_id,
                    &run.status.as_str(),
                    &run.host.to_string(),
                    &run.target.to_string(),
                    &Value::Object(run.extra.clone()).to_string(),
                    &hostname(run),
                    &target_path(run),
                ],
            )
            .map_err(|e| self.fail(&e))?;
        Ok(())
    }

    /// Sets the status of a run (to `failed` when a benchmark stops on an error).
    pub fn set_status(&mut self, run_id: i64, status: RunStatus) -> Result<()> {
        self.client
            .execute(
                "UPDATE runs SET status = $2 WHERE id = $1",
                &[&run_id, &status.as_str()],
            )
            .map_err(|e| self.fail(&e))?;
        Ok(())
    }

    /// Removes runs with all their tests; fails without removing anything if one is missing.
    pub fn remove(&mut self, ids: &[i64]) -> Result<()> {
        let shown = self.shown.clone();
        let mut tx = self.client.transaction().map_err(|e| fail(&shown, &e))?;
        for &id in ids {
            let n = tx
                .execute("DELETE FROM runs WHERE id = $1", &[&id])
                .map_err(|e| match e.code() {
                    Some(&SqlState::INSUFFICIENT_PRIVILEGE) => anyhow!(
                        "shared store {shown}: removing runs needs its administrator's role \
                         (host roles may only add runs); nothing removed"
                    ),
                    _ => fail(&shown, &e),
                })?;
            if n == 0 {
                bail!(
                    "no run {id} in {shown} (tacho runs list shows the stored ones); nothing removed"
                );
            }
        }
        tx.commit().map_err(|e| fail(&shown, &e))
    }

    /// The runs of group `name` that are running, began at `since` (RFC 3339, UTC) or later
    /// and marked themselves waiting (see [`PgStore::group_heartbeat`]) within the last
    /// `lease` seconds of the server's clock, by id: the hosts at the group's start barrier,
    /// as (id, host name). A host killed while waiting stops marking itself and drops out.
    pub fn group_waiting(
        &mut self,
        name: &str,
        since: &str,
        lease: f64,
    ) -> Result<Vec<(i64, String)>> {
        let rows = self
            .client
            .query(
                "SELECT id, coalesce(hostname, '') FROM runs
                 WHERE status = 'running' AND created_at >= $2
                   AND extra_json::JSONB -> 'group' ->> 'name' = $1
                   AND jsonb_typeof(extra_json::JSONB -> 'group' -> 'waiting') = 'number'
                   AND (extra_json::JSONB -> 'group' ->> 'waiting')::FLOAT8
                       >= extract(epoch FROM clock_timestamp())::FLOAT8 - $3::FLOAT8
                 ORDER BY id",
                &[&name, &since, &lease],
            )
            .map_err(|e| self.fail(&e))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Marks run `id` as still waiting at its group's barrier now (the server's clock, in
    /// seconds since the Unix epoch, as the run's `group.waiting`).
    pub fn group_heartbeat(&mut self, id: i64) -> Result<()> {
        self.client
            .execute(
                "UPDATE runs SET extra_json = jsonb_set(extra_json::JSONB, '{group,waiting}',
                     to_jsonb(extract(epoch FROM clock_timestamp())::FLOAT8))::TEXT
                 WHERE id = $1 AND extra_json::JSONB -> 'group' IS NOT NULL",
                &[&id],
            )
            .map_err(|e| self.fail(&e))?;
        Ok(())
    }

    /// The run ids of the latest finished start of group `name` (as its last run recorded
    /// them); empty when the group never finished a run here.
    pub fn group_runs(&mut self, name: &str) -> Result<Vec<i64>> {
        let row = self
            .client
            .query_opt(
                "SELECT (extra_json::JSONB -> 'group' -> 'runs')::TEXT FROM runs
                 WHERE status = 'finished' AND extra_json::JSONB -> 'group' ->> 'name' = $1
                   AND jsonb_typeof(extra_json::JSONB -> 'group' -> 'runs') = 'array'
                 ORDER BY id DESC LIMIT 1",
                &[&name],
            )
            .map_err(|e| self.fail(&e))?;
        let ids: Option<Value> = row.and_then(|r| serde_json::from_str(r.get::<_, &str>(0)).ok());
        Ok(ids
            .as_ref()
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default())
    }

    fn fail(&self, e: &postgres::Error) -> anyhow::Error {
        fail(&self.shown, e)
    }
}

fn fail(shown: &str, e: &postgres::Error) -> anyhow::Error {
    anyhow!("shared store {shown}: {}", error_chain(e))
}

/// A run row (without tests) from a row that starts with [`RUN_COLUMNS`].
fn raw(r: &Row) -> RawRun {
    RawRun {
        id: r.get(0),
        uuid: r.get(1),
        created_at: r.get(2),
        label: r.get(3),
        kind: r.get(4),
        status: r.get(5),
        source: r.get(6),
        tool_version: r.get(7),
        suite_name: r.get(8),
        suite_version: r.get(9),
        hostname: r.get(10),
        target_path: r.get(11),
        host_json: r.get(12),
        target_json: r.get(13),
        extra_json: r.get(14),
        owner: r.get(15),
        tests: Vec::new(),
    }
}

/// A row of [`PgStore::list_each`]'s query, its text borrowed from the row.
fn summary<'r>(root: &SysRoot, r: &'r Row) -> Result<RunSummary<'r>> {
    let id: i64 = r.get(0);
    let newer = |noun: &str, word: &str| {
        let word = crate::text::cut(word, crate::text::SHOWN_CHARS);
        anyhow!(
            "run {id} has {noun} {word:?}, which this tacho does not know (a newer one saved \
             it); upgrade tacho to read it"
        )
    };
    let (kind, status, source): (&str, &str, &str) = (r.get(3), r.get(4), r.get(5));
    let (standard, changed) = crate::store::runs::suite_flags(r.get(8));
    let text = |i: usize| r.get::<_, Option<&str>>(i).map(Cow::Borrowed);
    let (suite, suite_version) = text(6).zip(r.get::<_, Option<i64>>(7)).unzip();
    Ok(RunSummary {
        id,
        created_at: Cow::Borrowed(r.get(1)),
        label: text(2),
        kind: RunKind::parse(kind).ok_or_else(|| newer("kind", kind))?,
        status: status_of(root, status, r.get(9)).ok_or_else(|| newer("status", status))?,
        source: RunSource::parse(source).ok_or_else(|| newer("source", source))?,
        suite,
        suite_version,
        hostname: text(10),
        machine_id: text(13),
        labels: crate::store::runs::labels_of(r.get(14)),
        target: text(11),
        tests: r.get(12),
        standard,
        changed,
    })
}

/// A run's status as a reader sees it.
fn status(root: &SysRoot, run: &RawRun) -> Option<RunStatus> {
    status_of(root, &run.status, run.owner.as_deref())
}

/// The stored status word and owner as a reader sees them. A `running` run saved from this
/// machine (same boot) whose process is gone is `abandoned`; one saved from another machine or
/// an earlier boot cannot be checked from here and stays as stored.
fn status_of(root: &SysRoot, status: &str, owner: Option<&str>) -> Option<RunStatus> {
    let stored = RunStatus::parse(status)?;
    let Some(owner) = owner.filter(|_| stored == RunStatus::Running) else {
        return Some(stored);
    };
    let boot = crate::kernel::read_text(&root.proc.join("sys/kernel/random/boot_id")).ok();
    if owner.split(' ').next() != boot.as_deref().map(str::trim) {
        return Some(stored);
    }
    Some(crate::store::runs::current_status(
        root,
        stored,
        Some(owner.to_owned()),
    ))
}

/// Inserts the run's row; `None` when a run with its run id is already there.
fn insert_row(
    tx: &mut postgres::Transaction,
    run: &NewRun,
    owner: Option<&str>,
) -> Result<Option<i64>, postgres::Error> {
    let created = run.created_at.clone().unwrap_or_else(|| {
        let secs = run.created_unix.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
        chrono::DateTime::from_timestamp(secs, 0)
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    });
    let uuid = run
        .uuid
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let row = tx.query_opt(
        "INSERT INTO runs (uuid, created_at, label, kind, status, source, tool_version,
            suite_name, suite_version, hostname, target_path, host_json, target_json,
            extra_json, owner, machine_id, labels)
         VALUES ($1::TEXT::UUID, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 $12::TEXT::JSONB ->> 'machine_id', coalesce($12::TEXT::JSONB -> 'labels', '{}'))
         ON CONFLICT (uuid) DO NOTHING RETURNING id",
        &[
            &uuid,
            &created,
            &run.label,
            &run.kind.as_str(),
            &run.status.as_str(),
            &run.source.as_str(),
            &run.tool_version,
            &run.suite.as_ref().map(|s| &s.0),
            &run.suite.as_ref().map(|s| s.1),
            &hostname(run),
            &target_path(run),
            &run.host.to_string(),
            &run.target.to_string(),
            &Value::Object(run.extra.clone()).to_string(),
            &owner,
        ],
    )?;
    Ok(row.map(|r| r.get(0)))
}

/// Inserts a test's row (`$1` run, `$2` seq, its columns, `$8` its JSON text).
const INSERT_TEST: &str =
    "INSERT INTO tests (run_id, seq, name, rw, bs_bytes, iodepth, numjobs, json)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Inserts test `seq` of run `run_id` through `insert`: [`INSERT_TEST`], as text or prepared.
fn insert_test<T: postgres::ToStatement + ?Sized>(
    tx: &mut postgres::Transaction,
    insert: &T,
    run_id: i64,
    seq: i64,
    test: &Value,
) -> Result<(), postgres::Error> {
    let text = |k: &str| test.get(k).and_then(Value::as_str);
    let int = |k: &str| test.get(k).and_then(Value::as_i64);
    tx.execute(
        insert,
        &[
            &run_id,
            &seq,
            &text("name").unwrap_or("?"),
            &text("rw"),
            &int("bs_bytes"),
            &int("iodepth"),
            &int("numjobs"),
            &test.to_string(),
        ],
    )?;
    Ok(())
}
