//! Captures UDP port-53 datagrams on every interface with a packet socket and a classic BPF
//! filter, so only DNS reaches user space (no compiler, no libpcap), and feeds them to a
//! [`DnsTracker`] on a thread of its own.
//!
//! The socket is `SOCK_DGRAM` (packets start at the IP header, whatever the link) bound to no
//! interface. Loopback shows each packet twice (as sent and as received), so the sent copy is
//! skipped there. TCP DNS and IP fragments after the first are not seen.

use rustix::net::{self, AddressFamily, SocketFlags, SocketType, sockopt, sockopt::Timeout};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::dns::{DnsCounts, DnsTracker};

// Classic BPF opcodes (linux/filter.h: class | size | mode), for the filter below. BPF_LD is
// class 0.
const LD_B_ABS: u16 = 0x10 | 0x20;
const LD_H_ABS: u16 = 0x08 | 0x20;
const LD_H_IND: u16 = 0x08 | 0x40;
const LDX_B_MSH: u16 = 0x01 | 0x10 | 0xa0;
const ALU_RSH_K: u16 = 0x04 | 0x70;
const JEQ_K: u16 = 0x05 | 0x10;
const JSET_K: u16 = 0x05 | 0x40;
const RET_K: u16 = 0x06;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Accepts UDP datagrams from or to port 53 over IPv4 (not later fragments) or IPv6 (UDP as
/// the first header), at offset 0 of the network header; jumps are relative to the next
/// instruction.
const FILTER: [libc::sock_filter; 21] = [
    op(LD_B_ABS, 0, 0, 0),     // 0: A = first byte
    op(ALU_RSH_K, 0, 0, 4),    // 1: A = IP version
    op(JEQ_K, 0, 9, 4),        // 2: IPv4? else 12
    op(LD_B_ABS, 0, 0, 9),     // 3: protocol
    op(JEQ_K, 0, 15, 17),      // 4: UDP? else drop
    op(LD_H_ABS, 0, 0, 6),     // 5: flags and fragment offset
    op(JSET_K, 13, 0, 0x1fff), // 6: a later fragment: drop
    op(LDX_B_MSH, 0, 0, 0),    // 7: X = IP header length
    op(LD_H_IND, 0, 0, 0),     // 8: source port
    op(JEQ_K, 9, 0, 53),       // 9: 53? accept
    op(LD_H_IND, 0, 0, 2),     // 10: destination port
    op(JEQ_K, 7, 8, 53),       // 11: 53? accept, else drop
    op(JEQ_K, 0, 7, 6),        // 12: IPv6? else drop
    op(LD_B_ABS, 0, 0, 6),     // 13: next header
    op(JEQ_K, 0, 5, 17),       // 14: UDP? else drop
    op(LD_H_ABS, 0, 0, 40),    // 15: source port
    op(JEQ_K, 2, 0, 53),       // 16: 53? accept
    op(LD_H_ABS, 0, 0, 42),    // 17: destination port
    op(JEQ_K, 0, 1, 53),       // 18: 53? accept, else drop
    op(RET_K, 0, 0, 0xffff),   // 19: accept the whole datagram
    op(RET_K, 0, 0, 0),        // 20: drop
];

/// Why the DNS capture could not start, in one line for the caller's note.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A packet socket needs CAP_NET_RAW.
    #[error("capturing DNS needs root (CAP_NET_RAW for a packet socket)")]
    NotPermitted,
    /// The kernel refused the socket or its filter for another reason.
    #[error("cannot open a packet socket for DNS: {0}")]
    Socket(io::Error),
    /// The capture's thread could not be started.
    #[error("cannot start the DNS capture: {0}")]
    Thread(io::Error),
}

/// A running capture; stopped and joined on drop.
pub struct DnsCapture {
    tracker: Arc<Mutex<DnsTracker>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DnsCapture {
    /// Opens the packet socket and starts capturing; the error says what would allow it.
    pub fn start() -> Result<DnsCapture, CaptureError> {
        let fd = open_socket().map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => CaptureError::NotPermitted,
            _ => CaptureError::Socket(e),
        })?;
        let lo = loopback_index();
        let tracker = Arc::new(Mutex::new(DnsTracker::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (tracker, stop) = (Arc::clone(&tracker), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("dns-capture".into())
                .spawn(move || capture(&fd, lo, &tracker, &stop))
                .map_err(CaptureError::Thread)?
        };
        Ok(DnsCapture {
            tracker,
            stop,
            thread: Some(thread),
        })
    }

    /// What was seen since the last call.
    pub fn take(&self) -> DnsCounts {
        let mut t = self.tracker.lock().unwrap_or_else(|p| p.into_inner());
        t.take(Instant::now())
    }
}

impl Drop for DnsCapture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for DnsCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DnsCapture")
    }
}

fn open_socket() -> io::Result<OwnedFd> {
    let fd = net::socket_with(
        AddressFamily::PACKET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(net::eth::ALL),
    )?;
    let prog = libc::sock_fprog {
        len: FILTER.len() as u16,
        filter: FILTER.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program during the call; `prog` and FILTER outlive it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&raw const prog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // Wakes the reader every 200 ms to see whether it should stop.
    sockopt::set_socket_timeout(&fd, Timeout::Recv, Some(Duration::from_millis(200)))?;
    Ok(fd)
}

/// The loopback interface's index, whose sent copies are skipped.
fn loopback_index() -> i32 {
    // SAFETY: a NUL-terminated constant name.
    let i = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    i32::try_from(i).unwrap_or(0)
}

fn capture(fd: &OwnedFd, lo: i32, tracker: &Mutex<DnsTracker>, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` and `from` are valid for the sizes given, for the call's duration.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&raw mut from).cast(),
                &mut len,
            )
        };
        let Ok(n) = usize::try_from(n) else {
            match io::Error::last_os_error().raw_os_error() {
                // Timeout or a signal: check `stop` and read again.
                Some(libc::EAGAIN | libc::EINTR) => continue,
                // The socket failed for good: the figures stop growing.
                _ => return,
            }
        };
        if from.sll_pkttype == libc::PACKET_OUTGOING && from.sll_ifindex == lo {
            continue;
        }
        let mut t = tracker.lock().unwrap_or_else(|p| p.into_inner());
        t.packet(&buf[..n], Instant::now());
    }
}
