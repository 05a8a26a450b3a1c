//! What tacho's two SQLite files (the results store and the history) share when they are
//! opened: whose file it is (its `application_id`, layout version and tables, read in one
//! snapshot), SQLite's companion files beside it, read-only opening by URI (which names any
//! path exactly), and the retry of a step SQLite refuses as busy without waiting.
//!
//! Each file keeps its own messages: what it tells a user about a foreign or newer file
//! names its own option (`--db`, `--history`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

/// How long [`retry_busy`] keeps trying.
const RETRY_LIMIT: Duration = Duration::from_secs(30);

/// Whose a file is, as SQLite's header and schema say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marks {
    /// `PRAGMA application_id`: 0 until a program marks the file as its own.
    pub(crate) application_id: i32,
    /// `PRAGMA user_version`: the layout version its owner wrote.
    pub(crate) version: i64,
    /// Tables, indexes, views and triggers in it.
    pub(crate) tables: i64,
}

impl Marks {
    /// The marks of the file `conn` has open, read in one transaction so the three come from
    /// one snapshot: another tacho may be creating this very file right now.
    pub(crate) fn read(conn: &Connection) -> rusqlite::Result<Marks> {
        let snapshot = conn.unchecked_transaction()?;
        Marks::read_in(&snapshot)
    }

    /// The marks, read inside a transaction the caller holds (to read more of the same
    /// snapshot).
    pub(crate) fn read_in(snapshot: &rusqlite::Transaction) -> rusqlite::Result<Marks> {
        snapshot.query_row(
            "SELECT (SELECT application_id FROM pragma_application_id), \
             (SELECT user_version FROM pragma_user_version), \
             (SELECT count(*) FROM sqlite_master)",
            [],
            |r| {
                Ok(Marks {
                    application_id: r.get(0)?,
                    version: r.get(1)?,
                    tables: r.get(2)?,
                })
            },
        )
    }

    /// Nothing written yet: no owner's mark and no tables (a file just created, or empty).
    pub(crate) fn is_new(&self) -> bool {
        self.application_id == 0 && self.tables == 0
    }

    /// Another program's file: neither new nor marked with `application_id`.
    pub(crate) fn is_foreign(&self, application_id: i32) -> bool {
        !self.is_new() && self.application_id != application_id
    }
}

/// SQLite's file beside `path`: `-wal`, `-shm` or `-journal`.
pub(crate) fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Opens `path` for reading only through a `file:` URI with `query` (`mode=ro`, or
/// `immutable=1` where SQLite could not create the `-shm` it needs); `nofollow` refuses a
/// link as the file.
pub(crate) fn open_read_only(
    path: &Path,
    query: &str,
    nofollow: bool,
) -> rusqlite::Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if nofollow {
        flags |= OpenFlags::SQLITE_OPEN_NOFOLLOW;
    }
    Connection::open_with_flags(format!("file:{}?{query}", uri_path(path)), flags)
}

/// `path` for an SQLite `file:` URI: every byte but unreserved ones and `/` percent-encoded,
/// so `?`, `#` and `%` in a name (and bytes that are not UTF-8) stay part of the path.
pub(crate) fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Runs `step` again while SQLite answers BUSY, for up to 30 s. SQLite answers BUSY at once,
/// without calling the busy handler, where waiting could deadlock: two processes that both
/// read a new file and then both want to switch it to WAL or create its schema. One of them
/// must let go and try again; this is that retry.
pub(crate) fn retry_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + RETRY_LIMIT;
    let mut pause = Duration::from_millis(2);
    loop {
        match step() {
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                // Jitter, so two processes that collided do not collide again in step.
                std::thread::sleep(pause + Duration::from_micros(fastrand::u64(0..2000)));
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_new_ours_or_foreign_by_its_mark_and_tables() {
        let marks = |application_id, tables| Marks {
            application_id,
            version: 1,
            tables,
        };
        assert!(marks(0, 0).is_new() && !marks(0, 0).is_foreign(7));
        // Tables without a mark: another program's.
        assert!(marks(0, 3).is_foreign(7));
        assert!(marks(8, 3).is_foreign(7) && marks(8, 0).is_foreign(7));
        assert!(!marks(7, 3).is_foreign(7) && !marks(7, 3).is_new());
    }

    #[test]
    fn uri_paths_keep_every_byte_of_the_name() {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"/d/a?b#c%d \xff");
        assert_eq!(uri_path(Path::new(name)), "/d/a%3Fb%23c%25d%20%FF");
    }
}
