//! The figures of a sample as Prometheus text exposition (format 0.0.4) for `/metrics`.
//!
//! Each exported figure is listed in [`metrics`] with its name and unit: `disks[].util_pct`
//! is `tacho_disk_util_ratio{device="vda"}` from 0 to 1, `w_await_ms` is `w_await_seconds`,
//! `wkb_per_s` is `w_bytes_per_second`. The figures of the last interval (rates, shares) are
//! gauges; the totals since start of `--accumulate` are counters (`_total`).
//!
//! Process figures are labelled by unit and command, never by pid, and capped ([`groups`]).
//! Each device's traced queue and service times are histograms counted since the exporter
//! started ([`Exporter`]), with the same bucket bounds on every host, so
//! `histogram_quantile` over `sum by (le)` gives a fleet's or a group's percentile.

mod groups;
mod metrics;

use std::collections::BTreeMap;

use super::{Family, exposition};
use crate::bpf::hist::{LOG2_SLOTS, Log2Hist};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::Attribution;
use crate::diagnose::model::finding::Severity;
use groups::{BlockIoGroup, ProcessGroup, WaitGroup};
use metrics::{Metric, Unit};

/// Finite bucket bounds of the latency histograms: log2 µs slot `i` counts under `le` =
/// 2^(i+1) µs, from 2 µs to 2^24 µs (16.8 s); the slots above go to `+Inf` only.
const LATENCY_BOUNDS: usize = 24;

/// What `/metrics` keeps from sample to sample: each traced device's queue and service
/// times since the exporter started (histogram buckets are counters).
#[derive(Default)]
pub struct Exporter {
    /// By (device, display name), in the order the exposition lists them.
    latency: BTreeMap<(String, String), DeviceLatency>,
}

#[derive(Default)]
struct DeviceLatency {
    queue: Cumulative,
    service: Cumulative,
}

/// A histogram's counts since start: per log2 µs slot, their sum in µs.
#[derive(Default)]
struct Cumulative {
    slots: Vec<u64>,
    sum_us: f64,
}

impl Cumulative {
    fn add(&mut self, h: &Log2Hist) {
        self.slots.resize(LOG2_SLOTS.max(h.slots.len()), 0);
        for (total, c) in self.slots.iter_mut().zip(&h.slots) {
            *total = total.saturating_add(*c);
        }
        self.sum_us += h.sum_us;
    }

    /// Writes `_bucket` (cumulative, `le` in seconds), `_sum` and `_count` to `family`.
    fn write(&self, family: &mut Family, labels: &[(&str, &str)]) {
        let mut seen = 0u64;
        for (i, c) in self.slots.iter().enumerate().take(LATENCY_BOUNDS) {
            seen = seen.saturating_add(*c);
            // 2^(i+1) µs, exact in decimal seconds.
            let le = ((1u64 << (i + 1)) as f64 / 1e6).to_string();
            let with_le: Vec<(&str, &str)> = labels
                .iter()
                .copied()
                .chain([("le", le.as_str())])
                .collect();
            family.sample_named("_bucket", &with_le, None, seen as f64);
        }
        let count = self.slots.iter().fold(0u64, |a, c| a.saturating_add(*c));
        let with_inf: Vec<(&str, &str)> = labels.iter().copied().chain([("le", "+Inf")]).collect();
        family.sample_named("_bucket", &with_inf, None, count as f64);
        family.sample_named("_sum", labels, None, self.sum_us / 1e6);
        family.sample_named("_count", labels, None, count as f64);
    }
}

impl Exporter {
    /// Renders one sample, its devices' latencies added to those since start.
    pub fn render(&mut self, s: &TopSample) -> String {
        for d in &s.disks {
            if let Some(l) = &d.latency_log2 {
                let key = (d.device.name.clone(), d.device.display_name.clone());
                let dev = self.latency.entry(key).or_default();
                dev.queue.add(&l.queue);
                dev.service.add(&l.service);
            }
        }
        let mut families = figures(s);
        if !self.latency.is_empty() {
            let mut queue = Family::histogram(
                "tacho_disk_queue_seconds",
                "Time block requests waited before the driver got them (eBPF: creation to \
                 dispatch), counted since the exporter started; bounds double (a request of \
                 exactly a bound counts in the next), the sum is within 1/32.",
            );
            let mut service = Family::histogram(
                "tacho_disk_service_seconds",
                "Time the device took to serve a block request once dispatched (eBPF: \
                 dispatch to completion), counted since the exporter started; bounds double \
                 (a request of exactly a bound counts in the next), the sum is within 1/32.",
            );
            for ((device, name), l) in &self.latency {
                let labels = [("device", device.as_str()), ("name", name.as_str())];
                l.queue.write(&mut queue, &labels);
                l.service.write(&mut service, &labels);
            }
            families.extend([queue, service]);
            families.sort_by(|a, b| a.name().cmp(b.name()));
        }
        exposition(&families)
    }
}

/// The families of one rendering, by name (the exposition lists them sorted), each holding
/// its samples in the order they were added.
#[derive(Default)]
struct Families(BTreeMap<String, Family>);

impl Families {
    /// Adds `value` (in `unit`) as a sample of `name`; `field` is the JSON field it comes
    /// from, which the family's HELP names.
    fn add(&mut self, name: &str, field: &str, unit: Unit, labels: &[(&str, &str)], value: f64) {
        // Not a number the JSON could hold (it writes null): no sample.
        if !value.is_finite() {
            return;
        }
        let family = self.0.entry(name.to_string()).or_insert_with(|| {
            if name.ends_with("_total") {
                Family::counter(name, help(field))
            } else {
                Family::new(name, help(field))
            }
        });
        family.sample(labels, None, unit.base(value));
    }

    /// How many groups of rows `section` left out ([`groups::MAX_GROUPS`] are written).
    fn cut(&mut self, section: &str, groups: usize) {
        let name = "tacho_metrics_groups_cut";
        self.0.entry(name.to_string()).or_insert_with(|| {
            Family::new(
                name,
                format!(
                    "Groups of process rows (by unit and command) of a section left out of \
                     this scrape: at most {} a section are written, first by the section's sort.",
                    groups::MAX_GROUPS
                ),
            )
        });
        self.add(
            name,
            name,
            Unit::Same,
            &[("section", section)],
            groups as f64,
        );
    }

    /// Every figure of `x` that `metrics` lists and that was measured.
    fn figures<T>(&mut self, metrics: &[Metric<T>], x: &T, labels: &[(&str, &str)]) {
        for m in metrics {
            if let Some(v) = (m.get)(x) {
                self.add(m.name, m.field, m.unit, labels, v);
            }
        }
    }
}

/// The families of one sample's figures (all but the latency histograms), by name.
fn figures(s: &TopSample) -> Vec<Family> {
    let mut f = Families::default();
    f.figures(metrics::CPU, &s.cpu, &[]);
    for c in &s.cpu.per_cpu {
        f.figures(metrics::CORE, c, &[("cpu", &c.cpu.to_string())]);
    }
    f.figures(metrics::LOAD, &s.load, &[]);
    f.figures(metrics::MEMORY, &s.memory, &[]);
    f.figures(metrics::MEMORY_USED, &s.memory.used_parts, &[]);
    for (counter, v) in &s.vm_events {
        let labels = [("counter", counter.as_str())];
        f.add(
            "tacho_vm_events",
            "tacho_vm_events",
            Unit::Same,
            &labels,
            *v as f64,
        );
    }
    for (resource, r) in [
        ("cpu", &s.psi.cpu),
        ("io", &s.psi.io),
        ("memory", &s.psi.memory),
    ] {
        let Some(r) = r else { continue };
        for (kind, line) in [("some", Some(&r.some)), ("full", r.full.as_ref())] {
            if let Some(line) = line {
                let labels = [("resource", resource), ("kind", kind)];
                f.figures(metrics::PSI, line, &labels);
            }
        }
    }
    for d in &s.disks {
        let labels = [
            ("device", d.device.name.as_str()),
            ("name", d.device.display_name.as_str()),
        ];
        f.figures(metrics::DISK, d, &labels);
    }
    // Grouped by unit and command: a pid label would make new series whenever another
    // process reaches the top rows (see `groups`).
    let (groups, cut) = groups::grouped(&s.processes, |p| (groups::unit(&p.unit), p.comm.clone()));
    f.cut("processes", cut);
    for ((unit, comm), members) in &groups {
        let labels = [("unit", unit.as_str()), ("comm", comm.as_str())];
        f.figures(metrics::PROCESS, &ProcessGroup::of(members), &labels);
    }
    // At most --top rows each (the JSON's), grouped as the processes are.
    let (groups, cut) = groups::grouped(&s.block_io_processes, |p| {
        (groups::unit(&p.unit), p.comm.clone(), p.device.clone())
    });
    f.cut("block_io_processes", cut);
    for ((unit, comm, device), members) in &groups {
        // Label values are escaped as the format requires.
        let labels = [
            ("unit", unit.as_str()),
            ("comm", comm.as_str()),
            ("device", device.as_str()),
        ];
        f.figures(
            metrics::BLOCK_IO_PROCESS,
            &BlockIoGroup::of(members),
            &labels,
        );
    }
    for u in &s.block_io_units {
        let labels = [("unit", u.unit.as_str()), ("device", u.device.as_str())];
        f.figures(metrics::BLOCK_IO_UNIT, u, &labels);
    }
    for c in &s.cgroups {
        for d in &c.devices {
            let labels = [("cgroup", c.path.as_str()), ("device", d.device.as_str())];
            f.figures(metrics::CGROUP, d, &labels);
        }
    }
    f.figures(metrics::WRITE_AMPLIFICATION, &s.write_amplification, &[]);
    for n in &s.net {
        f.figures(metrics::NET, n, &[("interface", &n.name)]);
    }
    for l in &s.links {
        f.figures(metrics::LINK, l, &[("interface", &l.name)]);
    }
    if let Some(conns) = &s.connections {
        f.figures(metrics::TCP, conns, &[]);
        let (by_command, cut) = groups::grouped(&conns.by_process, |g| {
            (groups::unit(&g.unit), groups::tcp_command(g))
        });
        f.cut("tcp_processes", cut);
        for ((unit, command), members) in &by_command {
            let g = groups::tcp_group(command, members);
            let labels = [("process", command.as_str()), ("unit", unit.as_str())];
            f.figures(metrics::TCP_PROCESS, &g, &labels);
        }
        for (groups, metrics, label) in [
            (&conns.by_remote, metrics::TCP_PEER, "peer"),
            (&conns.by_service, metrics::TCP_SERVICE, "service"),
        ] {
            for g in groups {
                f.figures(metrics, g, &[(label, &g.key)]);
            }
        }
    }
    // Bounded: at most 64 processes a sample, 4 classes each.
    if let Some(waits) = &s.waits {
        f.figures(metrics::WAITS, waits, &[]);
        let (by_command, cut) = groups::grouped(&waits.processes, |p| {
            (groups::unit(&p.unit), p.comm.clone())
        });
        f.cut("wait_processes", cut);
        for ((unit, comm), members) in &by_command {
            let g = WaitGroup::of(members);
            let labels = [("unit", unit.as_str()), ("comm", comm.as_str())];
            f.figures(metrics::WAIT_PROCESS, &g, &labels);
            for c in &g.classes {
                let labels = [labels[0], labels[1], ("class", c.class.word())];
                f.figures(metrics::WAIT_CLASS, c, &labels);
            }
        }
    }
    if let Some(dns) = &s.dns {
        f.figures(metrics::DNS, dns, &[]);
        for (map, name, label) in [
            (&dns.rcodes, "tacho_dns_answers", "rcode"),
            (&dns.qtypes, "tacho_dns_queries", "type"),
        ] {
            for (k, v) in map {
                f.add(name, name, Unit::Same, &[(label, k)], *v as f64);
            }
        }
    }
    let mut culprits_cut = 0;
    for finding in &s.findings {
        let severity = match finding.severity {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        };
        let about = [
            ("code", finding.code.as_str()),
            ("subject", finding.subject.as_str()),
        ];
        let labels = [about[0], about[1], ("severity", severity)];
        f.add("tacho_finding", "tacho_finding", Unit::Same, &labels, 1.0);
        // A finding names a few culprits; two of one command and unit are summed.
        let (by_command, cut) = groups::grouped(&finding.culprits, |c| {
            let how = match c.attribution {
                Attribution::Exact { .. } => "exact",
                Attribution::Likely { .. } => "likely",
            };
            (c.comm.clone(), groups::unit(&c.unit), how)
        });
        culprits_cut += cut;
        for ((comm, unit, how), members) in &by_command {
            let labels = [
                about[0],
                about[1],
                ("comm", comm.as_str()),
                ("unit", unit.as_str()),
                ("attribution", how),
            ];
            let share: f64 = members.iter().map(|c| c.share_pct).sum();
            f.add(
                "tacho_finding_culprit_share_ratio",
                "tacho_finding_culprit_share_pct",
                Unit::Percent,
                &labels,
                share,
            );
        }
    }
    f.cut("finding_culprits", culprits_cut);
    if let Some(acc) = &s.accumulated {
        let (by_command, cut) =
            groups::grouped(&acc.processes, |p| (groups::unit(&p.unit), p.comm.clone()));
        f.cut("accumulated_processes", cut);
        for ((unit, comm), members) in &by_command {
            let labels = [("unit", unit.as_str()), ("comm", comm.as_str())];
            for (name, v) in groups::accumulated(members) {
                f.add(name, name, Unit::Same, &labels, v);
            }
        }
        for u in &acc.services {
            let labels = [("unit", u.unit.as_str())];
            for (name, v) in [
                ("tacho_service_read_bytes_total", u.read_bytes as f64),
                ("tacho_service_write_bytes_total", u.write_bytes as f64),
                ("tacho_service_cpu_seconds_total", u.cpu_s),
            ] {
                f.add(name, name, Unit::Same, &labels, v);
            }
        }
    }
    let interval = ("tacho_interval_seconds", "tacho_interval_s");
    f.add(interval.0, interval.1, Unit::Same, &[], s.interval_s);
    f.0.into_values().collect()
}

/// HELP for a metric read from a `tacho.top.v3` field: where to read what it means.
fn help(field: &str) -> String {
    format!(
        "tacho top figure {field} in base units (seconds, bytes, ratios 0-1); see tacho top \
         --json for the field."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::tests::fixture_top_sample;

    /// The captured sample's JSON (as `top --json` writes it) and `/metrics` text, byte for
    /// byte as tacho 0.1.0 wrote them (`TACHO_BLESS=1` rewrites the goldens).
    #[test]
    fn the_captured_sample_renders_as_the_goldens() {
        let golden =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema/golden");
        let mut s = fixture_top_sample();
        // The fixture is stamped when it is built; the golden's stamp stands for it.
        s.time_unix_s = 1795573250.7573602;
        for (name, text) in [
            ("top-sample.json", serde_json::to_string_pretty(&s).unwrap()),
            ("top-metrics.prom", Exporter::default().render(&s)),
        ] {
            let path = golden.join(name);
            if std::env::var_os("TACHO_BLESS").is_some() {
                std::fs::write(&path, &text).unwrap();
            }
            let want = std::fs::read_to_string(&path).unwrap();
            assert!(want == text, "{name} differs from its golden:\n{text}");
        }
    }

    /// The captured sample with every section `/metrics` exports filled: links, cgroups,
    /// TCP groups, DNS, a finding's culprit and accumulated totals.
    fn every_section() -> TopSample {
        use crate::bpf::hist::{BUCKETS, bucket};
        use crate::diagnose::model::accumulate::{
            Accumulated, AccumulatedProcess, AccumulatedService,
        };
        use crate::diagnose::model::process::{Cgroup, CgroupDevice};
        let mut s = fixture_top_sample();
        s.time_unix_s = 1795573250.7573602;
        s.disks[0].queue_p50_ms = Some(0.25);
        s.disks[0].service_p50_ms = Some(0.5);
        s.disks[0].service_p99_ms = Some(4.0);
        // Traced requests: 3 queued under 1 µs, 2 served in about 0.5 ms.
        let (mut queue, mut service) = (vec![0; BUCKETS], vec![0; BUCKETS]);
        queue[bucket(800)] = 3;
        service[bucket(500_000)] = 2;
        s.disks[0].latency_log2 = Some(Box::new(crate::diagnose::model::disk::LatencyLog2 {
            queue: Log2Hist::of(&queue),
            service: Log2Hist::of(&service),
        }));
        s.processes[0].io_delay_pct = Some(12.5);
        s.links = vec![crate::diagnose::model::net::Link {
            name: "eth0".into(),
            speed_mbps: Some(1000),
            duplex: Some("full".into()),
            shaper: Some("tbf".into()),
            shaped_mbps: Some(8.0),
            rx_utilisation_pct: Some(2.0),
            tx_utilisation_pct: Some(94.0),
            rx_overruns_per_s: Some(1.5),
            tx_fifo_errors_per_s: Some(0.5),
            carrier_changes_per_s: Some(0.0),
        }];
        s.cgroups = vec![Cgroup {
            path: "/system.slice/db.service".into(),
            devices: vec![CgroupDevice {
                device: "vda".into(),
                rbytes_per_s: 4096.0,
                wbytes_per_s: 8192.5,
                rios_per_s: 1.0,
                wios_per_s: 2.0,
                dbytes_per_s: 0.0,
            }],
        }];
        s.connections = Some(php_fpm_conns(1));
        s.waits = Some(crate::diagnose::model::waits::Waits {
            processes: vec![crate::diagnose::model::waits::ProcessWaits {
                pid: 812,
                comm: "php-fpm".into(),
                comm_hex: None,
                unit: Some("php-fpm.service".into()),
                threads: 1,
                classes: vec![crate::diagnose::model::waits::ClassShare {
                    class: crate::diagnose::sample::waits::WaitClass::Network,
                    ms: 710.0,
                    pct: 71.0,
                    count: 4,
                    mean_wait_ms: 177.5,
                    on: Some("10.0.0.5:3306".into()),
                    call: Some("recvfrom".into()),
                }],
            }],
            dropped: 2,
            lost: 0,
        });
        let mut dns = crate::diagnose::model::dns::between(&dns_counts(), 2.0);
        (dns.response_p50_ms, dns.response_p90_ms) = (Some(1.5), Some(20.0));
        dns.response_p99_ms = Some(250.0);
        s.dns = Some(dns);
        s.accumulated = Some(Accumulated {
            since_unix_s: 0.0,
            processes: vec![AccumulatedProcess {
                pid: 4242,
                comm: "backupd".into(),
                comm_hex: None,
                unit: Some("backup.service".into()),
                read_bytes: 7,
                write_bytes: 283 << 20,
                user_s: 1.5,
                system_s: 12.25,
                io_delay_s: 0.0,
                exited: true,
            }],
            services: vec![AccumulatedService {
                unit: "backup.service".into(),
                read_bytes: 7,
                write_bytes: 283 << 20,
                cpu_s: 13.75,
                processes: 1,
            }],
        });
        use crate::diagnose::model::block_io::{BlockIoFigures, BlockIoProcess, BlockIoUnit};
        let figures = BlockIoFigures {
            iops: 4100.0,
            read_iops: 4000.0,
            write_iops: 100.0,
            bytes_per_s: 33_587_200.0,
            lat_p50_ms: Some(2.5),
            lat_p99_ms: Some(38.0),
            lat_mean_ms: Some(4.0),
            queue_mean_ms: Some(3.0),
            queued_pct: Some(75.0),
        };
        s.block_io_processes = vec![BlockIoProcess {
            pid: Some(812),
            // A name any user can choose: quotes, a backslash and a newline in a label.
            comm: "pg\"x\\\n".into(),
            comm_hex: None,
            unit: Some("postgresql.service".into()),
            exited: false,
            device: "vda".into(),
            figures: figures.clone(),
        }];
        s.block_io_units = vec![BlockIoUnit {
            unit: "postgresql.service".into(),
            device: "vda".into(),
            processes: 1,
            figures,
        }];
        s
    }

    #[test]
    fn a_sample_with_every_section_renders_as_its_golden() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/schema/golden/top-metrics-every-section.prom");
        let text = Exporter::default().render(&every_section());
        if std::env::var_os("TACHO_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap();
        assert!(want == text, "differs from its golden:\n{text}");
    }

    /// No series of any section is labelled by pid, nor names one in a label's value.
    #[test]
    fn no_series_is_labelled_by_pid() {
        let text = Exporter::default().render(&every_section());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(!line.contains("pid"), "{line}");
        }
        assert!(text.contains(
            "tacho_block_io_process_iops{unit=\"postgresql.service\",comm=\"pg\\\"x\\\\\\n\",device=\"vda\"} 4100\n"
        ), "{text}");
        assert!(text.contains("tacho_metrics_groups_cut{section=\"processes\"} 0\n"));
    }

    /// Two processes of one unit and command are one group: rates summed, the count said.
    #[test]
    fn processes_of_one_unit_and_command_are_summed() {
        let mut s = fixture_top_sample();
        let mut twin = s.processes[0].clone();
        twin.pid += 1;
        let first = &s.processes[0];
        let (cpu, comm, unit) = (
            first.cpu_pct + twin.cpu_pct,
            first.comm.clone(),
            first.unit.clone(),
        );
        s.processes.push(twin);
        let text = Exporter::default().render(&s);
        let labels = format!(
            "{{unit=\"{}\",comm=\"{}\"}}",
            unit.unwrap_or_default(),
            crate::report::prom::escape_label(&comm)
        );
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{name}{labels} ")))
                .unwrap_or_else(|| panic!("no {name}{labels} in\n{text}"))
                .rsplit_once(' ')
                .unwrap()
                .1
                .parse::<f64>()
                .unwrap()
        };
        assert_eq!(line("tacho_process_cpu_ratio"), cpu / 100.0);
        assert!(line("tacho_process_processes") >= 2.0);
    }

    /// Each device's latency buckets are counters since start: a second sample's requests are
    /// added to the first's, every bucket holds those below it, and `+Inf` is the count.
    #[test]
    fn device_latency_is_a_histogram_counted_since_start() {
        use crate::bpf::block::DevLatency;
        use crate::bpf::hist::{BUCKETS, bucket};
        let mut hist = vec![0; BUCKETS];
        hist[bucket(3_000)] = 4; // 3 µs: under le 4 µs
        hist[bucket(1_500_000)] = 1; // 1.5 ms: under le 2.048 ms
        let lat = DevLatency {
            queue: hist.clone(),
            service: hist.clone(),
            total: hist,
        };
        let mut s = fixture_top_sample();
        s.disks[0].set_latency(&lat);
        let dev = format!("device=\"{0}\",name=\"{0}\"", s.disks[0].device.name);
        let mut exporter = Exporter::default();
        exporter.render(&s);
        let text = exporter.render(&s);
        for line in [
            "# TYPE tacho_disk_service_seconds histogram\n".to_string(),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"0.000002\"}} 0\n"),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"0.000004\"}} 8\n"),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"0.001024\"}} 8\n"),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"0.002048\"}} 10\n"),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"16.777216\"}} 10\n"),
            format!("tacho_disk_service_seconds_bucket{{{dev},le=\"+Inf\"}} 10\n"),
            format!("tacho_disk_service_seconds_count{{{dev}}} 10\n"),
            format!("tacho_disk_queue_seconds_count{{{dev}}} 10\n"),
        ] {
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
        let sum_prefix = format!("tacho_disk_service_seconds_sum{{{dev}}} ");
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&sum_prefix))
            .unwrap()
            .parse()
            .unwrap();
        let exact = 2.0 * (4.0 * 3e-6 + 1.5e-3);
        assert!((sum - exact).abs() < exact / 32.0, "{sum}");
        assert!(
            !text.contains("p99"),
            "no percentile gauges of devices:\n{text}"
        );
        // Families stay sorted by name with the histograms among them.
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert!(names.is_sorted(), "{names:?}");
    }

    #[test]
    fn every_figure_is_a_gauge_labelled_by_what_it_is_about() {
        let text = Exporter::default().render(&fixture_top_sample());
        assert!(
            text.contains("# TYPE tacho_disk_util_ratio gauge\n"),
            "{text}"
        );
        assert!(text.contains("tacho_disk_util_ratio{device=\"vda\",name=\"vda\"} "));
        assert!(text.contains("# HELP tacho_interval_seconds tacho top figure tacho_interval_s "));
        assert!(text.contains("tacho_interval_seconds 1\n"), "{text}");
        let mut s = fixture_top_sample();
        s.links = vec![crate::diagnose::model::net::Link {
            name: "eth0".into(),
            speed_mbps: Some(1000),
            duplex: Some("full".into()),
            shaper: None,
            shaped_mbps: None,
            rx_utilisation_pct: Some(2.0),
            tx_utilisation_pct: Some(94.0),
            rx_overruns_per_s: None,
            tx_fifo_errors_per_s: None,
            carrier_changes_per_s: Some(0.0),
        }];
        let links = Exporter::default().render(&s);
        assert!(
            links.contains("tacho_link_tx_utilisation_ratio{interface=\"eth0\"} 0.94\n"),
            "{links}"
        );
        assert!(
            !links.contains("tacho_link_rx_overruns_per_second"),
            "{links}"
        );
        // Each family once, its samples together.
        let types = text
            .lines()
            .filter(|l| l.starts_with("# TYPE tacho_disk_util_ratio "));
        assert_eq!(types.count(), 1);
    }

    /// A php-fpm talking to its database: one group by peer, process and service.
    fn php_fpm_conns(owners_unknown: usize) -> crate::diagnose::model::conns::Conns {
        use crate::diagnose::model::conns::{ConnGroup, Conns};
        let group = |key: &str, pid| ConnGroup {
            key: key.into(),
            key_hex: None,
            pid,
            unit: None,
            connections: 2,
            tx_bytes_per_s: 1000.0,
            rx_bytes_per_s: 10.0,
            tx_share_pct: 75.0,
            segs_out: 400,
            retrans: 8,
        };
        Conns {
            established: 3,
            tx_bytes_per_s: 1333.0,
            rx_bytes_per_s: 10.0,
            top: Vec::new(),
            by_remote: vec![group("10.0.0.5:5432", None)],
            by_process: vec![group("php-fpm (pid 3111)", Some(3111))],
            by_service: vec![group("php-fpm.service", None)],
            owners_unknown,
        }
    }

    /// Four AAAA queries, three answered NXDOMAIN.
    fn dns_counts() -> crate::net::dns::DnsCounts {
        let mut c = crate::net::dns::DnsCounts {
            queries: 4,
            answers: 4,
            ..Default::default()
        };
        c.rcodes.insert("NXDOMAIN".into(), 3);
        c.qtypes.insert("AAAA".into(), 4);
        c
    }

    #[test]
    fn connections_and_dns_are_exported_by_group_and_code() {
        let mut s = fixture_top_sample();
        s.connections = Some(php_fpm_conns(0));
        s.dns = Some(crate::diagnose::model::dns::between(&dns_counts(), 2.0));
        let text = Exporter::default().render(&s);
        for line in [
            "tacho_tcp_established 3\n",
            "tacho_tcp_process_tx_share_ratio{process=\"php-fpm\",unit=\"\"} 0.75\n",
            "tacho_tcp_peer_retrans{peer=\"10.0.0.5:5432\"} 8\n",
            "tacho_tcp_service_tx_bytes_per_second{service=\"php-fpm.service\"} 1000\n",
            "tacho_dns_queries_per_second 2\n",
            "tacho_dns_answers{rcode=\"NXDOMAIN\"} 3\n",
            "tacho_dns_queries{type=\"AAAA\"} 4\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn units_turn_figures_into_base_units() {
        for (unit, v, want) in [
            (Unit::KbPerSecond, 2.0, 2048.0),
            (Unit::Percent, 94.0, 0.94),
            (Unit::Millis, 4.0, 0.004),
            (Unit::Kb, 4.0, 4096.0),
            (Unit::Mbps, 8.0, 1e6),
            (Unit::Same, 0.5, 0.5),
        ] {
            assert_eq!(unit.base(v), want, "{unit:?}");
        }
    }

    /// Every number and flag `tacho top --json` writes in an exported section is a metric
    /// (listed with its field): a new field is not left out of `/metrics` unnoticed.
    #[test]
    fn every_figure_of_the_json_is_listed() {
        let json = serde_json::to_value(every_section()).unwrap();
        let listed: std::collections::HashSet<&str> = [
            metrics::CPU.iter().map(|m| m.field).collect::<Vec<_>>(),
            metrics::CORE.iter().map(|m| m.field).collect(),
            metrics::LOAD.iter().map(|m| m.field).collect(),
            metrics::MEMORY.iter().map(|m| m.field).collect(),
            metrics::MEMORY_USED.iter().map(|m| m.field).collect(),
            metrics::PSI.iter().map(|m| m.field).collect(),
            metrics::DISK.iter().map(|m| m.field).collect(),
            metrics::PROCESS.iter().map(|m| m.field).collect(),
            metrics::CGROUP.iter().map(|m| m.field).collect(),
            metrics::WRITE_AMPLIFICATION
                .iter()
                .map(|m| m.field)
                .collect(),
            metrics::NET.iter().map(|m| m.field).collect(),
            metrics::LINK.iter().map(|m| m.field).collect(),
            metrics::TCP.iter().map(|m| m.field).collect(),
            metrics::TCP_PROCESS.iter().map(|m| m.field).collect(),
            metrics::DNS.iter().map(|m| m.field).collect(),
            metrics::BLOCK_IO_PROCESS.iter().map(|m| m.field).collect(),
            metrics::BLOCK_IO_UNIT.iter().map(|m| m.field).collect(),
            metrics::WAITS.iter().map(|m| m.field).collect(),
            metrics::WAIT_PROCESS.iter().map(|m| m.field).collect(),
            metrics::WAIT_CLASS.iter().map(|m| m.field).collect(),
        ]
        .concat()
        .into_iter()
        .collect();
        let figures = |prefix: &str, v: &serde_json::Value, skip: &[&str]| -> Vec<String> {
            let obj = v.as_object().unwrap();
            obj.iter()
                .filter(|(k, v)| (v.is_number() || v.is_boolean()) && !skip.contains(&k.as_str()))
                .map(|(k, _)| format!("{prefix}{k}"))
                .collect()
        };
        let mut want = Vec::new();
        want.extend(figures("tacho_cpu_", &json["cpu"], &[]));
        want.extend(figures(
            "tacho_cpu_core_",
            &json["cpu"]["per_cpu"][0],
            &["cpu"],
        ));
        want.extend(figures("tacho_load_", &json["load"], &[]));
        want.extend(figures("tacho_memory_", &json["memory"], &[]));
        want.extend(figures(
            "tacho_memory_used_",
            &json["memory"]["used_parts"],
            &[],
        ));
        want.extend(figures("tacho_psi_", &json["psi"]["io"]["some"], &[]));
        // The percentiles are exported as histograms (tacho_disk_{queue,service}_seconds).
        let percentiles = ["queue_p50_ms", "service_p50_ms", "service_p99_ms"];
        want.extend(figures("tacho_disk_", &json["disks"][0], &percentiles));
        // Process rows are grouped by unit and command: no pid, no flag of one member.
        let one = ["pid", "exited"];
        want.extend(figures("tacho_process_", &json["processes"][0], &one));
        want.extend(figures(
            "tacho_cgroup_",
            &json["cgroups"][0]["devices"][0],
            &[],
        ));
        let wa = &json["write_amplification"];
        want.extend(figures("tacho_write_amplification_", wa, &[]));
        want.extend(figures("tacho_net_", &json["net"][0], &[]));
        want.extend(figures("tacho_link_", &json["links"][0], &[]));
        want.extend(figures("tacho_tcp_", &json["connections"], &[]));
        let group = &json["connections"]["by_process"][0];
        want.extend(figures("tacho_tcp_process_", group, &["pid"]));
        want.extend(figures("tacho_dns_", &json["dns"], &[]));
        let procs = &json["block_io_processes"][0];
        want.extend(figures("tacho_block_io_process_", procs, &one));
        let units = &json["block_io_units"][0];
        want.extend(figures("tacho_block_io_unit_", units, &[]));
        assert!(procs.is_object() && units.is_object(), "{json}");
        want.extend(figures("tacho_waits_", &json["waits"], &[]));
        let row = &json["waits"]["processes"][0];
        want.extend(figures("tacho_wait_process_", row, &["pid"]));
        want.extend(figures("tacho_wait_process_", &row["classes"][0], &[]));
        let missing: Vec<&String> = want
            .iter()
            .filter(|f| !listed.contains(f.as_str()))
            .collect();
        assert!(missing.is_empty(), "not exported: {missing:?}");
    }
}
