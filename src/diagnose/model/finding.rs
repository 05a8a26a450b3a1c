//! The shape of a verdict on a [`TopSample`](super::TopSample): the sample carries its findings
//! (the `tacho.top.v3` object has them), while `crate::diagnose::findings` decides them. Kept here so
//! the model does not depend on the stage that judges it.

use serde::Serialize;

use crate::words::words;

/// How much a live finding matters; ordered, so the worst sorts last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; nothing is wrong yet.
    Info,
    /// Likely costing performance now.
    Warning,
    /// Costing a lot now; act first.
    #[allow(
        dead_code,
        reason = "no live finding is critical yet; the screen and JSON already show one"
    )]
    Critical,
}

words! {
    /// The stable identifier of a live finding: the word `tacho top --json`, the history summary
    /// and `/metrics` (label `code`) carry, so a word never changes once released.
    pub enum Code {
        // CPU.
        /// System time above user time and a large share of all CPU time.
        CpuSystemHigh = "cpu_system_high",
        /// One CPU does most of the machine's softirq work.
        SoftirqOneCpu = "softirq_one_cpu",
        /// The hypervisor gives this VM's CPU time to other guests.
        CpuSteal = "cpu_steal",
        /// High iowait while no local disk is busy.
        IowaitIdleDisks = "iowait_idle_disks",
        /// Tasks stalled on I/O, named with what they wait on (disks busy or not).
        IowaitTasks = "iowait_tasks",
        /// Every CPU busy and more runnable threads than CPUs.
        CpuSaturated = "cpu_saturated",
        // Memory.
        /// Tasks wait for memory (PSI).
        MemoryPressure = "memory_pressure",
        /// Little memory available.
        MemoryLow = "memory_low",
        /// Swap traffic.
        Swapping = "swapping",
        /// Allocations waited for memory to be defragmented.
        CompactionStalls = "compaction_stalls",
        // Cgroup limits.
        /// A cgroup's CPU quota stopped its tasks in many periods.
        CpuThrottled = "cpu_throttled",
        /// A cgroup reached its memory limit or was reclaimed to stay under it.
        MemoryLimited = "memory_limited",
        /// A cgroup's I/O on a device ran at its limit.
        IoThrottled = "io_throttled",
        // Disks.
        /// A device with requests queueing.
        DiskSaturated = "disk_saturated",
        /// Tasks stalled on I/O with no device named saturated.
        IoPressure = "io_pressure",
        /// A busy device that is not saturated, with who keeps it busy.
        DiskBusy = "disk_busy",
        /// A member of a group of peers far slower than the others.
        HotDisk = "hot_disk",
        // Network.
        /// A link near its speed or its shaper's rate.
        LinkSaturated = "link_saturated",
        /// Receive or transmit errors on a link.
        LinkErrors = "link_errors",
        /// Packets dropped because the host cannot keep up.
        LinkDrops = "link_drops",
        /// A link's carrier going up and down.
        LinkFlapping = "link_flapping",
        /// DNS queries failing or unanswered.
        DnsFailures = "dns_failures",
        /// TCP retransmits to one peer: loss on the path.
        TcpRetransmits = "tcp_retransmits",
        // Waits.
        /// Processes spending a large share of their time waiting on one thing (the network
        /// replies of one peer, a disk) that is not itself saturated.
        Waiting = "waiting",
    }
}

/// One thing that stands out in an interval, with the sentence that says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier for scripts (`disk_saturated`, `hot_disk`, …).
    pub code: Code,
    /// How much it matters.
    pub severity: Severity,
    /// What it is about: a device, a CPU, `memory`, `io`.
    pub subject: String,
    /// The sentence an admin reads.
    pub message: String,
    /// Who is responsible, most first (empty when the verdict is about no process).
    pub culprits: Vec<super::culprits::Culprit>,
}

impl Finding {
    /// A warning about `subject` that names no process (culprits are added by the model).
    pub fn warning(code: Code, subject: impl Into<String>, message: String) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            subject: subject.into(),
            message,
            culprits: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    /// The words released versions print, written out: a renamed variant must not rename its
    /// word (scripts, alerts and recorded summaries match on them).
    const RELEASED: [(Code, &str); 24] = [
        (Code::CpuSystemHigh, "cpu_system_high"),
        (Code::SoftirqOneCpu, "softirq_one_cpu"),
        (Code::CpuSteal, "cpu_steal"),
        (Code::IowaitIdleDisks, "iowait_idle_disks"),
        (Code::IowaitTasks, "iowait_tasks"),
        (Code::CpuSaturated, "cpu_saturated"),
        (Code::MemoryPressure, "memory_pressure"),
        (Code::MemoryLow, "memory_low"),
        (Code::Swapping, "swapping"),
        (Code::CompactionStalls, "compaction_stalls"),
        (Code::CpuThrottled, "cpu_throttled"),
        (Code::MemoryLimited, "memory_limited"),
        (Code::IoThrottled, "io_throttled"),
        (Code::DiskSaturated, "disk_saturated"),
        (Code::IoPressure, "io_pressure"),
        (Code::DiskBusy, "disk_busy"),
        (Code::HotDisk, "hot_disk"),
        (Code::LinkSaturated, "link_saturated"),
        (Code::LinkErrors, "link_errors"),
        (Code::LinkDrops, "link_drops"),
        (Code::LinkFlapping, "link_flapping"),
        (Code::DnsFailures, "dns_failures"),
        (Code::TcpRetransmits, "tcp_retransmits"),
        (Code::Waiting, "waiting"),
    ];

    #[test]
    fn every_code_serializes_as_its_released_word() {
        assert_eq!(
            Code::ALL.len(),
            RELEASED.len(),
            "a code is missing from RELEASED"
        );
        for (code, word) in RELEASED {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), code);
            assert_eq!(code.to_string(), word);
        }
    }
}
