//! Exit accounting over taskstats (generic netlink): when a task exits, the kernel sends its
//! final CPU time and I/O bytes to every listener registered for its CPU. That keeps the
//! bytes of a `dd` that ends between two samples, which /proc no longer has.
//!
//! Hand-written on libc like the proc connector (`crate::files::proc_events`): the messages
//! are three fixed layouts, and the netlink crates (`neli`, `netlink-packet-generic`) have no
//! taskstats support, so a dependency would still leave the decoding here. Every field is
//! read with bounds checks at the offsets of `struct taskstats` (linux/taskstats.h, which
//! only ever grows). Registering needs CAP_NET_ADMIN; without it tacho says so in a note.

use rustix::net::{
    self, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType, netlink, sockopt,
    sockopt::Timeout,
};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NLMSG_HDR: usize = 16;
const GENL_HDR: usize = 4;
const NLMSG_ERROR: u16 = 2;
const GENL_ID_CTRL: u16 = 16;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_TYPE_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

// Offsets in struct taskstats (x86-64 and every 64-bit ABI: the struct is 8-aligned).
const OFF_COMM: usize = 80;
const COMM_LEN: usize = 32;
const OFF_PID: usize = 128;
const OFF_PPID: usize = 132;
const OFF_UTIME_US: usize = 152;
const OFF_STIME_US: usize = 160;
const OFF_MAJFLT: usize = 176;
const OFF_READ_BYTES: usize = 248;
const OFF_WRITE_BYTES: usize = 256;
const OFF_CANCELLED: usize = 264;
/// `ac_tgid` arrived in version 10 of the struct; older kernels' records are per thread
/// only, and the thread id stands in for the process.
const OFF_TGID: usize = 368;

/// The final counters of one exited task (a thread, or a whole single-threaded process).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ExitedTask {
    /// The process (thread group) it belonged to.
    pub tgid: u32,
    /// The task itself.
    pub tid: u32,
    /// Its parent process, which has these bytes added to its own /proc/PID/io when it
    /// reaps it.
    pub ppid: u32,
    /// Its command name, invalid UTF-8 as U+FFFD.
    pub comm: String,
    /// The name's exact bytes in hex when they are not UTF-8 (see [`crate::text`]).
    pub comm_hex: Option<String>,
    /// User CPU time, microseconds.
    pub utime_us: u64,
    /// System CPU time, microseconds.
    pub stime_us: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Bytes it caused to be read from storage.
    pub read_bytes: u64,
    /// Bytes it caused to be written to storage.
    pub write_bytes: u64,
    /// Written bytes cancelled by truncation.
    pub cancelled_write_bytes: u64,
}

/// CPUs the kernel may run tasks on (configured, online or not), for the registration mask.
pub fn configured_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// A registration for exit records of tasks on every CPU, read continuously by a thread of
/// its own: the kernel drops records once the socket's buffer is full, and an exit storm (a
/// build, a shell loop) fills even 4 MiB within a second or two on a busy machine, where the
/// sampler itself may run late. [`ExitListener::drain`] also reads whatever the socket holds
/// then: under CPU load the thread may not have run since a process exited, and a sample
/// that missed the exit of a process gone from its scan would count the process's whole
/// life again in the next (issue 29).
#[derive(Debug)]
pub struct ExitListener {
    reader: Arc<Mutex<Reader>>,
    stop: Arc<AtomicBool>,
}

/// Records kept between two drains at most (~100 MB): beyond, they are dropped and counted.
const MAX_KEPT: usize = 1 << 20;

/// The exits gathered by the reader thread since the last drain, and whether records were lost.
#[derive(Debug, Default)]
pub struct Drained {
    /// One record per exited task (thread), in the order the kernel sent them.
    pub tasks: Vec<ExitedTask>,
    /// Times records were dropped (the socket overran, or too many waited): the kernel only
    /// says that some were, not how many.
    pub overruns: u64,
}

/// The socket and what has been read from it, under one lock: a datagram is only ever
/// received with the lock held, so none is between the socket and `drained` when a drain
/// takes them.
#[derive(Debug)]
struct Reader {
    socket: Socket,
    drained: Drained,
    /// The socket is unusable; reading stops (the note about lost records would never end).
    broken: bool,
}

impl Reader {
    /// Receives every datagram queued now, without waiting.
    fn catch_up(&mut self) {
        let mut batch = Vec::new();
        while !self.broken {
            let overran = match self.socket.recv_now() {
                Ok(n) => {
                    parse_exits(&self.socket.buf[..n], &mut batch);
                    false
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.broken = true;
                    break;
                }
            };
            let c = &mut self.drained;
            let room = MAX_KEPT.saturating_sub(c.tasks.len());
            if batch.len() > room {
                batch.truncate(room);
                c.overruns += 1;
            }
            c.tasks.append(&mut batch);
            c.overruns += u64::from(overran);
        }
    }
}

impl ExitListener {
    /// Registers for exits on CPUs `0..cpus` and starts the reader thread; an error says why
    /// not (no root, no CONFIG_TASKSTATS).
    pub fn register(cpus: usize) -> io::Result<ExitListener> {
        let mut socket = Socket::open()?;
        let family = socket.family_id()?;
        let mask = format!("0-{}\0", cpus.max(1) - 1);
        socket.request(
            family,
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_REGISTER_CPUMASK,
            mask.as_bytes(),
            SEQ_REGISTER,
        )?;
        socket.ack(SEQ_REGISTER)?;
        let fd = Arc::clone(&socket.fd);
        let reader = Arc::new(Mutex::new(Reader {
            socket,
            drained: Drained::default(),
            broken: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (into, stopped) = (Arc::clone(&reader), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("tacho-exits".into())
            .spawn(move || read_until(&fd, &stopped, &into))?;
        Ok(ExitListener { reader, stop })
    }

    /// Every exit recorded since the last call, the socket read up to now.
    pub fn drain(&mut self) -> Drained {
        let mut r = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        r.catch_up();
        std::mem::take(&mut r.drained)
    }
}

impl Drop for ExitListener {
    fn drop(&mut self) {
        // The thread sees it within its wait and closes the socket.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The reader thread: waits (without the lock) until the socket has something, then reads
/// all of it into the reader, until `stop` or the socket breaks.
fn read_until(fd: &OwnedFd, stop: &AtomicBool, reader: &Mutex<Reader>) {
    use std::os::fd::AsRawFd;
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of a descriptor this thread holds open (the Arc), for 500 ms.
        let n = unsafe { libc::poll(&mut pfd, 1, 500) };
        if n == 0 || (n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted) {
            continue;
        }
        if n < 0 {
            return;
        }
        let mut r = reader.lock().unwrap_or_else(|e| e.into_inner());
        r.catch_up();
        if r.broken {
            return;
        }
    }
}

/// The netlink socket, used by `register` and then under the reader's lock.
#[derive(Debug)]
struct Socket {
    fd: Arc<OwnedFd>,
    buf: Vec<u8>,
}

impl Socket {
    fn open() -> io::Result<Socket> {
        let fd = net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(netlink::GENERIC),
        )?;
        // A smaller buffer than asked (without CAP_NET_ADMIN) only loses records sooner, and
        // they are counted.
        let _ = sockopt::set_socket_recv_buffer_size_force(&fd, 4 << 20);
        // Registration replies must not hang.
        let _ = sockopt::set_socket_timeout(&fd, Timeout::Recv, Some(Duration::from_millis(500)));
        Ok(Socket {
            fd: Arc::new(fd),
            buf: vec![0; 64 * 1024],
        })
    }

    /// One datagram if one is queued, else `WouldBlock`.
    fn recv_now(&mut self) -> io::Result<usize> {
        Ok(net::recv(&*self.fd, &mut self.buf[..], RecvFlags::DONTWAIT)?.0)
    }

    fn recv_raw(&mut self) -> io::Result<usize> {
        Ok(net::recv(&*self.fd, &mut self.buf[..], RecvFlags::empty())?.0)
    }

    fn recv(&mut self) -> Option<usize> {
        self.recv_raw().ok().filter(|&n| n > 0)
    }

    fn request(&self, kind: u16, cmd: u8, attr: u16, value: &[u8], seq: u32) -> io::Result<()> {
        let msg = message(kind, cmd, attr, value, seq);
        net::send(&*self.fd, &msg, SendFlags::empty())?;
        Ok(())
    }

    fn family_id(&mut self) -> io::Result<u16> {
        self.request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            CTRL_ATTR_FAMILY_NAME,
            b"TASKSTATS\0",
            SEQ_FAMILY,
        )?;
        let n = self.recv().ok_or_else(io::Error::last_os_error)?;
        let msg = &self.buf[..n];
        check_error(msg)?;
        attrs(msg.get(NLMSG_HDR + GENL_HDR..).unwrap_or_default())
            .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?)))
            .ok_or_else(|| io::Error::other("the kernel has no TASKSTATS netlink family"))
    }

    /// Waits for the kernel's answer to request `seq`: its error code, or 0. Every request asks
    /// for an acknowledgement, so the family lookup's own ack may come first: taking that one
    /// for the registration's hid a refusal (EPERM without CAP_NET_ADMIN), which the reader
    /// thread then dropped, and exits went uncounted without a note.
    fn ack(&mut self, seq: u32) -> io::Result<()> {
        for _ in 0..8 {
            let n = self.recv().ok_or_else(io::Error::last_os_error)?;
            if let Some(answer) = messages(&self.buf[..n])
                .find(|m| kind_of(m) == Some(NLMSG_ERROR) && seq_of(m) == Some(seq))
            {
                return check_error(answer);
            }
        }
        Err(io::Error::other(
            "the kernel did not answer the taskstats registration",
        ))
    }
}

/// The sequence numbers of the two requests, told apart in their acknowledgements.
const SEQ_FAMILY: u32 = 1;
const SEQ_REGISTER: u32 = 2;

/// nlmsghdr (request + ack) + genlmsghdr + one attribute.
fn message(kind: u16, cmd: u8, attr: u16, value: &[u8], seq: u32) -> Vec<u8> {
    let attr_len = 4 + value.len();
    let total = NLMSG_HDR + GENL_HDR + attr_len.next_multiple_of(4);
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&attr.to_ne_bytes());
    m.extend_from_slice(value);
    m.resize(total, 0);
    m
}

/// The netlink messages in one datagram, stopping at the first malformed one.
fn messages(mut bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let len = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let msg = bytes.get(..len).filter(|_| len >= NLMSG_HDR)?;
        bytes = bytes.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some(msg)
    })
}

/// A message's type.
fn kind_of(msg: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(msg.get(4..6)?.try_into().ok()?))
}

/// A message's sequence number.
fn seq_of(msg: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(msg.get(8..12)?.try_into().ok()?))
}

/// An NLMSG_ERROR with a non-zero code becomes that errno.
fn check_error(msg: &[u8]) -> io::Result<()> {
    if kind_of(msg) == Some(NLMSG_ERROR) {
        let code = msg
            .get(NLMSG_HDR..NLMSG_HDR + 4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0);
        if code != 0 {
            return Err(io::Error::from_raw_os_error(-code));
        }
    }
    Ok(())
}

/// Netlink attributes (type, value) in `bytes`, stopping at the first malformed one.
fn attrs(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(bytes.get(..2)?.try_into().ok()?));
        let kind = u16::from_ne_bytes(bytes.get(2..4)?.try_into().ok()?) & NLA_TYPE_MASK;
        let value = bytes.get(4..len.max(4))?;
        bytes = bytes.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, value))
    })
}

/// Decodes the per-task exit records in one datagram (several netlink messages may share
/// it); thread-group aggregates carry no I/O and are skipped.
pub fn parse_exits(bytes: &[u8], out: &mut Vec<ExitedTask>) {
    for msg in messages(bytes) {
        let payload = msg.get(NLMSG_HDR + GENL_HDR..).unwrap_or_default();
        for (kind, nested) in attrs(payload) {
            if kind != TASKSTATS_TYPE_AGGR_PID {
                continue;
            }
            let mut tid = None;
            for (k, v) in attrs(nested) {
                match k {
                    TASKSTATS_TYPE_PID => {
                        tid = v
                            .get(..4)
                            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    }
                    TASKSTATS_TYPE_STATS => {
                        if let Some(t) = task(v, tid) {
                            out.push(t);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn task(stats: &[u8], tid: Option<u32>) -> Option<ExitedTask> {
    let u64_at = |off: usize| {
        stats
            .get(off..off + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let u32_at = |off: usize| {
        stats
            .get(off..off + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4])))
    };
    let tid = tid.or_else(|| u32_at(OFF_PID))?;
    let comm = stats.get(OFF_COMM..OFF_COMM + COMM_LEN)?;
    let comm = &comm[..comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN)];
    Some(ExitedTask {
        tgid: u32_at(OFF_TGID).filter(|&t| t != 0).unwrap_or(tid),
        tid,
        ppid: u32_at(OFF_PPID)?,
        comm: String::from_utf8_lossy(comm).into_owned(),
        comm_hex: crate::text::hex_if_not_utf8(comm),
        utime_us: u64_at(OFF_UTIME_US)?,
        stime_us: u64_at(OFF_STIME_US)?,
        major_faults: u64_at(OFF_MAJFLT)?,
        read_bytes: u64_at(OFF_READ_BYTES)?,
        write_bytes: u64_at(OFF_WRITE_BYTES)?,
        cancelled_write_bytes: u64_at(OFF_CANCELLED)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_real_exit_is_recorded_with_its_bytes_when_root() {
        let Ok(mut l) = ExitListener::register(configured_cpus()) else {
            // Needs CAP_NET_ADMIN; tests/it/top_culprits.rs checks it end to end as root.
            return;
        };
        let out = std::env::temp_dir().join(format!("tacho-ts-{}", std::process::id()));
        let child = std::process::Command::new("dd")
            .args(["if=/dev/zero", "bs=64k", "count=16", "conv=fsync"])
            .arg(format!("of={}", out.display()))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(child.success());
        std::fs::remove_file(&out).unwrap();
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen.extend(l.drain().tasks);
            if seen.iter().any(|t| t.comm == "dd") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let dd = seen.iter().find(|t| t.comm == "dd").expect("dd's exit");
        assert_eq!(dd.tgid, dd.tid);
        // /tmp may be tmpfs (no block I/O); the write() calls are counted either way in
        // CPU time, and the record must carry the bytes when storage saw them.
        assert!(
            dd.utime_us + dd.stime_us > 0 || dd.write_bytes > 0,
            "{dd:?}"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut out = Vec::new();
            parse_exits(&bytes, &mut out);
        }
    }
}
