//! Link verdicts: an interface near the speed the kernel reports, and errors, drops, overruns
//! or carrier changes that keep coming.

use super::{Code, Finding};
use crate::diagnose::model::TopSample;

/// Share of the link's speed from which it is full: queues build and latency grows before
/// 100%, and framing overhead keeps payload a few percent under the line rate.
const SATURATED_PCT: f64 = 90.0;
/// Receive or transmit errors (with overruns) per second worth a look: a healthy link has
/// none, a handful in a burst is noise.
const ERRORS_PER_S: f64 = 10.0;
/// Dropped packets per second worth a look (the host, not the wire, could not keep up).
const DROPS_PER_S: f64 = 100.0;

/// `1 Gb/s`, `2.5 Gb/s`, `10 Mb/s`, from a rate in Mb/s that need not be whole.
fn rate(mbps: f64) -> String {
    if mbps >= 1000.0 {
        format!("{} Gb/s", mbps / 1000.0)
    } else {
        format!("{} Mb/s", (mbps * 10.0).round() / 10.0)
    }
}

/// Links at or above [`SATURATED_PCT`] of their capacity, per direction: the speed, or for
/// what is sent, a shaper's rate when that is lower.
pub(super) fn saturated(s: &TopSample, out: &mut Vec<Finding>) {
    for l in &s.links {
        let speed_mbps = l.speed_mbps.map(|m| m as f64);
        let shaped = l.shaped_mbps.filter(|&r| speed_mbps.is_none_or(|s| r < s));
        let (tx_cap, rx_cap) = (shaped.or(speed_mbps), speed_mbps);
        for (pct, cap, dir) in [
            (l.tx_utilisation_pct, tx_cap, "out"),
            (l.rx_utilisation_pct, rx_cap, "in"),
        ] {
            let (Some(p), Some(cap)) = (pct.filter(|&p| p >= SATURATED_PCT), cap) else {
                continue;
            };
            let mut msg = format!("{} at {p:.0}% of {} {dir}", l.name, rate(cap));
            if dir == "out"
                && shaped.is_some()
                && let Some(kind) = &l.shaper
            {
                msg.push_str(&format!(" (shaped by {kind}"));
                if let Some(s) = speed_mbps {
                    msg.push_str(&format!("; link speed {}", rate(s)));
                }
                msg.push(')');
            }
            if dir == "out" {
                msg.push_str(&top_sender(s));
            }
            out.push(Finding::warning(Code::LinkSaturated, &l.name, msg));
        }
    }
}

/// `: 75% of TCP sent from iperf3 (pid 3111), to 10.0.0.5:5201` — the process sending most,
/// and its busiest peer; empty when no connection moved data or its owner is unknown.
fn top_sender(s: &TopSample) -> String {
    let Some(c) = &s.connections else {
        return String::new();
    };
    let Some(p) = c
        .by_process
        .iter()
        .filter(|g| g.pid.is_some())
        .max_by(|a, b| a.tx_share_pct.total_cmp(&b.tx_share_pct))
    else {
        return String::new();
    };
    let peer = c
        .top
        .iter()
        .filter(|t| t.pid == p.pid)
        .max_by(|a, b| a.tx_bytes_per_s.total_cmp(&b.tx_bytes_per_s))
        .map(|t| format!(", to {}", t.remote))
        .unwrap_or_default();
    format!(": {:.0}% of TCP sent from {}{peer}", p.tx_share_pct, p.key)
}

/// Errors, overruns, drops and carrier changes that keep coming.
pub(super) fn errors(s: &TopSample, out: &mut Vec<Finding>) {
    for n in &s.net {
        let link = s.links.iter().find(|l| l.name == n.name);
        let overruns = link.and_then(|l| l.rx_overruns_per_s).unwrap_or(0.0);
        for (rate, dir) in [
            (n.rx_errors_per_s + overruns, "rx"),
            (n.tx_errors_per_s, "tx"),
        ] {
            if rate >= ERRORS_PER_S {
                let msg = format!(
                    "{}: {rate:.0} {dir} errors/s — check cabling or the switch port",
                    n.name
                );
                out.push(Finding::warning(Code::LinkErrors, &n.name, msg));
            }
        }
        for (rate, dir) in [(n.rx_drops_per_s, "rx"), (n.tx_drops_per_s, "tx")] {
            if rate >= DROPS_PER_S {
                let msg = format!(
                    "{}: {rate:.0} {dir} drops/s — the host cannot keep up (ring or queue full)",
                    n.name
                );
                out.push(Finding::warning(Code::LinkDrops, &n.name, msg));
            }
        }
        if let Some(c) = link
            .and_then(|l| l.carrier_changes_per_s)
            .filter(|&c| c > 0.0)
        {
            let msg = format!(
                "{}: carrier changed {:.0} times in {:.0} s — the link is flapping",
                n.name,
                c * s.interval_s,
                s.interval_s
            );
            out.push(Finding::warning(Code::LinkFlapping, &n.name, msg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::tests::fixture_top_sample;
    use crate::diagnose::model::net::Link;

    fn link(name: &str, mbps: Option<u64>, tx_pct: Option<f64>) -> Link {
        Link {
            name: name.into(),
            speed_mbps: mbps,
            duplex: Some("full".into()),
            shaper: None,
            shaped_mbps: None,
            rx_utilisation_pct: Some(1.0),
            tx_utilisation_pct: tx_pct,
            rx_overruns_per_s: Some(0.0),
            tx_fifo_errors_per_s: None,
            carrier_changes_per_s: Some(0.0),
        }
    }

    #[test]
    fn names_a_full_link_and_only_it() {
        let mut s = fixture_top_sample();
        s.links = vec![
            link("eth0", Some(1000), Some(94.2)),
            link("eth1", Some(10000), Some(89.0)),
            link("veth0", None, None),
        ];
        let mut out = Vec::new();
        saturated(&s, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].message, "eth0 at 94% of 1 Gb/s out");
        assert_eq!(out[0].code, Code::LinkSaturated);
    }

    #[test]
    fn names_errors_drops_and_flapping() {
        let mut s = fixture_top_sample();
        let name = s.net[0].name.clone();
        s.net[0].rx_errors_per_s = 100.0;
        s.net[0].tx_drops_per_s = 500.0;
        let mut l = link(&name, None, None);
        l.rx_overruns_per_s = Some(20.0);
        l.carrier_changes_per_s = Some(2.0 / s.interval_s);
        s.links = vec![l];
        let mut out = Vec::new();
        errors(&s, &mut out);
        let codes: Vec<_> = out.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["link_errors", "link_drops", "link_flapping"]);
        assert_eq!(
            out[0].message,
            format!("{name}: 120 rx errors/s — check cabling or the switch port")
        );
        assert!(
            out[2].message.contains("changed 2 times"),
            "{}",
            out[2].message
        );
    }

    #[test]
    fn a_quiet_link_says_nothing() {
        let mut s = fixture_top_sample();
        s.links = s
            .net
            .iter()
            .map(|n| link(&n.name, Some(1000), Some(0.5)))
            .collect();
        for n in &mut s.net {
            (n.rx_errors_per_s, n.tx_errors_per_s) = (1.0, 0.0);
            (n.rx_drops_per_s, n.tx_drops_per_s) = (5.0, 0.0);
        }
        let mut out = Vec::new();
        saturated(&s, &mut out);
        errors(&s, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_shaped_link_is_full_at_the_shapers_rate_and_says_so() {
        let mut s = fixture_top_sample();
        let mut v = link("veth0", Some(10_000), Some(97.4));
        v.shaper = Some("tbf".into());
        v.shaped_mbps = Some(10.0);
        s.links = vec![v];
        let mut out = Vec::new();
        saturated(&s, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            out[0].message,
            "veth0 at 97% of 10 Mb/s out (shaped by tbf; link speed 10 Gb/s)"
        );
    }

    #[test]
    fn speeds_read_as_admins_say_them() {
        assert_eq!(rate(1000.0), "1 Gb/s");
        assert_eq!(rate(2500.0), "2.5 Gb/s");
        assert_eq!(rate(100.0), "100 Mb/s");
        assert_eq!(rate(10.0), "10 Mb/s");
        assert_eq!(rate(0.5), "0.5 Mb/s");
    }
}
