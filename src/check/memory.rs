//! Transparent huge pages: `enabled` judged against the workload profile, `defrag`, and the
//! compaction counters that show whether allocations are actually waiting.

use super::facts::Facts;
use super::{Evidence, Finding, Group, Options, Profile, Remedy, Severity, cmds};
use crate::tune::Setting;

const KERNEL_DOC: &str = "kernel docs, admin-guide/mm/transhuge.rst";

/// Compaction stalls since boot above which they are a pattern, not an accident: a few
/// happen on any long-running machine; hundreds mean page faults routinely wait.
const MANY_STALLS: u64 = 100;

pub fn rules(facts: &Facts, options: Options, out: &mut Vec<Finding>) {
    let Some(enabled) = facts.tunables.thp_enabled.as_deref() else {
        return;
    };
    let stalls = facts.vmstat.as_ref().and_then(|v| v.get("compact_stall"));
    let many_stalls = stalls.is_some_and(|s| s >= MANY_STALLS);
    let mut evidence = vec![Evidence::new(Setting::ThpEnabled.shell_path(), enabled)];
    if let Some(v) = &facts.vmstat {
        for key in [
            "compact_stall",
            "compact_fail",
            "thp_fault_alloc",
            "thp_fault_fallback",
        ] {
            if let Some(n) = v.get(key) {
                evidence.push(Evidence::new(format!("/proc/vmstat {key}"), n.to_string()));
            }
        }
    }
    let (want, severity, why, reference) = judge_enabled(enabled, options.profile, many_stalls);
    let title = if severity == Severity::Ok {
        format!(
            "THP {enabled}: as recommended for the {} profile",
            options.profile.name()
        )
    } else {
        format!(
            "THP {enabled}; {want} recommended for the {} profile{}",
            options.profile.name(),
            if many_stalls {
                format!(" ({} compaction stalls since boot)", stalls.unwrap_or(0))
            } else {
                String::new()
            }
        )
    };
    out.push(Finding {
        id: "thp_enabled",
        group: Group::Memory,
        subject: None,
        severity,
        title,
        evidence,
        why: why.to_string(),
        reference: reference.to_string(),
        remedy: if severity == Severity::Ok {
            Remedy::default()
        } else {
            cmds::setting(&Setting::ThpEnabled, want, enabled)
        },
    });
    if let Some(defrag) = facts.tunables.thp_defrag.as_deref() {
        defrag_rule(defrag, enabled, many_stalls, out);
    }
}

/// What `enabled` should be for `profile`, how bad the current value is, why, and the source.
fn judge_enabled(
    enabled: &str,
    profile: Profile,
    many_stalls: bool,
) -> (&'static str, Severity, &'static str, &'static str) {
    let raised = |s: Severity| if many_stalls { bump(s) } else { s };
    match profile {
        Profile::Redis | Profile::Postgres => {
            let severity = match enabled {
                "never" => Severity::Ok,
                // Neither asks for huge pages with madvise(), so madvise behaves like never.
                "madvise" => Severity::Info,
                _ => raised(Severity::Warn),
            };
            let (why, reference) = if profile == Profile::Redis {
                (
                    "With THP always, each copy-on-write after Redis forks (BGSAVE, AOF rewrite, \
                     replication) copies 2 MiB instead of 4 KiB: latency spikes and memory \
                     growth. Redis warns about it at startup.",
                    "Redis docs, latency diagnosis (topics/latency); Red Hat Satellite tuning guide",
                )
            } else {
                (
                    "Databases touch memory sparsely; with THP always the kernel spends system \
                     CPU assembling and compacting huge pages, and PostgreSQL gains nothing \
                     from them (it uses explicit huge_pages instead).",
                    "Red Hat Satellite tuning guide (disable THP for PostgreSQL and Redis); \
                     PostgreSQL docs, huge_pages",
                )
            };
            ("never", severity, why, reference)
        }
        Profile::Mongodb => {
            let severity = match enabled {
                "always" => Severity::Ok,
                _ => Severity::Warn,
            };
            (
                "always",
                severity,
                "MongoDB 8.0 and later use a TCMalloc with per-CPU caches that needs THP \
                 always (with defrag defer+madvise); MongoDB 7.0 and earlier want it never. \
                 Match the MongoDB version you run.",
                "MongoDB manual, TCMalloc Performance Optimization (changed in 8.0)",
            )
        }
        Profile::Web | Profile::Etcd | Profile::Default => {
            let severity = match (enabled, profile) {
                ("always", Profile::Default) => raised(Severity::Info),
                ("always", _) => raised(Severity::Warn),
                _ => Severity::Ok,
            };
            let why = if profile == Profile::Web {
                "A web stack (nginx, php-fpm, Redis, PostgreSQL) under load spent more system \
                 than user time in huge-page work; THP never cut system CPU at least 2x. \
                 madvise gives huge pages only to programs that ask."
            } else {
                "madvise gives huge pages only to programs that ask for them (JVMs, some \
                 databases); always makes every large allocation pay for compaction and \
                 khugepaged, which shows as system CPU and latency spikes."
            };
            let reference = if profile == Profile::Web {
                "kernel Documentation/admin-guide/mm/transhuge.rst; Oracle Database \
                 Installation Guide for Linux, \"Disabling Transparent HugePages\""
            } else {
                KERNEL_DOC
            };
            ("madvise", severity, why, reference)
        }
    }
}

fn bump(s: Severity) -> Severity {
    match s {
        Severity::Ok => Severity::Ok,
        Severity::Info => Severity::Warn,
        Severity::Warn | Severity::Crit => Severity::Crit,
    }
}

fn defrag_rule(defrag: &str, enabled: &str, many_stalls: bool, out: &mut Vec<Finding>) {
    // `always` makes a page fault that finds no free huge page stall in direct compaction.
    let severity = match (defrag, enabled) {
        (_, "never") => Severity::Ok,
        ("always", _) if many_stalls => Severity::Crit,
        ("always", _) => Severity::Warn,
        _ => Severity::Ok,
    };
    out.push(Finding {
        id: "thp_defrag",
        group: Group::Memory,
        subject: None,
        severity,
        title: if severity == Severity::Ok {
            format!("THP defrag {defrag}: page faults do not wait for compaction")
        } else {
            format!("THP defrag {defrag}: page faults stall in direct compaction")
        },
        evidence: vec![Evidence::new(Setting::ThpDefrag.shell_path(), defrag)],
        why: "With defrag always, a process whose fault finds no free 2 MiB page waits while \
              the kernel compacts memory; madvise limits that to programs that asked, defer \
              hands it to kcompactd."
            .to_string(),
        reference: KERNEL_DOC.to_string(),
        remedy: if severity == Severity::Ok {
            Remedy::default()
        } else {
            cmds::setting(&Setting::ThpDefrag, "madvise", defrag)
        },
    });
}
