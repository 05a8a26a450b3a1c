//! The SQLite file: creation (safe among other users), appending, retention and reading.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, ErrorCode, OpenFlags, params};
use serde::{Deserialize, Serialize};

use crate::diagnose::model::ModelOptions;
use crate::diagnose::model::SortKey;
use crate::diagnose::model::conns::Conns;
use crate::diagnose::sample::Sample;
use crate::diagnose::sample::devices::{DeviceInfo, Devices};
use crate::sqlite::{self, Marks};

/// SQLite `application_id` marking a tacho history file ("thst"); the results store has its
/// own, so neither can be mistaken for the other.
const APPLICATION_ID: i32 = 0x7468_7374;
/// Version of the table layout and of the row encoding: 2 added key and delta rows (zstd);
/// version 1's zlib rows are still read.
const VERSION: i64 = 2;
/// Readers and the recorder wait this long for each other's transactions.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// A scan decodes this many rows per CPU at a time...
const ROWS_PER_THREAD: usize = 2;
/// ... or fewer, once what they may inflate to ([`codec::inflated_bound`]) reaches this: a
/// batch of rows near the bound holds two of them, not two per CPU.
const BATCH_INFLATED: u64 = 64 << 20;

/// One stored sample with what the model needs to judge it later on another process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The raw counters.
    pub sample: Sample,
    /// Device descriptions at the time (a device may be gone by replay).
    pub devices: Vec<((u32, u32), DeviceInfo)>,
    /// Clock ticks per second of the recording host.
    pub ticks_per_s: f64,
    /// Page size of the recording host.
    pub page_size: u64,
    /// `kernel.task_delayacct` of the recording host.
    pub delayacct: Option<bool>,
    /// The recorder's interval, to tell a gap (recorder stopped) from a sample.
    pub interval_s: f64,
    /// TCP traffic over the interval ending at this sample (the raw connections are not
    /// kept); absent from the first record and records written before it was kept.
    #[serde(default)]
    pub connections: Option<Conns>,
    /// The host's performance settings, stored only when they changed (and in the first row,
    /// and every so often: `history::settings`); absent from the other rows and from rows
    /// written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<super::settings::Settings>,
}

impl Record {
    /// A record of `sample` with the devices known when it was taken, on a host whose tick
    /// rate, page size and delay accounting `host` gives.
    pub fn new(sample: Sample, devices: &Devices, host: &ModelOptions, interval_s: f64) -> Record {
        Record {
            sample,
            devices: devices.iter().map(|(k, v)| (*k, v.clone())).collect(),
            ticks_per_s: host.ticks_per_s,
            page_size: host.page_size,
            delayacct: host.delayacct,
            interval_s,
            connections: None,
            settings: None,
        }
    }

    /// The device map `model::between` takes.
    pub fn device_map(&self) -> Devices {
        self.devices.iter().cloned().collect()
    }

    /// Model options as on the recording host, listing `top` processes.
    pub fn model_options(&self, top: usize, sort: SortKey) -> ModelOptions {
        ModelOptions {
            top,
            sort,
            ticks_per_s: self.ticks_per_s,
            page_size: self.page_size,
            delayacct: self.delayacct,
        }
    }
}

/// An open history file.
pub struct History {
    conn: Connection,
    path: PathBuf,
    /// The recorder's current key row, its deltas' dictionary; `None` until the first append.
    encoder: RefCell<Option<codec::Encoder>>,
}

/// Key rows' JSON by row id: what the deltas of the rows being decoded need.
type Keys = HashMap<i64, Vec<u8>>;

/// `--history`, else `$TACHO_HISTORY`, else /var/lib/tacho/history/history.db for root, else
/// `$XDG_DATA_HOME/tacho/history.db` (or `~/.local/share/tacho/history.db`), as the results
/// store picks its file.
pub fn resolve_path(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TACHO_HISTORY").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/tacho/history/history.db"));
    }
    // Beside the local results file; when TACHO_DB names a server, beside the default one.
    let db = match crate::store::Place::resolve(None) {
        Ok(crate::store::Place::File(p)) => Ok(p),
        Ok(crate::store::Place::Server(_)) => crate::store::default_local_path(),
        Err(e) => Err(e),
    }
    .context("no place for the history")?;
    Ok(db.with_file_name("history.db"))
}

impl History {
    /// Opens the file for recording, creating it (and its directory, mode 0700, as `make`
    /// allows) if needed.
    /// Refuses a directory or file another user could replace or reach, and a link as the
    /// file. A filesystem too full to start on is named as such, and a file made for nothing
    /// is removed.
    pub fn create(path: &Path, make: Make) -> Result<History> {
        let file = private::private_file(path, make)?;
        let existed = std::fs::symlink_metadata(&file).is_ok();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let opened = Connection::open_with_flags(&file, flags).map_err(|e| describe(path, e));
        let ready = opened.and_then(|conn| {
            // The file holds every process's name and command activity: not for other users.
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot make {} private", path.display()))?;
            let h = History {
                conn,
                path: path.to_path_buf(),
                encoder: RefCell::new(None),
            };
            h.guard().map_err(|e| describe(path, e))?;
            h.check_format(true)?;
            // Setting WAL on a file another recorder is creating answers "locked" at once,
            // without SQLite's busy wait: retried as the results store does.
            crate::sqlite::retry_busy(|| h.init()).map_err(|e| describe(path, e))?;
            Ok(h)
        });
        ready.map_err(|e| {
            if !existed {
                private::remove_new(&file);
            }
            if is_disk_full(&e) {
                let dir = file.parent().unwrap_or(Path::new("/"));
                return anyhow!(
                    "the filesystem holding {} is full, so the history cannot start there; \
                     free some space on it, or pass --history PATH on another filesystem",
                    dir.display()
                );
            }
            e
        })
    }

    /// Opens an existing file for reading, while a recorder may be writing it, creating
    /// nothing: SQLite's `-wal` and `-shm` are used when the recorder left them (it is running,
    /// or was killed), and otherwise the file alone is read as immutable, so another user's
    /// history or one on a read-only filesystem is read as it is.
    pub fn open(path: &Path) -> Result<History> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| {
            anyhow!(
                "no history at {} ({e}); start `tacho record` first, or name the file with --history FILE",
                path.display()
            )
        })?;
        if !meta.is_file() {
            bail!(
                "{} is not a regular file; name the history file with --history FILE",
                path.display()
            );
        }
        let companion = |suffix: &str| -> Result<Option<std::fs::Metadata>> {
            let name = sqlite::companion(path, suffix);
            match std::fs::symlink_metadata(&name) {
                Ok(m) if m.is_file() => Ok(Some(m)),
                Ok(_) => bail!(
                    "{} is not a regular file; move it away and read the history again",
                    name.display()
                ),
                Err(_) => Ok(None),
            }
        };
        let (wal, shm) = (companion("-wal")?, companion("-shm")?);
        let mode = match (&wal, &shm) {
            (Some(_), Some(_)) => "mode=ro",
            (Some(w), None) if w.len() > 0 => bail!(
                "the last samples of {} are in its -wal file, which SQLite cannot read without \
                 creating a -shm file beside it; run `tacho record` on it once (as its owner), \
                 or copy the files elsewhere and read the copy",
                path.display()
            ),
            _ => "immutable=1",
        };
        let conn = sqlite::open_read_only(path, mode, true).map_err(|e| describe(path, e))?;
        let h = History {
            conn,
            path: path.to_path_buf(),
            encoder: RefCell::new(None),
        };
        h.guard().map_err(|e| describe(path, e))?;
        h.check_format(false)?;
        Ok(h)
    }

    /// Bounds what this connection may be made to hold and run: values of at most
    /// [`codec::MAX_BLOB`], no function with side effects from the file's schema, and a
    /// wait for the other side's transactions.
    fn guard(&self) -> rusqlite::Result<()> {
        self.conn.set_limit(
            rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
            codec::MAX_BLOB as i32,
        )?;
        self.conn.pragma_update(None, "trusted_schema", false)?;
        self.conn.busy_timeout(BUSY_TIMEOUT)
    }

    /// Refuses a file that is not a tacho history (another SQLite file, or not SQLite), or
    /// whose `samples` is not the table tacho makes: a view can be endless or return
    /// anything.
    fn check_format(&self, may_initialise: bool) -> Result<()> {
        let fail = |e| describe(&self.path, e);
        // One snapshot: a recorder creating this file meanwhile is seen wholly or not at all.
        let snapshot = self.conn.unchecked_transaction().map_err(fail)?;
        let marks = Marks::read_in(&snapshot).map_err(fail)?;
        if marks.is_new() && may_initialise {
            return Ok(());
        }
        let ver = marks.version;
        if marks.application_id != APPLICATION_ID {
            bail!(
                "{} is not a tacho history file (another program's SQLite file, or empty); \
                 name the file `tacho record` writes (its --history)",
                self.path.display()
            );
        }
        if ver > VERSION {
            bail!(
                "{} was written by a newer tacho (history version {ver}, this one reads {VERSION}); \
                 upgrade tacho",
                self.path.display()
            );
        }
        let kinds: Vec<String> = snapshot
            .prepare(
                "SELECT type || ' ' || coalesce(sql, '') FROM sqlite_master WHERE name = 'samples'",
            )
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(fail)?;
        let columns: Vec<(String, String, i64, i64)> = snapshot
            .prepare("SELECT name, upper(type), pk, hidden FROM pragma_table_xinfo('samples')")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect()
            })
            .map_err(fail)?;
        let want = [
            ("id", "INTEGER", 1, 0),
            ("unix_s", "REAL", 0, 0),
            ("data", "BLOB", 0, 0),
        ];
        let same = columns.len() == want.len()
            && columns
                .iter()
                .zip(want)
                .all(|(c, w)| (c.0.as_str(), c.1.as_str(), c.2, c.3) == w);
        let table = matches!(kinds.as_slice(), [k] if k.starts_with("table CREATE TABLE"));
        if !table || !same {
            bail!(
                "{} is not a tacho history file: its samples are not the table tacho records \
                 (a view, or other columns); name the file `tacho record` writes",
                self.path.display()
            );
        }
        Ok(())
    }
    fn init(&self) -> rusqlite::Result<()> {
        // Both must be set before the first table. auto_vacuum lets retention give pages
        // back; 1 KiB pages: a compressed sample (~8 KiB with 300 processes) spills into
        // overflow pages whose last one is on average half empty, so small pages waste less
        // (4 KiB pages cost 25% more bytes per sample, measured in docs/benchmarks.md).
        self.conn.pragma_update(None, "page_size", 1024)?;
        self.conn
            .pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: a sample reported as written survives a power cut, not only a crash.
        self.conn.pragma_update(None, "synchronous", "FULL")?;
        self.conn.execute_batch(&format!(
            "BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS samples (
                 id INTEGER PRIMARY KEY,
                 unix_s REAL NOT NULL,
                 data BLOB NOT NULL);
             CREATE INDEX IF NOT EXISTS samples_time ON samples(unix_s);
             PRAGMA application_id = {APPLICATION_ID};
             PRAGMA user_version = {VERSION};
             COMMIT;"
        ))
    }

    /// Appends one sample in its own transaction: either all of it is stored or nothing. The
    /// first sample of a recorder, and one in every few dozen, is a key row; the others are
    /// deltas against the last key.
    pub fn append(&self, rec: &Record) -> Result<()> {
        let json = codec::to_json(rec)?;
        let mut encoder = self.encoder.borrow_mut();
        let delta = match encoder.as_mut() {
            Some(e) => e.delta(&json)?,
            None => None,
        };
        let is_key = delta.is_none();
        let blob = match delta {
            Some(delta) => delta,
            None => codec::key(&json)?,
        };
        self.conn
            .execute(
                "INSERT INTO samples (unix_s, data) VALUES (?1, ?2)",
                params![rec.sample.unix_time_s, blob],
            )
            .map_err(|e| describe(&self.path, e))?;
        if is_key {
            let id = self.conn.last_insert_rowid();
            *encoder = Some(codec::Encoder::new(id, &json, blob.len())?);
        }
        Ok(())
    }

    /// Makes the table of intervals waiting to be sent to the shared store (`record --db`):
    /// kept in this file, so it has the history's own protection, and survives a restart.
    #[cfg(feature = "pg")]
    pub fn backlog_init(&self) -> Result<()> {
        self.conn
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS fleet_backlog (
                     id INTEGER PRIMARY KEY AUTOINCREMENT,
                     data TEXT NOT NULL)",
            )
            .map_err(|e| describe(&self.path, e))
    }

    /// Adds `data` to the backlog; when it then holds more than `bound` entries, the oldest go.
    /// Returns the ends (`at_unix_s` of the JSON) of those dropped, oldest first.
    #[cfg(feature = "pg")]
    pub fn backlog_push(&self, data: &str, bound: u64) -> Result<Vec<f64>> {
        let fail = |e| describe(&self.path, e);
        let tx = self.conn.unchecked_transaction().map_err(fail)?;
        tx.execute(
            "INSERT INTO fleet_backlog (data) VALUES (?1)",
            params![data],
        )
        .map_err(fail)?;
        let over: i64 = tx
            .query_row(
                "SELECT count(*) - ?1 FROM fleet_backlog",
                params![bound as i64],
                |r| r.get(0),
            )
            .map_err(fail)?;
        let mut dropped = Vec::new();
        if over > 0 {
            let mut stmt = tx
                .prepare(
                    "DELETE FROM fleet_backlog WHERE id IN
                       (SELECT id FROM fleet_backlog ORDER BY id LIMIT ?1)
                     RETURNING json_extract(data, '$.at_unix_s')",
                )
                .map_err(fail)?;
            let rows = stmt
                .query_map(params![over], |r| r.get::<_, Option<f64>>(0))
                .map_err(fail)?;
            for r in rows {
                dropped.extend(r.map_err(fail)?);
            }
            drop(stmt);
        }
        tx.commit().map_err(fail)?;
        dropped.sort_by(f64::total_cmp);
        Ok(dropped)
    }

    /// The oldest `limit` backlog entries, as (id, data).
    #[cfg(feature = "pg")]
    pub fn backlog_oldest(&self, limit: usize) -> Result<Vec<(i64, String)>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare("SELECT id, data FROM fleet_backlog ORDER BY id LIMIT ?1")
            .map_err(fail)?;
        let rows = stmt
            .query_map(params![limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(fail)?;
        rows.collect::<rusqlite::Result<_>>().map_err(fail)
    }

    /// How many entries the backlog holds.
    #[cfg(feature = "pg")]
    pub fn backlog_len(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM fleet_backlog", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
            .map_err(|e| describe(&self.path, e))
    }

    /// Removes the backlog entries up to `id` (sent).
    #[cfg(feature = "pg")]
    pub fn backlog_remove_upto(&self, id: i64) -> Result<()> {
        self.conn
            .execute("DELETE FROM fleet_backlog WHERE id <= ?1", params![id])
            .map_err(|e| describe(&self.path, e))?;
        Ok(())
    }

    /// Drops samples older than `keep` before `now_unix_s`, then the oldest until the samples
    /// fit in `max_bytes`; the newest sample is never dropped. Returns how many were dropped.
    pub fn prune(&self, now_unix_s: f64, keep: Duration, max_bytes: u64) -> Result<u64> {
        let fail = |e| describe(&self.path, e);
        let cutoff = now_unix_s - keep.as_secs_f64();
        let newest: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM samples", [], |r| r.get(0))
            .map_err(fail)?;
        let Some(newest) = newest else { return Ok(0) };
        let first_kept: i64 = self
            .conn
            .query_row(
                "SELECT min(id) FROM samples WHERE NOT (unix_s < ?1 AND id < ?2)",
                params![cutoff, newest],
                |r| r.get(0),
            )
            .map_err(fail)?;
        let mut dropped = self
            .conn
            .execute(
                "DELETE FROM samples WHERE unix_s < ?1 AND id < ?2",
                params![cutoff, self.with_key(first_kept)?],
            )
            .map_err(fail)? as u64;
        loop {
            let used = self.used_bytes()?;
            if used <= max_bytes {
                break;
            }
            // Drop a tenth of what is over, at least one sample, oldest first.
            let (rows, bytes): (i64, i64) = self
                .conn
                .query_row(
                    "SELECT count(*), coalesce(sum(length(data)), 0) FROM samples",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(fail)?;
            if rows <= 1 {
                break;
            }
            let per_row = (bytes / rows).max(1) as u64;
            let n = ((used - max_bytes) / per_row).max(1) as i64;
            let (oldest, want): (i64, i64) = self
                .conn
                .query_row(
                    "SELECT min(id), coalesce((SELECT id FROM samples WHERE id <= ?2 \
                     ORDER BY id LIMIT 1 OFFSET ?1), ?2) FROM samples",
                    params![n, newest],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(fail)?;
            let mut bound = self.with_key(want)?;
            if bound <= oldest {
                // The oldest rows are the key of the first one to keep: they go together, up
                // to the next key, or not at all while the newest sample needs them.
                let next: Option<i64> = self
                    .conn
                    .query_row(
                        "SELECT min(id) FROM samples WHERE id > ?1 AND id <= ?2 \
                         AND substr(data, 1, 1) <> X'44'",
                        params![want, newest],
                        |r| r.get(0),
                    )
                    .map_err(fail)?;
                let Some(next) = next else { break };
                bound = next;
            }
            dropped += self
                .conn
                .execute("DELETE FROM samples WHERE id < ?1", params![bound])
                .map_err(fail)? as u64;
        }
        if dropped > 0 {
            self.conn
                .execute_batch("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
                .map_err(fail)?;
        }
        Ok(dropped)
    }

    /// The first row to keep so that row `id` and those after it can still be read: its key
    /// when it is a delta, else itself.
    fn with_key(&self, id: i64) -> Result<i64> {
        let head: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT substr(data, 1, 9) FROM samples WHERE id = ?1",
                params![id],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(|e| describe(&self.path, e))?;
        Ok(head
            .as_deref()
            .and_then(codec::key_of)
            .map_or(id, |key| key.min(id)))
    }

    /// Bytes of the file in use by samples (pages not on the free list).
    pub fn used_bytes(&self) -> Result<u64> {
        let fail = |e| describe(&self.path, e);
        let get = |p: &str| -> Result<i64> {
            self.conn
                .query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
                .map_err(fail)
        };
        let pages = get("page_count")? - get("freelist_count")?;
        Ok(u64::try_from(pages * get("page_size")?).unwrap_or(0))
    }

    /// Number of samples and the first and last times, `None` when empty (what the tests check
    /// retention by).
    #[cfg(test)]
    pub fn span(&self) -> Result<Option<(u64, f64, f64)>> {
        let (n, first, last): (i64, Option<f64>, Option<f64>) = self
            .conn
            .query_row(
                "SELECT count(*), min(unix_s), max(unix_s) FROM samples",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| describe(&self.path, e))?;
        Ok(first
            .zip(last)
            .map(|(f, l)| (u64::try_from(n).unwrap_or(0), f, l)))
    }

    /// Feeds `each` the samples from the last one at or before `from` (the start of the
    /// first interval) to `to`, oldest first, with `taken` rebuilt from their wall-clock
    /// times. Rows are read and decoded (on every CPU: a day's summary is mostly inflating
    /// and parsing) a few at a time, each batch in its own read, so memory stays bounded
    /// whatever the window and the recorder is never held up.
    pub fn scan(&self, from: f64, to: f64, each: impl FnMut(Record)) -> Result<()> {
        let fail = |e| describe(&self.path, e);
        let start: f64 = self
            .conn
            .query_row(
                "SELECT coalesce((SELECT max(unix_s) FROM samples WHERE unix_s <= ?1), ?1)",
                params![from],
                |r| r.get(0),
            )
            .map_err(fail)?;
        self.scan_after((start, i64::MIN), to, each)
    }

    /// Feeds `each` the samples of a replayed interval ending at `end`, oldest first, as
    /// [`History::scan`] does: the last `n` at or before `end`, less those before the last one
    /// older than `since` (where the baseline begins). Only a batch is held at a time, however
    /// large the rows: the window's samples were held all at once, and 61 rows that each
    /// inflate to their bound took 2.3 GB.
    pub fn scan_back(
        &self,
        end: f64,
        n: usize,
        since: f64,
        each: impl FnMut(Record),
    ) -> Result<()> {
        let fail = |e| describe(&self.path, e);
        let key = |sql: &str, at: f64, skip: usize| -> Result<Option<(f64, i64)>> {
            let skip = i64::try_from(skip).unwrap_or(i64::MAX);
            self.conn
                .query_row(sql, params![at, skip], |r| Ok((r.get(0)?, r.get(1)?)))
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .map_err(fail)
        };
        // The `n`th row back (or the first row), and the last row before `since`: the later.
        let nth = key(
            "SELECT unix_s, id FROM samples WHERE unix_s <= ?1 \
             ORDER BY unix_s DESC, id DESC LIMIT 1 OFFSET ?2",
            end,
            n.saturating_sub(1),
        )?;
        let before = key(
            "SELECT unix_s, id FROM samples WHERE unix_s < ?1 \
             ORDER BY unix_s DESC, id DESC LIMIT 1 OFFSET ?2",
            since,
            0,
        )?;
        let first = match (nth, before) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 || (b.0 == a.0 && b.1 > a.1) {
                b
            } else {
                a
            }),
            (a, b) => a.or(b),
        };
        let after = first.map_or((f64::NEG_INFINITY, i64::MIN), |(t, id)| {
            (t, id.saturating_sub(1))
        });
        self.scan_after(after, end, each)
    }

    /// The rows after `after` (time, id) up to `to`, decoded a batch at a time.
    fn scan_after(&self, after: (f64, i64), to: f64, mut each: impl FnMut(Record)) -> Result<()> {
        let fail = |e| describe(&self.path, e);
        let threads = crate::parallel::usable_cpus();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT unix_s, id, data FROM samples WHERE unix_s <= ?3 \
                 AND (unix_s > ?1 OR (unix_s = ?1 AND id > ?2)) ORDER BY unix_s, id",
            )
            .map_err(fail)?;
        let mut after = after;
        let mut base = None;
        let mut keys = Keys::new();
        let anchor = Instant::now();
        loop {
            let mut rows = Vec::new();
            let mut inflated = 0;
            let mut cursor = stmt.query(params![after.0, after.1, to]).map_err(fail)?;
            while rows.len() < threads * ROWS_PER_THREAD && inflated < BATCH_INFLATED {
                let Some(r) = cursor.next().map_err(fail)? else {
                    break;
                };
                let row: (f64, i64, Vec<u8>) = (
                    r.get(0).map_err(fail)?,
                    r.get(1).map_err(fail)?,
                    r.get(2).map_err(fail)?,
                );
                inflated += codec::inflated_bound(row.2.len());
                if codec::key_of(&row.2).is_some() {
                    inflated += keys.values().map(|k| k.len() as u64).max().unwrap_or(0);
                }
                rows.push(row);
            }
            drop(cursor);
            let Some(&(t, id, _)) = rows.last() else {
                return Ok(());
            };
            after = (t, id);
            self.load_keys(&rows, &mut keys)?;
            for mut rec in self.decode_all(&rows, &keys, threads)? {
                let base = *base.get_or_insert(rec.sample.unix_time_s);
                rec.sample.taken = instant_at(anchor, base, rec.sample.unix_time_s);
                each(rec);
            }
        }
    }

    /// The last `n` samples at or before `at`, oldest first, with `taken` rebuilt, all held at
    /// once: for a few (a replay's last sample, a day's last reading).
    pub fn recent(&self, at: f64, n: usize) -> Result<Vec<Record>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT unix_s, id, data FROM samples WHERE unix_s <= ?1 \
                 ORDER BY unix_s DESC, id DESC LIMIT ?2",
            )
            .map_err(fail)?;
        let mut rows: Vec<(f64, i64, Vec<u8>)> = stmt
            .query_map(params![at, i64::try_from(n).unwrap_or(i64::MAX)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(fail)?
            .collect::<rusqlite::Result<_>>()
            .map_err(fail)?;
        rows.reverse();
        let mut keys = Keys::new();
        self.load_keys(&rows, &mut keys)?;
        let mut records = self.decode_all(&rows, &keys, crate::parallel::usable_cpus())?;
        let anchor = Instant::now();
        if let Some(base) = records.first().map(|r| r.sample.unix_time_s) {
            for r in &mut records {
                r.sample.taken = instant_at(anchor, base, r.sample.unix_time_s);
            }
        }
        Ok(records)
    }

    /// Times of all samples, oldest first (for stepping through a replay and finding days).
    pub fn times(&self) -> Result<Vec<f64>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare("SELECT unix_s FROM samples ORDER BY unix_s")
            .map_err(fail)?;
        let times: Vec<f64> = stmt
            .query_map([], |r| r.get(0))
            .map_err(fail)?
            .collect::<rusqlite::Result<_>>()
            .map_err(fail)?;
        if let Some(t) = times.iter().find(|&&t| !codec::plausible_time(t)) {
            bail!(
                "{} holds a damaged sample (its time {t} is not a sample time); it was not \
                 written by this tacho's recorder: move it away and start `tacho record` again",
                self.path.display()
            );
        }
        Ok(times)
    }

    /// Makes `keys` hold the key rows' JSON that the deltas among `rows` need, and no other.
    fn load_keys(&self, rows: &[(f64, i64, Vec<u8>)], keys: &mut Keys) -> Result<()> {
        let needed: BTreeSet<i64> = rows.iter().filter_map(|r| codec::key_of(&r.2)).collect();
        keys.retain(|id, _| needed.contains(id));
        for id in needed {
            if keys.contains_key(&id) {
                continue;
            }
            let blob: Option<Vec<u8>> = match rows.iter().find(|r| r.1 == id) {
                Some(r) => Some(r.2.clone()),
                None => self
                    .conn
                    .query_row("SELECT data FROM samples WHERE id = ?1", params![id], |r| {
                        r.get(0)
                    })
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })
                    .map_err(|e| describe(&self.path, e))?,
            };
            // A missing key is said by the delta that needs it.
            if let Some(blob) = blob {
                let json = codec::key_json(&blob).map_err(|e| damaged(&self.path, &e))?;
                keys.insert(id, json);
            }
        }
        Ok(())
    }

    /// Decodes `rows` (time, id, blob) on up to `threads` threads, keeping their order.
    fn decode_all(
        &self,
        rows: &[(f64, i64, Vec<u8>)],
        keys: &Keys,
        threads: usize,
    ) -> Result<Vec<Record>> {
        let path = self.path.as_path();
        let chunk = rows.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Vec<Record>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = rows
                .chunks(chunk)
                .map(|rows| {
                    scope.spawn(move || {
                        rows.iter()
                            .map(|(t, _, blob)| {
                                let key = codec::key_of(blob).and_then(|id| keys.get(&id));
                                decode_row(path, blob, *t, key.map(Vec::as_slice))
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a decoding thread panicked")))
                })
                .collect()
        });
        let mut out = Vec::with_capacity(rows.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }
}

/// A row of the history at `path` stored at `unix_s` (`key`: its key row's JSON), or why it
/// cannot be one.
fn decode_row(path: &Path, blob: &[u8], unix_s: f64, key: Option<&[u8]>) -> Result<Record> {
    codec::decode(blob, unix_s, key).map_err(|e| damaged(path, &e))
}

/// A sample tacho's recorder did not write, as one line saying what to do.
fn damaged(path: &Path, e: &dyn std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "{} holds a damaged sample ({e}); it was not written by this tacho's recorder: move \
         it away and start `tacho record` again",
        path.display()
    )
}

/// The monotonic instant of a sample taken at `unix_s`, `anchor` standing for `base`.
fn instant_at(anchor: Instant, base: f64, unix_s: f64) -> Instant {
    let since = Duration::try_from_secs_f64((unix_s - base).max(0.0)).unwrap_or_default();
    anchor.checked_add(since).unwrap_or(anchor)
}

/// A database error as one line naming the file and what to do.
fn describe(path: &Path, e: rusqlite::Error) -> anyhow::Error {
    if matches!(
        e,
        rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)
    ) {
        return damaged(path, &e);
    }
    match e.sqlite_error_code() {
        Some(ErrorCode::TooBig) => {
            damaged(path, &format!("a value over {} MiB", codec::MAX_BLOB >> 20))
        }
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => anyhow!(
            "{} is not a tacho history file (not SQLite, or damaged: {e}); name the file \
             `tacho record` writes (its --history)",
            path.display()
        ),
        // A full filesystem can also fail SQLite's shared-memory file, as an I/O error.
        Some(ErrorCode::DiskFull) => disk_full(path, &e),
        Some(ErrorCode::SystemIoFailure) if private::filesystem_full(path) => disk_full(path, &e),
        _ => anyhow!("history {}: {e}", path.display()),
    }
}

/// A write refused for want of space: the recorder complains once and tries the next sample.
fn disk_full(path: &Path, e: &rusqlite::Error) -> anyhow::Error {
    anyhow::Error::new(DiskFull).context(format!(
        "{} not written ({e}); each interval is tried again, whole or not at all",
        path.display()
    ))
}

/// Marks a write refused because the disk is full: the recorder then complains and goes on.
#[derive(Debug, thiserror::Error)]
#[error("the disk is full")]
pub struct DiskFull;

/// Whether an error is the disk being full.
pub fn is_disk_full(e: &anyhow::Error) -> bool {
    e.downcast_ref::<DiskFull>().is_some()
}

mod codec;
#[cfg(test)]
mod hostile_tests;
mod private;
pub use private::{Make, filesystem_full};
#[cfg(test)]
mod tests;
