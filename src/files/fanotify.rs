//! The fanotify system calls and the parser of the events they return.
//!
//! Why libc and not a crate: nix 0.31's `sys::fanotify` reads events into a fresh `Vec` per
//! call and skips the information records that follow each event's metadata, but with
//! FAN_REPORT_DFID_NAME those records are the event (the directory's file handle and the
//! entry's name); without them create, delete and move cannot be reported at all. So the three
//! calls (fanotify_init, fanotify_mark, read) are made here through libc, each in a small
//! `unsafe` block, and the returned bytes are parsed by safe code ([`parse`]) that bounds-checks
//! every field and never panics on any input.

use super::bytes::{ne_i32, ne_u16, ne_u32, ne_u64};
use rustix::io::Errno;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Size of the read buffer; big enough for thousands of events per read.
pub const BUF_BYTES: usize = 256 * 1024;

/// Bytes of `struct fanotify_event_metadata`.
const METADATA_LEN: usize = 24;

/// How a group identifies the file of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Parent directory handle plus entry name (FAN_REPORT_DFID_NAME, with the file's own
    /// handle): every letter, including
    /// create, delete and move; needs a filesystem that can encode file handles.
    DirName,
    /// An open file descriptor per event (the original API): read, write, open, close only,
    /// but works on every filesystem.
    Fd,
}

/// One fanotify notification group.
#[derive(Debug)]
pub struct Group {
    fd: OwnedFd,
}

fn init_raw(flags: libc::c_uint) -> io::Result<OwnedFd> {
    // O_NOATIME: tacho's own opens (fd mode) must not change what it watches.
    let event_flags = libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC | libc::O_NOATIME;
    // SAFETY: fanotify_init takes two flag words and returns a new descriptor or -1.
    let fd = unsafe { libc::fanotify_init(flags, event_flags as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Group {
    /// Creates a notification-only group; `unbounded` lifts the 16384-event queue limit.
    pub fn init(mode: Mode, unbounded: bool) -> io::Result<Group> {
        let mut flags = libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK;
        if unbounded {
            flags |= libc::FAN_UNLIMITED_QUEUE;
        }
        let fd = match mode {
            // Paths come from the directory handle and name, but the file's own handle is
            // asked for too (FAN_REPORT_FID, and FAN_REPORT_TARGET_FID for create, delete and
            // move): the kernel merges queued events only when all their records match, so
            // with it two files that had the same name stay two events, and a create stays
            // apart from the open that follows. Kernels before 5.17 lack TARGET_FID.
            Mode::DirName => init_raw(flags | libc::FAN_REPORT_DFID_NAME_TARGET).or_else(|e| {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    init_raw(flags | libc::FAN_REPORT_DFID_NAME | libc::FAN_REPORT_FID)
                } else {
                    Err(e)
                }
            })?,
            Mode::Fd => init_raw(flags)?,
        };
        Ok(Group { fd })
    }

    /// Watches the whole filesystem holding `path` (FAN_MARK_FILESYSTEM) for `mask`.
    pub fn mark_filesystem(&self, path: &Path, mask: u64) -> io::Result<()> {
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let flags = libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM;
        let mask = mask | libc::FAN_ONDIR | libc::FAN_EVENT_ON_CHILD;
        // SAFETY: `cpath` is a valid NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::fanotify_mark(
                self.fd.as_raw_fd(),
                flags,
                mask,
                libc::AT_FDCWD,
                cpath.as_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the queued events into `buf`; `Ok(0)` when none are waiting.
    pub fn read(&self, buf: &mut EventBuf) -> io::Result<usize> {
        let bytes = &mut buf.0[..];
        match rustix::io::read(&self.fd, bytes) {
            Ok(n) => Ok(n),
            Err(Errno::AGAIN | Errno::INTR) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The fanotify descriptor, for poll().
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The read buffer, 8-byte aligned as the kernel's event structures are.
pub struct EventBuf(Box<[u8]>);

impl EventBuf {
    /// An empty buffer big enough for one read of the queue.
    pub fn new() -> EventBuf {
        EventBuf(vec![0u8; BUF_BYTES].into_boxed_slice())
    }

    /// The first `len` bytes, as a read filled them (never past the buffer's end).
    pub fn bytes(&self, len: usize) -> &[u8] {
        &self.0[..len.min(self.0.len())]
    }
}

impl Default for EventBuf {
    fn default() -> Self {
        EventBuf::new()
    }
}

/// A file handle as fanotify reports it: the filesystem id and an opaque handle that
/// `open_by_handle_at` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fid<'a> {
    /// The filesystem's id (`f_fsid` of statfs).
    pub fsid: [u8; 8],
    /// The handle's type, for `open_by_handle_at`.
    pub handle_type: i32,
    /// The handle's bytes, opaque to tacho.
    pub handle: &'a [u8],
}

/// One event as read from the queue, borrowing from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    /// The `FAN_*` bits of what happened.
    pub mask: u64,
    /// Thread group id of the process that caused the event.
    pub pid: i32,
    /// The open file (fd mode); the caller must close it.
    pub fd: Option<RawFd>,
    /// The directory holding the entry, or the directory itself (name ".").
    pub dir: Option<Fid<'a>>,
    /// The entry's name in `dir` (DFID_NAME mode).
    pub name: Option<&'a [u8]>,
}

impl RawEvent<'_> {
    /// True when the kernel's queue overflowed and events were lost.
    pub fn is_overflow(&self) -> bool {
        self.mask & libc::FAN_Q_OVERFLOW != 0
    }

    /// Takes ownership of the event's descriptor so it is closed even if the event is dropped.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        // SAFETY: the kernel opened this descriptor for us with the event; nobody else owns it,
        // and `take` makes sure it is wrapped at most once.
        self.fd.take().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// Why a buffer could not be parsed; the rest of that read is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// An event runs past the end of the bytes read (at this offset).
    #[error("truncated fanotify event at byte {0}")]
    Truncated(usize),
    /// The kernel speaks another metadata version than tacho.
    #[error("fanotify metadata version {0}, expected {expected}", expected = libc::FANOTIFY_METADATA_VERSION)]
    Version(u8),
}

/// Iterates over the events in the first `len` bytes of a read.
pub fn parse(bytes: &[u8]) -> impl Iterator<Item = Result<RawEvent<'_>, ParseError>> {
    let mut offset = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || offset >= bytes.len() {
            return None;
        }
        let result = parse_one(&bytes[offset..], offset);
        match &result {
            Ok((_, len)) => offset += len,
            Err(_) => failed = true,
        }
        Some(result.map(|(event, _)| event))
    })
}

/// Parses the event at the start of `b` (at `offset` in the read); returns it and its length.
fn parse_one(b: &[u8], offset: usize) -> Result<(RawEvent<'_>, usize), ParseError> {
    let truncated = ParseError::Truncated(offset);
    let event_len = ne_u32(b, 0).ok_or(truncated)? as usize;
    let version = *b.get(4).ok_or(truncated)?;
    if version != libc::FANOTIFY_METADATA_VERSION {
        return Err(ParseError::Version(version));
    }
    let metadata_len = ne_u16(b, 6).ok_or(truncated)? as usize;
    if event_len < METADATA_LEN || metadata_len < METADATA_LEN || metadata_len > event_len {
        return Err(truncated);
    }
    let event = b.get(..event_len).ok_or(truncated)?;
    let mask = ne_u64(event, 8).ok_or(truncated)?;
    let fd = ne_i32(event, 16).ok_or(truncated)?;
    let pid = ne_i32(event, 20).ok_or(truncated)?;
    let mut parsed = RawEvent {
        mask,
        pid,
        fd: (fd >= 0).then_some(fd),
        dir: None,
        name: None,
    };
    let mut at = metadata_len;
    while at + 4 <= event_len {
        let info_type = event[at];
        let len = ne_u16(event, at + 2).ok_or(truncated)? as usize;
        if len < 4 || at + len > event_len {
            return Err(truncated);
        }
        let record = &event[at..at + len];
        if matches!(
            info_type,
            libc::FAN_EVENT_INFO_TYPE_DFID_NAME | libc::FAN_EVENT_INFO_TYPE_DFID
        ) {
            let (fid, name) = parse_fid_record(record).ok_or(truncated)?;
            parsed.dir = Some(fid);
            parsed.name = name;
        }
        at += len;
    }
    Ok((parsed, event_len))
}

/// A FID record: header (4), fsid (8), handle_bytes (4), handle_type (4), handle, then for
/// DFID_NAME records a NUL-terminated name (padding after it is zeros).
fn parse_fid_record(record: &[u8]) -> Option<(Fid<'_>, Option<&[u8]>)> {
    let fsid: [u8; 8] = record.get(4..12)?.try_into().ok()?;
    let handle_bytes = ne_u32(record, 12)? as usize;
    let handle_type = ne_i32(record, 16)?;
    let handle = record.get(20..20usize.checked_add(handle_bytes)?)?;
    let rest = &record[20 + handle_bytes..];
    let name = if record[0] == libc::FAN_EVENT_INFO_TYPE_DFID_NAME {
        let end = rest.iter().position(|&c| c == 0)?;
        Some(&rest[..end])
    } else {
        None
    };
    Some((
        Fid {
            fsid,
            handle_type,
            handle,
        },
        name,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Builds the bytes of one event as the kernel lays them out.
    pub(crate) fn event_bytes(mask: u64, pid: i32, fd: i32, fid: Option<(&[u8], &str)>) -> Vec<u8> {
        let mut info = Vec::new();
        if let Some((handle, name)) = fid {
            let mut rec = vec![libc::FAN_EVENT_INFO_TYPE_DFID_NAME, 0, 0, 0];
            rec.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
            rec.extend_from_slice(&(handle.len() as u32).to_ne_bytes());
            rec.extend_from_slice(&1i32.to_ne_bytes());
            rec.extend_from_slice(handle);
            rec.extend_from_slice(name.as_bytes());
            rec.push(0);
            while rec.len() % 4 != 0 {
                rec.push(0);
            }
            let len = rec.len() as u16;
            rec[2..4].copy_from_slice(&len.to_ne_bytes());
            info = rec;
        }
        let total = (METADATA_LEN + info.len()) as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&total.to_ne_bytes());
        b.push(libc::FANOTIFY_METADATA_VERSION);
        b.push(0);
        b.extend_from_slice(&(METADATA_LEN as u16).to_ne_bytes());
        b.extend_from_slice(&mask.to_ne_bytes());
        b.extend_from_slice(&fd.to_ne_bytes());
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&info);
        b
    }

    #[test]
    fn parses_dfid_name_and_fd_events_in_sequence() {
        let mut bytes = event_bytes(libc::FAN_CREATE, 42, -1, Some((&[9; 8], "new.txt")));
        bytes.extend(event_bytes(libc::FAN_MODIFY, 7, 5, None));
        bytes.extend(event_bytes(libc::FAN_Q_OVERFLOW, -1, -1, None));
        let events: Vec<_> = parse(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].pid, 42);
        assert_eq!(events[0].fd, None);
        assert_eq!(events[0].name, Some(&b"new.txt"[..]));
        let dir = events[0].dir.unwrap();
        assert_eq!(dir.handle, &[9; 8]);
        assert_eq!(dir.fsid, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(events[1].fd, Some(5));
        assert_eq!(events[1].dir, None);
        assert!(events[2].is_overflow());
    }

    #[test]
    fn bad_versions_and_truncations_are_errors() {
        let mut bytes = event_bytes(libc::FAN_OPEN, 1, -1, Some((&[1; 8], "x")));
        bytes[4] = 2;
        assert_eq!(parse(&bytes).next(), Some(Err(ParseError::Version(2))));
        let bytes = event_bytes(libc::FAN_OPEN, 1, -1, Some((&[1; 8], "x")));
        let cut = &bytes[..bytes.len() - 3];
        assert!(matches!(
            parse(cut).next(),
            Some(Err(ParseError::Truncated(0)))
        ));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            for event in parse(&bytes) {
                let _ = event;
            }
        }

        #[test]
        fn parse_never_panics_on_damaged_records(
            name in "[a-z.]{0,20}", cut in 0usize..80, flip in 0usize..80, value in any::<u8>()
        ) {
            let mut bytes = event_bytes(libc::FAN_DELETE, 3, -1, Some((&[4; 12], &name)));
            let n = bytes.len();
            bytes[flip % n] = value;
            bytes.truncate(n - cut % n);
            for event in parse(&bytes) {
                let _ = event;
            }
        }
    }
}
