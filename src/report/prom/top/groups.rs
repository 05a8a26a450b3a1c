//! Process rows grouped by service and command for `/metrics`: a series per pid would be
//! new every time another process reaches the top rows, on every host (node_exporter
//! refused per-pid metrics for this reason). Rows of one (unit, command) are summed into one
//! group, in the order their first member comes (the section's sort), and at most
//! [`MAX_GROUPS`] groups a section are written; how many were left out is a metric of its own.

use crate::diagnose::model::Process;
use crate::diagnose::model::accumulate::AccumulatedProcess;
use crate::diagnose::model::block_io::{BlockIoFigures, BlockIoProcess};
use crate::diagnose::model::conns::ConnGroup;
use crate::diagnose::model::waits::{ClassShare, ProcessWaits};
use crate::diagnose::sample::waits::WaitClass;

/// Groups written per section; the rest are counted in `tacho_metrics_groups_cut`.
pub(super) const MAX_GROUPS: usize = 20;

/// Rows grouped by `key` in the order each key first comes, the first [`MAX_GROUPS`] kept,
/// with how many groups were left out.
pub(super) fn grouped<'a, R, K: PartialEq>(
    rows: impl IntoIterator<Item = &'a R>,
    key: impl Fn(&R) -> K,
) -> (Vec<(K, Vec<&'a R>)>, usize) {
    let mut groups: Vec<(K, Vec<&R>)> = Vec::new();
    for r in rows {
        let k = key(r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    let cut = groups.len().saturating_sub(MAX_GROUPS);
    groups.truncate(MAX_GROUPS);
    (groups, cut)
}

/// The unit a row runs in, `""` when unknown (Prometheus reads an empty label as absent).
pub(super) fn unit(u: &Option<String>) -> String {
    u.clone().unwrap_or_default()
}

/// The sum of the members' figures; `None` when any member's was not measured (a partial sum
/// would pass for the whole group's).
fn sum<R>(members: &[&R], get: impl Fn(&R) -> Option<f64>) -> Option<f64> {
    members.iter().map(|r| get(r)).sum()
}

/// The largest of the members' figures; `None` when any member's was not measured.
fn max<R>(members: &[&R], get: impl Fn(&R) -> Option<f64>) -> Option<f64> {
    let all: Option<Vec<f64>> = members.iter().map(|r| get(r)).collect();
    all?.into_iter().reduce(f64::max)
}

/// The processes of one unit and command, their figures together.
pub(super) struct ProcessGroup {
    pub(super) processes: usize,
    pub(super) cpu_pct: f64,
    pub(super) user_pct: f64,
    pub(super) system_pct: f64,
    pub(super) read_bytes_per_s: Option<f64>,
    pub(super) write_bytes_per_s: Option<f64>,
    pub(super) cancelled_write_bytes_per_s: Option<f64>,
    /// The largest member's: shares of the interval do not add up across processes.
    pub(super) io_delay_pct: Option<f64>,
}

impl ProcessGroup {
    pub(super) fn of(m: &[&Process]) -> ProcessGroup {
        ProcessGroup {
            processes: m.len(),
            cpu_pct: m.iter().map(|p| p.cpu_pct).sum(),
            user_pct: m.iter().map(|p| p.user_pct).sum(),
            system_pct: m.iter().map(|p| p.system_pct).sum(),
            read_bytes_per_s: sum(m, |p| p.read_bytes_per_s),
            write_bytes_per_s: sum(m, |p| p.write_bytes_per_s),
            cancelled_write_bytes_per_s: sum(m, |p| p.cancelled_write_bytes_per_s),
            io_delay_pct: max(m, |p| p.io_delay_pct),
        }
    }
}

/// The block I/O of one unit and command on one device.
pub(super) struct BlockIoGroup {
    pub(super) processes: usize,
    /// Rates summed; the latency figures only for a group of one process (percentiles do
    /// not add up; `tacho_block_io_unit_*` has the unit's own).
    pub(super) figures: BlockIoFigures,
}

impl BlockIoGroup {
    pub(super) fn of(m: &[&BlockIoProcess]) -> BlockIoGroup {
        let total = |get: fn(&BlockIoFigures) -> f64| m.iter().map(|p| get(&p.figures)).sum();
        let mut figures = BlockIoFigures {
            iops: total(|f| f.iops),
            read_iops: total(|f| f.read_iops),
            write_iops: total(|f| f.write_iops),
            bytes_per_s: total(|f| f.bytes_per_s),
            lat_p50_ms: None,
            lat_p99_ms: None,
            lat_mean_ms: None,
            queue_mean_ms: None,
            queued_pct: None,
        };
        if let [one] = m {
            figures = one.figures.clone();
        }
        BlockIoGroup {
            processes: m.len(),
            figures,
        }
    }
}

/// The waits of one unit and command: threads and time by class together.
pub(super) struct WaitGroup {
    pub(super) processes: usize,
    pub(super) threads: u64,
    pub(super) classes: Vec<ClassShare>,
}

impl WaitGroup {
    pub(super) fn of(m: &[&ProcessWaits]) -> WaitGroup {
        let threads: u64 = m.iter().map(|p| u64::from(p.threads)).sum();
        let mut classes: Vec<ClassShare> = Vec::new();
        // A share's base is threads × interval: the group's is the members' bases together.
        let mut weighted: Vec<(WaitClass, f64)> = Vec::new();
        for p in m {
            for c in &p.classes {
                let w = c.pct * f64::from(p.threads);
                match classes.iter_mut().find(|g| g.class == c.class) {
                    Some(g) => {
                        g.ms += c.ms;
                        g.count += c.count;
                    }
                    None => classes.push(ClassShare {
                        on: None,
                        call: None,
                        ..c.clone()
                    }),
                }
                match weighted.iter_mut().find(|(k, _)| *k == c.class) {
                    Some((_, sum)) => *sum += w,
                    None => weighted.push((c.class, w)),
                }
            }
        }
        for g in &mut classes {
            let w = weighted
                .iter()
                .find(|(k, _)| *k == g.class)
                .map_or(0.0, |x| x.1);
            g.pct = if threads > 0 { w / threads as f64 } else { 0.0 };
            g.mean_wait_ms = if g.count > 0 {
                g.ms / g.count as f64
            } else {
                0.0
            };
        }
        WaitGroup {
            processes: m.len(),
            threads,
            classes,
        }
    }
}

/// A TCP group by process, its key without the pid (` (pid N)`), for grouping by command.
pub(super) fn tcp_command(g: &ConnGroup) -> String {
    match g.pid {
        Some(pid) => g
            .key
            .strip_suffix(&format!(" (pid {pid})"))
            .unwrap_or(&g.key)
            .to_string(),
        None => g.key.clone(),
    }
}

/// The TCP groups of one unit and command summed, as one group keyed by the command.
pub(super) fn tcp_group(command: &str, m: &[&ConnGroup]) -> ConnGroup {
    ConnGroup {
        key: command.to_string(),
        key_hex: None,
        pid: None,
        unit: m.first().and_then(|g| g.unit.clone()),
        connections: m.iter().map(|g| g.connections).sum(),
        tx_bytes_per_s: m.iter().map(|g| g.tx_bytes_per_s).sum(),
        rx_bytes_per_s: m.iter().map(|g| g.rx_bytes_per_s).sum(),
        tx_share_pct: m.iter().map(|g| g.tx_share_pct).sum(),
        segs_out: m.iter().map(|g| g.segs_out).sum(),
        retrans: m.iter().map(|g| g.retrans).sum(),
    }
}

/// The accumulated totals of one unit and command: read, written, CPU seconds.
pub(super) fn accumulated(m: &[&AccumulatedProcess]) -> [(&'static str, f64); 3] {
    [
        (
            "tacho_process_read_bytes_total",
            m.iter().map(|p| p.read_bytes as f64).sum(),
        ),
        (
            "tacho_process_write_bytes_total",
            m.iter().map(|p| p.write_bytes as f64).sum(),
        ),
        (
            "tacho_process_cpu_seconds_total",
            m.iter().map(|p| p.user_s + p.system_s).sum(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_one_key_are_one_group_in_first_order_and_the_rest_is_counted() {
        let rows: Vec<(u32, &str)> = (0..50).map(|i| (i, ["a", "b"][i as usize % 2])).collect();
        let (groups, cut) = grouped(&rows, |r| r.1);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, "a");
        assert_eq!(groups[0].1.len(), 25);
        assert_eq!(cut, 0);
        let many: Vec<u32> = (0..(MAX_GROUPS as u32 + 7)).collect();
        let (groups, cut) = grouped(&many, |r| *r);
        assert_eq!((groups.len(), cut), (MAX_GROUPS, 7));
        assert_eq!(groups[0].0, 0, "the first rows (the sort's) are kept");
    }

    #[test]
    fn a_figure_one_member_lacks_is_not_summed() {
        let a = Some(2.0);
        let rows = [a, None];
        let refs: Vec<&Option<f64>> = rows.iter().collect();
        assert_eq!(sum(&refs, |r| *r), None);
        assert_eq!(max(&refs, |r| *r), None);
        let rows = [a, Some(3.0)];
        let refs: Vec<&Option<f64>> = rows.iter().collect();
        assert_eq!(sum(&refs, |r| *r), Some(5.0));
        assert_eq!(max(&refs, |r| *r), Some(3.0));
    }

    #[test]
    fn a_tcp_key_loses_its_pid() {
        let g = ConnGroup {
            key: "php-fpm (pid 3111)".into(),
            key_hex: None,
            pid: Some(3111),
            unit: Some("php-fpm.service".into()),
            connections: 1,
            tx_bytes_per_s: 1.0,
            rx_bytes_per_s: 1.0,
            tx_share_pct: 10.0,
            segs_out: 1,
            retrans: 0,
        };
        assert_eq!(tcp_command(&g), "php-fpm");
        let both = tcp_group("php-fpm", &[&g, &g]);
        assert_eq!((both.connections, both.tx_share_pct), (2, 20.0));
        assert_eq!(both.pid, None);
    }
}
