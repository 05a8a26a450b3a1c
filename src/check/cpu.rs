//! CPU power management: frequency governor and driver, turbo/boost, frequency caps, and
//! idle-state (C-state) limits.

use super::facts::Facts;
use super::{Evidence, Finding, Group, Options, Remedy, Severity, cmds};
use crate::tune::Setting;

const CPUFREQ_DOC: &str = "kernel docs, admin-guide/pm/cpufreq.rst and intel_pstate.rst";

pub fn rules(facts: &Facts, _options: Options, out: &mut Vec<Finding>) {
    out.push(governor(facts));
    if let Some(f) = boost(facts) {
        out.push(f);
    }
    if let Some(f) = frequency_cap(facts) {
        out.push(f);
    }
    if let Some(f) = idle_states(facts) {
        out.push(f);
    }
}

fn governor(facts: &Facts) -> Finding {
    let p = &facts.power;
    let driver = p.driver.as_deref();
    let mut evidence = Vec::new();
    if let Some(d) = driver {
        evidence.push(Evidence::new(
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver",
            d,
        ));
    }
    if let Some(s) = &p.pstate_status {
        evidence.push(Evidence::new("/sys/devices/system/cpu/*_pstate/status", s));
    }
    if let Some(epp) = &p.energy_performance_preference {
        evidence.push(Evidence::new(
            "/sys/devices/system/cpu/cpu0/cpufreq/energy_performance_preference",
            epp,
        ));
    }
    let Some(gov) = facts.tunables.cpu_governor.as_deref() else {
        let virt = facts.host.virtualization.is_some();
        evidence.push(Evidence::new(
            Setting::Governor.shell_path(),
            "absent (no cpufreq driver)",
        ));
        return Finding {
            id: "cpu_governor",
            group: Group::Cpu,
            subject: None,
            severity: if virt { Severity::Ok } else { Severity::Info },
            title: if virt {
                "no cpufreq in this VM: the host decides CPU frequency".to_string()
            } else {
                "no cpufreq driver: firmware (or nothing) decides CPU frequency".to_string()
            },
            evidence,
            why: "Without a cpufreq driver Linux cannot see or set frequency; on bare metal \
                  check the BIOS power profile (often 'OS control' or 'maximum performance')."
                .to_string(),
            reference: CPUFREQ_DOC.to_string(),
            remedy: Remedy::default(),
        };
    };
    evidence.push(Evidence::new(Setting::Governor.shell_path(), gov));
    // intel_pstate and amd-pstate in active mode implement powersave as a dynamic policy
    // driven by the hardware's energy/performance preference, not as "lowest frequency".
    let hardware_managed = matches!(driver, Some("intel_pstate" | "amd-pstate-epp"));
    let (severity, title, why) = match gov {
        "performance" => (
            Severity::Ok,
            "governor performance: CPUs run at full speed when busy".to_string(),
            "The performance governor requests the highest frequency; idle cores still sleep.",
        ),
        "powersave" if hardware_managed => (
            Severity::Info,
            format!(
                "governor powersave with {}: the CPU picks speed by its energy preference",
                driver.unwrap_or("")
            ),
            "With intel_pstate/amd-pstate active, powersave is dynamic, but bursts start \
             slower than under performance; latency-sensitive services usually set \
             performance (or EPP performance).",
        ),
        "powersave" => (
            Severity::Warn,
            "governor powersave: CPUs held at their lowest frequency".to_string(),
            "With a generic cpufreq driver, powersave pins every core to its minimum \
             frequency: everything runs several times slower than the CPU can.",
        ),
        other => (
            Severity::Info,
            format!("governor {other}: frequency follows load with a delay"),
            "Load-following governors (schedutil, ondemand, conservative) raise frequency \
             after load appears: short requests and benchmarks' first milliseconds run slow.",
        ),
    };
    let remedy = if severity == Severity::Ok || gov.starts_with("mixed") {
        Remedy::default()
    } else {
        cmds::setting(&Setting::Governor, "performance", gov)
    };
    Finding {
        id: "cpu_governor",
        group: Group::Cpu,
        subject: None,
        severity,
        title,
        evidence,
        why: why.to_string(),
        reference: CPUFREQ_DOC.to_string(),
        remedy,
    }
}

fn boost(facts: &Facts) -> Option<Finding> {
    let p = &facts.power;
    let (path, off, on_value, off_value) = match (p.intel_no_turbo, p.boost) {
        (Some(no_turbo), _) => (
            "/sys/devices/system/cpu/intel_pstate/no_turbo",
            no_turbo,
            "0",
            "1",
        ),
        (None, Some(boost)) => ("/sys/devices/system/cpu/cpufreq/boost", !boost, "1", "0"),
        (None, None) => return None,
    };
    Some(Finding {
        id: "cpu_boost",
        group: Group::Cpu,
        subject: None,
        severity: if off { Severity::Warn } else { Severity::Ok },
        title: if off {
            "turbo/boost disabled: CPUs never exceed base frequency".to_string()
        } else {
            "turbo/boost allowed".to_string()
        },
        evidence: vec![Evidence::new(path, if off { off_value } else { on_value })],
        why: "Turbo adds 20-60% single-thread speed on most server CPUs; it is disabled for \
              power capping or deterministic benchmarks, rarely on purpose in production."
            .to_string(),
        reference: CPUFREQ_DOC.to_string(),
        remedy: if off {
            cmds::sysfs(path, "cpu-boost", on_value, off_value)
        } else {
            Remedy::default()
        },
    })
}

/// A `scaling_max_freq` below this share of the hardware maximum is a deliberate cap.
const CAP_PCT: u64 = 90;

fn frequency_cap(facts: &Facts) -> Option<Finding> {
    let p = &facts.power;
    let (cap, max) = (p.scaling_max_khz?, p.cpuinfo_max_khz?);
    let capped = max > 0 && cap * 100 < max * CAP_PCT;
    let glob = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_max_freq";
    Some(Finding {
        id: "cpu_max_frequency",
        group: Group::Cpu,
        subject: None,
        severity: if capped { Severity::Warn } else { Severity::Ok },
        title: format!(
            "maximum frequency {} of {} MHz{}",
            cap / 1000,
            max / 1000,
            if capped { ": capped" } else { "" }
        ),
        evidence: vec![
            Evidence::new(
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq",
                cap.to_string(),
            ),
            Evidence::new(
                "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
                max.to_string(),
            ),
        ],
        why: "A power profile (tuned, TLP, a BMC policy) can lower scaling_max_freq; every \
              busy core then runs slower than the hardware allows."
            .to_string(),
        reference: CPUFREQ_DOC.to_string(),
        remedy: if capped {
            cmds::all_cpus(glob, "cpu-max-freq", &max.to_string(), &cap.to_string())
        } else {
            Remedy::default()
        },
    })
}

fn idle_states(facts: &Facts) -> Option<Finding> {
    let p = &facts.power;
    let poll = facts.cmdline_option("idle").filter(|v| v == "poll");
    let limits: Vec<String> = ["intel_idle.max_cstate", "processor.max_cstate", "idle"]
        .iter()
        .filter_map(|k| facts.cmdline_option(k).map(|v| format!("{k}={v}")))
        .collect();
    if p.idle_states.is_empty() && p.idle_driver.is_none() && limits.is_empty() {
        return None;
    }
    let states: Vec<String> = p
        .idle_states
        .iter()
        .map(|s| {
            format!(
                "{} ({} us{})",
                s.name,
                s.latency_us.map_or("?".to_string(), |l| l.to_string()),
                if s.disabled { ", disabled" } else { "" }
            )
        })
        .collect();
    let disabled: Vec<&str> = p
        .idle_states
        .iter()
        .filter(|s| s.disabled)
        .map(|s| s.name.as_str())
        .collect();
    let mut evidence = vec![Evidence::new(
        "/sys/devices/system/cpu/cpuidle/current_driver",
        p.idle_driver.as_deref().unwrap_or("none"),
    )];
    if !states.is_empty() {
        evidence.push(Evidence::new(
            "/sys/devices/system/cpu/cpu0/cpuidle/state*/{name,latency,disable}",
            states.join(", "),
        ));
    }
    if !limits.is_empty() {
        evidence.push(Evidence::new("/proc/cmdline", limits.join(" ")));
    }
    let (severity, title) = if poll.is_some() {
        (
            Severity::Warn,
            "idle=poll: idle CPUs spin instead of sleeping".to_string(),
        )
    } else if !limits.is_empty() || !disabled.is_empty() {
        (
            Severity::Info,
            format!(
                "deep C-states limited ({}): lower wake-up latency, more power and heat",
                if disabled.is_empty() {
                    limits.join(" ")
                } else {
                    format!("disabled: {}", disabled.join(", "))
                }
            ),
        )
    } else {
        let deepest = p
            .idle_states
            .last()
            .map_or("none".to_string(), |s| s.name.clone());
        (
            Severity::Ok,
            format!("all idle states enabled (deepest {deepest})"),
        )
    };
    Some(Finding {
        id: "cpu_idle",
        group: Group::Cpu,
        subject: None,
        severity,
        title,
        evidence,
        why: "Deep C-states save power but take tens to hundreds of microseconds to leave, \
              which latency-critical services feel; idle=poll removes that latency by \
              burning full power on every idle core, which costs turbo headroom on busy \
              ones (and host CPU in a VM)."
            .to_string(),
        reference: "kernel docs, admin-guide/pm/cpuidle.rst and kernel-parameters.txt (idle=)"
            .to_string(),
        remedy: if poll.is_some() {
            cmds::kernel_cmdline_remove("idle=poll")
        } else {
            Remedy::default()
        },
    })
}
