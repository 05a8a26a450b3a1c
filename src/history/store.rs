//! The SQLite file: creation (safe among other users), appending, retention and reading.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
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

/// SQLite `application_id` marking a tacho history file ("thst"); the results store has its
/// own, so neither can be mistaken for the other.
const APPLICATION_ID: i32 = 0x7468_7374;
/// Version of the table layout and of the row encoding.
const VERSION: i64 = 1;
/// Readers and the recorder wait this long for each other's transactions.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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
}

/// `--file`, else `$TACHO_HISTORY`, else /var/lib/tacho/history/history.db for root, else
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
    /// Opens the file for recording, creating it (and its directory, mode 0700) if needed.
    /// Refuses a directory or file another user could replace, and a link as the file.
    pub fn create(path: &Path) -> Result<History> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            make_private_dir(dir)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| describe(path, e))?;
        check_owner(path)?;
        // The file holds every process's name and command activity: not for other users.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} private", path.display()))?;
        let h = History {
            conn,
            path: path.to_path_buf(),
        };
        h.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| describe(path, e))?;
        h.check_format(true)?;
        h.init().map_err(|e| describe(path, e))?;
        Ok(h)
    }

    /// Opens an existing file for reading, while a recorder may be writing it.
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
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| describe(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| describe(path, e))?;
        let h = History {
            conn,
            path: path.to_path_buf(),
        };
        h.check_format(false)?;
        Ok(h)
    }

    /// Refuses a file that is not a tacho history (another SQLite file, or not SQLite).
    fn check_format(&self, may_initialise: bool) -> Result<()> {
        let q = || -> rusqlite::Result<(i32, i64, i64)> {
            let app: i32 = self
                .conn
                .query_row("PRAGMA application_id", [], |r| r.get(0))?;
            let ver: i64 = self
                .conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))?;
            let tables: i64 =
                self.conn
                    .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
            Ok((app, ver, tables))
        };
        let (app, ver, tables) = q().map_err(|e| describe(&self.path, e))?;
        let fresh = app == 0 && tables == 0;
        if fresh && may_initialise {
            return Ok(());
        }
        if app != APPLICATION_ID {
            bail!(
                "{} is not a tacho history file (another program's SQLite file, or empty); \
                 name the file `tacho record` writes (its --file; --history when reading)",
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

    /// Appends one sample in its own transaction: either all of it is stored or nothing.
    pub fn append(&self, rec: &Record) -> Result<()> {
        let blob = encode(rec)?;
        self.conn
            .execute(
                "INSERT INTO samples (unix_s, data) VALUES (?1, ?2)",
                params![rec.sample.unix_time_s, blob],
            )
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
        let mut dropped = self
            .conn
            .execute(
                "DELETE FROM samples WHERE unix_s < ?1 AND id < ?2",
                params![cutoff, newest],
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
            dropped += self
                .conn
                .execute(
                    "DELETE FROM samples WHERE id IN \
                     (SELECT id FROM samples WHERE id < ?2 ORDER BY id LIMIT ?1)",
                    params![n, newest],
                )
                .map_err(fail)? as u64;
        }
        if dropped > 0 {
            self.conn
                .execute_batch("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
                .map_err(fail)?;
        }
        Ok(dropped)
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

    /// Samples from the last one at or before `from` (the start of the first interval) to
    /// `to`, oldest first, with `taken` rebuilt from their wall-clock times.
    pub fn range(&self, from: f64, to: f64) -> Result<Vec<Record>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT data FROM samples WHERE unix_s <= ?2 AND unix_s >= coalesce(
                   (SELECT max(unix_s) FROM samples WHERE unix_s <= ?1), ?1)
                 ORDER BY unix_s",
            )
            .map_err(fail)?;
        let blobs: Vec<Vec<u8>> = stmt
            .query_map(params![from, to], |r| r.get::<_, Vec<u8>>(0))
            .map_err(fail)?
            .collect::<rusqlite::Result<_>>()
            .map_err(fail)?;
        let mut out = self.decode_all(&blobs)?;
        rebuild_instants(&mut out);
        Ok(out)
    }

    /// The sample at or before `at` and the one before it: one interval as `top` showed it.
    /// Falls back to the first interval when `at` is before the history starts.
    pub fn interval_at(&self, at: f64) -> Result<Option<(Record, Record)>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT data FROM (SELECT data, unix_s FROM samples WHERE unix_s <= ?1 \
                 ORDER BY unix_s DESC LIMIT 2) ORDER BY unix_s",
            )
            .map_err(fail)?;
        let mut rows: Vec<Vec<u8>> = stmt
            .query_map(params![at], |r| r.get(0))
            .map_err(fail)?
            .collect::<rusqlite::Result<_>>()
            .map_err(fail)?;
        if rows.len() < 2 {
            let mut first = self
                .conn
                .prepare("SELECT data FROM samples ORDER BY unix_s LIMIT 2")
                .map_err(fail)?;
            rows = first
                .query_map([], |r| r.get(0))
                .map_err(fail)?
                .collect::<rusqlite::Result<_>>()
                .map_err(fail)?;
        }
        if rows.len() != 2 {
            return Ok(None);
        }
        let mut pair = rows
            .iter()
            .map(|b| self.decode(b))
            .collect::<Result<Vec<_>>>()?;
        rebuild_instants(&mut pair);
        let (Some(b), Some(a)) = (pair.pop(), pair.pop()) else {
            return Ok(None);
        };
        Ok(Some((a, b)))
    }

    /// Times of all samples, oldest first (for stepping through a replay).
    pub fn times(&self) -> Result<Vec<f64>> {
        let fail = |e| describe(&self.path, e);
        let mut stmt = self
            .conn
            .prepare("SELECT unix_s FROM samples ORDER BY unix_s")
            .map_err(fail)?;
        let times = stmt
            .query_map([], |r| r.get(0))
            .map_err(fail)?
            .collect::<rusqlite::Result<_>>()
            .map_err(fail)?;
        Ok(times)
    }

    /// Decodes rows on every CPU: a day's summary is mostly inflating and parsing samples,
    /// and each row stands alone. Keeps the rows' order.
    fn decode_all(&self, blobs: &[Vec<u8>]) -> Result<Vec<Record>> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let path = self.path.as_path();
        let chunk = blobs.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Vec<Record>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = blobs
                .chunks(chunk)
                .map(|rows| scope.spawn(move || rows.iter().map(|b| decode_row(path, b)).collect()))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a decoding thread panicked")))
                })
                .collect()
        });
        let mut out = Vec::with_capacity(blobs.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    fn decode(&self, blob: &[u8]) -> Result<Record> {
        decode_row(&self.path, blob)
    }
}

/// A row of the history at `path`, or why it cannot be one.
fn decode_row(path: &Path, blob: &[u8]) -> Result<Record> {
    decode(blob).map_err(|e| {
        anyhow!(
            "{} holds a damaged sample ({e}); it was not written by this tacho's \
             recorder: move it away and start `tacho record` again",
            path.display()
        )
    })
}

/// Samples are stored as JSON compressed with zlib: JSON keeps the row readable by any later
/// tacho whose `Sample` gained fields (serde defaults), and the repeated keys of ~300
/// processes compress to a small fraction (measured in docs/benchmarks.md).
fn encode(rec: &Record) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(rec).context("cannot encode a sample")?;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&json)?;
    Ok(z.finish()?)
}

/// The inverse of [`encode`], bounded so a hostile row cannot exhaust memory.
fn decode(blob: &[u8]) -> Result<Record> {
    const LIMIT: u64 = 256 << 20;
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(blob)
        .take(LIMIT)
        .read_to_end(&mut json)?;
    Ok(serde_json::from_slice(&json)?)
}

/// Gives each record a monotonic `taken` consistent with its wall-clock time.
fn rebuild_instants(records: &mut [Record]) {
    let Some(base) = records
        .iter()
        .map(|r| r.sample.unix_time_s)
        .min_by(f64::total_cmp)
    else {
        return;
    };
    let anchor = Instant::now();
    for r in records {
        let since = (r.sample.unix_time_s - base).max(0.0);
        r.sample.taken = anchor + Duration::from_secs_f64(since);
    }
}

/// Creates `dir` (and missing parents) with mode 0700, then refuses it unless it is a real
/// directory owned by this user (or root) that no other user can write: otherwise another
/// user could swap the history file under the recorder.
fn make_private_dir(dir: &Path) -> Result<()> {
    let me = rustix::process::geteuid().as_raw();
    // Checked before anything is created, so a refusal leaves nothing behind; what is
    // created below is this user's, mode 0700.
    let absolute =
        std::path::absolute(dir).with_context(|| format!("cannot inspect {}", dir.display()))?;
    if let Some(open) = absolute
        .ancestors()
        .skip(1)
        .filter(|a| a.exists())
        .find(|a| !safe_ancestor(a, me))
    {
        bail!(
            "{} is in {}, which another user could rename or replace (theirs, or writable \
             by others without the sticky bit); pass --file PATH in a directory only you and \
             root control",
            dir.display(),
            open.display()
        );
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| {
            format!(
                "cannot create {} for the history; pass --file PATH",
                dir.display()
            )
        })?;
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot inspect {}", dir.display()))?;
    if !meta.is_dir() || (meta.uid() != me && meta.uid() != 0) || meta.mode() & 0o022 != 0 {
        bail!(
            "{} is a link, belongs to another user, or others can write it; the history must \
             live in a private directory: pass --file PATH in one",
            dir.display()
        );
    }
    Ok(())
}

/// Whether no other user can swap what `dir` holds: it belongs to this user or root, and
/// others cannot write it, or only as in /tmp (the sticky bit keeps them from renaming
/// entries they do not own).
fn safe_ancestor(dir: &Path, me: u32) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| {
        (m.uid() == me || m.uid() == 0) && (m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0)
    })
}

/// Refuses a history file owned by another user (it could be theirs to read back).
fn check_owner(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot inspect {}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me {
        bail!(
            "{} is not a regular file of this user; pass --file PATH",
            path.display()
        );
    }
    Ok(())
}

/// A database error as one line naming the file and what to do.
fn describe(path: &Path, e: rusqlite::Error) -> anyhow::Error {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => anyhow!(
            "{} is not a tacho history file (not SQLite, or damaged: {e}); name the file \
             `tacho record` writes (its --file; --history when reading)",
            path.display()
        ),
        Some(ErrorCode::DiskFull) => anyhow::Error::new(DiskFull).context(format!(
            "{} not written ({e}); each interval is tried again, whole or not at all",
            path.display()
        )),
        _ => anyhow!("history {}: {e}", path.display()),
    }
}

/// Marks a write refused because the disk is full: the recorder then complains and goes on.
#[derive(Debug, thiserror::Error)]
#[error("the disk is full")]
pub struct DiskFull;

/// Whether an error is the disk being full.
pub fn is_disk_full(e: &anyhow::Error) -> bool {
    e.downcast_ref::<DiskFull>().is_some()
}

#[cfg(test)]
mod tests;
