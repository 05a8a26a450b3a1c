//! A run's machine fingerprint as named, printable values, read from the stored JSON (so runs
//! from older tacho versions, other machines and fio imports all work: what a run lacks is
//! `None`, shown as unknown, never a difference).

use crate::store::StoredRun;
use crate::store::{RunKind, RunSource};
use crate::units::{format_latency_ns, format_size};
use serde_json::Value;

/// One fingerprint entry across runs (in the comparison's run order).
#[derive(Debug, Clone, PartialEq)]
pub struct FingerprintRow {
    /// What is compared (`kernel`, `CPU`, `memory`, a tunable's name).
    pub key: &'static str,
    /// Its value in each run; `None` where the run did not record it.
    pub values: Vec<Option<String>>,
}

impl FingerprintRow {
    /// True when two runs recorded different values (unknown values do not count).
    pub fn differs(&self) -> bool {
        let mut known = self.values.iter().flatten();
        match known.next() {
            Some(first) => known.any(|v| v != first),
            None => false,
        }
    }

    /// `scheduler: mq-deadline → none` (`?` where a run did not record it).
    pub fn describe(&self) -> String {
        let values: Vec<&str> = self
            .values
            .iter()
            .map(|v| v.as_deref().unwrap_or("?"))
            .collect();
        format!("{}: {}", self.key, values.join(" → "))
    }
}

/// The fingerprint of every run, one row per entry that at least one run recorded.
pub fn table(runs: &[StoredRun]) -> Vec<FingerprintRow> {
    let per_run: Vec<Vec<(&'static str, Option<String>)>> = runs.iter().map(of_run).collect();
    let Some(first) = per_run.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, (key, _))| FingerprintRow {
            key,
            values: per_run.iter().map(|r| r[i].1.clone()).collect(),
        })
        .filter(|row| row.values.iter().any(Option::is_some))
        .collect()
}

/// The entries of one run, always the same keys in the same order.
pub fn of_run(run: &StoredRun) -> Vec<(&'static str, Option<String>)> {
    let host = &run.host;
    let target = &run.target;
    let tunables = run.extra.get("tunables").unwrap_or(&Value::Null);
    let devices = tunables
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let queue = |key: &str| per_device(&devices, key);
    let mut entries = vec![
        ("host", text(host, "hostname")),
        ("kernel", text(host, "kernel")),
        ("OS", text(host, "os")),
        ("CPU", text(host, "cpu_model")),
        ("CPUs", text(host, "cpus")),
        (
            "memory",
            host.get("mem_total_bytes")
                .and_then(Value::as_f64)
                .map(|b| format!("{:.1} GiB", b / f64::from(1u32 << 30))),
        ),
        (
            "virtualization",
            or_if_recorded(host, "virtualization", "none detected"),
        ),
        ("THP", text(tunables, "thp_enabled")),
        ("THP defrag", text(tunables, "thp_defrag")),
        (
            "CPU governor",
            or_if_recorded(tunables, "cpu_governor", "none (no cpufreq)"),
        ),
        ("mitigations", text(tunables, "mitigations")),
        (
            "mitigations=",
            or_if_recorded(tunables, "mitigations_cmdline", "not set"),
        ),
        ("target", text(target, "path")),
        ("filesystem", text(target, "filesystem")),
        ("mount options", text(target, "mount_options")),
        (
            "devices",
            target
                .get("devices")
                .and_then(Value::as_array)
                .and_then(|d| {
                    let names: Vec<&str> = d.iter().filter_map(Value::as_str).collect();
                    (!names.is_empty()).then(|| names.join(" → "))
                }),
        ),
        ("device model", text(target, "device_model")),
        (
            "rotational",
            target
                .get("rotational")
                .and_then(Value::as_bool)
                .map(|r| if r { "yes" } else { "no" }.to_string()),
        ),
        (
            "scheduler",
            queue("scheduler").or_else(|| text(target, "scheduler")),
        ),
        ("nr_requests", queue("nr_requests")),
        ("read_ahead_kb", queue("read_ahead_kb")),
        ("write cache", queue("write_cache")),
        (
            "tool",
            Some(match (run.source, &run.tool_version) {
                (RunSource::Fio, Some(v)) => v.clone(),
                (_, Some(v)) => format!("tacho {v}"),
                (source, None) => source.to_string(),
            }),
        ),
        (
            "suite",
            run.suite.as_ref().map(|(name, v)| {
                super::suite_text(
                    name,
                    *v,
                    run.standard(),
                    &crate::store::suite_changes(&run.extra),
                )
            }),
        ),
    ];
    entries.extend(method(run));
    entries
}

/// How the run measured: the options a person chooses, which change the figures as much as
/// the machine does (threshold, engine, size, runtime, repeats, and the options of `bench
/// cpu`, `bench mem` and `time`).
fn method(run: &StoredRun) -> Vec<(&'static str, Option<String>)> {
    let extra = &run.extra;
    let tests: Vec<&Value> = run.tests.iter().map(|t| &t.json).collect();
    // The distinct values of a test field, in order: `io_uring, sync`.
    let distinct = |f: &dyn Fn(&Value) -> Option<String>| {
        let mut seen: Vec<String> = Vec::new();
        for v in tests.iter().filter_map(|t| f(t)) {
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
        (!seen.is_empty()).then(|| seen.join(", "))
    };
    let secs = |v: &Value| v.as_f64().map(|s| format!("{}s", round_secs(s)));
    let repeats = extra
        .get("suite")
        .and_then(|s| s.get("repeat"))
        .or_else(|| extra.get("repeat"))
        .and_then(Value::as_u64)
        .map(|n| n.to_string())
        .or_else(|| {
            if run.kind == RunKind::Time {
                return distinct(&|t| t.get("times")?.as_array().map(|r| r.len().to_string()));
            }
            // Sample 0 is a test's summary, 1..=N its repeats; compare loads tests without
            // their per-repeat JSON, so the figures table is where the repeats are counted.
            let mut seen: Vec<String> = Vec::new();
            for t in &run.tests {
                let n = t.figures.iter().map(|f| f.sample).max().unwrap_or(0).max(1);
                let n = n.to_string();
                if !seen.contains(&n) {
                    seen.push(n);
                }
            }
            (!seen.is_empty()).then(|| seen.join(", "))
        });
    match run.kind {
        RunKind::Disk => vec![
            (
                "threshold",
                extra
                    .get("judgement")
                    .and_then(|j| j.get("threshold_ns"))
                    .and_then(Value::as_f64)
                    .map(format_latency_ns),
            ),
            ("engine", distinct(&|t| text(t, "engine"))),
            (
                "I/O",
                distinct(&|t| {
                    t.get("direct")?
                        .as_bool()
                        .map(|d| if d { "direct" } else { "buffered" }.to_string())
                }),
            ),
            (
                "size",
                run.target
                    .get("region_bytes")
                    .and_then(Value::as_u64)
                    .map(format_size),
            ),
            // Measured seconds vary a little; the rounding keeps noise from reading as a
            // changed setting. A suite's runtime changes show in its `suite` entry.
            (
                "runtime",
                run.suite
                    .is_none()
                    .then(|| distinct(&|t| t.get("runtime_s").and_then(secs)))
                    .flatten(),
            ),
            ("ramp", distinct(&|t| t.get("ramp_s").and_then(secs))),
            ("repeats", repeats),
        ],
        RunKind::Cpu | RunKind::Mem => vec![
            ("runtime", extra.get("runtime_s").and_then(secs)),
            ("repeats", repeats),
            ("threads", distinct(&|t| text(t, "threads"))),
        ],
        RunKind::Time => vec![
            ("runs", repeats),
            (
                "order",
                extra
                    .get("interleaved")
                    .and_then(Value::as_bool)
                    .map(|i| if i { "interleaved" } else { "blocks" }.to_string()),
            ),
            (
                "shell",
                or_if_recorded(&Value::Object(extra.clone()), "shell", "none (-N)"),
            ),
        ],
    }
}

/// Seconds to two significant digits: `1`, `0.3`, `2.5`, `300`.
fn round_secs(s: f64) -> String {
    if s <= 0.0 || !s.is_finite() {
        return "0".into();
    }
    let digits = 1 - s.log10().floor() as i32;
    let scale = 10f64.powi(digits);
    let r = (s * scale).round() / scale;
    format!("{r}")
}

/// A scalar field as text; `None` when absent or null.
fn text(obj: &Value, key: &str) -> Option<String> {
    match obj.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Like [`text`], but a field recorded as null means `absent` (e.g. no cpufreq), which is
/// different from a run that did not record the field at all.
fn or_if_recorded(obj: &Value, key: &str, absent: &str) -> Option<String> {
    match obj.get(key) {
        Some(Value::Null) => Some(absent.to_string()),
        _ => text(obj, key),
    }
}

/// A queue setting: the value for one device, `dm-0 128, sda 256` for several.
fn per_device(devices: &[Value], key: &str) -> Option<String> {
    let values: Vec<(String, String)> = devices
        .iter()
        .filter_map(|d| Some((text(d, "device")?, text(d, key)?)))
        .collect();
    match values.as_slice() {
        [] => None,
        [(_, only)] => Some(only.clone()),
        many => Some(
            many.iter()
                .map(|(dev, v)| format!("{dev} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(id: i64, host: Value, extra: Value) -> StoredRun {
        StoredRun {
            id,
            created_at: String::new(),
            label: None,
            kind: RunKind::Disk,
            status: crate::store::RunStatus::Finished,
            source: RunSource::Bench,
            tool_version: Some("0.1.0".into()),
            suite: None,
            host,
            target: json!({"path": "/data", "scheduler": "mq-deadline"}),
            extra: extra.as_object().cloned().unwrap_or_default(),
            tests: Vec::new(),
        }
    }

    #[test]
    fn differences_name_the_change_and_ignore_unknowns() {
        let a = run(
            1,
            json!({"hostname": "a", "virtualization": null}),
            json!({"tunables": {"thp_enabled": "always", "cpu_governor": null,
                   "devices": [{"device": "vda", "scheduler": "mq-deadline", "nr_requests": 256}]}}),
        );
        let b = run(
            2,
            json!({"hostname": "a", "virtualization": "kvm"}),
            json!({"tunables": {"thp_enabled": "never", "cpu_governor": null,
                   "devices": [{"device": "vda", "scheduler": "none", "nr_requests": 256}]}}),
        );
        let c = run(3, json!({}), json!({}));
        let rows = table(&[a, b, c]);
        let diffs: Vec<String> = rows
            .iter()
            .filter(|r| r.differs())
            .map(FingerprintRow::describe)
            .collect();
        assert_eq!(
            diffs,
            [
                "virtualization: none detected → kvm → ?",
                "THP: always → never → ?",
                "scheduler: mq-deadline → none → mq-deadline",
            ]
        );
        let governor = rows.iter().find(|r| r.key == "CPU governor").unwrap();
        assert_eq!(governor.values[0].as_deref(), Some("none (no cpufreq)"));
        assert!(!governor.differs());
    }

    #[test]
    fn seconds_keep_two_significant_digits() {
        assert_eq!(round_secs(0.30012), "0.3");
        assert_eq!(round_secs(1.0004), "1");
        assert_eq!(round_secs(2.46), "2.5");
        assert_eq!(round_secs(299.7), "300");
        assert_eq!(round_secs(0.0), "0");
        assert_eq!(round_secs(f64::NAN), "0");
    }

    #[test]
    fn method_changes_are_differences() {
        let mut a = run(
            1,
            json!({}),
            json!({"judgement": {"threshold_ns": 10_000_000}}),
        );
        let mut b = run(2, json!({}), json!({"judgement": {"threshold_ns": 1000}}));
        a.suite = Some(("etcd".into(), 1));
        b.suite = Some(("etcd".into(), 1));
        b.extra.insert(
            "suite".into(),
            json!({"name": "etcd", "version": 1, "standard": false, "changed": ["runtime 1s"]}),
        );
        let diffs: Vec<String> = table(&[a, b])
            .iter()
            .filter(|r| r.differs())
            .map(FingerprintRow::describe)
            .collect();
        assert_eq!(
            diffs,
            [
                "suite: etcd v1 → etcd v1 (non-standard: runtime 1s)",
                "threshold: 10.0ms → 1.00µs",
            ]
        );
    }

    #[test]
    fn several_devices_are_named() {
        let devices = [
            json!({"device": "dm-0", "nr_requests": 128}),
            json!({"device": "sda", "nr_requests": 256}),
        ];
        assert_eq!(
            per_device(&devices, "nr_requests").as_deref(),
            Some("dm-0 128, sda 256")
        );
        assert_eq!(per_device(&devices, "write_cache"), None);
    }
}
