//! What a thread waited on, from the descriptor its system call named: a socket's TCP peer
//! (the socket's inode among the kernel's TCP table, `sock_diag`, of the process's own network
//! namespace: a container's connections are in its own), a file's device, a pipe;
//! for an epoll descriptor, the sockets it watches. Read from /proc/PID/fd links and fdinfo
//! without opening or stat'ing anything (a stat of a user's FUSE file can wait forever).
//!
//! Descriptors are looked at when the profile is made, not when the wait happened: a
//! descriptor closed since is not known, and one reused since names its new file.

use super::why::FdKind;
use crate::kernel::SysRoot;
use crate::kernel::procinfo::{parse_fdinfo, parse_mount_ids};
use crate::kernel::sockdiag;
use std::collections::HashMap;
use std::net::SocketAddr;

/// What a descriptor is and, where found, what it leads to ("10.0.0.5:3306", "vda").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Socket, pipe, file or unknown.
    pub kind: FdKind,
    /// The TCP peer of a socket, or the device of a file.
    pub name: Option<String>,
    /// A TCP connection accepted on a local listening port: its peer is a client, and waiting
    /// on it is a server waiting for its next request, not for a reply.
    pub accepted: bool,
}

/// Epoll targets looked at, at most, for one epoll descriptor.
const EPOLL_TARGETS: usize = 64;

/// A connection's peer, and whether it was accepted on a local listening port.
#[derive(Clone, Copy)]
struct Peer {
    remote: SocketAddr,
    accepted: bool,
}

/// Looks descriptors up once per (process, descriptor) and each network namespace's TCP
/// table once.
pub struct Resolver {
    root: SysRoot,
    /// By namespace (`None`: tacho's own), socket inode → peer.
    peers: HashMap<Option<u64>, HashMap<u32, Peer>>,
    cache: HashMap<(u32, u32), Target>,
}

impl Resolver {
    /// Looks under `root`'s /proc and /sys.
    pub fn new(root: SysRoot) -> Resolver {
        Resolver {
            root,
            peers: HashMap::new(),
            cache: HashMap::new(),
        }
    }

    /// What descriptor `fd` of process `pid` is.
    pub fn target(&mut self, pid: u32, fd: u32) -> Target {
        if let Some(t) = self.cache.get(&(pid, fd)) {
            return t.clone();
        }
        let t = self.look(pid, fd, true);
        self.cache.insert((pid, fd), t.clone());
        t
    }

    fn look(&mut self, pid: u32, fd: u32, follow_epoll: bool) -> Target {
        let dir = self.root.proc.join(pid.to_string());
        let unknown = Target {
            kind: FdKind::Unknown,
            name: None,
            accepted: false,
        };
        let Ok(link) = std::fs::read_link(dir.join("fd").join(fd.to_string())) else {
            return unknown;
        };
        let link = link.as_os_str().as_encoded_bytes();
        if let Some(inode) = bracketed(link, b"socket:[") {
            let peer = self.peer(pid, inode);
            return Target {
                kind: FdKind::Socket,
                name: peer.map(|p| p.remote.to_string()),
                accepted: peer.is_some_and(|p| p.accepted),
            };
        }
        if link.starts_with(b"pipe:[") {
            return Target {
                kind: FdKind::Pipe,
                name: None,
                accepted: false,
            };
        }
        if link == b"anon_inode:[eventpoll]" && follow_epoll {
            return self.epoll(pid, fd).unwrap_or(unknown);
        }
        if link.starts_with(b"/") {
            return Target {
                kind: FdKind::File,
                name: self.device(pid, fd),
                accepted: false,
            };
        }
        unknown
    }

    /// The first socket an epoll descriptor watches that has a known peer (else the first
    /// socket, else the first pipe).
    fn epoll(&mut self, pid: u32, fd: u32) -> Option<Target> {
        let path = self.root.proc.join(format!("{pid}/fdinfo/{fd}"));
        let text = std::fs::read_to_string(path).ok()?;
        let watched: Vec<u32> = text
            .lines()
            .filter_map(|l| l.strip_prefix("tfd:"))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .take(EPOLL_TARGETS)
            .collect();
        let targets: Vec<Target> = watched
            .into_iter()
            .map(|t| self.look(pid, t, false))
            .collect();
        targets
            .iter()
            .find(|t| t.kind == FdKind::Socket && t.name.is_some())
            .or_else(|| targets.iter().find(|t| t.kind == FdKind::Socket))
            .or_else(|| targets.iter().find(|t| t.kind == FdKind::Pipe))
            .cloned()
    }

    fn peer(&mut self, pid: u32, inode: u32) -> Option<Peer> {
        let ns = self.foreign_netns(pid);
        let proc = self.root.proc.clone();
        let peers = self.peers.entry(ns).or_insert_with(|| {
            let table = match ns {
                None => sockdiag::tcp_connections()
                    .and_then(|c| sockdiag::tcp_listening_ports().map(|l| (c, l))),
                // Opened once, here: the dump joins what this descriptor names.
                Some(_) => std::fs::File::open(proc.join(format!("{pid}/ns/net")))
                    .and_then(|f| sockdiag::tcp_table_in(&f)),
            };
            let Ok((conns, listening)) = table else {
                return HashMap::new();
            };
            conns
                .into_iter()
                .filter_map(|c| {
                    let accepted = c.local.is_some_and(|l| listening.contains(&l.port()));
                    Some((
                        c.inode,
                        Peer {
                            remote: c.remote?,
                            accepted,
                        },
                    ))
                })
                .collect()
        });
        peers.get(&inode).copied()
    }

    /// The network namespace of `pid` when it is not tacho's own (its inode number), from
    /// the `net:[N]` links; `None` when they are the same or either cannot be read.
    fn foreign_netns(&self, pid: u32) -> Option<u64> {
        let ns = |p: std::path::PathBuf| {
            let link = std::fs::read_link(p).ok()?;
            bracketed(link.as_os_str().as_encoded_bytes(), b"net:[")
        };
        let theirs = ns(self.root.proc.join(format!("{pid}/ns/net")))?;
        let ours = ns(std::path::PathBuf::from("/proc/self/ns/net"))?;
        (theirs != ours).then_some(theirs)
    }

    /// The block device of the filesystem holding an open file (its name under
    /// /sys/dev/block), from fdinfo's mount id and the process's mountinfo.
    fn device(&self, pid: u32, fd: u32) -> Option<String> {
        let dir = self.root.proc.join(pid.to_string());
        let (_, mnt_id) =
            parse_fdinfo(&std::fs::read_to_string(dir.join(format!("fdinfo/{fd}"))).ok()?)?;
        let mounts = parse_mount_ids(&std::fs::read_to_string(dir.join("mountinfo")).ok()?);
        let (major, minor, _) = mounts.get(&mnt_id)?;
        let link =
            std::fs::read_link(self.root.sys.join(format!("dev/block/{major}:{minor}"))).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }
}

/// The number in `prefix` N `]`.
fn bracketed<N: std::str::FromStr>(link: &[u8], prefix: &[u8]) -> Option<N> {
    let digits = link.strip_prefix(prefix)?.strip_suffix(b"]")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn descriptors_are_told_apart_by_their_links_and_a_files_device_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        let fds = dir.path().join("proc/42/fd");
        std::fs::create_dir_all(&fds).unwrap();
        symlink("pipe:[77]", fds.join("3")).unwrap();
        symlink("/var/lib/db/wal", fds.join("4")).unwrap();
        symlink("anon_inode:[eventpoll]", fds.join("5")).unwrap();
        crate::kernel::fixture::write(
            dir.path(),
            "proc/42/fdinfo/4",
            "pos:\t0\nflags:\t0100002\nmnt_id:\t31\n",
        );
        crate::kernel::fixture::write(
            dir.path(),
            "proc/42/mountinfo",
            "31 1 254:1 / /var rw - ext4 /dev/vdb1 rw\n",
        );
        crate::kernel::fixture::write(
            dir.path(),
            "proc/42/fdinfo/5",
            "pos:\t0\ntfd:        3 events:       19 data: 3\n",
        );
        let block = dir.path().join("sys/dev/block");
        std::fs::create_dir_all(&block).unwrap();
        symlink("../../devices/virtual/block/vdb/vdb1", block.join("254:1")).unwrap();
        let mut r = Resolver::new(root);
        assert_eq!(r.target(42, 3).kind, FdKind::Pipe);
        let file = r.target(42, 4);
        assert_eq!(
            (file.kind, file.name.as_deref()),
            (FdKind::File, Some("vdb1"))
        );
        // An epoll descriptor stands for what it watches: here the pipe.
        assert_eq!(r.target(42, 5).kind, FdKind::Pipe);
        assert_eq!(r.target(42, 9).kind, FdKind::Unknown);
        assert_eq!(r.target(43, 3).kind, FdKind::Unknown);
    }

    #[test]
    fn socket_links_give_their_inode() {
        assert_eq!(bracketed(b"socket:[12345]", b"socket:["), Some(12345u32));
        assert_eq!(bracketed::<u32>(b"socket:[x]", b"socket:["), None);
        assert_eq!(bracketed::<u32>(b"pipe:[1]", b"socket:["), None);
        assert_eq!(
            bracketed(b"net:[4026531840]", b"net:["),
            Some(4026531840u64)
        );
    }
}
