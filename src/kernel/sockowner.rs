//! Which process holds a socket: the `socket:[INODE]` links among each process's open files
//! (what `ss -p` and nethogs read). A pass over every process reads every descriptor, so the
//! sampler asks only when a busy connection's owner is not yet known, looks among the known
//! owners first, and passes over every process at most every few seconds.

use std::collections::{HashMap, HashSet};

use super::SysRoot;

/// Owners found for the wanted inodes (inode → pid) among the processes `among` (every
/// process when `None`), and how many processes' descriptors could not be read (another
/// user's, without root).
pub fn owners(
    root: &SysRoot,
    wanted: &HashSet<u32>,
    among: Option<&HashSet<u32>>,
) -> (HashMap<u32, u32>, usize) {
    let mut found = HashMap::new();
    let mut denied = 0;
    let pids: Vec<u32> = match among {
        Some(pids) => pids.iter().copied().collect(),
        None => match std::fs::read_dir(&root.proc) {
            Ok(procs) => procs
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect(),
            Err(_) => return (found, denied),
        },
    };
    for pid in pids {
        let fds = match std::fs::read_dir(root.proc.join(pid.to_string()).join("fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                denied += 1;
                continue;
            }
            Err(_) => continue,
        };
        for fd in fds.flatten() {
            // readlink of a /proc fd names the socket without touching it.
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if let Some(inode) = socket_inode(target.as_os_str().as_encoded_bytes())
                && wanted.contains(&inode)
            {
                found.entry(inode).or_insert(pid);
            }
        }
        if found.len() == wanted.len() {
            break;
        }
    }
    (found, denied)
}

/// The inode in a `socket:[12345]` link.
fn socket_inode(link: &[u8]) -> Option<u32> {
    let digits = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_this_process_as_a_sockets_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let fd_path = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&listener)
        );
        let inode = std::fs::metadata(fd_path).unwrap().ino() as u32;
        let me = std::process::id();
        let real = SysRoot::real();
        let wanted = HashSet::from([inode]);
        let (found, _) = owners(&real, &wanted, None);
        assert_eq!(found.get(&inode), Some(&me));
        // Among this process only, and among others only.
        let (found, _) = owners(&real, &wanted, Some(&HashSet::from([me])));
        assert_eq!(found.get(&inode), Some(&me));
        let (found, _) = owners(&real, &wanted, Some(&HashSet::from([1])));
        assert!(found.is_empty());
    }

    #[test]
    fn reads_socket_links_only() {
        assert_eq!(socket_inode(b"socket:[4242]"), Some(4242));
        assert_eq!(socket_inode(b"pipe:[4242]"), None);
        assert_eq!(socket_inode(b"socket:[42x]"), None);
        assert_eq!(socket_inode(b"/tmp/socket:[1]"), None);
    }

    proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = socket_inode(&b);
        }
    }
}
