//! Every figure of a `tacho top` sample that `/metrics` exports: its Prometheus name, the
//! `tacho top --json` field it comes from (named in its HELP), its unit and how to read it.
//! Names are written out, not derived from the field names: renaming a field cannot rename
//! a metric, and a metric is found by grepping for its name.

use super::groups::{BlockIoGroup, ProcessGroup, WaitGroup};
use crate::diagnose::model::block_io::BlockIoUnit;
use crate::diagnose::model::conns::{ConnGroup, Conns};
use crate::diagnose::model::cpu::{Cpu, PerCpu};
use crate::diagnose::model::dns::Dns;
use crate::diagnose::model::memory::{Memory, UsedParts};
use crate::diagnose::model::net::Link;
use crate::diagnose::model::process::CgroupDevice;
use crate::diagnose::model::waits::{ClassShare, Waits};
use crate::diagnose::model::{Disk, Load, Net, PsiLine, WriteAmplification};

/// How a figure is turned into Prometheus's base units (seconds, bytes, ratios 0–1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    /// Already in base units: counts, bytes, seconds, per-second rates, load averages.
    Same,
    /// Kilobytes per second (iostat's kB, 1024 bytes) → bytes per second.
    KbPerSecond,
    /// Percent → ratio from 0 to 1.
    Percent,
    /// Milliseconds → seconds.
    Millis,
    /// Kilobytes → bytes.
    Kb,
    /// Megabits per second → bytes per second.
    Mbps,
}

impl Unit {
    /// `v` in base units; dividing keeps 94 % an exact 0.94.
    pub(super) fn base(self, v: f64) -> f64 {
        let (mul, div) = match self {
            Unit::Same => (1.0, 1.0),
            Unit::KbPerSecond | Unit::Kb => (1024.0, 1.0),
            Unit::Percent => (1.0, 100.0),
            Unit::Millis => (1.0, 1e3),
            Unit::Mbps => (125_000.0, 1.0),
        };
        v * mul / div
    }
}

/// One exported figure of a `T`.
pub(super) struct Metric<T> {
    /// The metric's name.
    pub(super) name: &'static str,
    /// The `tacho top --json` field it is read from, as `tacho_<section>_<field>`.
    pub(super) field: &'static str,
    pub(super) unit: Unit,
    /// The figure as measured; `None` when not measured.
    pub(super) get: fn(&T) -> Option<f64>,
}

/// A figure as a sample's value: a flag is 1 or 0; what is not measured, or not finite (JSON
/// writes it as null), is left out.
pub(super) trait Figure {
    fn figure(&self) -> Option<f64>;
}

impl Figure for f64 {
    fn figure(&self) -> Option<f64> {
        Some(*self).filter(|v| v.is_finite())
    }
}

impl Figure for u64 {
    fn figure(&self) -> Option<f64> {
        Some(*self as f64)
    }
}

impl Figure for i64 {
    fn figure(&self) -> Option<f64> {
        Some(*self as f64)
    }
}

impl Figure for usize {
    fn figure(&self) -> Option<f64> {
        Some(*self as f64)
    }
}

impl Figure for bool {
    fn figure(&self) -> Option<f64> {
        Some(if *self { 1.0 } else { 0.0 })
    }
}

impl<T: Figure> Figure for Option<T> {
    fn figure(&self) -> Option<f64> {
        self.as_ref().and_then(Figure::figure)
    }
}

/// A table of the figures of one type: `NAME <- FIELD, UNIT, |x| FIGURE;` per metric.
macro_rules! metrics {
    ($table:ident: $t:ty { $($name:literal <- $field:literal, $unit:ident, |$x:ident| $get:expr;)+ }) => {
        pub(super) const $table: &[Metric<$t>] = &[$(Metric {
            name: $name,
            field: $field,
            unit: Unit::$unit,
            get: |$x: &$t| $get.figure(),
        }),+];
    };
}

metrics! {
    CPU: Cpu {
        "tacho_cpu_user_ratio" <- "tacho_cpu_user_pct", Percent, |x| x.all.user_pct;
        "tacho_cpu_nice_ratio" <- "tacho_cpu_nice_pct", Percent, |x| x.all.nice_pct;
        "tacho_cpu_system_ratio" <- "tacho_cpu_system_pct", Percent, |x| x.all.system_pct;
        "tacho_cpu_irq_ratio" <- "tacho_cpu_irq_pct", Percent, |x| x.all.irq_pct;
        "tacho_cpu_softirq_ratio" <- "tacho_cpu_softirq_pct", Percent, |x| x.all.softirq_pct;
        "tacho_cpu_iowait_ratio" <- "tacho_cpu_iowait_pct", Percent, |x| x.all.iowait_pct;
        "tacho_cpu_steal_ratio" <- "tacho_cpu_steal_pct", Percent, |x| x.all.steal_pct;
        "tacho_cpu_guest_ratio" <- "tacho_cpu_guest_pct", Percent, |x| x.all.guest_pct;
        "tacho_cpu_idle_ratio" <- "tacho_cpu_idle_pct", Percent, |x| x.all.idle_pct;
    }
}

metrics! {
    CORE: PerCpu {
        "tacho_cpu_core_user_ratio" <- "tacho_cpu_core_user_pct", Percent, |x| x.split.user_pct;
        "tacho_cpu_core_nice_ratio" <- "tacho_cpu_core_nice_pct", Percent, |x| x.split.nice_pct;
        "tacho_cpu_core_system_ratio" <- "tacho_cpu_core_system_pct", Percent, |x| x.split.system_pct;
        "tacho_cpu_core_irq_ratio" <- "tacho_cpu_core_irq_pct", Percent, |x| x.split.irq_pct;
        "tacho_cpu_core_softirq_ratio" <- "tacho_cpu_core_softirq_pct", Percent, |x| x.split.softirq_pct;
        "tacho_cpu_core_iowait_ratio" <- "tacho_cpu_core_iowait_pct", Percent, |x| x.split.iowait_pct;
        "tacho_cpu_core_steal_ratio" <- "tacho_cpu_core_steal_pct", Percent, |x| x.split.steal_pct;
        "tacho_cpu_core_guest_ratio" <- "tacho_cpu_core_guest_pct", Percent, |x| x.split.guest_pct;
        "tacho_cpu_core_idle_ratio" <- "tacho_cpu_core_idle_pct", Percent, |x| x.split.idle_pct;
    }
}

metrics! {
    LOAD: Load {
        "tacho_load_load1" <- "tacho_load_load1", Same, |x| x.load1;
        "tacho_load_load5" <- "tacho_load_load5", Same, |x| x.load5;
        "tacho_load_load15" <- "tacho_load_load15", Same, |x| x.load15;
        "tacho_load_runnable" <- "tacho_load_runnable", Same, |x| x.runnable;
        "tacho_load_blocked" <- "tacho_load_blocked", Same, |x| x.blocked;
        "tacho_load_context_switches_per_second" <- "tacho_load_context_switches_per_s", Same, |x| x.context_switches_per_s;
        "tacho_load_interrupts_per_second" <- "tacho_load_interrupts_per_s", Same, |x| x.interrupts_per_s;
        "tacho_load_forks_per_second" <- "tacho_load_forks_per_s", Same, |x| x.forks_per_s;
        "tacho_load_cpus" <- "tacho_load_cpus", Same, |x| x.cpus;
    }
}

metrics! {
    MEMORY: Memory {
        "tacho_memory_total_bytes" <- "tacho_memory_total_bytes", Same, |x| x.total_bytes;
        "tacho_memory_used_bytes" <- "tacho_memory_used_bytes", Same, |x| x.used_bytes;
        "tacho_memory_free_bytes" <- "tacho_memory_free_bytes", Same, |x| x.free_bytes;
        "tacho_memory_shared_bytes" <- "tacho_memory_shared_bytes", Same, |x| x.shared_bytes;
        "tacho_memory_buffers_bytes" <- "tacho_memory_buffers_bytes", Same, |x| x.buffers_bytes;
        "tacho_memory_cache_bytes" <- "tacho_memory_cache_bytes", Same, |x| x.cache_bytes;
        "tacho_memory_available_bytes" <- "tacho_memory_available_bytes", Same, |x| x.available_bytes;
        "tacho_memory_swap_total_bytes" <- "tacho_memory_swap_total_bytes", Same, |x| x.swap_total_bytes;
        "tacho_memory_swap_used_bytes" <- "tacho_memory_swap_used_bytes", Same, |x| x.swap_used_bytes;
        "tacho_memory_swap_free_bytes" <- "tacho_memory_swap_free_bytes", Same, |x| x.swap_free_bytes;
        "tacho_memory_dirty_bytes" <- "tacho_memory_dirty_bytes", Same, |x| x.dirty_bytes;
        "tacho_memory_writeback_bytes" <- "tacho_memory_writeback_bytes", Same, |x| x.writeback_bytes;
        "tacho_memory_anon_huge_bytes" <- "tacho_memory_anon_huge_bytes", Same, |x| x.anon_huge_bytes;
        "tacho_memory_swap_in_bytes_per_second" <- "tacho_memory_swap_in_bytes_per_s", Same, |x| x.swap_in_bytes_per_s;
        "tacho_memory_swap_out_bytes_per_second" <- "tacho_memory_swap_out_bytes_per_s", Same, |x| x.swap_out_bytes_per_s;
    }
}

metrics! {
    MEMORY_USED: UsedParts {
        "tacho_memory_used_anon_bytes" <- "tacho_memory_used_anon_bytes", Same, |x| x.anon_bytes;
        "tacho_memory_used_shmem_bytes" <- "tacho_memory_used_shmem_bytes", Same, |x| x.shmem_bytes;
        "tacho_memory_used_slab_unreclaimable_bytes" <- "tacho_memory_used_slab_unreclaimable_bytes", Same, |x| x.slab_unreclaimable_bytes;
        "tacho_memory_used_page_tables_bytes" <- "tacho_memory_used_page_tables_bytes", Same, |x| x.page_tables_bytes;
        "tacho_memory_used_kernel_stack_bytes" <- "tacho_memory_used_kernel_stack_bytes", Same, |x| x.kernel_stack_bytes;
        "tacho_memory_used_hugetlb_bytes" <- "tacho_memory_used_hugetlb_bytes", Same, |x| x.hugetlb_bytes;
        "tacho_memory_used_other_bytes" <- "tacho_memory_used_other_bytes", Same, |x| x.other_bytes;
    }
}

metrics! {
    PSI: PsiLine {
        "tacho_psi_avg10_ratio" <- "tacho_psi_avg10_pct", Percent, |x| x.avg10_pct;
        "tacho_psi_avg60_ratio" <- "tacho_psi_avg60_pct", Percent, |x| x.avg60_pct;
        "tacho_psi_avg300_ratio" <- "tacho_psi_avg300_pct", Percent, |x| x.avg300_pct;
        "tacho_psi_stall_seconds" <- "tacho_psi_stall_ms", Millis, |x| x.stall_ms;
        "tacho_psi_stall_ratio" <- "tacho_psi_stall_pct", Percent, |x| x.stall_pct;
    }
}

metrics! {
    DISK: Disk {
        "tacho_disk_rotational" <- "tacho_disk_rotational", Same, |x| x.device.rotational;
        "tacho_disk_virtual_disk" <- "tacho_disk_virtual_disk", Same, |x| x.device.virtual_disk;
        "tacho_disk_r_per_second" <- "tacho_disk_r_per_s", Same, |x| x.r_per_s;
        "tacho_disk_r_bytes_per_second" <- "tacho_disk_rkb_per_s", KbPerSecond, |x| x.rkb_per_s;
        "tacho_disk_rrqm_per_second" <- "tacho_disk_rrqm_per_s", Same, |x| x.rrqm_per_s;
        "tacho_disk_rrqm_ratio" <- "tacho_disk_rrqm_pct", Percent, |x| x.rrqm_pct;
        "tacho_disk_r_await_seconds" <- "tacho_disk_r_await_ms", Millis, |x| x.r_await_ms;
        "tacho_disk_rareq_sz_bytes" <- "tacho_disk_rareq_sz_kb", Kb, |x| x.rareq_sz_kb;
        "tacho_disk_w_per_second" <- "tacho_disk_w_per_s", Same, |x| x.w_per_s;
        "tacho_disk_w_bytes_per_second" <- "tacho_disk_wkb_per_s", KbPerSecond, |x| x.wkb_per_s;
        "tacho_disk_wrqm_per_second" <- "tacho_disk_wrqm_per_s", Same, |x| x.wrqm_per_s;
        "tacho_disk_wrqm_ratio" <- "tacho_disk_wrqm_pct", Percent, |x| x.wrqm_pct;
        "tacho_disk_w_await_seconds" <- "tacho_disk_w_await_ms", Millis, |x| x.w_await_ms;
        "tacho_disk_wareq_sz_bytes" <- "tacho_disk_wareq_sz_kb", Kb, |x| x.wareq_sz_kb;
        "tacho_disk_d_per_second" <- "tacho_disk_d_per_s", Same, |x| x.d_per_s;
        "tacho_disk_d_bytes_per_second" <- "tacho_disk_dkb_per_s", KbPerSecond, |x| x.dkb_per_s;
        "tacho_disk_drqm_per_second" <- "tacho_disk_drqm_per_s", Same, |x| x.drqm_per_s;
        "tacho_disk_drqm_ratio" <- "tacho_disk_drqm_pct", Percent, |x| x.drqm_pct;
        "tacho_disk_d_await_seconds" <- "tacho_disk_d_await_ms", Millis, |x| x.d_await_ms;
        "tacho_disk_dareq_sz_bytes" <- "tacho_disk_dareq_sz_kb", Kb, |x| x.dareq_sz_kb;
        "tacho_disk_f_per_second" <- "tacho_disk_f_per_s", Same, |x| x.f_per_s;
        "tacho_disk_f_await_seconds" <- "tacho_disk_f_await_ms", Millis, |x| x.f_await_ms;
        "tacho_disk_aqu_sz" <- "tacho_disk_aqu_sz", Same, |x| x.aqu_sz;
        "tacho_disk_util_ratio" <- "tacho_disk_util_pct", Percent, |x| x.util_pct;
    }
}

metrics! {
    PROCESS: ProcessGroup {
        "tacho_process_processes" <- "tacho_process_processes", Same, |x| x.processes;
        "tacho_process_cpu_ratio" <- "tacho_process_cpu_pct", Percent, |x| x.cpu_pct;
        "tacho_process_user_ratio" <- "tacho_process_user_pct", Percent, |x| x.user_pct;
        "tacho_process_system_ratio" <- "tacho_process_system_pct", Percent, |x| x.system_pct;
        "tacho_process_read_bytes_per_second" <- "tacho_process_read_bytes_per_s", Same, |x| x.read_bytes_per_s;
        "tacho_process_write_bytes_per_second" <- "tacho_process_write_bytes_per_s", Same, |x| x.write_bytes_per_s;
        "tacho_process_cancelled_write_bytes_per_second" <- "tacho_process_cancelled_write_bytes_per_s", Same, |x| x.cancelled_write_bytes_per_s;
        "tacho_process_io_delay_max_ratio" <- "tacho_process_io_delay_pct", Percent, |x| x.io_delay_pct;
    }
}

metrics! {
    CGROUP: CgroupDevice {
        "tacho_cgroup_rbytes_per_second" <- "tacho_cgroup_rbytes_per_s", Same, |x| x.rbytes_per_s;
        "tacho_cgroup_wbytes_per_second" <- "tacho_cgroup_wbytes_per_s", Same, |x| x.wbytes_per_s;
        "tacho_cgroup_rios_per_second" <- "tacho_cgroup_rios_per_s", Same, |x| x.rios_per_s;
        "tacho_cgroup_wios_per_second" <- "tacho_cgroup_wios_per_s", Same, |x| x.wios_per_s;
        "tacho_cgroup_dbytes_per_second" <- "tacho_cgroup_dbytes_per_s", Same, |x| x.dbytes_per_s;
    }
}

metrics! {
    WRITE_AMPLIFICATION: WriteAmplification {
        "tacho_write_amplification_device_write_bytes" <- "tacho_write_amplification_device_write_bytes", Same, |x| x.device_write_bytes;
        "tacho_write_amplification_process_write_bytes" <- "tacho_write_amplification_process_write_bytes", Same, |x| x.process_write_bytes;
        "tacho_write_amplification_ratio" <- "tacho_write_amplification_ratio", Same, |x| x.ratio;
        "tacho_write_amplification_processes_readable" <- "tacho_write_amplification_processes_readable", Same, |x| x.processes_readable;
        "tacho_write_amplification_processes_total" <- "tacho_write_amplification_processes_total", Same, |x| x.processes_total;
    }
}

metrics! {
    NET: Net {
        "tacho_net_rx_bytes_per_second" <- "tacho_net_rx_bytes_per_s", Same, |x| x.rx_bytes_per_s;
        "tacho_net_tx_bytes_per_second" <- "tacho_net_tx_bytes_per_s", Same, |x| x.tx_bytes_per_s;
        "tacho_net_rx_packets_per_second" <- "tacho_net_rx_packets_per_s", Same, |x| x.rx_packets_per_s;
        "tacho_net_tx_packets_per_second" <- "tacho_net_tx_packets_per_s", Same, |x| x.tx_packets_per_s;
        "tacho_net_rx_errors_per_second" <- "tacho_net_rx_errors_per_s", Same, |x| x.rx_errors_per_s;
        "tacho_net_tx_errors_per_second" <- "tacho_net_tx_errors_per_s", Same, |x| x.tx_errors_per_s;
        "tacho_net_rx_drops_per_second" <- "tacho_net_rx_drops_per_s", Same, |x| x.rx_drops_per_s;
        "tacho_net_tx_drops_per_second" <- "tacho_net_tx_drops_per_s", Same, |x| x.tx_drops_per_s;
    }
}

metrics! {
    LINK: Link {
        "tacho_link_speed_bytes_per_second" <- "tacho_link_speed_mbps", Mbps, |x| x.speed_mbps;
        "tacho_link_shaped_bytes_per_second" <- "tacho_link_shaped_mbps", Mbps, |x| x.shaped_mbps;
        "tacho_link_rx_utilisation_ratio" <- "tacho_link_rx_utilisation_pct", Percent, |x| x.rx_utilisation_pct;
        "tacho_link_tx_utilisation_ratio" <- "tacho_link_tx_utilisation_pct", Percent, |x| x.tx_utilisation_pct;
        "tacho_link_rx_overruns_per_second" <- "tacho_link_rx_overruns_per_s", Same, |x| x.rx_overruns_per_s;
        "tacho_link_tx_fifo_errors_per_second" <- "tacho_link_tx_fifo_errors_per_s", Same, |x| x.tx_fifo_errors_per_s;
        "tacho_link_carrier_changes_per_second" <- "tacho_link_carrier_changes_per_s", Same, |x| x.carrier_changes_per_s;
    }
}

metrics! {
    TCP: Conns {
        "tacho_tcp_established" <- "tacho_tcp_established", Same, |x| x.established;
        "tacho_tcp_tx_bytes_per_second" <- "tacho_tcp_tx_bytes_per_s", Same, |x| x.tx_bytes_per_s;
        "tacho_tcp_rx_bytes_per_second" <- "tacho_tcp_rx_bytes_per_s", Same, |x| x.rx_bytes_per_s;
        "tacho_tcp_owners_unknown" <- "tacho_tcp_owners_unknown", Same, |x| x.owners_unknown;
    }
}

metrics! {
    TCP_PROCESS: ConnGroup {
        "tacho_tcp_process_connections" <- "tacho_tcp_process_connections", Same, |x| x.connections;
        "tacho_tcp_process_tx_bytes_per_second" <- "tacho_tcp_process_tx_bytes_per_s", Same, |x| x.tx_bytes_per_s;
        "tacho_tcp_process_rx_bytes_per_second" <- "tacho_tcp_process_rx_bytes_per_s", Same, |x| x.rx_bytes_per_s;
        "tacho_tcp_process_tx_share_ratio" <- "tacho_tcp_process_tx_share_pct", Percent, |x| x.tx_share_pct;
        "tacho_tcp_process_segs_out" <- "tacho_tcp_process_segs_out", Same, |x| x.segs_out;
        "tacho_tcp_process_retrans" <- "tacho_tcp_process_retrans", Same, |x| x.retrans;
    }
}

metrics! {
    TCP_PEER: ConnGroup {
        "tacho_tcp_peer_connections" <- "tacho_tcp_peer_connections", Same, |x| x.connections;
        "tacho_tcp_peer_tx_bytes_per_second" <- "tacho_tcp_peer_tx_bytes_per_s", Same, |x| x.tx_bytes_per_s;
        "tacho_tcp_peer_rx_bytes_per_second" <- "tacho_tcp_peer_rx_bytes_per_s", Same, |x| x.rx_bytes_per_s;
        "tacho_tcp_peer_tx_share_ratio" <- "tacho_tcp_peer_tx_share_pct", Percent, |x| x.tx_share_pct;
        "tacho_tcp_peer_segs_out" <- "tacho_tcp_peer_segs_out", Same, |x| x.segs_out;
        "tacho_tcp_peer_retrans" <- "tacho_tcp_peer_retrans", Same, |x| x.retrans;
    }
}

metrics! {
    TCP_SERVICE: ConnGroup {
        "tacho_tcp_service_connections" <- "tacho_tcp_service_connections", Same, |x| x.connections;
        "tacho_tcp_service_tx_bytes_per_second" <- "tacho_tcp_service_tx_bytes_per_s", Same, |x| x.tx_bytes_per_s;
        "tacho_tcp_service_rx_bytes_per_second" <- "tacho_tcp_service_rx_bytes_per_s", Same, |x| x.rx_bytes_per_s;
        "tacho_tcp_service_tx_share_ratio" <- "tacho_tcp_service_tx_share_pct", Percent, |x| x.tx_share_pct;
        "tacho_tcp_service_segs_out" <- "tacho_tcp_service_segs_out", Same, |x| x.segs_out;
        "tacho_tcp_service_retrans" <- "tacho_tcp_service_retrans", Same, |x| x.retrans;
    }
}

metrics! {
    DNS: Dns {
        "tacho_dns_queries_per_second" <- "tacho_dns_queries_per_s", Same, |x| x.queries_per_s;
        "tacho_dns_answers_per_second" <- "tacho_dns_answers_per_s", Same, |x| x.answers_per_s;
        "tacho_dns_unanswered" <- "tacho_dns_unanswered", Same, |x| x.unanswered;
        "tacho_dns_response_p50_seconds" <- "tacho_dns_response_p50_ms", Millis, |x| x.response_p50_ms;
        "tacho_dns_response_p90_seconds" <- "tacho_dns_response_p90_ms", Millis, |x| x.response_p90_ms;
        "tacho_dns_response_p99_seconds" <- "tacho_dns_response_p99_ms", Millis, |x| x.response_p99_ms;
        "tacho_dns_names_dropped" <- "tacho_dns_names_dropped", Same, |x| x.names_dropped;
        "tacho_dns_sources_dropped" <- "tacho_dns_sources_dropped", Same, |x| x.sources_dropped;
        "tacho_dns_destinations_dropped" <- "tacho_dns_destinations_dropped", Same, |x| x.destinations_dropped;
        "tacho_dns_unmatched" <- "tacho_dns_unmatched", Same, |x| x.unmatched;
        "tacho_dns_malformed" <- "tacho_dns_malformed", Same, |x| x.malformed;
    }
}

metrics! {
    BLOCK_IO_PROCESS: BlockIoGroup {
        "tacho_block_io_process_processes" <- "tacho_block_io_process_processes", Same, |x| x.processes;
        "tacho_block_io_process_iops" <- "tacho_block_io_process_iops", Same, |x| x.figures.iops;
        "tacho_block_io_process_read_iops" <- "tacho_block_io_process_read_iops", Same, |x| x.figures.read_iops;
        "tacho_block_io_process_write_iops" <- "tacho_block_io_process_write_iops", Same, |x| x.figures.write_iops;
        "tacho_block_io_process_bytes_per_second" <- "tacho_block_io_process_bytes_per_s", Same, |x| x.figures.bytes_per_s;
        "tacho_block_io_process_lat_p50_seconds" <- "tacho_block_io_process_lat_p50_ms", Millis, |x| x.figures.lat_p50_ms;
        "tacho_block_io_process_lat_p99_seconds" <- "tacho_block_io_process_lat_p99_ms", Millis, |x| x.figures.lat_p99_ms;
        "tacho_block_io_process_lat_mean_seconds" <- "tacho_block_io_process_lat_mean_ms", Millis, |x| x.figures.lat_mean_ms;
        "tacho_block_io_process_queue_mean_seconds" <- "tacho_block_io_process_queue_mean_ms", Millis, |x| x.figures.queue_mean_ms;
        "tacho_block_io_process_queued_ratio" <- "tacho_block_io_process_queued_pct", Percent, |x| x.figures.queued_pct;
    }
}

metrics! {
    WAITS: Waits {
        "tacho_waits_dropped_processes" <- "tacho_waits_dropped", Same, |x| x.dropped;
        "tacho_waits_lost" <- "tacho_waits_lost", Same, |x| x.lost;
    }
}

metrics! {
    BLOCK_IO_UNIT: BlockIoUnit {
        "tacho_block_io_unit_processes" <- "tacho_block_io_unit_processes", Same, |x| x.processes;
        "tacho_block_io_unit_iops" <- "tacho_block_io_unit_iops", Same, |x| x.figures.iops;
        "tacho_block_io_unit_read_iops" <- "tacho_block_io_unit_read_iops", Same, |x| x.figures.read_iops;
        "tacho_block_io_unit_write_iops" <- "tacho_block_io_unit_write_iops", Same, |x| x.figures.write_iops;
        "tacho_block_io_unit_bytes_per_second" <- "tacho_block_io_unit_bytes_per_s", Same, |x| x.figures.bytes_per_s;
        "tacho_block_io_unit_lat_p50_seconds" <- "tacho_block_io_unit_lat_p50_ms", Millis, |x| x.figures.lat_p50_ms;
        "tacho_block_io_unit_lat_p99_seconds" <- "tacho_block_io_unit_lat_p99_ms", Millis, |x| x.figures.lat_p99_ms;
        "tacho_block_io_unit_lat_mean_seconds" <- "tacho_block_io_unit_lat_mean_ms", Millis, |x| x.figures.lat_mean_ms;
        "tacho_block_io_unit_queue_mean_seconds" <- "tacho_block_io_unit_queue_mean_ms", Millis, |x| x.figures.queue_mean_ms;
        "tacho_block_io_unit_queued_ratio" <- "tacho_block_io_unit_queued_pct", Percent, |x| x.figures.queued_pct;
    }
}

metrics! {
    WAIT_PROCESS: WaitGroup {
        "tacho_wait_process_processes" <- "tacho_wait_process_processes", Same, |x| x.processes;
        "tacho_wait_process_threads" <- "tacho_wait_process_threads", Same, |x| x.threads;
    }
}

metrics! {
    WAIT_CLASS: ClassShare {
        "tacho_wait_process_seconds" <- "tacho_wait_process_ms", Millis, |x| x.ms;
        "tacho_wait_process_ratio" <- "tacho_wait_process_pct", Percent, |x| x.pct;
        "tacho_wait_process_waits" <- "tacho_wait_process_count", Same, |x| x.count;
        "tacho_wait_process_mean_seconds" <- "tacho_wait_process_mean_wait_ms", Millis, |x| x.mean_wait_ms;
    }
}
