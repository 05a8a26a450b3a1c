//! Saving, listing, loading and removing runs. Every write is one immediate transaction.

use super::Store;
use super::document::{NewRun, StoredRun, StoredTest};
use super::figures::{self, Figures};
use crate::kernel::{SysRoot, process};
use anyhow::{Result, bail};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Map, Value};

/// One line of `tacho runs list`.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub id: i64,
    pub created_at: String,
    pub label: Option<String>,
    pub kind: String,
    pub status: String,
    pub source: String,
    pub suite: Option<String>,
    pub suite_version: Option<i64>,
    pub hostname: Option<String>,
    pub target: Option<String>,
    pub tests: i64,
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

impl Store {
    /// Saves a whole run (import) in one transaction; returns its id.
    pub fn insert_run(&mut self, run: &NewRun) -> Result<i64> {
        let fail = |e: rusqlite::Error| super::describe(&self.path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let id = insert_run_row(&tx, run).map_err(fail)?;
        for (seq, test) in run.tests.iter().enumerate() {
            insert_test(&tx, id, seq as i64, &test.value()).map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(id)
    }

    /// Starts a run whose tests arrive one by one ([`Store::add_test`]).
    pub fn begin_run(&mut self, run: &NewRun) -> Result<i64> {
        let mut run = run.clone();
        run.tests.clear();
        run.status = "running".into();
        let id = self.insert_run(&run)?;
        let owner = process::identity(&SysRoot::real(), std::process::id());
        self.conn
            .execute(
                "UPDATE runs SET owner = ?2 WHERE id = ?1",
                params![id, owner],
            )
            .map_err(|e| self.err(e))?;
        Ok(id)
    }

    /// Saves test number `seq` of a run begun with [`Store::begin_run`].
    pub fn add_test(&mut self, run_id: i64, seq: usize, test: &Value) -> Result<()> {
        let fail = |e: rusqlite::Error| super::describe(&self.path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        insert_test(&tx, run_id, seq as i64, test).map_err(fail)?;
        tx.commit().map_err(fail)
    }

    /// Records how a run ended and its final document fields (warnings found at the end).
    pub fn finish_run(&mut self, run_id: i64, run: &NewRun) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET status = ?2, host_json = ?3, target_json = ?4, extra_json = ?5,
                 hostname = ?6, target_path = ?7 WHERE id = ?1",
                params![
                    run_id,
                    run.status,
                    run.host.to_string(),
                    run.target.to_string(),
                    Value::Object(run.extra.clone()).to_string(),
                    hostname(run),
                    target_path(run),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Sets the status of a run (to `failed` when a benchmark stops on an error).
    pub fn set_status(&mut self, run_id: i64, status: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET status = ?2 WHERE id = ?1",
                params![run_id, status],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// All runs, oldest first.
    pub fn list(&self) -> Result<Vec<RunSummary>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.created_at, r.label, r.kind, r.status, r.source, r.suite_name,
                        r.suite_version, r.hostname, r.target_path,
                        (SELECT count(*) FROM tests t WHERE t.run_id = r.id), r.owner
                 FROM runs r ORDER BY r.id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    created_at: r.get(1)?,
                    label: r.get(2)?,
                    kind: r.get(3)?,
                    status: current_status(r.get(4)?, r.get(11)?),
                    source: r.get(5)?,
                    suite: r.get(6)?,
                    suite_version: r.get(7)?,
                    hostname: r.get(8)?,
                    target: r.get(9)?,
                    tests: r.get(10)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// The run with `id`, its tests and their figures.
    pub fn load(&self, id: i64) -> Result<StoredRun> {
        let run = self
            .conn
            .query_row(
                "SELECT id, created_at, label, kind, status, source, tool_version, suite_name,
                        suite_version, host_json, target_json, extra_json, owner
                 FROM runs WHERE id = ?1",
                [id],
                read_run,
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(mut run) = run else {
            bail!(
                "no run {id} in {} (tacho runs list shows the stored ones)",
                self.path.display()
            );
        };
        let mut stmt = self
            .conn
            .prepare("SELECT seq, name, json FROM tests WHERE run_id = ?1 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let tests: Vec<(i64, String, String)> = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        for (seq, name, json) in tests {
            run.tests.push(StoredTest {
                name,
                json: serde_json::from_str(&json).unwrap_or(Value::Null),
                figures: self.figures(id, seq)?,
            });
        }
        Ok(run)
    }

    fn figures(&self, run_id: i64, seq: i64) -> Result<Vec<Figures>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT sample, direction, iops, bw_bytes_per_s, lat_mean_ns, lat_p50_ns,
                        lat_p90_ns, lat_p99_ns, lat_p99_9_ns, lat_p99_99_ns, lat_max_ns,
                        ops_per_s
                 FROM figures WHERE run_id = ?1 AND seq = ?2 ORDER BY sample, direction",
            )
            .map_err(|e| self.err(e))?;
        let rows: Vec<Option<Figures>> = stmt
            .query_map([run_id, seq], |r| {
                let direction: String = r.get(1)?;
                // Tacho writes only DIRECTIONS; a row from a newer tacho with another
                // direction is left out rather than shown under a wrong name.
                let Some(direction) = figures::direction(&direction) else {
                    return Ok(None);
                };
                let mut lat_ns = [None; 7];
                for (i, slot) in lat_ns.iter_mut().enumerate() {
                    *slot = r.get(4 + i)?;
                }
                Ok(Some(Figures {
                    sample: r.get(0)?,
                    direction,
                    iops: r.get(2)?,
                    bw_bytes_per_s: r.get(3)?,
                    ops_per_s: r.get(11)?,
                    lat_ns,
                }))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        let rows = rows.into_iter().flatten().collect();
        Ok(rows)
    }

    /// Removes runs with all their tests; fails without removing anything if one is missing.
    pub fn remove(&mut self, ids: &[i64]) -> Result<()> {
        let fail = |e: rusqlite::Error| super::describe(&self.path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        for &id in ids {
            let n = tx
                .execute("DELETE FROM runs WHERE id = ?1", [id])
                .map_err(fail)?;
            if n == 0 {
                bail!(
                    "no run {id} in {} (tacho runs list shows the stored ones); nothing removed",
                    self.path.display()
                );
            }
        }
        tx.commit().map_err(fail)
    }
}

fn read_run(r: &Row) -> rusqlite::Result<StoredRun> {
    let json = |i: usize| -> rusqlite::Result<Value> {
        let text: String = r.get(i)?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    let suite_name: Option<String> = r.get(7)?;
    let suite_version: Option<i64> = r.get(8)?;
    let extra = match json(11)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    Ok(StoredRun {
        id: r.get(0)?,
        created_at: r.get(1)?,
        label: r.get(2)?,
        kind: r.get(3)?,
        status: current_status(r.get(4)?, r.get(12)?),
        source: r.get(5)?,
        tool_version: r.get(6)?,
        suite: suite_name.zip(suite_version),
        host: json(9)?,
        target: json(10)?,
        extra,
        tests: Vec::new(),
    })
}

/// A run still marked `running` whose saving process is gone (killed, or the machine
/// rebooted) is `abandoned`: the tests saved so far are all it will ever have.
fn current_status(status: String, owner: Option<String>) -> String {
    let Some(owner) = owner.filter(|_| status == "running") else {
        return status;
    };
    let alive = owner
        .split(' ')
        .nth(1)
        .and_then(|pid| pid.parse().ok())
        .and_then(|pid| process::identity(&SysRoot::real(), pid))
        .is_some_and(|now| now == owner);
    if alive { status } else { "abandoned".into() }
}

fn hostname(run: &NewRun) -> Option<&str> {
    run.host.get("hostname").and_then(Value::as_str)
}

fn target_path(run: &NewRun) -> Option<&str> {
    run.target.get("path").and_then(Value::as_str)
}

fn insert_run_row(tx: &rusqlite::Transaction, run: &NewRun) -> rusqlite::Result<i64> {
    tx.execute(
        &format!(
            "INSERT INTO runs (created_at, label, kind, status, source, tool_version, suite_name,
                suite_version, hostname, target_path, host_json, target_json, extra_json)
             VALUES (COALESCE(?1, strftime('%Y-%m-%dT%H:%M:%SZ', ?2, 'unixepoch'), {NOW}),
                ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
        ),
        params![
            run.created_at,
            run.created_unix,
            run.label,
            run.kind,
            run.status,
            run.source,
            run.tool_version,
            run.suite.as_ref().map(|s| &s.0),
            run.suite.as_ref().map(|s| s.1),
            hostname(run),
            target_path(run),
            run.host.to_string(),
            run.target.to_string(),
            Value::Object(run.extra.clone()).to_string(),
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

fn insert_test(
    tx: &rusqlite::Transaction,
    run_id: i64,
    seq: i64,
    test: &Value,
) -> rusqlite::Result<()> {
    let text = |k: &str| test.get(k).and_then(Value::as_str);
    let int = |k: &str| test.get(k).and_then(Value::as_i64);
    tx.prepare_cached(
        "INSERT INTO tests (run_id, seq, name, rw, bs_bytes, iodepth, numjobs, json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        run_id,
        seq,
        text("name").unwrap_or("?"),
        text("rw"),
        int("bs_bytes"),
        int("iodepth"),
        int("numjobs"),
        test.to_string(),
    ])?;
    figures::insert(tx, run_id, seq, test)
}
