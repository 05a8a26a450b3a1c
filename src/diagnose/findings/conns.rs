//! TCP verdicts: a peer to which segments keep being retransmitted (loss on the path).

use super::{Code, Finding};
use crate::diagnose::model::TopSample;

/// Segments sent to a peer in an interval before its retransmission share means anything.
const MIN_SEGMENTS: u64 = 200;
/// Share of segments retransmitted from which the path is losing packets (a clean LAN path
/// retransmits well under 0.1%).
const RETRANS_PCT: f64 = 2.0;

/// Peers with retransmissions at or above [`RETRANS_PCT`] of the segments sent to them.
pub(super) fn retransmits(s: &TopSample, out: &mut Vec<Finding>) {
    let Some(c) = &s.connections else { return };
    for g in &c.by_remote {
        if g.segs_out < MIN_SEGMENTS {
            continue;
        }
        let pct = g.retrans as f64 / g.segs_out as f64 * 100.0;
        if pct < RETRANS_PCT {
            continue;
        }
        let host = g.key.rsplit_once(':').map_or(g.key.as_str(), |(h, _)| h);
        let who = c
            .top
            .iter()
            .find(|t| t.remote == g.key && t.pid.is_some())
            .and_then(|t| Some(format!(" (from {} (pid {}))", t.comm.as_deref()?, t.pid?)))
            .unwrap_or_default();
        let msg = format!("TCP retransmits to {host} at {pct:.1}%: packet loss on the path{who}");
        out.push(Finding::warning(Code::TcpRetransmits, &g.key, msg));
    }
}
