//! A tracer kept loaded for the rest of the boot, so that only the first run pays for its load
//! (aya's parse of the kernel's BTF, the relocations, the verifier: ~45 ms of CPU, most of a
//! short `tacho top`'s). The first run pins its programs and maps in a bpffs, under
//! `/sys/fs/bpf/tacho/NAME`; later runs reopen them, clear what the last run left in the
//! maps and attach the programs again. Between runs nothing is attached, so nothing runs:
//! what stays is the programs and the maps' memory, until reboot or `rm -r /sys/fs/bpf/tacho`.
//! `TACHO_BPF_PIN=0` keeps a run from pinning or reusing anything ([`super::keep_tracer`]).
//!
//! Only where a bpffs is already mounted at /sys/fs/bpf (systemd mounts one at boot): tacho
//! mounts nothing. Only for the runs that ask (`top`; not the recorder, which runs for days).
//! The run using a set holds `flock` on its directory, so a second tacho at the same time
//! loads its own. Among strangers: bpffs's root is world-writable (sticky), so the
//! `tacho` directory is used only when root owns it and nobody else may write to it; inside
//! it, every path goes through the directory's descriptor (`/proc/self/fd/N/…`), never reopened
//! by name. A set is published whole, by renaming its directory into place.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};

use super::sys;

/// `f_type` of a bpffs (include/uapi/linux/magic.h).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Where a bpffs is mounted by convention, and tacho's directory in it.
pub(super) const ROOT: &str = "/sys/fs/bpf";
const DIR: &str = "tacho";

/// Prefix of a set being pinned (renamed into place when whole). bpffs refuses names with a
/// dot.
const NEW: &str = "new-";

/// One set's directory, opened and locked by this run until dropped.
#[derive(Debug)]
pub(super) struct PinDir {
    fd: OwnedFd,
}

/// A kept set: its directory, and the directory holding it.
#[derive(Debug)]
pub(super) struct KeptSet {
    pub(super) dir: PinDir,
    parent: OwnedFd,
    name: CString,
}

/// Where this run's set is.
#[derive(Debug)]
pub(super) enum Slot {
    /// The set was pinned by an earlier run; its lock is now this run's.
    Kept(KeptSet),
    /// No set yet: load, then [`Unpinned::publish`] what was loaded.
    Unpinned(Unpinned),
}

/// A locked, private directory to pin a fresh load into, and the name it will take.
#[derive(Debug)]
pub(super) struct Unpinned {
    parent: OwnedFd,
    dir: PinDir,
    tmp: CString,
    name: CString,
}

/// The slot of the set `name` (one object with its settings: see [`set_name`]), or `None`
/// where sets cannot be kept (no bpffs, a directory someone else could write to, another run
/// using the set): the caller then loads for this run only.
pub(super) fn open(root: &Path, name: &str) -> Option<Slot> {
    let parent = tacho_dir(root).ok()?;
    let cname = CString::new(name).ok()?;
    match open_locked(&parent, &cname) {
        Ok(Some(dir)) => {
            return Some(Slot::Kept(KeptSet {
                dir,
                parent,
                name: cname,
            }));
        }
        // In use by another run.
        Ok(None) => return None,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(_) => return None,
    }
    let tmp = CString::new(format!("{NEW}{}-{name}", std::process::id())).ok()?;
    // Left by a run of the same pid that died while pinning (bpffs lives for the boot).
    remove_set(&parent, &tmp);
    rustix::fs::mkdirat(&parent, tmp.as_c_str(), Mode::RWXU).ok()?;
    let Ok(Some(dir)) = open_locked(&parent, &tmp) else {
        remove_set(&parent, &tmp);
        return None;
    };
    Some(Slot::Unpinned(Unpinned {
        parent,
        dir,
        tmp,
        name: cname,
    }))
}

/// The name of the set for `label`'s `object` loaded with these settings: a digest of all of
/// them, so a set is reused only by a run that would load exactly the same programs.
pub(super) fn set_name(label: &str, object: &[u8], settings: &[&str]) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(object);
    for s in settings {
        hash.update((s.len() as u64).to_le_bytes());
        hash.update(s.as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{label}-{hex}")
}

/// ROOT/tacho, made if missing, when `root` (/sys/fs/bpf but in tests) is a bpffs and the
/// directory is root's alone.
fn tacho_dir(root: &Path) -> io::Result<OwnedFd> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root = rustix::fs::open(root, dir_flags, Mode::empty())?;
    if rustix::fs::fstatfs(&root)?.f_type != BPF_FS_MAGIC {
        return Err(io::Error::other("not a bpffs"));
    }
    match rustix::fs::mkdirat(&root, DIR, Mode::RWXU) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::EXIST => {}
        Err(e) => return Err(e.into()),
    }
    let dir = rustix::fs::openat(&root, DIR, dir_flags, Mode::empty())?;
    root_only(&dir)?;
    Ok(dir)
}

/// Refuses a directory another user owns or may write to: its entries could be theirs.
fn root_only(dir: &OwnedFd) -> io::Result<()> {
    let st = rustix::fs::fstat(dir)?;
    if st.st_uid != 0 || st.st_mode & 0o022 != 0 {
        return Err(io::Error::other("not root's alone"));
    }
    Ok(())
}

/// The directory `name` in `parent`, opened and locked; `None` when another run holds it.
fn open_locked(parent: &OwnedFd, name: &CString) -> io::Result<Option<PinDir>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name.as_c_str(), flags, Mode::empty())?;
    root_only(&fd)?;
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(PinDir { fd })),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl PinDir {
    /// The path of entry `name` through this directory's descriptor, which nobody can swap.
    fn path(&self, name: &str) -> io::Result<CString> {
        CString::new(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
            .map_err(io::Error::other)
    }

    /// The object pinned as `name`.
    pub(super) fn get(&self, name: &str) -> io::Result<OwnedFd> {
        sys::obj_get(&self.path(name)?)
    }

    fn pin(&self, name: &str, object: BorrowedFd<'_>) -> io::Result<()> {
        sys::obj_pin(&self.path(name)?, object)
    }

    /// Unpins everything in the directory (the objects live on while something holds them).
    fn empty(&self) {
        let Ok(entries) = rustix::fs::Dir::read_from(&self.fd) else {
            return;
        };
        let names: Vec<CString> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect();
        for n in names {
            let _ = rustix::fs::unlinkat(&self.fd, n.as_c_str(), AtFlags::empty());
        }
    }

    /// Unpins everything and removes the directory, `name` in `parent`: this run holds its
    /// lock.
    fn remove(self, parent: &OwnedFd, name: &CString) {
        self.empty();
        let _ = rustix::fs::unlinkat(parent, name.as_c_str(), AtFlags::REMOVEDIR);
    }
}

impl KeptSet {
    /// Removes a set that could not be reused (the kernel refused it, or it lacked an
    /// object), so the next run loads and pins afresh.
    pub(super) fn discard(self) {
        self.dir.remove(&self.parent, &self.name);
    }
}

impl Unpinned {
    /// Pins `objects` (name, program or map) and puts the set in place for later runs; returns
    /// the set's directory, whose lock this run keeps. Pinning is an optimisation: on any
    /// failure nothing is left behind and `None` says the run goes on with what it loaded.
    pub(super) fn publish(self, objects: &[(String, BorrowedFd<'_>)]) -> Option<PinDir> {
        let pinned = objects
            .iter()
            .try_for_each(|(name, fd)| self.dir.pin(name, *fd));
        let placed = pinned.and_then(|()| {
            rustix::fs::renameat(&self.parent, self.tmp.as_c_str(), &self.parent, &self.name)
                .map_err(io::Error::from)
        });
        if placed.is_err() {
            // Includes losing a race to another run that published the same set first.
            self.dir.remove(&self.parent, &self.tmp);
            return None;
        }
        prune(&self.parent, &self.name);
        Some(self.dir)
    }
}

/// Unpins and removes the set `name` of `parent` unless a run holds it.
fn remove_set(parent: &OwnedFd, name: &CString) {
    if let Ok(Some(dir)) = open_locked(parent, name) {
        dir.remove(parent, name);
    }
}

/// Removes the sets of the same object other than `keep` that no run holds: those of other
/// tacho builds or settings, and pins left half-made by a run that died. One set per object
/// then stays.
fn prune(parent: &OwnedFd, keep: &CString) {
    let keep = keep.as_bytes();
    // The object's label, with its dash: what precedes the digest.
    let label = &keep[..=keep.iter().rposition(|&b| b == b'-').unwrap_or(0)];
    let Ok(entries) = rustix::fs::Dir::read_from(parent) else {
        return;
    };
    let names: Vec<CString> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_owned())
        .filter(|n| {
            let b = n.as_bytes();
            b != keep && (b.starts_with(label) || b.starts_with(NEW.as_bytes()))
        })
        .collect();
    for name in names {
        remove_set(parent, &name);
    }
}
