//! Watching: set up the fanotify groups and marks, then read, filter and write events until
//! the time is up or a signal arrives.
//!
//! Two groups at most: one that names files by directory handle and entry name (every letter,
//! including create, delete and move), and, for filesystems that cannot encode file handles,
//! one that gets an open descriptor per event (read, write, open and close only).

use super::Shown;
use super::fanotify::{self, EventBuf, Group, Mode};
use super::filter::{Filter, FilterSpec};
use super::inode_paths::FileId;
use super::ops::{Op, Ops};
use super::proc_events::{ProcEvent, ProcEvents};
use super::procs::Comms;
use super::resolve::{self, Resolver};
use super::summary::Summary;
use crate::kernel::SysRoot;
use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Longest wait in poll, so signals and the deadline are noticed promptly.
const POLL_MS: u64 = 200;
/// How long to wait after a read before polling again, so a storm of events is read a
/// millisecond's worth at a time instead of waking tacho for each few: waking cost more CPU
/// than everything else done per event. Events queued meanwhile for the same file by the same
/// process merge into one line, as they do whenever the reader is behind; none is lost (the
/// queue holds 16,384 events, or is unbounded with --unbounded-queue).
const GATHER: Duration = Duration::from_millis(1);
/// How long the events queued before a stop may take to read and print.
const FINAL_DRAIN: Duration = Duration::from_secs(2);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(
        "tacho files needs root (CAP_SYS_ADMIN to watch whole filesystems with fanotify, \
         CAP_DAC_READ_SEARCH to turn file handles into paths); run it with sudo"
    )]
    NeedPrivilege,
    #[error("cannot watch {}: {reason}", path.display())]
    Mark { path: PathBuf, reason: String },
    #[error("fanotify is not available: {0} (the kernel needs CONFIG_FANOTIFY)")]
    Init(io::Error),
    #[error("cannot read fanotify events: {0}")]
    Read(io::Error),
    #[error("cannot understand fanotify events: {0} (a kernel newer than this tacho?)")]
    Format(#[from] fanotify::ParseError),
    #[error("cannot write events: {0}")]
    Write(#[from] io::Error),
}

/// What to watch and how to report it.
#[derive(Clone)]
pub struct WatchConfig {
    /// Mount points whose filesystems are watched.
    pub mounts: Vec<PathBuf>,
    pub filter: FilterSpec,
    pub duration: Option<Duration>,
    pub unbounded_queue: bool,
}

/// Where events go.
pub struct Sink<E> {
    /// The event stream; `None` when only the summary is wanted.
    pub events: Option<E>,
    pub summary: Option<Summary>,
    /// The path of each file shown, by device and inode, when bytes are counted beside the
    /// watch (the byte tracer knows files by inode; a file written and closed between its
    /// looks at /proc/PID/fd is named from here).
    pub inodes: Option<Names>,
}

/// Paths of the files a watch showed, by device and inode (see [`Sink::inodes`]).
#[derive(Debug, Default)]
pub struct Names {
    by_inode: HashMap<FileId, PathBuf>,
    /// Names already looked up: a write storm to one file is one lookup, not one per event.
    seen: std::collections::HashSet<PathBuf>,
}

impl Names {
    /// Notes the inode behind an event's path: from the event's descriptor when it has one,
    /// else by looking the name up without following a final symlink (nothing is opened) --
    /// once per name, again only when an event may have put a new file there.
    fn learn(&mut self, path: &Path, fd: Option<&OwnedFd>, ops: Ops) {
        let renewed = ops.contains(Op::Create) || ops.contains(Op::MovedTo);
        let st = match fd {
            Some(fd) => rustix::fs::fstat(fd),
            None if renewed || !self.seen.contains(path) => rustix::fs::lstat(path),
            None => return,
        };
        self.seen.insert(path.to_path_buf());
        if let Ok(st) = st {
            let dev = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
            self.by_inode.insert((dev, st.st_ino), path.to_path_buf());
        }
    }

    /// The path of a file, by (device, inode).
    pub fn get(&self, id: &FileId) -> Option<&PathBuf> {
        self.by_inode.get(id)
    }
}

/// Receives the events a watch shows, as it reads them (a renderer in `report::files`).
pub trait Events {
    /// One event that passed the filters.
    fn event(&mut self, e: &Shown<'_>) -> io::Result<()>;
    /// The kernel's queue overflowed at `time`: events were lost there.
    fn overflow(&mut self, time: SystemTime) -> io::Result<()>;
    /// Pushes out what is buffered, after each batch.
    fn flush(&mut self) -> io::Result<()>;
}

/// The watch after it ended.
#[derive(Debug, Default)]
pub struct Outcome {
    pub elapsed: Duration,
    /// Events read from the kernel, before filtering (tacho's own included).
    pub events_read: u64,
    pub events_shown: u64,
    /// Overflow notices; at least this many events were lost (the kernel does not count them).
    pub overflows: u64,
    /// Events the kernel dropped because it could not open their file for tacho (descriptor
    /// mode only; e.g. some /proc files refuse to be opened).
    pub undeliverable: u64,
    pub interrupted: bool,
}

/// A ready-to-run watch: groups created, filesystems marked.
pub struct Watcher {
    groups: Vec<Group>,
    resolver: Resolver,
    filter: Filter,
    comms: Comms,
    duration: Option<Duration>,
    /// Fork and name notifications, where the kernel provides them.
    proc_events: Option<ProcEvents>,
    /// Filesystems watched, and notes about those watched with fewer letters or not at all.
    pub watching: Vec<String>,
    pub notes: Vec<String>,
}

/// Privilege errors are the same whichever call meets them.
fn privileged(e: io::Error, otherwise: impl FnOnce(io::Error) -> WatchError) -> WatchError {
    if e.raw_os_error() == Some(libc::EPERM) {
        WatchError::NeedPrivilege
    } else {
        otherwise(e)
    }
}

/// Sets up the groups mount by mount: by handle where the filesystem allows, else by
/// descriptor (created on first need).
struct Marks {
    ops: Ops,
    unbounded: bool,
    dir_group: Option<Group>,
    fd_group: Option<Group>,
    resolver: Resolver,
    watching: Vec<String>,
    notes: Vec<String>,
}

impl Marks {
    fn new(ops: Ops, unbounded: bool) -> Result<Marks, WatchError> {
        let dir_group = match Group::init(Mode::DirName, unbounded) {
            Ok(g) => Some(g),
            // EINVAL: a kernel older than 5.9 without FAN_REPORT_DFID_NAME.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
            Err(e) => return Err(privileged(e, WatchError::Init)),
        };
        Ok(Marks {
            ops,
            unbounded,
            dir_group,
            fd_group: None,
            resolver: Resolver::new(),
            watching: Vec::new(),
            notes: Vec::new(),
        })
    }

    fn mark(&mut self, mount: &Path) -> Result<(), WatchError> {
        if let Some(group) = &self.dir_group {
            match group.mark_filesystem(mount, self.ops.mask()) {
                Ok(()) => {
                    if let Err(e) = self.resolver.add_mount(mount) {
                        let note = format!("{}: paths not resolvable: {e}", mount.display());
                        self.notes.push(note);
                    }
                    self.watching.push(mount.display().to_string());
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    return Err(WatchError::NeedPrivilege);
                }
                Err(_) => {} // no file handles on this filesystem: descriptors below
            }
        }
        let fd_mask = self
            .ops
            .iter()
            .filter(|op| !Ops::DIRENT.contains(*op))
            .fold(0, |m, op| m | op.mask());
        if fd_mask == 0 {
            self.notes.push(format!(
                "{}: not watched (it cannot report create, delete or move)",
                mount.display()
            ));
            return Ok(());
        }
        if self.fd_group.is_none() {
            let group = Group::init(Mode::Fd, self.unbounded)
                .map_err(|e| privileged(e, WatchError::Init))?;
            self.fd_group = Some(group);
        }
        let group = self.fd_group.as_ref().expect("created above");
        match group.mark_filesystem(mount, fd_mask) {
            Ok(()) => {
                if self.ops.intersects(Ops::DIRENT) {
                    self.notes.push(format!(
                        "{}: only R W O C (this filesystem cannot report create, delete or move)",
                        mount.display()
                    ));
                }
                self.watching.push(mount.display().to_string());
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(WatchError::NeedPrivilege),
            Err(e) => {
                self.notes
                    .push(format!("{}: not watched: {e}", mount.display()));
                Ok(())
            }
        }
    }
}

impl Watcher {
    pub fn new(root: &SysRoot, config: WatchConfig) -> Result<Watcher, WatchError> {
        let filter = Filter::new(config.filter, root.clone());
        let ops = filter.ops();
        let mut marks = Marks::new(ops, config.unbounded_queue)?;
        for mount in &config.mounts {
            marks.mark(mount)?;
        }
        let Marks {
            dir_group,
            fd_group,
            mut resolver,
            watching,
            mut notes,
            ..
        } = marks;
        if watching.is_empty() {
            let path = config.mounts.first().cloned().unwrap_or_default();
            let reason = notes
                .pop()
                .unwrap_or_else(|| "no filesystem to watch".into());
            return Err(WatchError::Mark { path, reason });
        }
        // Every directory move and delete reaches the handle group, so its path cache can
        // outlive a batch (see Watcher::batch).
        if ops.contains(Op::MovedFrom) && ops.contains(Op::Delete) {
            resolver.keep_across_batches();
        }
        let proc_events = ProcEvents::subscribe()
            .inspect_err(|e| {
                if filter.follows_children() {
                    notes.push(format!(
                        "--children: no fork notifications ({e}); children that exit before \
                         their events are read may be missed"
                    ));
                }
            })
            .ok();
        Ok(Watcher {
            groups: dir_group.into_iter().chain(fd_group).collect(),
            proc_events,
            resolver,
            filter,
            comms: Comms::new(root.clone()),
            duration: config.duration,
            watching,
            notes,
        })
    }

    /// Reads events until the deadline or `stop`; writes them to `sink`.
    pub fn run<E: Events>(
        &mut self,
        sink: &mut Sink<E>,
        stop: &Arc<AtomicBool>,
    ) -> Result<Outcome, WatchError> {
        let start = Instant::now();
        let deadline = self.duration.map(|d| start + d);
        let mut buf = EventBuf::new();
        let mut outcome = Outcome::default();
        let mut pollfds: Vec<libc::pollfd> = self
            .groups
            .iter()
            .map(|g| libc::pollfd {
                fd: g.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        loop {
            if stop.load(Ordering::Relaxed) {
                outcome.interrupted = true;
                // What was queued before Ctrl-C happened before it: show it too.
                self.drain_queued(&mut buf, sink, &mut outcome)?;
                break;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            let wait = deadline
                .map(|d| d - now)
                .unwrap_or(Duration::MAX)
                .min(Duration::from_millis(POLL_MS));
            // Round up so a wait under 1 ms does not become a busy loop.
            let wait_ms = wait.as_micros().div_ceil(1000) as libc::c_int;
            // SAFETY: `pollfds` is a valid array of `len` pollfd structs for the call.
            let n =
                unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms) };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(WatchError::Read(err));
            }
            for (i, pollfd) in pollfds.iter().enumerate() {
                if pollfd.revents & libc::POLLIN != 0 {
                    // Drain this group fully before polling again.
                    loop {
                        let Some(len) = self.read_group(i, &mut buf, &mut outcome)? else {
                            continue;
                        };
                        if len == 0 {
                            break;
                        }
                        self.batch(buf.bytes(len), sink, &mut outcome)?;
                        // A read that left room for more events emptied the queue; skip the
                        // read that would only say so.
                        if stop.load(Ordering::Relaxed) || len < fanotify::BUF_BYTES / 2 {
                            break;
                        }
                    }
                }
            }
            if let Some(out) = sink.events.as_mut() {
                out.flush()?;
            }
            if n > 0 {
                // Let a storm's next events gather before the next read: one wake-up per
                // millisecond rather than per event (docs/benchmarks.md, "files vs fatrace").
                std::thread::sleep(GATHER);
            }
        }
        outcome.elapsed = start.elapsed();
        if let Some(out) = sink.events.as_mut() {
            out.flush()?;
        }
        Ok(outcome)
    }

    /// One read of group `i`: `Some(bytes)` (0 when its queue is empty), or `None` for an
    /// event the kernel could not deliver (counted, and said once).
    fn read_group(
        &self,
        i: usize,
        buf: &mut EventBuf,
        outcome: &mut Outcome,
    ) -> Result<Option<usize>, WatchError> {
        match self.groups[i].read(buf) {
            Ok(len) => Ok(Some(len)),
            Err(e) if is_fatal(&e) => Err(WatchError::Read(e)),
            Err(e) => {
                outcome.undeliverable += 1;
                if outcome.undeliverable == 1 {
                    eprintln!(
                        "tacho: note: the kernel could not open a file to report an event \
                         ({e}); such events are skipped"
                    );
                }
                Ok(None)
            }
        }
    }

    /// Reads what every group has queued, once tacho was asked to stop: bounded in time, so
    /// a system that keeps producing events cannot keep tacho from exiting.
    fn drain_queued<E: Events>(
        &mut self,
        buf: &mut EventBuf,
        sink: &mut Sink<E>,
        outcome: &mut Outcome,
    ) -> Result<(), WatchError> {
        let until = Instant::now() + FINAL_DRAIN;
        for i in 0..self.groups.len() {
            while Instant::now() < until {
                match self.read_group(i, buf, outcome)? {
                    None => continue,
                    Some(0) => break,
                    Some(len) => self.batch(buf.bytes(len), sink, outcome)?,
                }
            }
        }
        Ok(())
    }

    /// Handles one read's worth of events.
    fn batch<E: Events>(
        &mut self,
        bytes: &[u8],
        sink: &mut Sink<E>,
        outcome: &mut Outcome,
    ) -> Result<(), WatchError> {
        let time = SystemTime::now();
        // Every fork and exec behind the events just read has been notified by now.
        if let Some(proc_events) = self.proc_events.as_mut() {
            let (filter, comms) = (&mut self.filter, &mut self.comms);
            proc_events.drain(|e| match e {
                ProcEvent::Fork { parent, child } => {
                    filter.note_fork(parent, child);
                    comms.note_fork(parent, child);
                }
                ProcEvent::Exec { pid } => comms.forget(pid),
                ProcEvent::Comm { pid, name } => comms.note(pid, name),
            });
        }
        self.resolver.new_batch();
        self.comms.new_batch();
        for parsed in fanotify::parse(bytes) {
            // Events the parser does not understand mean a kernel format tacho does not know;
            // stopping beats guessing (and leaking the descriptors of unparsed events).
            let mut event = parsed.map_err(WatchError::Format)?;
            let fd = event.take_fd();
            if event.is_overflow() {
                outcome.overflows += 1;
                if outcome.overflows == 1 {
                    eprintln!(
                        "tacho: warning: the kernel's event queue overflowed and dropped events; \
                         try --unbounded-queue, --mount for fewer filesystems, or --ops"
                    );
                }
                if let Some(out) = sink.events.as_mut() {
                    out.overflow(time)?;
                }
                continue;
            }
            outcome.events_read += 1;
            if event.mask & libc::FAN_ONDIR != 0
                && event.mask & (libc::FAN_MOVED_FROM | libc::FAN_DELETE) != 0
            {
                self.resolver.invalidate();
            }
            let ops = Ops::from_mask(event.mask);
            if !self.filter.pass_pid_ops(event.pid, ops) {
                continue;
            }
            let comm = self.comms.get(event.pid);
            if self.filter.needs_comm() && !self.filter.pass_comm(comm) {
                continue;
            }
            let path = match (&event.dir, &fd) {
                (Some(dir), _) => self.resolver.path_of_dir_entry(dir, event.name),
                (None, Some(fd)) => path_of_descriptor(fd),
                (None, None) => PathBuf::from("(unknown)"),
            };
            if !self.filter.pass_path(&path) {
                continue;
            }
            if let Some(inodes) = sink.inodes.as_mut() {
                inodes.learn(&path, fd.as_ref(), ops);
            }
            let shown = Shown {
                time,
                pid: event.pid,
                comm,
                ops,
                path: &path,
            };
            outcome.events_shown += 1;
            if let Some(out) = sink.events.as_mut() {
                out.event(&shown)?;
            }
            if let Some(summary) = sink.summary.as_mut() {
                summary.add(&shown);
            }
        }
        Ok(())
    }
}

/// Read errors that mean the group itself is broken. Any other error comes from opening the
/// file of one event in descriptor mode: that event is lost, the next read goes on.
fn is_fatal(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBADF | libc::EFAULT))
}

fn path_of_descriptor(fd: &OwnedFd) -> PathBuf {
    resolve::path_of_fd(fd).unwrap_or_else(|_| PathBuf::from("(unknown)"))
}

/// Mount points of the filesystems worth watching by default: those backed by a device or
/// file (a source path that exists), as fatrace chooses them; proc, sysfs, tmpfs and the like
/// are left out (they cause no disk I/O). One mount point per filesystem.
pub fn default_mounts(root: &SysRoot) -> crate::kernel::Result<Vec<PathBuf>> {
    let mounts = crate::kernel::mounts::read_mounts(root)?;
    let mut chosen: Vec<PathBuf> = Vec::new();
    let mut seen = Vec::new();
    for m in mounts {
        let real = m
            .source
            .as_deref()
            .is_some_and(|s| s.starts_with('/') && Path::new(s).exists())
            || m.fs_type == "zfs";
        let id = (m.major, m.minor, m.source.clone());
        if real && !seen.contains(&id) {
            seen.push(id);
            chosen.push(m.mount_point);
        }
    }
    Ok(chosen)
}

/// Mount points of the real filesystems that can hold files under `prefixes`: the mount
/// containing each prefix, and every real mount below one.
pub fn mounts_for_paths(
    root: &SysRoot,
    prefixes: &[PathBuf],
) -> crate::kernel::Result<Vec<PathBuf>> {
    let real = default_mounts(root)?;
    let all = crate::kernel::mounts::read_mounts(root)?;
    let mut chosen: Vec<PathBuf> = Vec::new();
    for prefix in prefixes {
        let holder =
            crate::kernel::mounts::mount_containing(&all, prefix).map(|m| m.mount_point.clone());
        let below = real.iter().filter(|m| m.starts_with(prefix)).cloned();
        for m in holder.into_iter().chain(below) {
            if !chosen.contains(&m) {
                chosen.push(m);
            }
        }
    }
    Ok(chosen)
}
