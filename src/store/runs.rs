//! Saving, listing, loading and removing runs. Every write is one immediate transaction.

use super::Store;
use super::figures::{self, Figures};
use super::run::{NewRun, RunKind, RunSource, RunStatus, StoredRun, suite_changes, suite_standard};
use super::test_text::{Walked, Walker};
use crate::kernel::{SysRoot, process};
use anyhow::{Result, bail};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// One line of `tacho runs list`, its text borrowed from the row being read where it can be:
/// a label of 100 MB is then held once, by the database's row, and only one row at a time.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary<'a> {
    /// The run's id in the store.
    pub id: i64,
    /// When the run happened, as RFC 3339 UTC.
    pub created_at: Cow<'a, str>,
    /// The run's `--label`, if given (cut as read, for a table: see [`ListText`]).
    pub label: Option<Cow<'a, str>>,
    /// What was benchmarked.
    pub kind: RunKind,
    /// Running, finished, interrupted, failed or abandoned.
    pub status: RunStatus,
    /// Measured here, or imported from a tacho document or from fio.
    pub source: RunSource,
    /// The suite's name; `None` for a custom test or a non-disk run.
    pub suite: Option<Cow<'a, str>>,
    /// The suite's version.
    pub suite_version: Option<i64>,
    /// The host name the document recorded.
    pub hostname: Option<Cow<'a, str>>,
    /// The machine id of that host, when its run recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<Cow<'a, str>>,
    /// Its host's labels (from the host document).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
    /// The path that was benchmarked, when the kind has one (cut as read, for a table).
    pub target: Option<Cow<'a, str>>,
    /// Tests saved.
    pub tests: i64,
    /// False when options changed the suite's method; `None` without a suite or when the
    /// run was saved before this was kept.
    pub standard: Option<bool>,
    /// What changed the method (`runtime 1s`), when recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

impl RunSummary<'_> {
    /// The summary holding its own text, each piece cut to `chars` characters plus one (so a
    /// table still shows that something was cut): what a table keeps of every row.
    pub fn shown(&self, chars: usize) -> RunSummary<'static> {
        let keep = |s: &str| -> Cow<'static, str> {
            Cow::Owned(s.chars().take(chars.saturating_add(1)).collect())
        };
        RunSummary {
            id: self.id,
            created_at: keep(&self.created_at),
            label: self.label.as_deref().map(keep),
            kind: self.kind,
            status: self.status,
            source: self.source,
            suite: self.suite.as_deref().map(keep),
            suite_version: self.suite_version,
            hostname: self.hostname.as_deref().map(keep),
            machine_id: self.machine_id.clone().map(|m| Cow::Owned(m.into_owned())),
            labels: self.labels.clone(),
            target: self.target.as_deref().map(keep),
            tests: self.tests,
            standard: self.standard,
            changed: self
                .changed
                .iter()
                .take(chars)
                .map(|c| keep(c).into_owned())
                .collect(),
        }
    }
}

/// How `runs list` reads a run's label and target: whole (JSON keeps them), or the first
/// this many characters and one more (a table shows [`crate::text::SHOWN_CHARS`] of them),
/// so a table's rows stay small whatever was stored. PostgreSQL sends only the cut text;
/// SQLite reads the row's whole value to cut it, one row at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListText {
    /// As stored.
    Whole,
    /// At most this many characters and one more.
    Cut(usize),
}

impl ListText {
    /// The SQL expression reading `column` this way (SQLite and PostgreSQL both count
    /// characters in `substr`).
    pub(crate) fn column(self, column: &str) -> String {
        match self {
            ListText::Whole => column.to_owned(),
            ListText::Cut(n) => format!("substr({column}, 1, {})", n.saturating_add(1)),
        }
    }
}

/// `suite.standard` and `suite.changed` of a run's `extra_json` text, parsing nothing but
/// its `suite` member (the rest is skipped unread), so a run's other fields cost a listing
/// nothing; text that is not an object reads as no suite, as [`read_run`] reads it.
pub(crate) fn suite_flags(extra_json: &str) -> (Option<bool>, Vec<String>) {
    let extra = serde_json::from_str::<SuiteOnly>(extra_json).map_or_else(|_| Map::new(), |s| s.0);
    (suite_standard(&extra), suite_changes(&extra))
}

/// A run's extra fields with only `suite` kept.
struct SuiteOnly(Map<String, Value>);

impl<'de> serde::Deserialize<'de> for SuiteOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = SuiteOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SuiteOnly, A::Error> {
                let mut out = Map::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "suite" {
                        out.insert(key.into_owned(), map.next_value()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(SuiteOnly(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A run's row exactly as stored, for copying it to another store.
#[cfg(feature = "pg")]
pub struct RawRun {
    /// The local id (differs between stores).
    pub id: i64,
    /// The run id made on the saving host; the same in every store.
    pub uuid: String,
    /// When the run started, RFC 3339 UTC.
    pub created_at: String,
    /// The user's name for the run.
    pub label: Option<String>,
    /// disk, cpu, mem, time...
    pub kind: String,
    /// finished, failed, interrupted, running.
    pub status: String,
    /// bench or import.
    pub source: String,
    /// The tacho version that made the run.
    pub tool_version: Option<String>,
    /// The suite's name, for disk runs.
    pub suite_name: Option<String>,
    /// The suite's version.
    pub suite_version: Option<i64>,
    /// The host the run was made on.
    pub hostname: Option<String>,
    /// What was measured (device or directory).
    pub target_path: Option<String>,
    /// The document's `host` object, as JSON text.
    pub host_json: String,
    /// The document's `target` object, as JSON text.
    pub target_json: String,
    /// Every other top-level field, as JSON text.
    pub extra_json: String,
    /// The process saving a `running` run (`boot-id pid start-ticks`).
    pub owner: Option<String>,
    /// The run's tests in order.
    pub tests: Vec<RawTest>,
}

#[cfg(feature = "pg")]
impl RawRun {
    /// The run as read back, with `status` as the reader sees it (`None`: the stored word is
    /// not one this tacho knows) and its `tests`.
    pub(crate) fn stored(
        &self,
        status: Option<RunStatus>,
        tests: Vec<super::run::StoredTest>,
    ) -> Result<StoredRun> {
        let newer = |noun: &str, word: &str| {
            anyhow::anyhow!(
                "run {} has {noun} {word:?}, which this tacho does not know (a newer one saved \
                 it); upgrade tacho to read it",
                self.id
            )
        };
        let json = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        Ok(StoredRun {
            id: self.id,
            created_at: self.created_at.clone(),
            label: self.label.clone(),
            kind: RunKind::parse(&self.kind).ok_or_else(|| newer("kind", &self.kind))?,
            status: status.ok_or_else(|| newer("status", &self.status))?,
            source: RunSource::parse(&self.source).ok_or_else(|| newer("source", &self.source))?,
            tool_version: self.tool_version.clone(),
            suite: self.suite_name.clone().zip(self.suite_version),
            host: json(&self.host_json),
            target: json(&self.target_json),
            extra: match json(&self.extra_json) {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            tests,
            uuid: Some(self.uuid.clone()),
        })
    }
}

/// A test's row exactly as stored.
#[cfg(feature = "pg")]
pub struct RawTest {
    /// Position in the run.
    pub seq: i64,
    /// The test's name.
    pub name: String,
    /// fio's rw, for disk tests.
    pub rw: Option<String>,
    /// Block size.
    pub bs_bytes: Option<i64>,
    /// Queue depth.
    pub iodepth: Option<i64>,
    /// Jobs.
    pub numjobs: Option<i64>,
    /// The whole test object, as JSON text.
    pub json: String,
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')";

impl Store {
    /// Saves a whole run in one transaction; returns its id (that of the run already here
    /// when one has its run id: see [`Store::import_run`]).
    pub fn insert_run(&mut self, run: &NewRun) -> Result<i64> {
        self.import_run(run).map(|(id, _)| id)
    }

    /// Saves an imported run unless a run with its run id is already here: `(id, true)` for a
    /// new run, `(id of the one here, false)` for one imported (or saved) before.
    pub fn import_run(&mut self, run: &NewRun) -> Result<(i64, bool)> {
        self.writable()?;
        let fail = |e: rusqlite::Error| super::describe(&self.path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let saved = import_in(&tx, &mut Walker::default(), run).map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(saved)
    }

    /// Starts a run whose tests arrive one by one ([`Store::add_test`]).
    pub fn begin_run(&mut self, run: &NewRun) -> Result<i64> {
        let mut run = run.clone();
        run.tests.clear();
        run.status = RunStatus::Running;
        let id = self.insert_run(&run)?;
        let owner = process::identity(&self.root, std::process::id());
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
        let mut walker = Walker::default();
        insert_test(
            &tx,
            &mut walker,
            run_id,
            seq as i64,
            &test.to_string(),
            None,
        )
        .map_err(fail)?;
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
    pub fn set_status(&mut self, run_id: i64, status: RunStatus) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET status = ?2 WHERE id = ?1",
                params![run_id, status],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Every run as stored, with its tests, oldest first: what `runs push` uploads.
    #[cfg(feature = "pg")]
    pub fn raw_runs(&self) -> Result<Vec<RawRun>> {
        let snapshot = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        let mut runs: Vec<RawRun> = snapshot
            .prepare(
                "SELECT id, uuid, created_at, label, kind, status, source, tool_version,
                    suite_name, suite_version, hostname, target_path, host_json, target_json,
                    extra_json, owner FROM runs ORDER BY id",
            )
            .and_then(|mut stmt| {
                stmt.query_map([], |r| {
                    Ok(RawRun {
                        id: r.get(0)?,
                        uuid: r.get(1)?,
                        created_at: r.get(2)?,
                        label: r.get(3)?,
                        kind: r.get(4)?,
                        status: r.get(5)?,
                        source: r.get(6)?,
                        tool_version: r.get(7)?,
                        suite_name: r.get(8)?,
                        suite_version: r.get(9)?,
                        hostname: r.get(10)?,
                        target_path: r.get(11)?,
                        host_json: r.get(12)?,
                        target_json: r.get(13)?,
                        extra_json: r.get(14)?,
                        owner: r.get(15)?,
                        tests: Vec::new(),
                    })
                })?
                .collect()
            })
            .map_err(|e| self.err(e))?;
        let mut stmt = snapshot
            .prepare(
                "SELECT seq, name, rw, bs_bytes, iodepth, numjobs, json FROM tests
                 WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        for run in &mut runs {
            run.tests = stmt
                .query_map([run.id], |r| {
                    Ok(RawTest {
                        seq: r.get(0)?,
                        name: r.get(1)?,
                        rw: r.get(2)?,
                        bs_bytes: r.get(3)?,
                        iodepth: r.get(4)?,
                        numjobs: r.get(5)?,
                        json: r.get(6)?,
                    })
                })
                .and_then(Iterator::collect)
                .map_err(|e| self.err(e))?;
        }
        Ok(runs)
    }

    /// All runs, oldest first, each handed to `each` as it is read (one row held at a time),
    /// with its label and target read as `text` says; stops at `each`'s first error.
    pub fn list_each(
        &self,
        text: ListText,
        mut each: impl FnMut(&RunSummary) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT r.id, r.created_at, {}, r.kind, r.status, r.source, r.suite_name,
                        r.suite_version, r.extra_json, r.owner, r.hostname, {},
                        (SELECT count(*) FROM tests t WHERE t.run_id = r.id),
                        json_extract(r.host_json, '$.machine_id'),
                        json_extract(r.host_json, '$.labels')
                 FROM runs r ORDER BY r.id",
                text.column("r.label"),
                text.column("r.target_path"),
            ))
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        while let Some(r) = rows.next().map_err(|e| self.err(e))? {
            let summary = self.summary(r).map_err(|e| self.err(e))?;
            each(&summary)?;
        }
        Ok(())
    }

    /// A row of [`Store::list_each`]'s query, its text borrowed from the row.
    fn summary<'r>(&self, r: &'r Row) -> rusqlite::Result<RunSummary<'r>> {
        let text = |i: usize| -> rusqlite::Result<Option<Cow<'r, str>>> {
            Ok(r.get_ref(i)?.as_str_or_null()?.map(Cow::Borrowed))
        };
        let (standard, changed) = suite_flags(r.get_ref(8)?.as_str()?);
        // As a stored run reads them: a suite is a name and a version, or none.
        let (suite, suite_version) = text(6)?.zip(r.get::<_, Option<i64>>(7)?).unzip();
        Ok(RunSummary {
            id: r.get(0)?,
            created_at: Cow::Borrowed(r.get_ref(1)?.as_str()?),
            label: text(2)?,
            kind: r.get(3)?,
            status: current_status(&self.root, r.get(4)?, r.get(9)?),
            source: r.get(5)?,
            suite,
            suite_version,
            hostname: text(10)?,
            machine_id: text(13)?,
            labels: labels_of(text(14)?.as_deref()),
            target: text(11)?,
            tests: r.get(12)?,
            standard,
            changed,
        })
    }

    /// All runs, oldest first, their text whole (what the tests check the store by).
    #[cfg(test)]
    pub fn list(&self) -> Result<Vec<RunSummary<'static>>> {
        let mut all = Vec::new();
        self.list_each(ListText::Whole, |r| {
            all.push(r.shown(usize::MAX));
            Ok(())
        })?;
        Ok(all)
    }

    /// The latest finished run of `kind` (of `suite`, when given; made at or after `since`, an
    /// RFC 3339 UTC time, when given) of each host, as (host, id), by host.
    pub fn latest_per_host(
        &self,
        kind: RunKind,
        suite: Option<&str>,
        since: Option<&str>,
        labels: &crate::labels::Labels,
    ) -> Result<Vec<(String, i64)>> {
        let mut stmt = self
            .conn
            .prepare(LATEST_PER_HOST)
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![kind, suite, since], |r| {
                let labels: Option<String> = r.get(3)?;
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    labels_of(labels.as_deref()),
                ))
            })
            .and_then(Iterator::collect)
            .map_err(|e| self.err(e))?;
        Ok(per_host(rows, labels))
    }

    /// The run with `id`, its tests and their figures.
    pub fn load(&self, id: i64) -> Result<StoredRun> {
        self.load_with(id, false, usize::MAX)
    }

    /// The run with `id` for comparing: as [`Store::load`], but each test's JSON leaves out
    /// its figures and per-repeat detail ([`SUMMARY_SKIPS`]), which compare takes from the
    /// figures table. Parsing those into `Value`s was most of the time and memory of
    /// comparing runs of many tests. Only the first `max_tests` tests are read, so the
    /// memory a comparison takes is bounded however many tests a stored run holds.
    pub fn load_summary(&self, id: i64, max_tests: usize) -> Result<StoredRun> {
        self.load_with(id, true, max_tests)
    }

    fn load_with(&self, id: i64, summary: bool, max_tests: usize) -> Result<StoredRun> {
        super::run::collected(
            |each| self.each_test(id, max_tests, each),
            |json| {
                if summary {
                    serde_json::from_str::<Summary>(json).map_or(Value::Null, |s| s.0)
                } else {
                    serde_json::from_str(json).unwrap_or(Value::Null)
                }
            },
        )
    }

    /// The run with `id` without its tests, each of its first `max_tests` tests handed to
    /// `each` as read (its name, its JSON text and its figures): one test held at a time, so
    /// `compare` keeps only what it compares.
    pub fn each_test(
        &self,
        id: i64,
        max_tests: usize,
        each: &mut crate::store::EachTest<'_>,
    ) -> Result<StoredRun> {
        // SQLite reads a negative LIMIT as none.
        let limit = i64::try_from(max_tests).unwrap_or(-1);
        // One read transaction: one snapshot of the run, and one lock taken instead of one
        // per statement.
        let snapshot = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        let run = snapshot
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?1"),
                [id],
                |r| read_run(r, &self.root),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(run) = run else {
            bail!(
                "no run {id} in {} (tacho runs list shows the stored ones)",
                self.path.display()
            );
        };
        // Both queries go in seq order, read side by side: this test's figures are the next
        // ones.
        let mut figures_stmt = snapshot.prepare(FIGURES_OF_RUN).map_err(|e| self.err(e))?;
        let mut figures = figures_stmt.query([id]).map_err(|e| self.err(e))?;
        let mut next_figure = || -> Result<Option<(i64, Option<Figures>)>> {
            figures
                .next()
                .and_then(|r| r.map(figure_row).transpose())
                .map_err(|e| self.err(e))
        };
        let mut pending = next_figure()?;
        let mut stmt = snapshot
            .prepare("SELECT seq, name, json FROM tests WHERE run_id = ?1 ORDER BY seq LIMIT ?2")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([id, limit]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let read = || -> rusqlite::Result<(i64, String, &str)> {
                let json = row.get_ref(2)?.as_str().map_err(rusqlite::Error::from)?;
                Ok((row.get(0)?, row.get(1)?, json))
            };
            let (seq, name, json) = read().map_err(|e| self.err(e))?;
            let mut mine = Vec::new();
            while let Some((s, f)) = pending.take() {
                if s > seq {
                    pending = Some((s, f));
                    break;
                }
                if s == seq {
                    mine.extend(f);
                }
                pending = next_figure()?;
            }
            // Runs saved before flushes were indexed have their flush figures only in the
            // JSON.
            if !mine.iter().any(|f| f.direction == "sync") && json.contains("\"sync\"") {
                mine.extend(
                    figures::of_test_text(json)
                        .into_iter()
                        .filter(|f| f.direction == "sync"),
                );
            }
            each(name, json, mine)?;
        }
        Ok(run)
    }

    /// Removes runs with all their tests; fails without removing anything if one is missing.
    pub fn remove(&mut self, ids: &[i64]) -> Result<()> {
        self.writable()?;
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

/// Every figure of run `?1` with its test's seq, in (seq, sample, direction) order (its primary
/// key's, so nothing is sorted): one query for the run, not one per test. It is read beside
/// the run's tests and no further than the last of them, so a run cut short by a limit is
/// read no further either (its figures were looked up test by test from a list of the
/// tests' seqs, which cost more).
const FIGURES_OF_RUN: &str = "
    SELECT sample, direction, iops, bw_bytes_per_s, lat_mean_ns, lat_p50_ns, lat_p90_ns,
           lat_p99_ns, lat_p99_9_ns, lat_p99_99_ns, lat_max_ns, ops_per_s, seq
    FROM figures WHERE run_id = ?1
    ORDER BY seq, sample, direction";

/// A row of [`FIGURES_OF_RUN`]: its test's seq and the figures; `None` for a direction this
/// tacho does not write (a row from a newer tacho is left out rather than shown under a
/// wrong name).
fn figure_row(r: &Row) -> rusqlite::Result<(i64, Option<Figures>)> {
    let seq = r.get(12)?;
    // Read in place, not into a string for each figure row (1.6 million in a compare of two
    // runs of 200,000 tests). Anything but UTF-8 text fails as reading it into a String does.
    let direction = match r.get_ref(1)?.as_str() {
        Ok(name) => figures::direction(name),
        Err(_) => figures::direction(&r.get::<_, String>(1)?),
    };
    let Some(direction) = direction else {
        return Ok((seq, None));
    };
    let mut lat_ns = [None; 7];
    for (i, slot) in lat_ns.iter_mut().enumerate() {
        *slot = r.get(4 + i)?;
    }
    Ok((
        seq,
        Some(Figures {
            sample: r.get(0)?,
            direction,
            iops: r.get(2)?,
            bw_bytes_per_s: r.get(3)?,
            ops_per_s: r.get(11)?,
            lat_ns,
        }),
    ))
}

/// A test's JSON object without [`SUMMARY_SKIPS`], skipped unparsed.
struct Summary(Value);

/// The fields of a stored test that [`Store::load_summary`] leaves out: the figures of each
/// direction and repeat (kept in the figures table, where compare reads them) and the
/// per-interval and per-device detail.
const SUMMARY_SKIPS: [&str; 9] = [
    "repeats", "timeline", "device", "read", "write", "copy", "run", "wall", "cpu_time",
];

impl<'de> serde::Deserialize<'de> for Summary {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Summary;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a test object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Summary, A::Error> {
                let mut out = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if SUMMARY_SKIPS.contains(&key.as_str()) {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    } else {
                        out.insert(key, map.next_value()?);
                    }
                }
                Ok(Summary(Value::Object(out)))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The latest finished run of a kind per host (`?1` kind, `?2` suite or NULL, `?3` earliest
/// `created_at` or NULL); the same text runs on PostgreSQL with `$n` for `?n`.
/// The latest run of each machine (host name and machine id: two machines with one name are
/// two) with its labels; SQLite takes a bare column's value from the `max(id)` row.
pub(crate) const LATEST_PER_HOST: &str = "
    SELECT hostname, json_extract(host_json, '$.machine_id') AS machine, max(id),
           json_extract(host_json, '$.labels')
    FROM runs
    WHERE kind = ?1 AND status = 'finished' AND hostname IS NOT NULL
      AND (?2 IS NULL OR suite_name = ?2) AND (?3 IS NULL OR created_at >= ?3)
    GROUP BY hostname, machine ORDER BY hostname, machine";

/// Labels from a host document's `labels` (JSON text); none when absent or not an object of
/// strings.
pub(crate) fn labels_of(json: Option<&str>) -> crate::labels::Labels {
    json.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// The latest run per machine, as (host, id), of those whose labels hold `wanted`: a host
/// name shared by several machines is told apart by their machine ids.
pub(crate) fn per_host(
    rows: Vec<(String, Option<String>, i64, crate::labels::Labels)>,
    wanted: &crate::labels::Labels,
) -> Vec<(String, i64)> {
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| crate::labels::matches(&r.3, wanted))
        .collect();
    let mut per_name: std::collections::HashMap<&str, usize> = Default::default();
    for r in &rows {
        *per_name.entry(r.0.as_str()).or_default() += 1;
    }
    rows.iter()
        .map(|(host, machine, id, _)| {
            let shared = per_name.get(host.as_str()).is_some_and(|&n| n > 1);
            match machine {
                Some(m) if shared => (format!("{host} ({m})"), *id),
                _ => (host.clone(), *id),
            }
        })
        .collect()
}

/// The columns [`read_run`] reads by position, first in every query of runs (table alias
/// `r`); a query's own columns follow and are read by name.
const RUN_COLUMNS: &str = "r.id, r.created_at, r.label, r.kind, r.status, r.source, \
    r.tool_version, r.suite_name, r.suite_version, r.host_json, r.target_json, r.extra_json, \
    r.owner, r.uuid";

/// A run (without its tests) from a row that starts with [`RUN_COLUMNS`].
fn read_run(r: &Row, root: &SysRoot) -> rusqlite::Result<StoredRun> {
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
        status: current_status(root, r.get(4)?, r.get(12)?),
        source: r.get(5)?,
        tool_version: r.get(6)?,
        suite: suite_name.zip(suite_version),
        host: json(9)?,
        target: json(10)?,
        extra,
        tests: Vec::new(),
        uuid: r.get(13)?,
    })
}

/// A run still marked `running` whose saving process is gone (killed, or the machine
/// rebooted) is `abandoned`: the tests saved so far are all it will ever have.
pub(crate) fn current_status(
    root: &SysRoot,
    status: RunStatus,
    owner: Option<String>,
) -> RunStatus {
    let Some(owner) = owner.filter(|_| status == RunStatus::Running) else {
        return status;
    };
    let alive = owner
        .split(' ')
        .nth(1)
        .and_then(|pid| pid.parse().ok())
        .and_then(|pid| process::identity(root, pid))
        .is_some_and(|now| now == owner);
    if alive { status } else { RunStatus::Abandoned }
}

pub(crate) fn hostname(run: &NewRun) -> Option<&str> {
    run.host.get("hostname").and_then(Value::as_str)
}

/// The target's path, or a load run's URL.
pub(crate) fn target_path(run: &NewRun) -> Option<&str> {
    ["path", "url"]
        .iter()
        .find_map(|k| run.target.get(*k).and_then(Value::as_str))
}

/// [`Store::import_run`] inside the caller's transaction.
pub(super) fn import_in(
    tx: &rusqlite::Connection,
    walker: &mut Walker,
    run: &NewRun,
) -> rusqlite::Result<(i64, bool)> {
    if let Some(id) = run_with_uuid(tx, run.uuid.as_deref())? {
        return Ok((id, false));
    }
    let id = insert_run_row(tx, run)?;
    for (seq, test) in run.tests.iter().enumerate() {
        insert_test(tx, walker, id, seq as i64, test.text(), None)?;
    }
    Ok((id, true))
}

/// The run here with run id `uuid`, if any.
pub(super) fn run_with_uuid(
    conn: &rusqlite::Connection,
    uuid: Option<&str>,
) -> rusqlite::Result<Option<i64>> {
    let Some(uuid) = uuid else { return Ok(None) };
    conn.prepare_cached("SELECT id FROM runs WHERE uuid = ?1")?
        .query_row([uuid], |r| r.get(0))
        .optional()
}

fn insert_run_row(tx: &rusqlite::Connection, run: &NewRun) -> rusqlite::Result<i64> {
    write_run_row(tx, run, None)
}

/// Writes a run's row: a new one, or (`Some(id)`) over the placeholder row `id` that its tests
/// were stored under as they were read, with the same values an insert writes.
pub(super) fn write_run_row(
    conn: &rusqlite::Connection,
    run: &NewRun,
    over: Option<i64>,
) -> rusqlite::Result<i64> {
    const COLUMNS: &str = "created_at, label, kind, status, source, tool_version, suite_name, \
        suite_version, hostname, target_path, host_json, target_json, extra_json, uuid";
    let values = format!(
        "COALESCE(?1, strftime('%Y-%m-%dT%H:%M:%SZ', ?2, 'unixepoch'), {NOW}), ?3, ?4, ?5, ?6, \
         ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15"
    );
    let sql = match over {
        None => format!("INSERT INTO runs ({COLUMNS}) VALUES ({values})"),
        Some(_) => format!("UPDATE runs SET ({COLUMNS}) = ({values}) WHERE id = ?16"),
    };
    let uuid = run
        .uuid
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let values = params![
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
        uuid,
        over,
    ];
    // `?16`, the row written over, only in the update.
    let given = if over.is_some() { 16 } else { 15 };
    conn.execute(&sql, &values[..given])?;
    Ok(over.unwrap_or_else(|| conn.last_insert_rowid()))
}

/// Saves test `seq` of run `run_id` from its compact text; `found`: what a one-pass read of
/// the test found, when it was read so (else the text is read here).
pub(super) fn insert_test(
    tx: &rusqlite::Connection,
    walker: &mut Walker,
    run_id: i64,
    seq: i64,
    test: &str,
    found: Option<Walked>,
) -> rusqlite::Result<()> {
    // Read from the test's compact text, as it is stored: no tree of values is built. A
    // plain test (every checked test without a key written twice) in one pass; any other
    // through the typed views.
    let found = found.or_else(|| walker.read_text(test)).filter(|f| f.plain);
    let (name, rw, [bs_bytes, iodepth, numjobs], figures) = match found {
        Some(f) => (f.name, f.rw, f.columns, f.figures),
        None => {
            let c: TestColumns = super::stored::view_text(test);
            let whole = |f: super::stored::Field<i64>| f.get().copied();
            (
                c.name.get().cloned(),
                c.rw.get().cloned(),
                [whole(c.bs_bytes), whole(c.iodepth), whole(c.numjobs)],
                figures::of_test_text(test),
            )
        }
    };
    tx.prepare_cached(
        "INSERT INTO tests (run_id, seq, name, rw, bs_bytes, iodepth, numjobs, json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        run_id,
        seq,
        name.as_deref().unwrap_or("?"),
        rw,
        bs_bytes,
        iodepth,
        numjobs,
        test,
    ])?;
    figures::insert_all(tx, run_id, seq, figures)
}

/// The fields of a test the `tests` table keeps in columns of their own (a text field only
/// when it is text, a number only when it is a whole number that fits).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct TestColumns {
    name: super::stored::Field<String>,
    rw: super::stored::Field<String>,
    bs_bytes: super::stored::Field<i64>,
    iodepth: super::stored::Field<i64>,
    numjobs: super::stored::Field<i64>,
}
