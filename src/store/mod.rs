//! The results store: every benchmark run (disk, cpu, mem, timed commands), saved into an
//! SQLite file; disk runs test by test as they finish.
//!
//! WAL mode and a generous busy timeout let several tacho processes save at once; every write
//! is one `BEGIN IMMEDIATE` transaction, so none of them can lose another's rows. A file that is
//! not SQLite, is damaged, belongs to another program or to a newer tacho is refused with one
//! line saying so; it is never modified.

mod backend;
mod document;
pub mod figures;
pub mod fio;
mod import;
pub mod kinds;
#[cfg(feature = "pg")]
pub(crate) mod pg;
mod run;
mod runs;
pub mod schema;
pub(crate) mod stored;
mod test_text;
pub(crate) mod version;

#[cfg(feature = "pg")]
pub use backend::redact;
pub use backend::{Place, Results, is_url};
pub use document::parse_documents;
pub use import::import_files;
#[cfg(test)]
pub use run::StoredTest;
pub use run::{EachTest, NewRun, RunKind, RunSource, RunStatus, StoredRun, suite_changes};
#[cfg(feature = "pg")]
pub use runs::RawRun;
pub use runs::{ListText, RunSummary};

use crate::kernel::SysRoot;
use crate::sqlite::{self, Marks, retry_busy};
use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer waits for another process's transaction before giving up. Transactions
/// here are tiny (one test), so this only runs out when something holds the file for good.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Opened for reading only (a read-only filesystem, or a file this user cannot write):
    /// every write is refused before it is tried.
    read_only: bool,
    /// Where /proc is: a run's saving process is looked up there to tell a run still being
    /// saved from an abandoned one.
    root: SysRoot,
}

impl Store {
    /// Opens (creating the file if needed) and migrates to the latest schema. The default
    /// file's directory is created as needed; another path's directory must exist (a typo in
    /// `--db` is reported, not created as root).
    pub fn open(path: &Path) -> Result<Store> {
        backend::refuse_url(path)?;
        make_directory(path)?;
        let existed = std::fs::symlink_metadata(path).is_ok();
        let opened = Self::open_with(path, OpenFlags::default());
        let opened = opened.and_then(|store| store.writable().map(|()| store));
        if opened.is_err() && !existed {
            remove_if_empty(path);
        }
        opened
    }

    /// Opens an existing database; `Ok(None)` when there is no file yet (nothing was saved).
    /// A database this process cannot write (read-only filesystem, file or directory without
    /// write permission) is opened for reading: listing, showing, exporting and comparing
    /// work, and writes are refused with [`Store::writable`]'s message.
    pub fn open_existing(path: &Path) -> Result<Option<Store>> {
        backend::refuse_url(path)?;
        if !path.exists() {
            return Ok(None);
        }
        if !writable(path) {
            return Self::open_read_only(path).map(Some);
        }
        Self::open_with(path, OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE).map(Some)
    }

    /// Refuses a write to a database opened for reading only, in one line saying how to pick
    /// another.
    pub fn writable(&self) -> Result<()> {
        if self.read_only {
            bail!(
                "the results database {} is read-only (read-only filesystem or no write \
                 permission); pass --db PATH (or set TACHO_DB) to keep results elsewhere",
                self.path.display()
            );
        }
        Ok(())
    }

    /// Opens without writing anything, not even SQLite's `-shm` file when it cannot be
    /// created: in WAL mode SQLite needs it to read, so when the directory is read-only and
    /// no `-shm` exists the file is opened as immutable, which is exact only when no `-wal`
    /// holds changes; a `-wal` with changes is refused rather than silently left out.
    fn open_read_only(path: &Path) -> Result<Store> {
        let attempt = |query: &str| -> Result<Store> {
            let conn = sqlite::open_read_only(path, query, false).map_err(|e| describe(path, e))?;
            Self::ready(path, conn, true)
        };
        let plain = attempt("mode=ro");
        let Err(first) = plain else { return plain };
        let sidecar = |ext: &str| std::fs::metadata(sqlite::companion(path, ext)).ok();
        if sidecar("-shm").is_some() {
            return Err(first);
        }
        if sidecar("-wal").is_some_and(|m| m.len() > 0) {
            bail!(
                "the results database {} is read-only and its last changes are in {}-wal, which \
                 SQLite cannot read without creating {}-shm; copy the three files to a writable \
                 directory and pass --db PATH",
                path.display(),
                path.display(),
                path.display()
            );
        }
        attempt("immutable=1")
    }

    fn open_with(path: &Path, flags: OpenFlags) -> Result<Store> {
        let conn = Connection::open_with_flags(path, flags).map_err(|e| describe(path, e))?;
        // SQLite falls back to reading when the file cannot be opened for writing.
        let read_only = conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false);
        if read_only {
            drop(conn);
            return Self::open_read_only(path);
        }
        Self::ready(path, conn, false)
    }

    /// Checks the file is tacho's, then (when writable) sets WAL mode and migrates.
    fn ready(path: &Path, mut conn: Connection, read_only: bool) -> Result<Store> {
        let fail = |e: rusqlite::Error| describe(path, e);
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        let marks = retry_busy(|| Marks::read(&conn)).map_err(fail)?;
        check_ownership(path, marks)?;
        let version = marks.version;
        if read_only {
            if version < schema::LATEST {
                bail!(
                    "the results database {} is read-only and was written by an older tacho \
                     (schema {version}); tacho must upgrade it before reading: copy it to a \
                     writable place and pass --db PATH",
                    path.display()
                );
            }
            return Ok(Store {
                conn,
                path: path.to_path_buf(),
                read_only,
                root: SysRoot::real(),
            });
        }
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(fail)?;
        // NORMAL is durable in WAL mode except for the last transactions before a power cut.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(fail)?;
        retry_busy(|| schema::migrate(&mut conn)).map_err(fail)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            read_only,
            root: SysRoot::real(),
        })
    }

    /// The same store, marking runs with their saving process and judging which are alive
    /// under `root` (the caller's: `Results::open`, or a test's fixture tree).
    pub fn with_sys_root(mut self, root: SysRoot) -> Store {
        self.root = root;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Turns a database error into the one-line message users see.
    fn err(&self, e: rusqlite::Error) -> anyhow::Error {
        describe(&self.path, e)
    }
}

/// Makes the directory of a new database at `path` when it is the default file's (see
/// [`directory_to_make`]).
fn make_directory(path: &Path) -> Result<()> {
    if let Some(dir) = directory_to_make(path)? {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create {} for the results database; pass --db PATH or --no-save",
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// Removes the empty file (and SQLite's files beside it) that a failed first open left, e.g.
/// on a full filesystem: a 0-byte "database" is not left behind. A file with contents is
/// another process's, which created it meanwhile, and stays.
fn remove_if_empty(path: &Path) {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return;
    }
    let _ = std::fs::remove_file(path);
    for suffix in ["-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(sqlite::companion(path, suffix));
    }
}

/// The missing directory a new database at `path` needs, checked before anything runs: the
/// default file's is made when the run is saved, so the nearest directory that exists must
/// let this process make it; another path's directory must exist (a typo in `--db` is
/// reported, not created as root). `None` when the directory exists.
pub fn directory_to_make(path: &Path) -> Result<Option<&Path>> {
    let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    else {
        return Ok(None);
    };
    if !default_local_path().is_ok_and(|d| d == path) {
        bail!(
            "the directory {} of the results database does not exist; fix the path, create the \
             directory, or pass --no-save",
            dir.display()
        );
    }
    let Some(existing) = dir.ancestors().find(|a| a.exists()) else {
        return Ok(Some(dir));
    };
    if let Err(e) = rustix::fs::access(existing, rustix::fs::Access::WRITE_OK) {
        bail!(
            "cannot create {} for the results database: {} does not let this user make it \
             ({}); pass --db PATH or --no-save",
            dir.display(),
            existing.display(),
            std::io::Error::from(e)
        );
    }
    Ok(Some(dir))
}

/// Whether this process may write `path` and create files beside it (SQLite's `-wal` and
/// `-shm`), asked of the kernel (`access(2)` honours read-only mounts and permissions).
fn writable(path: &Path) -> bool {
    let may_write = |p: &Path| rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    may_write(path) && may_write(dir)
}

/// Refuses files that are not tacho's before anything is written to them.
fn check_ownership(path: &Path, marks: Marks) -> Result<()> {
    // A new, empty file is ours to initialise; one with tables and no mark is not.
    if marks.is_foreign(schema::APPLICATION_ID) {
        bail!(
            "{} is an SQLite database of another program, not tacho's results; pass another \
             --db PATH",
            path.display()
        );
    }
    if marks.version > schema::LATEST {
        bail!(
            "{} was written by a newer tacho (schema {}; this one knows up to {}); \
             upgrade tacho or pass another --db PATH",
            path.display(),
            marks.version,
            schema::LATEST
        );
    }
    Ok(())
}

/// A database error as one line naming the file and what to do.
fn describe(path: &Path, e: rusqlite::Error) -> anyhow::Error {
    let code = e.sqlite_error_code();
    match code {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => anyhow!(
            "{} is not a tacho results database (not SQLite, or damaged: {e}); move it away or \
             pass another --db PATH",
            path.display()
        ),
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => anyhow!(
            "{} stayed locked by another process for {}s ({e}); try again when it has finished",
            path.display(),
            BUSY_TIMEOUT.as_secs()
        ),
        Some(ErrorCode::DiskFull) => anyhow!(
            "the filesystem holding the results database {} is full ({e}); free some space \
             there, or pass --db PATH on another filesystem (or --no-save)",
            path.display()
        ),
        Some(ErrorCode::ReadOnly) => anyhow!(
            "the results database {} is read-only ({e}); pass --db PATH (or set TACHO_DB) to \
             keep results elsewhere",
            path.display()
        ),
        Some(ErrorCode::CannotOpen) | Some(ErrorCode::PermissionDenied) => {
            anyhow!(
                "cannot write the results database {} ({e}); pass a writable --db PATH or \
                 --no-save",
                path.display()
            )
        }
        _ => anyhow!("results database {}: {e}", path.display()),
    }
}

/// The config file's results store (`db_url`, `db_url_file`), set once by `cmd` before a
/// command runs: below `--db` and `$TACHO_DB`, above the default file.
static CONFIGURED_DB: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the config file's results store (once; a second call changes nothing).
pub fn configure_db(db: &str) {
    let _ = CONFIGURED_DB.set(db.to_owned());
}

/// The config file's results store, when it names one.
pub fn configured_db() -> Option<&'static str> {
    CONFIGURED_DB.get().map(String::as_str)
}

/// `$TACHO_DB`, else the config file's store, when either names a PostgreSQL server.
#[cfg(feature = "pg")]
pub fn server_url_from_env_or_config() -> Option<String> {
    std::env::var("TACHO_DB")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| configured_db().map(str::to_owned))
        .filter(|u| backend::is_url(u))
}

/// `--db`, else `$TACHO_DB`, else the config file's `db_url`, else
/// `$XDG_DATA_HOME/tacho/tacho.db`, else
/// `~/.local/share/tacho/tacho.db`. Read here rather than by the argument parser so every way into a
/// benchmark (`tacho bench` alone builds its options without parsing) honours `TACHO_DB`.
pub fn resolve_path(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TACHO_DB").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(db) = configured_db() {
        return Ok(PathBuf::from(db));
    }
    default_path(
        std::env::var_os("XDG_DATA_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

/// The local file `--db` defaults to when `TACHO_DB` is not a file (it names a shared server).
pub fn default_local_path() -> Result<PathBuf> {
    default_path(
        std::env::var_os("XDG_DATA_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn default_path(xdg_data_home: Option<PathBuf>, home: Option<PathBuf>) -> Result<PathBuf> {
    // The XDG spec says relative values are invalid and must be ignored.
    let base = xdg_data_home
        .filter(|p| p.is_absolute())
        .or_else(|| {
            home.filter(|h| h.is_absolute())
                .map(|h| h.join(".local/share"))
        })
        .ok_or_else(|| {
            anyhow!(
                "nowhere to keep results: neither XDG_DATA_HOME nor HOME is set; pass --db PATH, \
                 set TACHO_DB, or add --no-save"
            )
        })?;
    Ok(base.join("tacho/tacho.db"))
}

#[cfg(test)]
mod tests;
