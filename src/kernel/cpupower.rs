//! CPU power management: the cpufreq driver, turbo/boost, frequency limits, and the idle
//! states (C-states) the cpuidle driver may enter. The governor itself is in
//! [`tunables`](super::tunables). Everything is optional: VMs usually have no cpufreq at all.

use std::path::Path;

use serde::Serialize;

use super::{KernelError, Result, SysRoot, read_optional};

/// One idle state of CPU 0 (`cpuidle/stateN`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdleState {
    /// `POLL`, `C1`, `C6`, `haltpoll idle`.
    pub name: String,
    /// Exit latency the driver declares, in microseconds.
    pub latency_us: Option<u64>,
    /// True when the state is disabled (`disable` = 1).
    pub disabled: bool,
}

/// CPU frequency and idle-state settings, each `None` (or empty) when this machine has no such
/// file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuPower {
    /// `scaling_driver` of CPU 0 (`intel_pstate`, `intel_cpufreq`, `amd-pstate-epp`,
    /// `acpi-cpufreq`, `cppc_cpufreq`).
    pub driver: Option<String>,
    /// `cpufreq/boost` (acpi-cpufreq, amd-pstate): true when turbo/boost is allowed.
    pub boost: Option<bool>,
    /// `intel_pstate/no_turbo`: true when turbo is forbidden.
    pub intel_no_turbo: Option<bool>,
    /// `intel_pstate/status` or `amd_pstate/status` (`active`, `passive`, `guided`).
    pub pstate_status: Option<String>,
    /// `energy_performance_preference` of CPU 0 (`performance`, `balance_power`, `power`).
    pub energy_performance_preference: Option<String>,
    /// `scaling_max_freq` of CPU 0, in kHz.
    pub scaling_max_khz: Option<u64>,
    /// `cpuinfo_max_freq` of CPU 0, in kHz (the hardware's maximum).
    pub cpuinfo_max_khz: Option<u64>,
    /// `cpuidle/current_driver` (`intel_idle`, `acpi_idle`, `haltpoll`, `none`).
    pub idle_driver: Option<String>,
    /// `cpuidle/current_governor` (`menu`, `teo`, `ladder`, `haltpoll`).
    pub idle_governor: Option<String>,
    /// CPU 0's idle states, shallowest first.
    pub idle_states: Vec<IdleState>,
}

impl CpuPower {
    /// Reads what exists; a file that exists but cannot be parsed is an error naming it.
    pub fn read(root: &SysRoot) -> Result<CpuPower> {
        let cpu = root.sys.join("devices/system/cpu");
        let freq = cpu.join("cpu0/cpufreq");
        let pstate_status = match text(&cpu.join("intel_pstate/status"))? {
            Some(s) => Some(s),
            None => text(&cpu.join("amd_pstate/status"))?,
        };
        Ok(CpuPower {
            driver: text(&freq.join("scaling_driver"))?,
            boost: flag(&cpu.join("cpufreq/boost"))?,
            intel_no_turbo: flag(&cpu.join("intel_pstate/no_turbo"))?,
            pstate_status,
            energy_performance_preference: text(&freq.join("energy_performance_preference"))?,
            scaling_max_khz: number(&freq.join("scaling_max_freq"))?,
            cpuinfo_max_khz: number(&freq.join("cpuinfo_max_freq"))?,
            idle_driver: text(&cpu.join("cpuidle/current_driver"))?,
            idle_governor: match text(&cpu.join("cpuidle/current_governor"))? {
                Some(g) => Some(g),
                None => text(&cpu.join("cpuidle/current_governor_ro"))?,
            },
            idle_states: idle_states(&cpu.join("cpu0/cpuidle"))?,
        })
    }
}

fn idle_states(dir: &Path) -> Result<Vec<IdleState>> {
    let mut states = Vec::new();
    for n in 0.. {
        let state = dir.join(format!("state{n}"));
        if !state.is_dir() {
            break;
        }
        states.push(IdleState {
            name: text(&state.join("name"))?.unwrap_or_else(|| format!("state{n}")),
            latency_us: number(&state.join("latency"))?,
            disabled: flag(&state.join("disable"))?.unwrap_or(false),
        });
    }
    Ok(states)
}

fn text(path: &Path) -> Result<Option<String>> {
    Ok(read_optional(path)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty()))
}

fn number(path: &Path) -> Result<Option<u64>> {
    text(path)?.map(|t| super::parse_u64(&t, path)).transpose()
}

fn flag(path: &Path) -> Result<Option<bool>> {
    match text(path)?.as_deref() {
        None => Ok(None),
        Some("0") => Ok(Some(false)),
        Some("1") => Ok(Some(true)),
        Some(other) => Err(KernelError::parse(
            path,
            None,
            format!("expected 0 or 1, found {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::write;

    #[test]
    fn reads_a_firecracker_guest_and_a_server() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let c = "sys/devices/system/cpu";
        write(t, &format!("{c}/cpuidle/current_driver"), "haltpoll\n");
        write(t, &format!("{c}/cpuidle/current_governor_ro"), "haltpoll\n");
        write(t, &format!("{c}/cpu0/cpuidle/state0/name"), "POLL\n");
        write(t, &format!("{c}/cpu0/cpuidle/state0/latency"), "0\n");
        write(t, &format!("{c}/cpu0/cpuidle/state0/disable"), "0\n");
        write(
            t,
            &format!("{c}/cpu0/cpuidle/state1/name"),
            "haltpoll idle\n",
        );
        write(t, &format!("{c}/cpu0/cpuidle/state1/latency"), "1\n");
        write(t, &format!("{c}/cpu0/cpuidle/state1/disable"), "1\n");
        let p = CpuPower::read(&SysRoot::under(t)).unwrap();
        assert_eq!(p.driver, None);
        assert_eq!(p.idle_driver.as_deref(), Some("haltpoll"));
        assert_eq!(p.idle_governor.as_deref(), Some("haltpoll"));
        assert_eq!(p.idle_states.len(), 2);
        assert!(p.idle_states[1].disabled);
        assert_eq!(p.idle_states[1].latency_us, Some(1));

        write(
            t,
            &format!("{c}/cpu0/cpufreq/scaling_driver"),
            "intel_pstate\n",
        );
        write(
            t,
            &format!("{c}/cpu0/cpufreq/scaling_max_freq"),
            "3500000\n",
        );
        write(t, &format!("{c}/intel_pstate/no_turbo"), "1\n");
        write(t, &format!("{c}/intel_pstate/status"), "active\n");
        let p = CpuPower::read(&SysRoot::under(t)).unwrap();
        assert_eq!(p.driver.as_deref(), Some("intel_pstate"));
        assert_eq!(p.intel_no_turbo, Some(true));
        assert_eq!(p.scaling_max_khz, Some(3_500_000));
        assert_eq!(p.pstate_status.as_deref(), Some("active"));

        write(t, &format!("{c}/cpufreq/boost"), "maybe\n");
        let err = CpuPower::read(&SysRoot::under(t)).unwrap_err();
        assert!(err.to_string().contains("cpufreq/boost"), "{err}");
    }
}
