//! `waiting`: processes (one, or one command's in one unit) that spent a large share of their
//! time waiting on one thing that is not itself saturated: the replies of one peer, a disk.
//! "php-fpm (12 processes, in php-fpm.service): 71% of their time waiting on network replies
//! from 10.0.0.5:3306, mean wait 180 ms". A saturated disk or link already has its own
//! finding, which explains the waits; they are not said twice.
//!
//! Only the classes that stall work are judged: the network (a connection the process opened,
//! waiting on replies) and the disk. A lock (futex) is left out: an idle thread pool parks on
//! futexes all day, and that looks the same; accepted connections (`clients`), polls and sleeps
//! are a server's or a timer's idling.

use std::collections::BTreeMap;

use super::{Code, Finding, Severity};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::{Attribution, Culprit};
use crate::diagnose::sample::waits::WaitClass;

/// A share of the group's threads' time, percent, from which waiting is a finding.
pub(super) const MIN_PCT: f64 = 30.0;
/// And at least this much waiting in the interval, ms (a short-lived process's 40% of a few
/// milliseconds says nothing).
pub(super) const MIN_MS: f64 = 250.0;
/// Findings of this kind per interval, at most.
const MAX_FINDINGS: usize = 3;

/// One (command, unit, class) group's sums.
#[derive(Default)]
struct Group {
    comm_hex: Option<String>,
    ms: f64,
    base_ms: f64,
    count: u64,
    // Per target and per call: ms.
    on: BTreeMap<String, f64>,
    calls: BTreeMap<String, f64>,
    members: Vec<(u32, f64)>,
}

/// Adds the `waiting` findings of `s`.
pub fn waiting(s: &TopSample, out: &mut Vec<Finding>) {
    let Some(waits) = &s.waits else { return };
    let mut groups: BTreeMap<(String, Option<String>, WaitClass), Group> = BTreeMap::new();
    for p in &waits.processes {
        let base_ms = f64::from(p.threads) * s.interval_s * 1000.0;
        for c in &p.classes {
            if !matches!(c.class, WaitClass::Network | WaitClass::Disk) {
                continue;
            }
            let g = groups
                .entry((p.comm.clone(), p.unit.clone(), c.class))
                .or_default();
            g.comm_hex = p.comm_hex.clone();
            g.ms += c.ms;
            g.base_ms += base_ms;
            g.count += c.count;
            if let Some(on) = &c.on {
                *g.on.entry(on.clone()).or_default() += c.ms;
            }
            if let Some(call) = &c.call {
                *g.calls.entry(call.clone()).or_default() += c.ms;
            }
            g.members.push((p.pid, c.ms));
        }
    }
    let mut found: Vec<(f64, Finding)> = Vec::new();
    for ((comm, unit, class), g) in groups {
        let pct = (g.ms / g.base_ms.max(1e-9) * 100.0).min(100.0);
        if pct < MIN_PCT || g.ms < MIN_MS {
            continue;
        }
        let on = largest(&g.on);
        // A socket with no TCP peer (netlink, a Unix socket, UDP) is how daemons idle: only
        // a known peer's replies are judged.
        if class == WaitClass::Network && on.is_none() {
            continue;
        }
        if explained(out, class, on.as_deref()) {
            continue;
        }
        let call = largest(&g.calls);
        let mean = g.ms / g.count.max(1) as f64;
        let name = crate::text::exact(&comm, g.comm_hex.as_deref());
        let n = g.members.len();
        let whom = match (n, &unit) {
            (1, Some(u)) if *u != comm => format!("{name} (pid {}, {u})", g.members[0].0),
            (1, _) => format!("{name} (pid {})", g.members[0].0),
            (_, Some(u)) if *u != comm => format!("{name} ({n} processes, in {u})"),
            _ => format!("{name} ({n} processes)"),
        };
        let their = if n == 1 { "its" } else { "their" };
        let what = match (class, on.as_deref(), call.as_deref()) {
            (WaitClass::Network, Some(peer), _) => {
                format!("waiting on network replies from {peer}")
            }
            (WaitClass::Disk, dev, Some(c @ ("fsync" | "fdatasync" | "sync_file_range"))) => {
                format!(
                    "in {c}{}",
                    dev.map(|d| format!(" on {d}")).unwrap_or_default()
                )
            }
            (_, Some(dev), _) => format!("waiting on disk {dev}"),
            _ => "waiting on disk".into(),
        };
        let message = format!(
            "{whom}: {pct:.0}% of {their} time {what}, mean wait {}",
            ms_words(mean)
        );
        let source = "eBPF sched_switch: time off the CPU by system call and descriptor";
        let mut members: Vec<Culprit> = g
            .members
            .iter()
            .map(|(pid, ms)| {
                let share = ms / g.ms.max(1e-9) * 100.0;
                let mut c = Culprit::named(
                    Some(*pid),
                    comm.clone(),
                    unit.clone(),
                    share,
                    Attribution::Exact {
                        source: source.into(),
                    },
                );
                c.comm_hex = g.comm_hex.clone();
                c
            })
            .collect();
        members.sort_by(|x, y| y.share_pct.total_cmp(&x.share_pct));
        let culprits = if members.len() == 1 {
            members
        } else {
            crate::diagnose::model::culprits::fold_culprits(members)
        };
        found.push((
            pct,
            Finding {
                code: Code::Waiting,
                severity: Severity::Info,
                subject: on.unwrap_or_else(|| class.word().to_string()),
                message,
                culprits,
            },
        ));
    }
    found.sort_by(|x, y| y.0.total_cmp(&x.0));
    out.extend(found.into_iter().take(MAX_FINDINGS).map(|(_, f)| f));
}

/// The key with the most time.
fn largest(m: &BTreeMap<String, f64>) -> Option<String> {
    m.iter()
        .max_by(|x, y| x.1.total_cmp(y.1))
        .map(|(k, _)| k.clone())
}

/// Whether a saturated resource already explains the waits: a disk finding on the device
/// (on any device when it is not known), a saturated link for the network.
fn explained(findings: &[Finding], class: WaitClass, on: Option<&str>) -> bool {
    findings.iter().any(|f| match class {
        WaitClass::Disk => {
            matches!(
                f.code,
                Code::DiskSaturated | Code::DiskBusy | Code::IoThrottled
            ) && on.is_none_or(|d| f.subject == d)
        }
        WaitClass::Network => f.code == Code::LinkSaturated,
        _ => false,
    })
}

/// `180 ms`, `0.4 ms`, `2.1 s`.
fn ms_words(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::tests::fixture_top_sample;
    use crate::diagnose::model::waits::{ClassShare, ProcessWaits, Waits};

    fn class(class: WaitClass, ms: f64, count: u64, on: Option<&str>, call: &str) -> ClassShare {
        ClassShare {
            class,
            ms,
            pct: 0.0,
            count,
            mean_wait_ms: ms / count as f64,
            on: on.map(str::to_string),
            call: Some(call.into()),
        }
    }

    fn process(pid: u32, comm: &str, unit: &str, classes: Vec<ClassShare>) -> ProcessWaits {
        ProcessWaits {
            pid,
            comm: comm.into(),
            comm_hex: None,
            unit: Some(unit.into()),
            threads: 1,
            classes,
        }
    }

    /// The fixture sample, 1 s long, with these waits, judged by `waiting` after `before`.
    fn judged(processes: Vec<ProcessWaits>, before: Vec<Finding>) -> Vec<Finding> {
        judged_over(1.0, processes, before)
    }

    fn judged_over(dt: f64, processes: Vec<ProcessWaits>, before: Vec<Finding>) -> Vec<Finding> {
        let mut s = fixture_top_sample();
        s.interval_s = dt;
        s.waits = Some(Waits {
            processes,
            dropped: 0,
            lost: 0,
        });
        let mut out = before;
        let n = out.len();
        waiting(&s, &mut out);
        out.split_off(n)
    }

    #[test]
    fn one_commands_processes_in_a_unit_waiting_on_one_peer_are_one_finding() {
        let workers: Vec<ProcessWaits> = (0..12)
            .map(|i| {
                let net = class(
                    WaitClass::Network,
                    710.0,
                    4,
                    Some("10.0.0.5:3306"),
                    "recvfrom",
                );
                process(100 + i, "php-fpm", "php-fpm.service", vec![net])
            })
            .collect();
        let found = judged(workers, Vec::new());
        assert_eq!(found.len(), 1);
        let f = &found[0];
        assert_eq!(f.code, Code::Waiting);
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(f.subject, "10.0.0.5:3306");
        assert_eq!(
            f.message,
            "php-fpm (12 processes, in php-fpm.service): 71% of their time waiting on network \
             replies from 10.0.0.5:3306, mean wait 178 ms"
        );
        assert_eq!(f.culprits.len(), 1);
        assert_eq!(f.culprits[0].processes, Some(12));
        assert_eq!(f.culprits[0].members.len(), 12);
    }

    #[test]
    fn one_process_in_fsync_is_named_with_its_device() {
        let pg = process(
            812,
            "postgres",
            "postgresql.service",
            vec![class(WaitClass::Disk, 400.0, 80, Some("vda"), "fsync")],
        );
        let found = judged(vec![pg], Vec::new());
        assert_eq!(
            found[0].message,
            "postgres (pid 812, postgresql.service): 40% of its time in fsync on vda, mean \
             wait 5.0 ms"
        );
        assert_eq!(found[0].culprits[0].pid, Some(812));
    }

    #[test]
    fn short_small_idle_or_explained_waits_are_not_findings() {
        let net = |ms| class(WaitClass::Network, ms, 1, Some("10.0.0.5:3306"), "recvfrom");
        // Under 30% of its time.
        assert!(judged(vec![process(1, "a", "a.service", vec![net(290.0)])], vec![]).is_empty());
        // 100% of a short interval, under MIN_MS; the same share of a longer one is found.
        let short = process(2, "b", "b.service", vec![net(200.0)]);
        assert!(judged_over(0.2, vec![short.clone()], vec![]).is_empty());
        let long = process(2, "b", "b.service", vec![net(300.0)]);
        assert_eq!(judged_over(0.3, vec![long], vec![]).len(), 1);
        // A socket with no TCP peer (netlink, Unix): not judged.
        let unix = process(
            7,
            "f",
            "f.service",
            vec![class(WaitClass::Network, 900.0, 9, None, "poll")],
        );
        assert!(judged(vec![unix], vec![]).is_empty());
        // A lock, a server's clients, sleeps and polls: idling, not stalls.
        for c in [
            WaitClass::Lock,
            WaitClass::Clients,
            WaitClass::Sleep,
            WaitClass::Poll,
        ] {
            let idle = process(
                3,
                "c",
                "c.service",
                vec![class(c, 1000.0, 1, None, "futex")],
            );
            assert!(judged(vec![idle], vec![]).is_empty(), "{c:?}");
        }
        // The disk it waits on is busy: that finding explains it; another device's is not.
        let disk = || {
            process(
                4,
                "d",
                "d.service",
                vec![class(WaitClass::Disk, 900.0, 9, Some("vda"), "fsync")],
            )
        };
        let busy = |dev: &str| Finding::warning(Code::DiskBusy, dev, "busy".into());
        assert!(judged(vec![disk()], vec![busy("vda")]).is_empty());
        assert_eq!(judged(vec![disk()], vec![busy("vdb")]).len(), 1);
        // A saturated link explains network waits.
        let link = Finding::warning(Code::LinkSaturated, "eth0", "full".into());
        let p = process(5, "e", "e.service", vec![net(900.0)]);
        assert!(judged(vec![p], vec![link]).is_empty());
    }

    #[test]
    fn a_hostile_name_is_shown_as_its_bytes_not_as_control_characters() {
        let mut p = process(
            6,
            "x",
            "x.service",
            vec![class(
                WaitClass::Network,
                900.0,
                9,
                Some("10.0.0.5:3306"),
                "recvfrom",
            )],
        );
        p.comm = "\u{fffd}".into();
        p.comm_hex = Some("ff1b".into());
        let found = judged(vec![p], Vec::new());
        assert!(
            found[0].message.starts_with("\\xff\\e (pid 6"),
            "{}",
            found[0].message
        );
        assert!(!found[0].message.contains('\x1b'));
    }
}
