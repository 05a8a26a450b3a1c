//! Process events from the kernel's connector (netlink, CN_IDX_PROC): forks, execs and renames.
//! They let tacho follow `--children`, and name a forked process (it keeps its parent's name
//! until it execs or renames itself) even when it has exited before tacho reads its file
//! events (its /proc entry, with its parent link and name, is gone by then). Exec reports no
//! name, so after one tacho can only read /proc.
//!
//! Ordering makes this exact: a process's file events happen after its fork and exec, so once
//! a batch of fanotify events has been read, draining this socket yields every fork and name
//! that batch can involve. No crate covers the connector; the socket calls go through libc, and messages are
//! decoded from bytes with bounds checks. Needs CAP_NET_ADMIN (root has it); without it, or
//! without CONFIG_PROC_EVENTS, tacho falls back to /proc alone.

use super::bytes::ne_u32;
use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{self, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::io;
use std::os::fd::OwnedFd;

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
const PROC_EVENT_COMM: u32 = 0x200;
const NLMSG_HDR: usize = 16;
const CN_MSG_HDR: usize = 20;

/// What the connector reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcEvent {
    /// `child` (a new process, not a thread) started from `parent`.
    Fork { parent: i32, child: i32 },
    /// Process `pid` ran exec: its name changed to one the event does not carry.
    Exec { pid: i32 },
    /// Process `pid` renamed its main thread to `name` (prctl, /proc/PID/comm).
    Comm { pid: i32, name: String },
}

/// A subscription to process events.
pub struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl ProcEvents {
    /// Opens the connector socket and asks for process events; fails without CAP_NET_ADMIN or
    /// CONFIG_PROC_EVENTS.
    pub fn subscribe() -> io::Result<ProcEvents> {
        let fd = net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            Some(netlink::CONNECTOR),
        )?;
        net::bind(&fd, &SocketAddrNetlink::new(0, CN_IDX_PROC))?;
        net::send(&fd, &listen_message(), SendFlags::empty())?;
        Ok(ProcEvents {
            fd,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Every event reported since the last call, in order. Errors (a full socket buffer after
    /// a fork storm) end the drain; the /proc fallback covers what was lost.
    pub fn drain(&mut self, mut each: impl FnMut(ProcEvent)) {
        loop {
            let n = match net::recv(&self.fd, &mut self.buf[..], RecvFlags::empty()) {
                Ok((n, _)) if n > 0 => n,
                _ => return,
            };
            parse(&self.buf[..n], &mut each);
        }
    }
}

/// nlmsghdr + cn_msg + PROC_CN_MCAST_LISTEN.
fn listen_message() -> Vec<u8> {
    let total = (NLMSG_HDR + CN_MSG_HDR + 4) as u32;
    let mut m = Vec::with_capacity(total as usize);
    m.extend_from_slice(&total.to_ne_bytes());
    m.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&std::process::id().to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // ack
    m.extend_from_slice(&4u16.to_ne_bytes()); // len
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

/// Decodes the netlink messages in one datagram; keeps process forks, execs and renames,
/// drops those of threads other than the main one.
pub fn parse(bytes: &[u8], each: &mut impl FnMut(ProcEvent)) {
    let mut at = 0;
    while let Some(len) = ne_u32(bytes, at) {
        let len = len as usize;
        if len < NLMSG_HDR || at + len > bytes.len() {
            return;
        }
        // proc_event: what (4), cpu (4), timestamp (8), then for a fork: parent_pid,
        // parent_tgid, child_pid, child_tgid; for a comm: pid, tgid, comm[16].
        let ev = at + NLMSG_HDR + CN_MSG_HDR;
        let end = at + len;
        let what = ne_u32(bytes, ev);
        if what == Some(PROC_EVENT_FORK)
            && let (Some(parent), Some(child_pid), Some(child)) = (
                ne_u32(bytes, ev + 20),
                ne_u32(bytes, ev + 24),
                ne_u32(bytes, ev + 28),
            )
            && child_pid == child
            && ev + 32 <= end
        {
            each(ProcEvent::Fork {
                parent: parent as i32,
                child: child as i32,
            });
        } else if what == Some(PROC_EVENT_EXEC)
            && let (Some(pid), Some(tgid)) = (ne_u32(bytes, ev + 16), ne_u32(bytes, ev + 20))
            && pid == tgid
            && ev + 24 <= end
        {
            each(ProcEvent::Exec { pid: pid as i32 });
        } else if what == Some(PROC_EVENT_COMM)
            && let (Some(pid), Some(tgid)) = (ne_u32(bytes, ev + 16), ne_u32(bytes, ev + 20))
            && pid == tgid
            && let Some(comm) = bytes.get(ev + 24..ev + 40)
            && ev + 40 <= end
        {
            let name = comm.split(|&c| c == 0).next().unwrap_or_default();
            each(ProcEvent::Comm {
                pid: pid as i32,
                name: String::from_utf8_lossy(name).into_owned(),
            });
        }
        at += len.div_ceil(4) * 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fork_message(parent_tgid: u32, child_pid: u32, child_tgid: u32) -> Vec<u8> {
        let total = (NLMSG_HDR + CN_MSG_HDR + 32) as u32;
        let mut m = vec![0u8; total as usize];
        m[0..4].copy_from_slice(&total.to_ne_bytes());
        let ev = NLMSG_HDR + CN_MSG_HDR;
        m[ev..ev + 4].copy_from_slice(&PROC_EVENT_FORK.to_ne_bytes());
        m[ev + 20..ev + 24].copy_from_slice(&parent_tgid.to_ne_bytes());
        m[ev + 24..ev + 28].copy_from_slice(&child_pid.to_ne_bytes());
        m[ev + 28..ev + 32].copy_from_slice(&child_tgid.to_ne_bytes());
        m
    }

    fn comm_message(pid: u32, tgid: u32, name: &str) -> Vec<u8> {
        let total = (NLMSG_HDR + CN_MSG_HDR + 40) as u32;
        let mut m = vec![0u8; total as usize];
        m[0..4].copy_from_slice(&total.to_ne_bytes());
        let ev = NLMSG_HDR + CN_MSG_HDR;
        m[ev..ev + 4].copy_from_slice(&PROC_EVENT_COMM.to_ne_bytes());
        m[ev + 16..ev + 20].copy_from_slice(&pid.to_ne_bytes());
        m[ev + 20..ev + 24].copy_from_slice(&tgid.to_ne_bytes());
        m[ev + 24..ev + 24 + name.len()].copy_from_slice(name.as_bytes());
        m
    }

    #[test]
    fn process_forks_and_names_are_kept_thread_ones_dropped() {
        let mut bytes = fork_message(10, 11, 11);
        bytes.extend(fork_message(10, 12, 10)); // a thread of 10
        bytes.extend(comm_message(11, 11, "touch"));
        let mut exec = comm_message(11, 11, "");
        let ev = NLMSG_HDR + CN_MSG_HDR;
        exec[ev..ev + 4].copy_from_slice(&PROC_EVENT_EXEC.to_ne_bytes());
        bytes.extend(exec);
        bytes.extend(comm_message(13, 11, "worker-3")); // a thread renaming itself
        let mut seen = Vec::new();
        parse(&bytes, &mut |f| seen.push(f));
        let fork = ProcEvent::Fork {
            parent: 10,
            child: 11,
        };
        let comm = ProcEvent::Comm {
            pid: 11,
            name: "touch".into(),
        };
        assert_eq!(seen, vec![fork, comm, ProcEvent::Exec { pid: 11 }]);
        assert_eq!(listen_message().len(), NLMSG_HDR + CN_MSG_HDR + 4);
    }

    #[test]
    fn a_real_fork_and_exec_are_reported_when_the_connector_is_available() {
        let mut events = match ProcEvents::subscribe() {
            Ok(f) => f,
            Err(e) => {
                // Not root, or no CONFIG_PROC_EVENTS: the /proc fallback is tested elsewhere.
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "SKIP: no process events connector: {e}");
                return;
            }
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let child_pid = child.id() as i32;
        child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut seen = Vec::new();
        events.drain(|f| seen.push(f));
        let fork = ProcEvent::Fork {
            parent: std::process::id() as i32,
            child: child_pid,
        };
        let exec = ProcEvent::Exec { pid: child_pid };
        assert!(seen.contains(&fork), "{fork:?} not among {seen:?}");
        assert!(seen.contains(&exec), "{exec:?} not among {seen:?}");
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            parse(&bytes, &mut |_| {});
        }
    }
}
