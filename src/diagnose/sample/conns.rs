//! TCP connections for a sample, with the process holding each busy one: sock_diag for the
//! connections, and a pass over /proc/PID/fd only when a connection that moved data has an
//! owner not yet known (owners are kept while their sockets live).

use std::collections::{HashMap, HashSet};

use crate::kernel::SysRoot;
use crate::kernel::sockdiag::{self, TcpConn};
use crate::kernel::{procinfo, sockowner};

/// Connections of one sample and what could not be known about them.
#[derive(Debug, Clone, Default)]
pub struct ConnScan {
    /// Established TCP connections.
    pub conns: Vec<TcpConn>,
    /// Owner of each connection's socket inode, where found.
    pub owners: HashMap<u32, u32>,
    /// The service (systemd unit or container scope) of each owner, by pid, where it has one.
    pub units: HashMap<u32, String>,
    /// Why there are no connections (sock_diag refused or failed).
    pub unavailable: Option<String>,
    /// Processes whose open files could not be read while looking for owners.
    pub owners_denied: usize,
}

/// The least time between two passes over every process's descriptors: on a server opening
/// connections all the time, a pass per sample would cost more than the rest of the sample.
const FULL_PASS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// What the sampler keeps between samples.
#[derive(Debug, Default)]
pub(crate) struct ConnTracker {
    /// When every process's descriptors were last read for owners.
    last_full_pass: Option<std::time::Instant>,
    /// Processes whose descriptors that pass could not read.
    denied: usize,
    owners: HashMap<u32, u32>,
    units: HashMap<u32, String>,
    bytes: HashMap<u64, u64>,
}

impl ConnTracker {
    /// Dumps the connections and finds the owners of those that moved data since last time.
    pub(crate) fn scan(&mut self, root: &SysRoot) -> ConnScan {
        let conns = match sockdiag::tcp_connections() {
            Ok(c) => c,
            Err(e) => {
                return ConnScan {
                    unavailable: Some(format!("sock_diag: {e}")),
                    ..ConnScan::default()
                };
            }
        };
        let moved = |c: &TcpConn| {
            let now = c.bytes_acked + c.bytes_received;
            self.bytes.get(&c.cookie).is_none_or(|&then| then != now) && now > 2
        };
        let wanted: HashSet<u32> = conns
            .iter()
            .filter(|c| moved(c) && !self.owners.contains_key(&c.inode))
            .map(|c| c.inode)
            .collect();
        let mut owners_denied = 0;
        if !wanted.is_empty() {
            // New connections are mostly the known owners' (a server accepting): those first.
            let known: HashSet<u32> = self.owners.values().copied().collect();
            let (found, _) = sockowner::owners(root, &wanted, Some(&known));
            let missing = wanted.iter().any(|i| !found.contains_key(i));
            self.owners.extend(found);
            let due = self
                .last_full_pass
                .is_none_or(|t| t.elapsed() >= FULL_PASS_EVERY);
            if missing && due {
                let (found, denied) = sockowner::owners(root, &wanted, None);
                self.owners.extend(found);
                self.denied = denied;
                self.last_full_pass = Some(std::time::Instant::now());
            }
            // Said for as long as busy connections stay unowned, from the last full pass.
            if wanted.iter().any(|i| !self.owners.contains_key(i)) {
                owners_denied = self.denied;
            }
        }
        let live: HashSet<u32> = conns.iter().map(|c| c.inode).collect();
        self.owners.retain(|inode, _| live.contains(inode));
        let pids: HashSet<u32> = self.owners.values().copied().collect();
        self.units.retain(|pid, _| pids.contains(pid));
        for pid in pids {
            if let std::collections::hash_map::Entry::Vacant(e) = self.units.entry(pid)
                && let Some(unit) = procinfo::read_cgroups(root, pid)
                    .and_then(|c| c.unit_path)
                    .and_then(|p| procinfo::unit_of(&p))
            {
                e.insert(unit);
            }
        }
        self.bytes = conns
            .iter()
            .map(|c| (c.cookie, c.bytes_acked + c.bytes_received))
            .collect();
        ConnScan {
            owners: self.owners.clone(),
            units: self.units.clone(),
            conns,
            unavailable: None,
            owners_denied,
        }
    }
}
