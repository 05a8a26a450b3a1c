//! Throttling, named: a cgroup's CPU quota, memory limit or I/O limit that held its work back,
//! with the unit, the file that shows it, who runs there, and the setting that lifts it.

use super::{Code, Finding, Severity};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::Culprit;
use crate::diagnose::model::limits::{
    CpuThrottled, IoLimitKind, IoLimited, Limited, MemoryLimited,
};
use crate::kernel::limits::Hierarchy;
use crate::units::format_bytes_approx as bytes;

/// Share of the interval a cgroup's tasks stalled on memory from which its limit costs it.
const MEMORY_STALL_PCT: f64 = 10.0;

/// Share of periods throttled from which a quota visibly slows the cgroup's work…
const THROTTLED_PCT: f64 = 10.0;
/// …in at least this many periods of the interval (one throttled period is noise).
const THROTTLED_PERIODS: u64 = 2;

pub fn throttling(s: &TopSample, out: &mut Vec<Finding>) {
    let t = &s.throttling;
    for c in t
        .cpu
        .iter()
        .filter(|c| c.throttled_pct >= THROTTLED_PCT && c.throttled_periods >= THROTTLED_PERIODS)
    {
        out.push(finding(
            Code::CpuThrottled,
            &c.who,
            cpu_message(c, s.interval_s),
        ));
    }
    for m in &t.memory {
        let mut f = finding(Code::MemoryLimited, &m.who, memory_message(m));
        if !memory_hurts(m) {
            f.severity = Severity::Info;
        }
        out.push(f);
    }
    for i in &t.io {
        out.push(finding(Code::IoThrottled, &i.who, io_message(i)));
    }
}

/// Whether a memory limit visibly costs the cgroup: throttled by memory.high, an OOM kill, or
/// stalls. Reaching memory.max (v1: failcnt) alone is often only page cache reclaimed at the
/// limit, which is how a limit works: worth knowing, not a warning.
fn memory_hurts(m: &MemoryLimited) -> bool {
    m.high_events.is_some_and(|n| n > 0)
        || m.oom_kills.is_some_and(|n| n > 0)
        || m.stall_pct.is_some_and(|p| p >= MEMORY_STALL_PCT)
}

fn finding(code: Code, who: &Limited, message: String) -> Finding {
    let mut f = Finding::warning(code, who.cgroup.clone(), message);
    f.culprits.clone_from(&who.culprits);
    f
}

/// `nginx.service`, or the cgroup's path when it names no unit.
fn name(who: &Limited) -> &str {
    who.unit.as_deref().unwrap_or(&who.cgroup)
}

/// A unit systemd manages, whose limits `systemctl set-property` changes.
fn systemd_unit(who: &Limited) -> Option<&str> {
    who.unit.as_deref().filter(|u| {
        [".service", ".scope", ".slice"]
            .iter()
            .any(|s| u.ends_with(s))
    })
}

/// The cgroup's directory, from the evidence file's path.
fn dir(who: &Limited) -> &str {
    who.evidence
        .rsplit_once('/')
        .map_or(who.evidence.as_str(), |(d, _)| d)
}

/// `fix`, unless the cgroup's name (which a delegated user may choose) holds anything a shell
/// would read as more than a name: root must never be handed a command to paste that runs
/// someone else's words.
fn pasteable(who: &Limited, fix: String) -> String {
    let safe = |t: &str| {
        t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-@:,+=".contains(c))
    };
    if safe(dir(who)) && who.unit.as_deref().is_none_or(safe) {
        fix
    } else {
        "change the limit by hand (no command is given: the cgroup's name holds characters a \
         shell would interpret)"
            .into()
    }
}

/// `: burn (pid 77) 100%, …` when processes in the cgroup are known.
fn culprits_text(culprits: &[Culprit], what: &str) -> String {
    if culprits.is_empty() {
        return String::new();
    }
    let named: Vec<String> = culprits
        .iter()
        .map(|c| format!("{} {:.0}% of {what}", c.who(), c.share_pct))
        .collect();
    format!("; in it: {}", named.join(", "))
}

fn cpu_message(c: &CpuThrottled, interval_s: f64) -> String {
    let quota = c.quota_pct;
    let fix = match (systemd_unit(&c.who), c.who.hierarchy) {
        (Some(unit), _) => format!(
            "systemctl set-property {unit} CPUQuota={:.0}% (CPUQuota= lifts it)",
            quota * 2.0
        ),
        (None, Hierarchy::V1) => format!(
            "echo {} > {}/cpu.cfs_quota_us (-1 lifts it)",
            c.quota_us * 2,
            dir(&c.who)
        ),
        (None, Hierarchy::V2) => format!(
            "echo '{} {}' > {}/cpu.max ('max' lifts it)",
            c.quota_us * 2,
            c.period_us,
            dir(&c.who)
        ),
    };
    format!(
        "{} throttled {:.0}% of periods by CPUQuota={quota:.0}% ({} of {} periods, stopped {:.1} s in {interval_s:.0} s; {}){}; raise it: {fix}",
        name(&c.who),
        c.throttled_pct,
        c.throttled_periods,
        c.periods,
        c.throttled_s,
        c.who.evidence,
        culprits_text(&c.who.culprits, "its CPU"),
        fix = pasteable(&c.who, fix),
    )
}

fn memory_message(m: &MemoryLimited) -> String {
    let mut what = Vec::new();
    let n = |x: Option<u64>| x.filter(|&n| n > 0);
    if let (Some(k), Some(high)) = (n(m.high_events), m.high_bytes) {
        what.push(format!(
            "reclaimed {k} times to stay under memory.high {}",
            bytes(high)
        ));
    }
    if let Some(k) = n(m.max_events) {
        what.push(format!(
            "reached memory.max {} {k} times",
            m.max_bytes.map_or("-".into(), bytes)
        ));
    }
    if let Some(k) = n(m.oom_kills) {
        what.push(format!("the OOM killer killed {k} of its processes"));
    }
    if let Some(k) = n(m.failcnt) {
        what.push(format!(
            "hit its memory limit {} {k} times (cgroup v1 keeps no stall time)",
            m.max_bytes.map_or("-".into(), bytes)
        ));
    }
    if let Some(p) = m.stall_pct.filter(|&p| p >= 1.0) {
        what.push(format!(
            "its tasks stalled on memory {p:.0}% of the interval"
        ));
    }
    let used = m
        .current_bytes
        .map(|c| format!(", {} in use", bytes(c)))
        .unwrap_or_default();
    let (property, limit) = match (m.high_events.filter(|&k| k > 0), m.high_bytes) {
        (Some(_), Some(high)) => ("MemoryHigh", high),
        _ => ("MemoryMax", m.max_bytes.unwrap_or(0)),
    };
    let fix = match (systemd_unit(&m.who), m.who.hierarchy) {
        (Some(unit), _) => format!(
            "systemctl set-property {unit} {property}={}M",
            limit.saturating_mul(2) >> 20
        ),
        (None, Hierarchy::V1) => format!(
            "echo {} > {}/memory.limit_in_bytes",
            limit.saturating_mul(2),
            dir(&m.who)
        ),
        (None, Hierarchy::V2) => format!(
            "echo {} > {}/{}",
            limit.saturating_mul(2),
            dir(&m.who),
            if property == "MemoryHigh" {
                "memory.high"
            } else {
                "memory.max"
            }
        ),
    };
    format!(
        "{} {}{used} ({}){}; raise it: {fix}",
        name(&m.who),
        what.join(", "),
        m.who.evidence,
        culprits_text(&m.who.culprits, "its activity"),
        fix = pasteable(&m.who, fix),
    )
}

fn io_message(i: &IoLimited) -> String {
    let device = i.device_name.as_deref().unwrap_or(&i.device);
    let (rate, limit) = match i.limit {
        IoLimitKind::Rbps | IoLimitKind::Wbps => (
            format!("{}/s", bytes(i.rate_per_s as u64)),
            format!("{}/s", bytes(i.limit_per_s)),
        ),
        IoLimitKind::Riops | IoLimitKind::Wiops => (
            format!("{:.0}/s", i.rate_per_s),
            format!("{}/s", i.limit_per_s),
        ),
    };
    let verb = match i.limit {
        IoLimitKind::Rbps => "read",
        IoLimitKind::Wbps => "written",
        IoLimitKind::Riops => "reads",
        IoLimitKind::Wiops => "writes",
    };
    let doubled = i.limit_per_s.saturating_mul(2);
    let fix = match (systemd_unit(&i.who), i.who.hierarchy) {
        (Some(unit), Hierarchy::V2) => {
            let property = match i.limit {
                IoLimitKind::Rbps => "IOReadBandwidthMax",
                IoLimitKind::Wbps => "IOWriteBandwidthMax",
                IoLimitKind::Riops => "IOReadIOPSMax",
                IoLimitKind::Wiops => "IOWriteIOPSMax",
            };
            format!("systemctl set-property {unit} {property}=\"/dev/{device} {doubled}\"")
        }
        (_, Hierarchy::V2) => format!(
            "echo '{} {}={doubled}' > {}/io.max",
            i.device,
            i.limit,
            dir(&i.who)
        ),
        (_, Hierarchy::V1) => {
            let file = match i.limit {
                IoLimitKind::Rbps => "read_bps_device",
                IoLimitKind::Wbps => "write_bps_device",
                IoLimitKind::Riops => "read_iops_device",
                IoLimitKind::Wiops => "write_iops_device",
            };
            format!(
                "echo '{} {doubled}' > {}/blkio.throttle.{file}",
                i.device,
                dir(&i.who)
            )
        }
    };
    format!(
        "{} held at its I/O limit on {device}: {rate} {verb} of {} {limit} ({}){}; raise it: {fix}",
        name(&i.who),
        i.limit,
        i.who.evidence,
        culprits_text(&i.who.culprits, "its I/O"),
        fix = pasteable(&i.who, fix),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::tests::fixture_top_sample;

    fn who(unit: &str, hierarchy: Hierarchy, dir: &str, file: &str) -> Limited {
        Limited {
            cgroup: format!("/system.slice/{unit}"),
            unit: Some(unit.into()),
            hierarchy,
            evidence: format!("{dir}/{file}"),
            culprits: Vec::new(),
        }
    }

    fn cpu(unit: &str, hierarchy: Hierarchy, throttled: u64) -> CpuThrottled {
        CpuThrottled {
            who: who(unit, hierarchy, "/sys/fs/cgroup/x", "cpu.stat"),
            quota_pct: 50.0,
            quota_us: 50000,
            period_us: 100000,
            periods: 100,
            throttled_periods: throttled,
            throttled_pct: throttled as f64,
            throttled_s: 1.9,
        }
    }

    #[test]
    fn a_throttled_unit_is_named_with_its_quota_the_file_and_the_fix() {
        let mut s = fixture_top_sample();
        s.throttling.cpu = vec![
            cpu("nginx.service", Hierarchy::V2, 38),
            cpu("tacho-x", Hierarchy::V1, 60),
            cpu("quiet.service", Hierarchy::V2, 5),
        ];
        let mut out = Vec::new();
        throttling(&s, &mut out);
        assert_eq!(
            out.len(),
            2,
            "5% of periods is not worth a finding: {out:?}"
        );
        assert_eq!(out[0].code, Code::CpuThrottled);
        assert_eq!(out[0].subject, "/system.slice/nginx.service");
        assert!(
            out[0]
                .message
                .starts_with("nginx.service throttled 38% of periods by CPUQuota=50% ("),
            "{}",
            out[0].message
        );
        assert!(out[0].message.contains("/sys/fs/cgroup/x/cpu.stat"));
        assert!(
            out[0].message.ends_with(
                "systemctl set-property nginx.service CPUQuota=100% (CPUQuota= lifts it)"
            ),
            "{}",
            out[0].message
        );
        assert!(
            out[1]
                .message
                .ends_with("echo 100000 > /sys/fs/cgroup/x/cpu.cfs_quota_us (-1 lifts it)"),
            "{}",
            out[1].message
        );
        // A name a delegated user chose that a shell would read as a command gets none.
        let mut hostile = cpu("x;reboot", Hierarchy::V1, 60);
        hostile.who.evidence = "/sys/fs/cgroup/cpu/x;reboot/cpu.stat".into();
        s.throttling.cpu = vec![hostile];
        let mut out = Vec::new();
        throttling(&s, &mut out);
        assert!(
            out[0].message.ends_with("raise it: change the limit by hand (no command is given: the cgroup's name holds characters a shell would interpret)"),
            "{}",
            out[0].message
        );
    }

    #[test]
    fn memory_and_io_limits_say_what_bit() {
        let mut s = fixture_top_sample();
        s.throttling.memory = vec![MemoryLimited {
            who: who(
                "db.service",
                Hierarchy::V2,
                "/sys/fs/cgroup/db",
                "memory.events",
            ),
            max_bytes: None,
            high_bytes: Some(512 << 20),
            current_bytes: Some(510 << 20),
            high_events: Some(17),
            max_events: Some(0),
            oom_kills: Some(0),
            failcnt: None,
            stall_pct: Some(12.0),
        }];
        s.throttling.io = vec![IoLimited {
            who: who(
                "backup.service",
                Hierarchy::V1,
                "/sys/fs/cgroup/blkio/b",
                "blkio.throttle.io_service_bytes",
            ),
            device: "8:0".into(),
            device_name: Some("sda".into()),
            limit: IoLimitKind::Wbps,
            limit_per_s: 10 << 20,
            rate_per_s: (10 << 20) as f64,
        }];
        let mut out = Vec::new();
        throttling(&s, &mut out);
        assert_eq!(
            out[0].severity,
            Severity::Warning,
            "throttled by memory.high"
        );
        let mut cache_at_limit = s.throttling.memory[0].clone();
        (cache_at_limit.high_events, cache_at_limit.stall_pct) = (Some(0), Some(0.5));
        cache_at_limit.max_events = Some(40);
        let mut quiet = fixture_top_sample();
        quiet.throttling.memory = vec![cache_at_limit];
        let mut info = Vec::new();
        throttling(&quiet, &mut info);
        assert_eq!(info[0].severity, Severity::Info, "{}", info[0].message);
        assert_eq!(
            out[0].message,
            "db.service reclaimed 17 times to stay under memory.high 512 MiB, its tasks stalled \
             on memory 12% of the interval, 510 MiB in use (/sys/fs/cgroup/db/memory.events); \
             raise it: systemctl set-property db.service MemoryHigh=1024M"
        );
        assert_eq!(
            out[1].message,
            "backup.service held at its I/O limit on sda: 10.0 MiB/s written of wbps 10.0 MiB/s \
             (/sys/fs/cgroup/blkio/b/blkio.throttle.io_service_bytes); raise it: echo '8:0 \
             20971520' > /sys/fs/cgroup/blkio/b/blkio.throttle.write_bps_device"
        );
    }
}
