//! The figures of a sample as Prometheus text exposition (format 0.0.4) for `/metrics`.
//!
//! Each exported figure is listed in [`metrics`] with its name and unit: `disks[].util_pct`
//! is `tacho_disk_util_ratio{device="vda"}` from 0 to 1, `w_await_ms` is `w_await_seconds`,
//! `wkb_per_s` is `w_bytes_per_second`. The figures of the last interval (rates, shares) are
//! gauges; the totals since start of `--accumulate` are counters (`_total`).

mod metrics;

use std::collections::BTreeMap;

use super::{Family, exposition};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::Attribution;
use crate::diagnose::model::finding::Severity;
use metrics::{Metric, Unit};

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

    /// Every figure of `x` that `metrics` lists and that was measured.
    fn figures<T>(&mut self, metrics: &[Metric<T>], x: &T, labels: &[(&str, &str)]) {
        for m in metrics {
            if let Some(v) = (m.get)(x) {
                self.add(m.name, m.field, m.unit, labels, v);
            }
        }
    }
}

/// Renders one sample.
pub fn render(s: &TopSample) -> String {
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
    for p in &s.processes {
        let pid = p.pid.to_string();
        f.figures(metrics::PROCESS, p, &[("pid", &pid), ("comm", &p.comm)]);
    }
    // At most --top rows each: the JSON's, so the series stay bounded.
    for p in &s.block_io_processes {
        let pid = p.pid.map_or_else(|| "-".to_string(), |p| p.to_string());
        // Label values are escaped as the format requires, as the process list's are.
        let labels = [
            ("pid", pid.as_str()),
            ("comm", p.comm.as_str()),
            ("device", p.device.as_str()),
        ];
        f.figures(metrics::BLOCK_IO_PROCESS, p, &labels);
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
        for (groups, metrics, label) in [
            (&conns.by_process, metrics::TCP_PROCESS, "process"),
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
        for p in &waits.processes {
            let pid = p.pid.to_string();
            f.figures(
                metrics::WAIT_PROCESS,
                p,
                &[("pid", &pid), ("comm", &p.comm)],
            );
            for c in &p.classes {
                let labels = [
                    ("pid", pid.as_str()),
                    ("comm", &p.comm),
                    ("class", c.class.word()),
                ];
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
        for c in &finding.culprits {
            let pid = c.pid.map_or(String::new(), |p| p.to_string());
            let how = match c.attribution {
                Attribution::Exact { .. } => "exact",
                Attribution::Likely { .. } => "likely",
            };
            let labels = [
                about[0],
                about[1],
                ("pid", &pid),
                ("comm", &c.comm),
                ("unit", c.unit.as_deref().unwrap_or("")),
                ("attribution", how),
            ];
            f.add(
                "tacho_finding_culprit_share_ratio",
                "tacho_finding_culprit_share_pct",
                Unit::Percent,
                &labels,
                c.share_pct,
            );
        }
    }
    if let Some(acc) = &s.accumulated {
        for p in &acc.processes {
            let pid = p.pid.to_string();
            let labels = [("pid", pid.as_str()), ("comm", p.comm.as_str())];
            for (name, v) in [
                ("tacho_process_read_bytes_total", p.read_bytes as f64),
                ("tacho_process_write_bytes_total", p.write_bytes as f64),
                ("tacho_process_cpu_seconds_total", p.user_s + p.system_s),
            ] {
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
    let families: Vec<Family> = f.0.into_values().collect();
    exposition(&families)
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
            ("top-metrics.prom", render(&s)),
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
        use crate::diagnose::model::accumulate::{
            Accumulated, AccumulatedProcess, AccumulatedService,
        };
        use crate::diagnose::model::process::{Cgroup, CgroupDevice};
        let mut s = fixture_top_sample();
        s.time_unix_s = 1795573250.7573602;
        s.disks[0].queue_p50_ms = Some(0.25);
        s.disks[0].service_p50_ms = Some(0.5);
        s.disks[0].service_p99_ms = Some(4.0);
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
        let text = render(&every_section());
        if std::env::var_os("TACHO_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap();
        assert!(want == text, "differs from its golden:\n{text}");
    }

    #[test]
    fn every_figure_is_a_gauge_labelled_by_what_it_is_about() {
        let text = render(&fixture_top_sample());
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
        let links = render(&s);
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
        let text = render(&s);
        for line in [
            "tacho_tcp_established 3\n",
            "tacho_tcp_process_tx_share_ratio{process=\"php-fpm (pid 3111)\"} 0.75\n",
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
        want.extend(figures("tacho_disk_", &json["disks"][0], &[]));
        want.extend(figures("tacho_process_", &json["processes"][0], &["pid"]));
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
        want.extend(figures("tacho_block_io_process_", procs, &["pid"]));
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
