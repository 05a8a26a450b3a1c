//! Where a history may be recorded: a directory no other user can swap, reached without
//! following another user's link, holding a file (and SQLite's `-wal`, `-shm` beside it) of
//! this user's. Everything is checked before anything is created, so a refusal leaves
//! nothing behind.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

/// Links followed while resolving a directory before it is taken for a loop (as the kernel's
/// ELOOP limit).
const MAX_LINKS: usize = 40;

/// Which missing directories above the history file may be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Make {
    /// Every missing level: the default place (`/var/lib/tacho/history`), which is tacho's.
    Chain,
    /// Only the file's own directory: a path the admin typed, where a missing level above it
    /// is a typo to report, not a tree to create as root.
    OwnDirectory,
}

/// The history file `path` names, in a directory that is this user's (or root's) and that
/// only they can write: the directory is created mode 0700 where missing (each level checked
/// as it is made; above the file's own directory only with [`Make::Chain`]), after every
/// existing directory on the way was found safe and every link on the way this user's or
/// root's. A bare file name is in the current directory, checked the same way. Returns the
/// file's path with the links resolved, which SQLite then opens.
pub(super) fn private_file(path: &Path, make: Make) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("{} names no file; pass --history PATH", path.display()))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let me = rustix::process::geteuid().as_raw();
    let (existing, missing) = resolve(dir, me)?;
    if make == Make::OwnDirectory && missing.len() > 1 {
        bail!(
            "{} does not exist (tacho creates only the history's own directory, {}); fix the \
             path, or create {} first",
            existing.join(&missing[0]).display(),
            dir.display(),
            dir.parent().unwrap_or(dir).display()
        );
    }
    let mut real = existing;
    for part in missing {
        real.push(part);
        make_level(&real, me)?;
    }
    let meta = std::fs::symlink_metadata(&real)
        .with_context(|| format!("cannot inspect {}", real.display()))?;
    if !meta.is_dir() || !mine(meta.uid(), me) || meta.mode() & 0o022 != 0 {
        bail!(
            "{} is a link, belongs to another user, or others can write it; the history must \
             live in a private directory: pass --history PATH in one",
            real.display()
        );
    }
    let file = real.join(name);
    check_companions(&file, me)?;
    Ok(file)
}

/// Refuses the history file or SQLite's `-wal`, `-shm` and `-journal` beside it when one
/// exists and is not a regular file of this user: another user's would let them read every
/// sample through their descriptor, or rewrite the log SQLite replays.
fn check_companions(file: &Path, me: u32) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        let name = PathBuf::from(name);
        match std::fs::symlink_metadata(&name) {
            Ok(m) if m.is_file() && m.uid() == me => {}
            Ok(_) => bail!(
                "{} is not a regular file of this user; remove it, or pass --history PATH",
                name.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => bail!(
                "cannot inspect {}: {e}; pass --history PATH",
                name.display()
            ),
        }
    }
    Ok(())
}

/// Walks `dir` from `/`, following links as the kernel would, into the deepest directory
/// that exists (links resolved) and the names still to create below it. Refuses a link that
/// is not this user's or root's (its owner could point it anywhere, `/etc` included) and an
/// existing directory another user could rename or replace.
fn resolve(dir: &Path, me: u32) -> Result<(PathBuf, Vec<OsString>)> {
    let absolute =
        std::path::absolute(dir).with_context(|| format!("cannot inspect {}", dir.display()))?;
    let refuse = |at: &Path, why: &str| {
        anyhow!(
            "{} is reached through {}, {why}; pass --history PATH in a directory only you and \
             root control",
            dir.display(),
            at.display()
        )
    };
    // Components still to walk, the next one last.
    let mut todo: Vec<OsString> = parts(&absolute);
    let mut real = PathBuf::from("/");
    if !safe_dir(&real, me) {
        return Err(refuse(&real, "which another user could change"));
    }
    let mut missing = Vec::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            if missing.pop().is_none() {
                real.pop();
            }
            continue;
        }
        if !missing.is_empty() {
            missing.push(part);
            continue;
        }
        let next = real.join(&part);
        match std::fs::symlink_metadata(&next) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(part),
            Err(e) => bail!(
                "cannot inspect {}: {e}; pass --history PATH",
                next.display()
            ),
            Ok(m) if m.file_type().is_symlink() => {
                if !mine(m.uid(), me) {
                    return Err(refuse(&next, "a link of another user"));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(refuse(&next, "one of too many links"));
                }
                let target = std::fs::read_link(&next)
                    .with_context(|| format!("cannot read the link {}", next.display()))?;
                if target.is_absolute() {
                    real = PathBuf::from("/");
                }
                todo.extend(parts(&target));
            }
            Ok(m) if m.is_dir() => {
                if !safe_dir(&next, me) {
                    return Err(refuse(
                        &next,
                        "which another user could rename or replace (theirs, or writable by \
                         others without the sticky bit)",
                    ));
                }
                real = next;
            }
            Ok(_) => bail!(
                "{} is not a directory; pass --history PATH in a directory",
                next.display()
            ),
        }
    }
    Ok((real, missing))
}

/// The names of `path` after its root, last first (a stack to pop).
fn parts(path: &Path) -> Vec<OsString> {
    path.components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Creates one missing level, mode 0700; an entry that appeared meanwhile is taken only if it
/// is a directory of this user's that no one else can write.
fn make_level(dir: &Path, me: u32) -> Result<()> {
    let made = std::fs::DirBuilder::new().mode(0o700).create(dir);
    if let Err(e) = made
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(anyhow!(e)).with_context(|| {
            format!(
                "cannot create {} for the history; pass --history PATH",
                dir.display()
            )
        });
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot inspect {}", dir.display()))?;
    if !meta.is_dir() || !mine(meta.uid(), me) || meta.mode() & 0o022 != 0 {
        bail!(
            "{} appeared as a link or another user's while it was being made; pass --history \
             PATH in a directory only you and root control",
            dir.display()
        );
    }
    Ok(())
}

/// Whether no other user can swap what `dir` (a directory, not followed) holds: it belongs
/// to this user or root, and others cannot write it, or only as in /tmp (the sticky bit
/// keeps them from renaming entries they do not own).
fn safe_dir(dir: &Path, me: u32) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && mine(m.uid(), me) && (m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0)
    })
}

/// Whether an owner is this user or root, whom the recorder trusts.
fn mine(uid: u32, me: u32) -> bool {
    uid == me || uid == 0
}

/// Whether the filesystem holding `file` has (nearly) no space left for this user: root may
/// use the blocks reserved for it.
pub fn filesystem_full(file: &Path) -> bool {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    rustix::fs::statvfs(dir).is_ok_and(|s| {
        let blocks = if rustix::process::geteuid().is_root() {
            s.f_bfree
        } else {
            s.f_bavail
        };
        blocks.saturating_mul(s.f_frsize) < 1 << 20
    })
}

/// Removes a history file that [`private_file`] found missing and SQLite then created, with
/// its companions, when the history could not start: a refusal leaves nothing behind.
pub(super) fn remove_new(file: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}
