//! Files to remove when a run is abandoned: a third Ctrl-C (or SIGTERM, SIGHUP) exits from the
//! signal handler at once, without unwinding, so the drops that remove a test file never
//! run. What is registered here is removed by that handler first.
//!
//! The handler may only make async-signal-safe calls: entries are fixed slots of atomics
//! holding a directory descriptor and a C string the registrant leaked (a few bytes, a few
//! times per process, so a handler on another thread never reads a freed name), removed with
//! `unlinkat` only, and a file only while its name still names the inode registered.

use std::ffi::{CString, c_char};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, Ordering};

/// More than any command registers (a test file; an hdd directory and its workers' files).
const SLOTS: usize = 64;
/// A slot's `dir` when it is free, and while it is being filled.
const FREE: i32 = -1;
const FILLING: i32 = -2;

struct Slot {
    dir: AtomicI32,
    name: AtomicPtr<c_char>,
    /// `AT_REMOVEDIR` for a directory (removed after the files), 0 for a file.
    flags: AtomicI32,
    /// The file's device and inode; 0 and 0 for a name inside tacho's own private directory,
    /// which needs no check (nobody else can put anything there).
    dev: AtomicU64,
    ino: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    dir: AtomicI32::new(FREE),
    name: AtomicPtr::new(std::ptr::null_mut()),
    flags: AtomicI32::new(0),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
};
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// What to remove from `dir` when abandoned.
#[derive(Debug, Clone, Copy)]
pub enum Entry {
    /// A file, removed only while its name is this inode: `(st_dev, st_ino)`.
    File(u64, u64),
    /// A file in a directory only tacho can write.
    PrivateFile,
    /// An (emptied) directory.
    Directory,
}

/// A registration; dropping it unregisters. The directory descriptor must stay open until then.
#[derive(Debug)]
pub struct Registered(usize);

impl Drop for Registered {
    fn drop(&mut self) {
        TABLE[self.0].dir.store(FREE, Ordering::SeqCst);
    }
}

/// Registers `name` in `dir` for removal if the run is abandoned; `None` when every slot is
/// taken or the name holds a NUL (then the next run's stale-file check is what removes it).
pub fn register(dir: BorrowedFd<'_>, name: &str, entry: Entry) -> Option<Registered> {
    let name = CString::new(name).ok()?;
    let slot = TABLE.iter().position(|s| {
        s.dir
            .compare_exchange(FREE, FILLING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })?;
    let s = &TABLE[slot];
    // Leaked on purpose: see the module's comment.
    s.name.store(name.into_raw(), Ordering::SeqCst);
    let (flags, dev, ino) = match entry {
        Entry::File(dev, ino) => (0, dev, ino),
        Entry::PrivateFile => (0, 0, 0),
        Entry::Directory => (libc::AT_REMOVEDIR, 0, 0),
    };
    s.flags.store(flags, Ordering::SeqCst);
    s.dev.store(dev, Ordering::SeqCst);
    s.ino.store(ino, Ordering::SeqCst);
    s.dir.store(dir.as_raw_fd(), Ordering::SeqCst);
    Some(Registered(slot))
}

/// Removes everything registered: files first, then directories. Called from a signal
/// handler: atomics and system calls only. The run's other threads go on until the process
/// exits, so a worker may make its file again between the two passes and leave a directory
/// not empty: the passes are repeated while one is, a bounded number of times.
pub fn remove_all() {
    for _ in 0..ROUNDS {
        if !remove_once() {
            return;
        }
    }
}

/// Rounds of [`remove_all`] at most: a worker makes its file once per file it writes, so a
/// second round nearly always finds the directory empty.
const ROUNDS: usize = 64;

/// One round of [`remove_all`]; true when a directory was left because it was not empty.
fn remove_once() -> bool {
    let mut not_empty = false;
    for pass in [0, libc::AT_REMOVEDIR] {
        for s in &TABLE {
            let dir = s.dir.load(Ordering::SeqCst);
            let name = s.name.load(Ordering::SeqCst);
            if dir < 0 || name.is_null() || s.flags.load(Ordering::SeqCst) != pass {
                continue;
            }
            let (dev, ino) = (s.dev.load(Ordering::SeqCst), s.ino.load(Ordering::SeqCst));
            if (dev, ino) != (0, 0) {
                // SAFETY: a zeroed stat (plain integers) is valid.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: `name` is a leaked, never freed C string; `st` a valid out-pointer.
                let ok = unsafe { libc::fstatat(dir, name, &mut st, libc::AT_SYMLINK_NOFOLLOW) };
                if ok != 0 || (st.st_dev, st.st_ino) != (dev, ino) {
                    continue;
                }
            }
            // SAFETY: `name` as above; unlinkat is async-signal-safe.
            let failed = unsafe { libc::unlinkat(dir, name, pass) } != 0;
            // Reading errno is async-signal-safe.
            let errno = std::io::Error::last_os_error().raw_os_error();
            not_empty |= failed && pass == libc::AT_REMOVEDIR && errno == Some(libc::ENOTEMPTY);
        }
    }
    not_empty
}
