//! TCP traffic over the interval, per connection and grouped by peer and by process (iftop
//! and nethogs in one): rates from the kernel's per-connection counters, so nothing is
//! sampled or captured and every byte acknowledged or received is counted.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::diagnose::sample::Sample;
use crate::kernel::sockdiag::TcpConn;

/// Connections listed, busiest first, at least (more when `--top` asks for more).
const TOP: usize = 20;
/// Groups listed per table.
const TOP_GROUPS: usize = 10;

/// One connection over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connection {
    /// This machine's end (`10.0.0.1:43210`).
    pub local: String,
    /// The peer (`10.0.0.5:5432`).
    pub remote: String,
    /// The process holding the socket, when found.
    pub pid: Option<u32>,
    /// Its command name, invalid UTF-8 shown as U+FFFD (escape before printing).
    pub comm: Option<String>,
    /// The name's exact bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// Bytes sent and acknowledged per second.
    pub tx_bytes_per_s: f64,
    /// Bytes received per second.
    pub rx_bytes_per_s: f64,
    /// Segments retransmitted as a share of segments sent in the interval.
    pub retrans_pct: Option<f64>,
    /// Smoothed round-trip time, milliseconds.
    pub rtt_ms: f64,
    /// Bytes in the send queue at the end of the interval.
    pub send_queue_bytes: u32,
}

/// A group's key, the key's bytes in hex when they are not UTF-8, and its process.
type GroupKey = (String, Option<String>, Option<u32>);

/// Connections summed by peer address or by process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnGroup {
    /// `10.0.0.5:5432`, or `iperf3 (pid 3111)` (escape before printing).
    pub key: String,
    /// The key's exact bytes in hex, only when the process's name is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hex: Option<String>,
    /// The process, for a group by process.
    pub pid: Option<u32>,
    /// Its service (systemd unit or container scope), for a group by process.
    pub unit: Option<String>,
    /// Connections in the group that moved data.
    pub connections: usize,
    /// Bytes sent and acknowledged per second.
    pub tx_bytes_per_s: f64,
    /// Bytes received per second.
    pub rx_bytes_per_s: f64,
    /// Share of all TCP bytes sent in the interval.
    pub tx_share_pct: f64,
    /// Segments sent in the interval.
    pub segs_out: u64,
    /// Segments retransmitted in the interval.
    pub retrans: u64,
}

/// TCP over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Conns {
    /// Established connections at the end of the interval.
    pub established: usize,
    /// All TCP bytes sent and acknowledged per second.
    pub tx_bytes_per_s: f64,
    /// All TCP bytes received per second.
    pub rx_bytes_per_s: f64,
    /// The busiest connections.
    pub top: Vec<Connection>,
    /// By peer address and port.
    pub by_remote: Vec<ConnGroup>,
    /// By process.
    pub by_process: Vec<ConnGroup>,
    /// By service (systemd unit or container scope) of the processes.
    pub by_service: Vec<ConnGroup>,
    /// Connections that moved data whose process was not found.
    pub owners_unknown: usize,
}

/// One connection's counters over the interval.
struct Delta<'a> {
    conn: &'a TcpConn,
    tx: u64,
    rx: u64,
    segs: u64,
    retrans: u64,
}

/// The interval's TCP traffic; `None` when connections could not be read, or none were seen
/// (as in a sample read back from the history, which keeps this result instead).
pub(crate) fn between(a: &Sample, b: &Sample, dt: f64, listed: usize) -> Option<Conns> {
    if b.conns.unavailable.is_some() || b.conns.conns.is_empty() {
        return None;
    }
    let before: HashMap<u64, &TcpConn> = a.conns.conns.iter().map(|c| (c.cookie, c)).collect();
    // A connection opened in the interval counts from nothing (its SYN is the first byte).
    let zero = TcpConn::default();
    let deltas: Vec<Delta> = b
        .conns
        .conns
        .iter()
        .map(|c| {
            let p = before.get(&c.cookie).copied().unwrap_or(&zero);
            Delta {
                conn: c,
                tx: c.bytes_acked.saturating_sub(p.bytes_acked.max(1)),
                rx: c.bytes_received.saturating_sub(p.bytes_received.max(1)),
                segs: c.segs_out.saturating_sub(p.segs_out),
                retrans: c.total_retrans.saturating_sub(p.total_retrans),
            }
        })
        .filter(|d| d.tx + d.rx > 0)
        .collect();
    let owner = |c: &TcpConn| b.conns.owners.get(&c.inode).copied();
    let name = |pid: u32| {
        b.processes
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| (p.comm.clone(), p.comm_hex.clone()))
    };
    let total_tx: u64 = deltas.iter().map(|d| d.tx).sum();
    let endpoint = |e: Option<std::net::SocketAddr>| e.map_or("?".into(), |e| e.to_string());

    let mut top: Vec<&Delta> = deltas.iter().collect();
    top.sort_by_key(|d| std::cmp::Reverse(d.tx + d.rx));
    let top = top
        .into_iter()
        .take(listed.max(TOP))
        .map(|d| {
            let pid = owner(d.conn);
            let (comm, comm_hex) = pid.and_then(name).unzip();
            Connection {
                local: endpoint(d.conn.local),
                remote: endpoint(d.conn.remote),
                pid,
                comm,
                comm_hex: comm_hex.flatten(),
                tx_bytes_per_s: d.tx as f64 / dt,
                rx_bytes_per_s: d.rx as f64 / dt,
                retrans_pct: (d.segs > 0).then(|| d.retrans as f64 / d.segs as f64 * 100.0),
                rtt_ms: f64::from(d.conn.rtt_us) / 1000.0,
                send_queue_bytes: d.conn.send_queue,
            }
        })
        .collect();
    let unit = |pid: u32| b.conns.units.get(&pid).cloned();
    let group = |key_of: &dyn Fn(&Delta) -> GroupKey| {
        let mut groups: HashMap<String, ConnGroup> = HashMap::new();
        for d in &deltas {
            let (key, key_hex, pid) = key_of(d);
            // Two names that differ only in bytes that are not UTF-8 stay two groups.
            let g = groups.entry(key_hex.clone().unwrap_or_else(|| key.clone()));
            let g = g.or_insert(ConnGroup {
                key,
                key_hex,
                pid,
                unit: pid.and_then(unit),
                connections: 0,
                tx_bytes_per_s: 0.0,
                rx_bytes_per_s: 0.0,
                tx_share_pct: 0.0,
                segs_out: 0,
                retrans: 0,
            });
            g.connections += 1;
            g.tx_bytes_per_s += d.tx as f64 / dt;
            g.rx_bytes_per_s += d.rx as f64 / dt;
            g.segs_out += d.segs;
            g.retrans += d.retrans;
            if total_tx > 0 {
                g.tx_share_pct += d.tx as f64 / total_tx as f64 * 100.0;
            }
        }
        let mut v: Vec<ConnGroup> = groups.into_values().collect();
        v.sort_by(|x, y| {
            (y.tx_bytes_per_s + y.rx_bytes_per_s)
                .total_cmp(&(x.tx_bytes_per_s + x.rx_bytes_per_s))
                .then(x.key.cmp(&y.key))
        });
        v.truncate(TOP_GROUPS);
        v
    };
    let by_remote = group(&|d| (endpoint(d.conn.remote), None, None));
    let by_process = group(&|d| match owner(d.conn) {
        Some(pid) => {
            let (comm, hex) = name(pid).unwrap_or_else(|| ("?".into(), None));
            let suffix = format!(" (pid {pid})");
            let hex = hex.map(|h| h + &crate::text::hex(suffix.as_bytes()));
            (format!("{comm}{suffix}"), hex, Some(pid))
        }
        None => ("unknown process".into(), None, None),
    });
    let by_service = group(&|d| {
        let u = owner(d.conn).and_then(unit);
        (u.unwrap_or_else(|| "no known service".into()), None, None)
    });
    Some(Conns {
        established: b.conns.conns.len(),
        tx_bytes_per_s: total_tx as f64 / dt,
        rx_bytes_per_s: deltas.iter().map(|d| d.rx).sum::<u64>() as f64 / dt,
        top,
        by_remote,
        by_process,
        by_service,
        owners_unknown: deltas.iter().filter(|d| owner(d.conn).is_none()).count(),
    })
}
