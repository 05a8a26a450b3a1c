//! Links: how full each interface is against the speed the kernel reports, and the overruns
//! and carrier changes /proc/net/dev does not show, over the interval.

use serde::Serialize;

use super::{Net, counter_rate};
use crate::kernel::netlinkinfo::LinkInfo;

/// One interface's capacity and the share of it used over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Interface name (`eth0`).
    pub name: String,
    /// Speed the kernel reports, in Mb/s; `null` when it does not know one (then no
    /// utilisation is given: tacho does not guess a capacity).
    pub speed_mbps: Option<u64>,
    /// `full` or `half`, when the driver says.
    pub duplex: Option<String>,
    /// The qdisc shaping its egress (`tbf`), when there is one.
    pub shaper: Option<String>,
    /// The rate that shaper lets out, in Mb/s: the capacity of the outbound direction when it
    /// is below the speed (or the speed is unknown, as on virtual links).
    pub shaped_mbps: Option<f64>,
    /// Received bits as a share of the speed (of both directions together on half duplex).
    pub rx_utilisation_pct: Option<f64>,
    /// Sent bits as a share of the speed, or of the shaper's rate when that is lower (of
    /// both directions together on half duplex).
    pub tx_utilisation_pct: Option<f64>,
    /// Receive FIFO and ring overruns per second (the NIC had no room for a frame).
    pub rx_overruns_per_s: Option<f64>,
    /// Transmit FIFO errors per second.
    pub tx_fifo_errors_per_s: Option<f64>,
    /// Carrier up/down transitions per second (a flapping link or cable).
    pub carrier_changes_per_s: Option<f64>,
}

/// The links of the interfaces that have rates in `net`, in the same order.
pub(crate) fn links(a: &[LinkInfo], b: &[LinkInfo], net: &[Net], dt: f64) -> Vec<Link> {
    net.iter()
        .filter_map(|n| {
            let cur = b.iter().find(|l| l.name == n.name)?;
            let prev = a.iter().find(|l| l.name == n.name);
            let rate = |f: fn(&LinkInfo) -> Option<u64>| counter_rate(f(prev?)?, f(cur)?, dt);
            let overruns = |l: &LinkInfo| match (l.rx_fifo_errors, l.rx_over_errors) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
            };
            let (rx, tx) = if cur.duplex.as_deref() == Some("half") {
                let both = n.rx_bytes_per_s + n.tx_bytes_per_s;
                (both, both)
            } else {
                (n.rx_bytes_per_s, n.tx_bytes_per_s)
            };
            let speed = cur.speed_mbps.map(|mbps| mbps as f64 * 1e6 / 8.0);
            // A root shaper holds back only what is sent.
            let shaped = cur
                .shaper
                .as_ref()
                .map(|(_, bytes_per_s)| *bytes_per_s as f64);
            let tx_cap = match (speed, shaped) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let share = |bytes: f64, cap: Option<f64>| cap.map(|c| bytes / c * 100.0);
            let (rx_pct, tx_pct) = (share(rx, speed), share(tx, tx_cap));
            Some(Link {
                name: n.name.clone(),
                speed_mbps: cur.speed_mbps,
                duplex: cur.duplex.clone(),
                shaper: cur.shaper.as_ref().map(|(kind, _)| kind.clone()),
                shaped_mbps: shaped.map(|b| b * 8.0 / 1e6),
                rx_utilisation_pct: rx_pct,
                tx_utilisation_pct: tx_pct,
                rx_overruns_per_s: prev
                    .and_then(|p| counter_rate(overruns(p)?, overruns(cur)?, dt)),
                tx_fifo_errors_per_s: rate(|l| l.tx_fifo_errors),
                carrier_changes_per_s: rate(|l| l.carrier_changes),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(name: &str, rx: f64, tx: f64) -> Net {
        Net {
            name: name.into(),
            rx_bytes_per_s: rx,
            tx_bytes_per_s: tx,
            rx_packets_per_s: 0.0,
            tx_packets_per_s: 0.0,
            rx_errors_per_s: 0.0,
            tx_errors_per_s: 0.0,
            rx_drops_per_s: 0.0,
            tx_drops_per_s: 0.0,
        }
    }

    fn info(name: &str, speed: Option<u64>, duplex: &str, carrier: u64, fifo: u64) -> LinkInfo {
        LinkInfo {
            name: name.into(),
            speed_mbps: speed,
            duplex: Some(duplex.into()),
            carrier_changes: Some(carrier),
            rx_fifo_errors: Some(fifo),
            rx_over_errors: None,
            tx_fifo_errors: None,
            ifindex: None,
            shaper: None,
        }
    }

    #[test]
    fn utilisation_against_speed() {
        // 1 Gb/s full duplex; 117.5 MB/s out is 94%.
        let a = [info("eth0", Some(1000), "full", 1, 10)];
        let b = [info("eth0", Some(1000), "full", 3, 30)];
        let l = &links(&a, &b, &[net("eth0", 12.5e6, 117.5e6)], 2.0)[0];
        assert!((l.tx_utilisation_pct.unwrap() - 94.0).abs() < 1e-9);
        assert!((l.rx_utilisation_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(l.carrier_changes_per_s, Some(1.0));
        assert_eq!(l.rx_overruns_per_s, Some(10.0));
        assert_eq!(l.tx_fifo_errors_per_s, None);
    }

    #[test]
    fn half_duplex_shares_the_medium_and_unknown_speed_gives_no_share() {
        let a = [
            info("h", Some(100), "half", 0, 0),
            info("v", None, "full", 0, 0),
        ];
        let n = [net("h", 5e6, 5e6), net("v", 5e6, 5e6)];
        let l = links(&a, &a, &n, 1.0);
        assert!((l[0].rx_utilisation_pct.unwrap() - 80.0).abs() < 1e-9);
        assert!((l[0].tx_utilisation_pct.unwrap() - 80.0).abs() < 1e-9);
        assert_eq!(l[1].tx_utilisation_pct, None);
    }

    #[test]
    fn a_shaper_below_the_speed_is_the_outbound_capacity() {
        // veth says 10 Gb/s; tbf lets out 10 Mbit/s (1.25 MB/s): 1.2 MB/s out is 96%.
        let mut v = info("veth0", Some(10_000), "full", 0, 0);
        v.shaper = Some(("tbf".into(), 1_250_000));
        let l = &links(&[], &[v.clone()], &[net("veth0", 1.2e6, 1.2e6)], 1.0)[0];
        assert!((l.tx_utilisation_pct.unwrap() - 96.0).abs() < 1e-9);
        // Receiving is not shaped: against the speed.
        assert!((l.rx_utilisation_pct.unwrap() - 0.096).abs() < 1e-9);
        assert_eq!(l.shaper.as_deref(), Some("tbf"));
        assert_eq!(l.shaped_mbps, Some(10.0));
        // Without a speed, the shaper alone gives the outbound share.
        v.speed_mbps = None;
        let l = &links(&[], &[v], &[net("veth0", 1.2e6, 0.6e6)], 1.0)[0];
        assert!((l.tx_utilisation_pct.unwrap() - 48.0).abs() < 1e-9);
        assert_eq!(l.rx_utilisation_pct, None);
    }

    #[test]
    fn a_new_interface_has_a_share_but_no_counter_rates() {
        let b = [info("eth0", Some(1000), "full", 9, 9)];
        let l = &links(&[], &b, &[net("eth0", 0.0, 0.0)], 1.0)[0];
        assert_eq!(l.tx_utilisation_pct, Some(0.0));
        assert_eq!(l.carrier_changes_per_s, None);
    }
}
