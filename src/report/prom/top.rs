//! The figures of a sample as Prometheus text exposition (format 0.0.4) for `/metrics`.
//!
//! Metric names are the JSON field names under a `tacho_<section>_` prefix, turned into
//! Prometheus's base units by their suffix ([`base_units`]: `disks[].util_pct` is
//! `tacho_disk_util_ratio{device="vda"}` from 0 to 1, `w_await_ms` is `w_await_seconds`,
//! `wkb_per_s` is `w_bytes_per_second`), which keeps the two outputs in step without a second
//! list of names. The figures of the last interval (rates, shares) are gauges; the totals since
//! start of `--accumulate` are counters (`_total`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Family, exposition};
use crate::diagnose::model::TopSample;

/// Renders one sample.
pub fn render(s: &TopSample) -> String {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let json = serde_json::to_value(s).unwrap_or(Value::Null);
    let mut add = |field: String, labels: &[(&str, &str)], v: &Value| {
        let value = match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            _ => None,
        };
        if let Some(value) = value {
            let (name, value) = base_units(&field, value);
            let family = families.entry(name.clone()).or_insert_with(|| {
                if name.ends_with("_total") {
                    Family::counter(name.as_str(), help(&field))
                } else {
                    Family::new(name.as_str(), help(&field))
                }
            });
            family.sample(labels, None, value);
        }
    };
    let fields = |v: &Value| v.as_object().cloned().unwrap_or_default();

    for (k, v) in fields(&json["cpu"]) {
        add(format!("tacho_cpu_{k}"), &[], &v);
    }
    for c in json["cpu"]["per_cpu"].as_array().into_iter().flatten() {
        let cpu = c["cpu"].to_string();
        for (k, v) in fields(c).iter().filter(|(k, _)| *k != "cpu") {
            add(format!("tacho_cpu_core_{k}"), &[("cpu", &cpu)], v);
        }
    }
    for (k, v) in fields(&json["load"]) {
        add(format!("tacho_load_{k}"), &[], &v);
    }
    for (k, v) in fields(&json["memory"]) {
        add(format!("tacho_memory_{k}"), &[], &v);
    }
    for (k, v) in fields(&json["memory"]["used_parts"]) {
        add(format!("tacho_memory_used_{k}"), &[], &v);
    }
    for (k, v) in fields(&json["vm_events"]) {
        add("tacho_vm_events".into(), &[("counter", &k)], &v);
    }
    for (resource, r) in fields(&json["psi"]) {
        for kind in ["some", "full"] {
            for (k, v) in fields(&r[kind]) {
                add(
                    format!("tacho_psi_{k}"),
                    &[("resource", &resource), ("kind", kind)],
                    &v,
                );
            }
        }
    }
    for d in json["disks"].as_array().into_iter().flatten() {
        let (dev, name) = (text(&d["name"]), text(&d["display_name"]));
        for (k, v) in fields(d) {
            add(
                format!("tacho_disk_{k}"),
                &[("device", &dev), ("name", &name)],
                &v,
            );
        }
    }
    for p in json["processes"].as_array().into_iter().flatten() {
        let (pid, comm) = (p["pid"].to_string(), text(&p["comm"]));
        for (k, v) in fields(p).iter().filter(|(k, _)| *k != "pid") {
            add(
                format!("tacho_process_{k}"),
                &[("pid", &pid), ("comm", &comm)],
                v,
            );
        }
    }
    for c in json["cgroups"].as_array().into_iter().flatten() {
        let path = text(&c["path"]);
        for d in c["devices"].as_array().into_iter().flatten() {
            let dev = text(&d["device"]);
            for (k, v) in fields(d) {
                add(
                    format!("tacho_cgroup_{k}"),
                    &[("cgroup", &path), ("device", &dev)],
                    &v,
                );
            }
        }
    }
    for (k, v) in fields(&json["write_amplification"]) {
        add(format!("tacho_write_amplification_{k}"), &[], &v);
    }
    for n in json["net"].as_array().into_iter().flatten() {
        let name = text(&n["name"]);
        for (k, v) in fields(n) {
            add(format!("tacho_net_{k}"), &[("interface", &name)], &v);
        }
    }
    for l in json["links"].as_array().into_iter().flatten() {
        let name = text(&l["name"]);
        for (k, v) in fields(l) {
            add(format!("tacho_link_{k}"), &[("interface", &name)], &v);
        }
    }
    let conns = &json["connections"];
    for (k, v) in fields(conns) {
        add(format!("tacho_tcp_{k}"), &[], &v);
    }
    for (group, label) in [
        ("by_process", "process"),
        ("by_remote", "peer"),
        ("by_service", "service"),
    ] {
        for g in conns[group].as_array().into_iter().flatten() {
            let key = text(&g["key"]);
            for (k, v) in fields(g).iter().filter(|(k, _)| *k != "pid") {
                add(format!("tacho_tcp_{label}_{k}"), &[(label, &key)], v);
            }
        }
    }
    let dns = &json["dns"];
    for (k, v) in fields(dns) {
        add(format!("tacho_dns_{k}"), &[], &v);
    }
    for (map, name, label) in [
        ("rcodes", "answers", "rcode"),
        ("qtypes", "queries", "type"),
    ] {
        for (k, v) in fields(&dns[map]) {
            add(format!("tacho_dns_{name}"), &[(label, &k)], &v);
        }
    }
    for f in &s.findings {
        let severity = serde_json::to_value(f.severity).unwrap_or(Value::Null);
        add(
            "tacho_finding".into(),
            &[
                ("code", f.code),
                ("subject", &f.subject),
                ("severity", &text(&severity)),
            ],
            &Value::from(1),
        );
        for c in &f.culprits {
            let pid = c.pid.map_or(String::new(), |p| p.to_string());
            let how = match c.attribution {
                crate::diagnose::model::culprits::Attribution::Exact { .. } => "exact",
                crate::diagnose::model::culprits::Attribution::Likely { .. } => "likely",
            };
            add(
                "tacho_finding_culprit_share_pct".into(),
                &[
                    ("code", f.code),
                    ("subject", &f.subject),
                    ("pid", &pid),
                    ("comm", &c.comm),
                    ("unit", c.unit.as_deref().unwrap_or("")),
                    ("attribution", how),
                ],
                &Value::from(c.share_pct),
            );
        }
    }
    if let Some(acc) = &s.accumulated {
        for p in &acc.processes {
            let pid = p.pid.to_string();
            let labels = [("pid", pid.as_str()), ("comm", p.comm.as_str())];
            add(
                "tacho_process_read_bytes_total".into(),
                &labels,
                &Value::from(p.read_bytes),
            );
            add(
                "tacho_process_write_bytes_total".into(),
                &labels,
                &Value::from(p.write_bytes),
            );
            add(
                "tacho_process_cpu_seconds_total".into(),
                &labels,
                &Value::from(p.user_s + p.system_s),
            );
        }
        for u in &acc.services {
            let labels = [("unit", u.unit.as_str())];
            add(
                "tacho_service_read_bytes_total".into(),
                &labels,
                &Value::from(u.read_bytes),
            );
            add(
                "tacho_service_write_bytes_total".into(),
                &labels,
                &Value::from(u.write_bytes),
            );
            add(
                "tacho_service_cpu_seconds_total".into(),
                &labels,
                &Value::from(u.cpu_s),
            );
        }
    }
    add("tacho_interval_s".into(), &[], &Value::from(s.interval_s));

    let families: Vec<Family> = families.into_values().collect();
    exposition(&families)
}

/// HELP for a metric named after a `tacho.top.v2` field: where to read what it means.
fn help(field: &str) -> String {
    format!(
        "tacho top figure {field} in base units (seconds, bytes, ratios 0-1); see tacho top \
         --json for the field."
    )
}

/// A field's name and value in Prometheus's base units, by the field's suffix: kB/s → bytes
/// per second, `_per_s` → `_per_second`, percent → ratio (0–1), ms/µs/ns and `_s` →
/// seconds, kB → bytes, Mb/s → bytes per second. Other names are kept.
pub(crate) fn base_units(field: &str, v: f64) -> (String, f64) {
    // Multiplied or divided (dividing keeps 94 % an exact 0.94).
    const RULES: [(&str, &str, f64, f64); 9] = [
        ("kb_per_s", "_bytes_per_second", 1024.0, 1.0),
        ("_per_s", "_per_second", 1.0, 1.0),
        ("_pct", "_ratio", 1.0, 100.0),
        ("_ms", "_seconds", 1.0, 1e3),
        ("_us", "_seconds", 1.0, 1e6),
        ("_ns", "_seconds", 1.0, 1e9),
        ("_kb", "_bytes", 1024.0, 1.0),
        ("_mbps", "_bytes_per_second", 125_000.0, 1.0),
        ("_s", "_seconds", 1.0, 1.0),
    ];
    for (suffix, unit, mul, div) in RULES {
        if let Some(stem) = field.strip_suffix(suffix) {
            // `rkb_per_s` → `r_bytes_per_second`; `util_pct` → `util_ratio`.
            let stem = stem.strip_suffix('_').unwrap_or(stem);
            return (format!("{stem}{unit}"), v * mul / div);
        }
    }
    (field.to_owned(), v)
}

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
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
        use crate::diagnose::model::conns::{ConnGroup, Conns};
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
        s.connections = Some(Conns {
            established: 3,
            tx_bytes_per_s: 1333.0,
            rx_bytes_per_s: 10.0,
            top: Vec::new(),
            by_remote: vec![group("10.0.0.5:5432", None)],
            by_process: vec![group("php-fpm (pid 3111)", Some(3111))],
            by_service: vec![group("php-fpm.service", None)],
            owners_unknown: 1,
        });
        let mut c = crate::net::dns::DnsCounts {
            queries: 4,
            answers: 4,
            ..Default::default()
        };
        c.rcodes.insert("NXDOMAIN".into(), 3);
        c.qtypes.insert("AAAA".into(), 4);
        let mut dns = crate::diagnose::model::dns::between(&c, 2.0);
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

    #[test]
    fn connections_and_dns_are_exported_by_group_and_code() {
        use crate::diagnose::model::conns::{ConnGroup, Conns};
        let mut s = fixture_top_sample();
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
        s.connections = Some(Conns {
            established: 3,
            tx_bytes_per_s: 1333.0,
            rx_bytes_per_s: 10.0,
            top: Vec::new(),
            by_remote: vec![group("10.0.0.5:5432", None)],
            by_process: vec![group("php-fpm (pid 3111)", Some(3111))],
            by_service: vec![group("php-fpm.service", None)],
            owners_unknown: 0,
        });
        let mut c = crate::net::dns::DnsCounts {
            queries: 4,
            answers: 4,
            ..Default::default()
        };
        c.rcodes.insert("NXDOMAIN".into(), 3);
        c.qtypes.insert("AAAA".into(), 4);
        s.dns = Some(crate::diagnose::model::dns::between(&c, 2.0));
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
    fn names_and_values_are_in_base_units() {
        let cases = [
            (
                "tacho_disk_wkb_per_s",
                2.0,
                "tacho_disk_w_bytes_per_second",
                2048.0,
            ),
            ("tacho_disk_r_per_s", 5.0, "tacho_disk_r_per_second", 5.0),
            ("tacho_disk_util_pct", 50.0, "tacho_disk_util_ratio", 0.5),
            (
                "tacho_disk_w_await_ms",
                4.0,
                "tacho_disk_w_await_seconds",
                0.004,
            ),
            (
                "tacho_disk_rareq_sz_kb",
                4.0,
                "tacho_disk_rareq_sz_bytes",
                4096.0,
            ),
            (
                "tacho_link_shaped_mbps",
                8.0,
                "tacho_link_shaped_bytes_per_second",
                1e6,
            ),
            ("tacho_interval_s", 1.0, "tacho_interval_seconds", 1.0),
            (
                "tacho_memory_free_bytes",
                7.0,
                "tacho_memory_free_bytes",
                7.0,
            ),
            ("tacho_load_load1", 0.5, "tacho_load_load1", 0.5),
        ];
        for (field, v, name, want) in cases {
            let (n, got) = base_units(field, v);
            assert_eq!(n, name);
            assert!((got - want).abs() < 1e-12, "{field}: {got}");
        }
    }
}
