//! `contrib/prometheus` and `contrib/grafana`: the alert rules pass promtool's checks and their
//! unit tests, every dashboard expression is valid PromQL, and every metric name either uses is
//! one a live `tacho top --listen` really exports.

use crate::common;
use crate::common::{SpawnPiped, have_tool, skip, tacho};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command};

/// Families written only while their condition holds (a finding is open; the block tracer
/// saw a request on a device, which `bpf_svctm` makes happen and checks), so an idle test
/// machine's scrape lacks them; for these the test asks that the binary holds the name.
const CONDITIONAL: &[&str] = &[
    "tacho_finding",
    "tacho_disk_queue_seconds",
    "tacho_disk_service_seconds",
];

/// A histogram's series name the family's: `X_bucket`, `X_sum` and `X_count` are `X`'s.
fn family(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|base| CONDITIONAL.contains(base))
        .unwrap_or(name)
}

fn contrib() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus")
}

/// The dashboard's PromQL expressions (Prometheus panel targets) with Grafana's variables
/// made concrete.
fn dashboard_exprs() -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana/tacho.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        // The history panels query PostgreSQL (`rawSql`, tests/it/fleet_history.rs).
        .filter_map(|t| t["expr"].as_str())
        .map(|e| e.replace("$instance", ".*"))
        .collect();
    assert!(!exprs.is_empty(), "the dashboard has no expression");
    exprs
}

/// The `label_values(METRIC, …)` queries of the dashboard's variables (not PromQL, but they
/// name metrics).
fn dashboard_variable_queries() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana/tacho.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["query"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_dashboard_expression_is_valid_promql() {
    if !have_tool("promtool") {
        return skip("promtool is not installed: the dashboard's PromQL is not checked");
    }
    // One recording rule per expression; JSON is YAML, so the rule file is written as JSON.
    let rules: Vec<serde_json::Value> = dashboard_exprs()
        .iter()
        .enumerate()
        .map(|(i, e)| serde_json::json!({"record": format!("tacho:dashboard_{i}"), "expr": e}))
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard_rules.yml");
    std::fs::write(&path, file.to_string()).unwrap();
    promtool(&["check", "rules", path.to_str().unwrap()]);
}

fn promtool(args: &[&str]) {
    let o = Command::new("promtool")
        .args(args)
        .current_dir(contrib())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn alert_rules_pass_promtool_checks_and_unit_tests() {
    if !have_tool("promtool") {
        return skip("promtool is not installed: the alert rules are not checked");
    }
    promtool(&["check", "rules", "alerts.yml"]);
    promtool(&["test", "rules", "alerts_test.yml"]);
}

/// The `tacho_…` names an expression text uses.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("tacho_") {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if before_ok {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// A running `tacho top --listen`, killed on drop.
struct Top(Child);

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_metric_the_alerts_and_dashboard_use_is_exported() {
    let rules = std::fs::read_to_string(contrib().join("alerts.yml")).unwrap();
    let mut used = names_in(&rules);
    used.extend(names_in(&dashboard_exprs().join("\n")));
    used.extend(names_in(&dashboard_variable_queries()));
    assert!(!used.is_empty(), "no tacho_ metric in alerts.yml");
    // A results store holding an etcd-suite run of this host, so the stored-benchmark
    // families the alerts use are exported for real.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let doc = serde_json::json!({
        "schema": "tacho.bench.v1",
        "host": {"hostname": host.trim()},
        "suite": {"name": "etcd", "version": 1},
        "tests": [{"name": "etcd wal", "rw": "write", "bs_bytes": 2300, "iodepth": 1,
                   "numjobs": 1,
                   "write": {"iops": 450.0, "bw_bytes_per_s": 1_035_000.0,
                             "lat_ns": {"p99": 2_000_000.0}},
                   "sync": {"lat_ns": {"p99": 3_100_000.0, "mean": 1_200_000.0}}}],
    });
    let file = dir.path().join("etcd.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = tacho()
        .args([
            "runs",
            "import",
            "--db",
            db.to_str().unwrap(),
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut top = Top(tacho()
        .args([
            "top",
            "--json",
            "--interval",
            "200ms",
            "--count",
            "50",
            "--listen",
            &addr,
        ])
        .env("TACHO_DB", &db)
        .spawn_piped());
    // The first JSON line means a sample exists and the server is up.
    let mut first = String::new();
    BufReader::new(top.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "no sample: {first}");
    let exported: BTreeSet<String> = common::http_get(port, "/metrics")
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect();
    let body = common::http_get(port, "/metrics");
    assert!(
        body.contains(
            "tacho_stored_bench_latency_seconds{suite=\"etcd\",test=\"etcd wal\",direction=\"sync\",quantile=\"0.99\"} 0.0031\n"
        ),
        "the stored etcd run is exported: {body}"
    );
    let binary = std::fs::read(env!("CARGO_BIN_EXE_tacho")).unwrap();
    for name in used.iter().map(|n| family(n)) {
        if CONDITIONAL.contains(&name) {
            let found = binary.windows(name.len()).any(|w| w == name.as_bytes());
            assert!(found, "{name} is not in the tacho binary");
        } else {
            assert!(
                exported.contains(name),
                "{name} is not exported: {exported:?}"
            );
        }
    }
}

/// Two tests of one name in a stored run of this host (an imported run, or two `[same]` jobs)
/// gave two samples of one series on `/metrics`, and Prometheus refuses such a scrape: the
/// repeat is labelled `NAME #2`, and no series is written twice.
#[test]
fn stored_runs_with_repeated_test_names_give_unique_series() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let test = serde_json::json!({"name": "dup", "rw": "randread", "bs_bytes": 4096,
        "iodepth": 1, "numjobs": 1,
        "read": {"iops": 450.0, "bw_bytes_per_s": 1_843_200.0, "lat_ns": {"p99": 2_000_000.0}}});
    let doc = serde_json::json!({
        "schema": "tacho.bench.v1",
        "host": {"hostname": host.trim()},
        "suite": {"name": "quick", "version": 1},
        "tests": [test, test],
    });
    let file = dir.path().join("dup.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = tacho()
        .args(["runs", "import", "--db", db.to_str().unwrap()])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut top = Top(tacho()
        .args(["top", "--json", "--interval", "200ms", "--count", "50"])
        .args(["--listen", &addr])
        .env("TACHO_DB", &db)
        .spawn_piped());
    let mut first = String::new();
    BufReader::new(top.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "no sample: {first}");
    let response = common::http_get(port, "/metrics");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(body.contains("test=\"dup\""), "{body}");
    assert!(body.contains("test=\"dup #2\""), "{body}");
    // Not promtool: its lint refuses the live families' names and the stored latency's
    // `quantile` label on a gauge, both older than this and used by the shipped alerts.
    common::assert_series_unique(body);
}

/// A job file with two `[same]` sections, and `tacho time` given one command twice: each
/// repeat is its own series in the textfile (`same #2`), which promtool accepts.
#[test]
fn textfiles_of_repeated_job_and_command_names_give_unique_series() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("same.fio");
    std::fs::write(
        &job,
        format!(
            "[global]\nsize=4m\nruntime=300ms\nrw=randread\nbs=4k\ndirectory={}\n\n[same]\n\n\
             [same]\nstonewall\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let prom = dir.path().join("bench.prom");
    let o = tacho()
        .args(["bench", "disk", "--no-probe-cache", "--fio-job"])
        .arg(&job)
        .arg("--prom-textfile")
        .arg(&prom)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("test=\"same #2\""), "{text}");
    common::assert_promtool_accepts(&prom);
    let prom = dir.path().join("time.prom");
    let o = tacho()
        .args(["time", "--runs", "2", "true", "true", "--prom-textfile"])
        .arg(&prom)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("command=\"true #2\""), "{text}");
    common::assert_promtool_accepts(&prom);
}

/// A stored run of this host with 5,000 tests: `/metrics` exports its first 1,000, so the text
/// copied into every scrape stays bounded.
#[test]
fn metrics_export_a_bounded_number_of_a_stored_runs_tests() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let tests: Vec<serde_json::Value> = (0..5_000)
        .map(|i| {
            serde_json::json!({"name": format!("t{i}"), "rw": "randread", "bs_bytes": 4096,
                "iodepth": 1 + i % 64, "numjobs": 1 + i / 64,
                "read": {"iops": 450.0, "bw_bytes_per_s": 1_843_200.0,
                         "lat_ns": {"p99": 2_000_000.0}}})
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "tacho.bench.v1",
        "host": {"hostname": host.trim()},
        "suite": {"name": "quick", "version": 1},
        "tests": tests,
    });
    let file = dir.path().join("many.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = tacho()
        .args(["runs", "import", "--db", db.to_str().unwrap()])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut top = Top(tacho()
        .args(["top", "--json", "--interval", "200ms", "--count", "50"])
        .args(["--listen", &addr])
        .env("TACHO_DB", &db)
        .spawn_piped());
    let mut first = String::new();
    BufReader::new(top.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "no sample: {first}");
    let body = common::http_get(port, "/metrics");
    let exported = body
        .lines()
        .filter(|l| l.starts_with("tacho_stored_bench_iops{"))
        .count();
    assert_eq!(exported, 1_000, "stored tests exported");
}
