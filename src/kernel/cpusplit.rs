//! CPU time split between two /proc/stat samples, as mpstat computes it: user and nice
//! exclude guest time (the kernel counts it in both), and irq and softirq stay separate
//! (iostat folds them into %system). Shown by `top` (`diagnose::model::cpu`) and measured
//! around the CPU benchmark and `stress`.

use serde::Serialize;

use super::stat::CpuTicks;

/// Percent of the interval's CPU time in each state; they add up to 100.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct CpuSplit {
    /// User mode, guest time excluded.
    pub user_pct: f64,
    /// Niced user mode, niced guest time excluded.
    pub nice_pct: f64,
    /// Kernel mode.
    pub system_pct: f64,
    /// Hardware interrupts.
    pub irq_pct: f64,
    /// Softirqs.
    pub softirq_pct: f64,
    /// Idle while some task waited for I/O.
    pub iowait_pct: f64,
    /// Stolen by the hypervisor.
    pub steal_pct: f64,
    /// Running guests' virtual CPUs (guest and guest_nice).
    pub guest_pct: f64,
    /// Idle.
    pub idle_pct: f64,
}

impl CpuSplit {
    /// Everything but idle and iowait.
    pub fn busy_pct(&self) -> f64 {
        100.0 - self.idle_pct - self.iowait_pct
    }

    /// The split between two readings. A counter that went backwards (a CPU was offlined
    /// and came back) counts as 0; `None` when no tick passed.
    pub fn between(a: &CpuTicks, b: &CpuTicks) -> Option<CpuSplit> {
        let d = |x: u64, y: u64| y.saturating_sub(x);
        let guest = d(a.guest, b.guest);
        let guest_nice = d(a.guest_nice, b.guest_nice);
        let user = d(a.user, b.user).saturating_sub(guest);
        let nice = d(a.nice, b.nice).saturating_sub(guest_nice);
        let system = d(a.system, b.system);
        let irq = d(a.irq, b.irq);
        let softirq = d(a.softirq, b.softirq);
        let iowait = d(a.iowait, b.iowait);
        let steal = d(a.steal, b.steal);
        let idle = d(a.idle, b.idle);
        let parts = [
            user,
            nice,
            system,
            irq,
            softirq,
            iowait,
            steal,
            guest + guest_nice,
            idle,
        ];
        let total: u64 = parts.iter().sum();
        if total == 0 {
            return None;
        }
        let pct = |v: u64| v as f64 * 100.0 / total as f64;
        Some(CpuSplit {
            user_pct: pct(user),
            nice_pct: pct(nice),
            system_pct: pct(system),
            irq_pct: pct(irq),
            softirq_pct: pct(softirq),
            iowait_pct: pct(iowait),
            steal_pct: pct(steal),
            guest_pct: pct(guest + guest_nice),
            idle_pct: pct(idle),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_is_taken_out_of_user_and_parts_add_up() {
        let a = CpuTicks::default();
        let b = CpuTicks {
            user: 40,
            nice: 10,
            system: 10,
            irq: 5,
            softirq: 5,
            iowait: 10,
            steal: 5,
            idle: 15,
            guest: 10,
            guest_nice: 0,
        };
        let s = CpuSplit::between(&a, &b).unwrap();
        // 100 ticks: user 30 (40 less 10 guest), guest 10.
        assert_eq!((s.user_pct, s.guest_pct, s.softirq_pct), (30.0, 10.0, 5.0));
        let sum = s.user_pct
            + s.nice_pct
            + s.system_pct
            + s.irq_pct
            + s.softirq_pct
            + s.iowait_pct
            + s.steal_pct
            + s.guest_pct
            + s.idle_pct;
        assert!((sum - 100.0).abs() < 1e-9);
        assert_eq!(s.busy_pct(), 75.0);
        assert_eq!(CpuSplit::between(&b, &b), None);
        // Backwards counters count as 0, never underflow.
        let back = CpuSplit::between(&b, &CpuTicks { idle: 30, ..a }).unwrap();
        assert_eq!(back.idle_pct, 100.0);
    }
}
