//! The revert journal: before `tacho experiment` changes anything it records the values it
//! read, so a revert survives Ctrl-C, SIGKILL, a crash or a reboot (`experiment --recover`, or
//! the next tacho start, restores them and says so).
//!
//! Root later applies what a journal holds, so nobody else may be able to write one: the
//! directory (`/var/lib/tacho/experiments`, or `$TACHO_EXPERIMENT_DIR`) must be a real
//! directory, not a link, owned by root, mode 0700, under directories only root can change; each
//! journal file must be a regular root-owned file no one else can write, opened without
//! following links. A journal holds settings and values: each is checked against the
//! catalogue (`tune`) before anything is written, so even a forged one could only set a listed
//! setting to a value it takes. The one command it may hold is a `--revert-cmd` root gave on
//! the command line, which is run only from a journal that passed every check above.
//!
//! A running experiment holds `flock` on its journal: a locked journal is a live experiment's
//! and is left alone; the kernel drops the lock when its process dies, however it dies.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use super::command;
use crate::kernel::SysRoot;
use crate::report::outfile::{self, Existing};
use crate::text::Escaped;
use crate::tune::{Saved, Setting};

/// Where journals live unless `$TACHO_EXPERIMENT_DIR` says otherwise.
pub const DEFAULT_DIR: &str = "/var/lib/tacho/experiments";
/// The environment variable that moves the journal directory (tests).
pub const DIR_ENV: &str = "TACHO_EXPERIMENT_DIR";
/// The `schema` of a journal file.
const SCHEMA: &str = "tacho.experiment-journal.v1";
/// Largest journal read back (a real one is a few hundred bytes).
const MAX_BYTES: u64 = 1 << 20;

/// The journal directory in use.
pub fn dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Why the journal directory or a journal could not be used; each names the path and the fix.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The directory (or an ancestor) could be changed by someone other than root.
    #[error(
        "{path} {why}: another user could plant values there for root to apply; {fix}",
        path = .0.display(), why = .1, fix = .2
    )]
    Unsafe(PathBuf, String, &'static str),
    /// Reading, creating or writing failed.
    #[error("{}: {}", .0.display(), .1)]
    Io(PathBuf, std::io::Error),
    /// Writing a journal failed.
    #[error(transparent)]
    Output(#[from] outfile::OutputError),
    /// A journal file is not what tacho writes.
    #[error("{}: {}", .0.display(), .1)]
    Invalid(PathBuf, String),
}

/// One changed setting and the values it had before.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The setting's catalogue name (`thp.enabled`).
    pub setting: String,
    /// The values read before the change.
    pub saved: Saved,
}

/// What a journal file holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// [`SCHEMA`].
    pub schema: String,
    /// The experiment's process.
    pub pid: u32,
    /// When it started, seconds since the epoch.
    pub started_unix_s: u64,
    /// The settings it changes, with their values before.
    pub changes: Vec<Entry>,
    /// The `--revert-cmd` root gave, run before the settings are restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_command: Option<String>,
}

impl Record {
    /// A journal of `changes` (and the revert command, if any) for this process.
    pub fn new(changes: Vec<Entry>, revert_command: Option<String>) -> Record {
        Record {
            schema: SCHEMA.into(),
            pid: std::process::id(),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            changes,
            revert_command,
        }
    }
}

/// The journal directory, opened and checked.
pub struct Dir {
    path: PathBuf,
    fd: OwnedFd,
}

/// A journal this process wrote and holds locked until [`Held::remove`].
pub struct Held {
    path: PathBuf,
    _lock: OwnedFd,
}

impl Held {
    /// Removes the journal once everything in it was restored.
    pub fn remove(self) -> Result<(), JournalError> {
        std::fs::remove_file(&self.path).map_err(|e| JournalError::Io(self.path.clone(), e))
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A journal left by an experiment that is no longer running (its lock is held by the caller
/// until it is restored and removed).
pub struct Stale {
    /// The journal file.
    pub path: PathBuf,
    /// What it holds.
    pub record: Record,
    _lock: OwnedFd,
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks that no one but root (the caller) can change `path` or its ancestors.
fn check_ancestors(path: &Path) -> Result<(), JournalError> {
    for ancestor in path.ancestors().skip(1) {
        if ancestor.as_os_str().is_empty() {
            continue;
        }
        let meta = match std::fs::metadata(ancestor) {
            // Not made yet (/var/lib/tacho on a fresh machine): made root-owned and 0700 with
            // the directory, and checked again once made.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            r => r.map_err(|e| JournalError::Io(ancestor.to_path_buf(), e))?,
        };
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.uid() != 0 && meta.uid() != euid() {
            return Err(JournalError::Unsafe(
                ancestor.to_path_buf(),
                format!("is owned by uid {}, not root", meta.uid()),
                "choose a journal directory under directories root owns",
            ));
        }
        if meta.mode() & 0o022 != 0 && !sticky {
            return Err(JournalError::Unsafe(
                ancestor.to_path_buf(),
                format!(
                    "is writable by group or others (mode {:o})",
                    meta.mode() & 0o7777
                ),
                "choose a journal directory under directories only root can write",
            ));
        }
    }
    Ok(())
}

impl Dir {
    /// Opens the journal directory, making it (0700) when `create` is set; `Ok(None)` when it
    /// does not exist and `create` is not set.
    pub fn open(path: &Path, create: bool) -> Result<Option<Dir>, JournalError> {
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| JournalError::Io(path.to_path_buf(), e))?
                .join(path)
        };
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Ok(None);
                }
                check_ancestors(&path)?;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&path)
                    .map_err(|e| JournalError::Io(path.clone(), e))?;
            }
            Err(e) => return Err(JournalError::Io(path, e)),
            Ok(_) => {}
        }
        check_ancestors(&path)?;
        let fd = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            let why = if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
                "is a symbolic link or not a directory".to_string()
            } else {
                e.to_string()
            };
            JournalError::Unsafe(
                path.clone(),
                why,
                "remove it (tacho makes it again, root-owned, 0700)",
            )
        })?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| JournalError::Io(path.clone(), e.into()))?;
        let fix = "remove it (tacho makes it again, root-owned, 0700)";
        if stat.st_uid != euid() {
            return Err(JournalError::Unsafe(
                path,
                format!("is owned by uid {}, not root", stat.st_uid),
                fix,
            ));
        }
        if stat.st_mode & 0o077 != 0 {
            return Err(JournalError::Unsafe(
                path,
                format!("has mode {:o}, not 0700", stat.st_mode & 0o7777),
                fix,
            ));
        }
        Ok(Some(Dir { path, fd }))
    }

    /// Writes `record` as a new journal and locks it.
    pub fn write(&self, record: &Record) -> Result<Held, JournalError> {
        // A series holds its own journal beside each step's, written in the same second.
        static WRITTEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{}-{}-{n}.json", record.started_unix_s, record.pid);
        let path = self.path.join(&name);
        let text = serde_json::to_vec_pretty(record)
            .map_err(|e| JournalError::Invalid(path.clone(), e.to_string()))?;
        outfile::write_atomically(&path, &text, Existing::Refuse)?;
        let fd = rustix::fs::openat(
            &self.fd,
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| JournalError::Io(path.clone(), e.into()))?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)
            .map_err(|e| JournalError::Io(path.clone(), e.into()))?;
        // A `--recover` between the write and the lock would have taken it away.
        let stat = rustix::fs::fstat(&fd).map_err(|e| JournalError::Io(path.clone(), e.into()))?;
        if stat.st_nlink == 0 {
            return Err(JournalError::Invalid(
                path,
                "removed by another tacho before it was locked; run the experiment again".into(),
            ));
        }
        Ok(Held { path, _lock: fd })
    }

    /// Every journal no running experiment holds, each locked for the caller. Files that are
    /// not journals tacho could have written are errors (named), never read as one.
    pub fn stale(&self) -> Result<Vec<Result<Stale, JournalError>>, JournalError> {
        let mut names: Vec<String> = std::fs::read_dir(&self.path)
            .map_err(|e| JournalError::Io(self.path.clone(), e))?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            match self.open_journal(&name) {
                Ok(Some(stale)) => out.push(Ok(stale)),
                Ok(None) => {}
                Err(e) => out.push(Err(e)),
            }
        }
        Ok(out)
    }

    /// Opens, checks, locks and reads one journal; `Ok(None)` when a live experiment holds it
    /// or it went away.
    fn open_journal(&self, name: &str) -> Result<Option<Stale>, JournalError> {
        let path = self.path.join(name);
        let fd = match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(JournalError::Invalid(
                    path,
                    format!("not opened as a journal ({e}); remove it"),
                ));
            }
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| JournalError::Io(path.clone(), e.into()))?;
        let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file();
        if !regular || stat.st_uid != euid() || stat.st_mode & 0o022 != 0 {
            return Err(JournalError::Invalid(
                path,
                "is not a regular root-owned file only root can write; not applied, remove it"
                    .into(),
            ));
        }
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(JournalError::Io(path, e.into())),
        }
        let mut text = String::new();
        std::fs::File::from(
            fd.try_clone()
                .map_err(|e| JournalError::Io(path.clone(), e))?,
        )
        .take(MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| JournalError::Io(path.clone(), e))?;
        let record: Record = serde_json::from_str(&text)
            .map_err(|e| JournalError::Invalid(path.clone(), format!("not a journal: {e}")))?;
        if record.schema != SCHEMA {
            return Err(JournalError::Invalid(
                path,
                format!("schema {:?}, not {SCHEMA}", record.schema),
            ));
        }
        Ok(Some(Stale {
            path,
            record,
            _lock: fd,
        }))
    }
}

/// What restoring one journal did.
#[derive(Debug)]
pub struct Restored {
    /// The journal file.
    pub path: PathBuf,
    /// What became of each change, in words: `vm.swappiness back to 60`, `--revert-cmd '…'
    /// ran (exit 0)`, or why it was not restored.
    pub settings: Vec<Result<String, String>>,
}

impl Restored {
    /// True when every setting was restored (and read back).
    pub fn complete(&self) -> bool {
        self.settings.iter().all(Result::is_ok)
    }
}

/// Restores every setting of a stale journal (its revert command first, as a live experiment
/// reverts) and removes the journal when all were restored (a failure keeps it, so the next
/// start tries again).
pub fn restore(root: &SysRoot, stale: Stale) -> Restored {
    let mut settings = Vec::new();
    if let Some(cmd) = &stale.record.revert_command {
        settings.push(
            command::run("--revert-cmd", cmd)
                .map(|()| format!("--revert-cmd `{}` ran (exit 0)", Escaped(cmd)))
                .map_err(|e| format!("{e}: NOT restored")),
        );
    }
    for entry in &stale.record.changes {
        let result = Setting::parse(&entry.setting).and_then(|s| {
            s.check_saved(&entry.saved)?;
            s.restore(root, &entry.saved)?;
            Ok(s.current(&entry.saved))
        });
        settings.push(match result {
            Ok(value) => Ok(format!("{} back to {value}", entry.setting)),
            Err(e) => Err(format!("{} NOT restored ({e})", entry.setting)),
        });
    }
    let restored = Restored {
        path: stale.path.clone(),
        settings,
    };
    if restored.complete() {
        let _ = std::fs::remove_file(&stale.path);
    }
    restored
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_directory_others_can_write_or_a_link_is_refused() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            base.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let dir = base.path().join("j");
        assert!(Dir::open(&dir, false).unwrap().is_none());
        Dir::open(&dir, true).unwrap().unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let e = Dir::open(&dir, false).err().unwrap().to_string();
        assert!(e.contains("not 0700"), "{e}");
        let link = base.path().join("l");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = Dir::open(&link, false).err().unwrap().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_written_journal_is_locked_and_not_stale_until_released() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            base.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let dir = Dir::open(&base.path().join("j"), true).unwrap().unwrap();
        let mut saved = BTreeMap::new();
        saved.insert(String::new(), "madvise".to_string());
        let held = dir
            .write(&Record::new(
                vec![Entry {
                    setting: "thp.enabled".into(),
                    saved: Saved(saved),
                }],
                None,
            ))
            .unwrap();
        assert!(
            dir.stale().unwrap().is_empty(),
            "a live journal is left alone"
        );
        let path = held.path().to_path_buf();
        drop(held);
        let stale = dir.stale().unwrap();
        assert_eq!(stale.len(), 1);
        let stale = stale.into_iter().next().unwrap().unwrap();
        assert_eq!(stale.path, path);
        assert_eq!(stale.record.changes[0].saved.0[""], "madvise");
    }
}
