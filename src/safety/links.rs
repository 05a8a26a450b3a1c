//! Resolving a path the way the kernel does, one component at a time, but following a symbolic
//! link only when root or the running user owns it. Another user's link can be re-pointed at
//! any moment (`fs.protected_symlinks` guards only sticky directories, and is off on many
//! servers), so a target reached through one could become a device with data on it.
//!
//! Written by hand: `openat2`'s `RESOLVE_NO_SYMLINKS` refuses every link (including root's
//! `/dev/disk/by-id/…`), and no maintained crate resolves by link owner. Each link is read
//! through the descriptor whose owner was checked, so nothing can swap it between the check
//! and the use.

use rustix::fs::{self, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// The kernel's own limit on links followed in one lookup (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug)]
pub enum Unresolved {
    /// A component could not be opened (missing, not a directory, no permission, …).
    Open(Errno),
    /// The path goes through a link owned by someone else.
    ForeignLink { link: PathBuf, uid: u32 },
    /// More than [`MAX_LINKS`] links, as the kernel's ELOOP.
    TooManyLinks,
}

/// An `O_PATH` descriptor of what `path` names, following only links owned by root or the
/// running user (a link anywhere in the path, the last component included).
pub fn open_trusted(path: &Path) -> Result<OwnedFd, Unresolved> {
    let me = rustix::process::geteuid().as_raw();
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let open_dir = |p: &str| fs::open(p, flags | OFlags::DIRECTORY, Mode::empty());
    let mut cur = open_dir(if path.is_absolute() { "/" } else { "." }).map_err(Unresolved::Open)?;
    // Where we are, as text, to name a refused link.
    let mut walked = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    let mut todo: VecDeque<OsString> = components(path).collect();
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        let next = fs::openat(
            &cur,
            name.as_os_str(),
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(Unresolved::Open)?;
        walked.push(&name);
        let st = fs::fstat(&next).map_err(Unresolved::Open)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            cur = next;
            continue;
        }
        if st.st_uid != 0 && st.st_uid != me {
            return Err(Unresolved::ForeignLink {
                link: walked,
                uid: st.st_uid,
            });
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(Unresolved::TooManyLinks);
        }
        let target = PathBuf::from(OsString::from_vec(
            fs::readlinkat(&next, "", Vec::new())
                .map_err(Unresolved::Open)?
                .into_bytes(),
        ));
        walked.pop();
        if target.is_absolute() {
            cur = open_dir("/").map_err(Unresolved::Open)?;
            walked = PathBuf::from("/");
        }
        for (i, c) in components(&target).enumerate() {
            todo.insert(i, c);
        }
    }
    Ok(cur)
}

/// The names to look up in turn; `.` is skipped, `..` is looked up (physically, as the kernel
/// does after a link).
fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn ino(fd: &OwnedFd) -> u64 {
        fs::fstat(fd).unwrap().st_ino
    }

    #[test]
    fn own_links_are_followed_like_the_kernel_does() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/file"), b"x").unwrap();
        symlink("real", d.join("rel")).unwrap();
        symlink(d.join("real/file"), d.join("abs")).unwrap();
        symlink("rel/../real/./file", d.join("chain")).unwrap();
        let want = std::fs::metadata(d.join("real/file")).unwrap();
        use std::os::unix::fs::MetadataExt;
        for p in ["rel/file", "abs", "chain", "real/../rel/file"] {
            let fd = open_trusted(&d.join(p)).unwrap_or_else(|e| panic!("{p}: {e:?}"));
            assert_eq!(ino(&fd), want.ino(), "{p}");
        }
    }

    #[test]
    fn loops_and_missing_components_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        symlink("b", d.join("a")).unwrap();
        symlink("a", d.join("b")).unwrap();
        assert!(matches!(
            open_trusted(&d.join("a")),
            Err(Unresolved::TooManyLinks)
        ));
        assert!(matches!(
            open_trusted(&d.join("none/x")),
            Err(Unresolved::Open(Errno::NOENT))
        ));
    }
}
