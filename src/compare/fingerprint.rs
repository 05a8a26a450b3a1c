//! A run's machine fingerprint as named, printable values, read from the stored JSON (so runs
//! from older tacho versions, other machines and fio imports all work: what a run lacks is
//! `None`, shown as unknown, never a difference).

use crate::store::StoredRun;
use crate::store::stored::{
    ExtraView, Field, HostView, QueueView, TargetView, TestView, Text, TunablesView, view,
};
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

/// The fingerprint of every run, one row per entry that at least one run recorded; `seen`
/// holds what each run's tests recorded of their method, in the same order.
pub fn table(runs: &[StoredRun], seen: &[TestsSeen]) -> Vec<FingerprintRow> {
    let per_run: Vec<Vec<(&'static str, Option<String>)>> = runs
        .iter()
        .zip(seen)
        .map(|(run, seen)| of_run(run, seen))
        .collect();
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

/// The distinct values of the method fields a run's tests recorded, each in the order first
/// seen (`io_uring, sync`), gathered test by test so no test is held to read them. A value
/// already seen costs no string: a run of 200,000 tests repeats a handful.
#[derive(Debug, Default)]
pub struct TestsSeen {
    engine: Vec<String>,
    io: Vec<String>,
    runtime: Seconds,
    ramp: Seconds,
    threads: Vec<String>,
    times: Vec<usize>,
    repeats: Vec<u32>,
}

/// Seconds as the fingerprint shows them, each distinct text once, and the last figure seen
/// (most tests of a run share it, and rounding it is what costs).
#[derive(Debug, Default)]
struct Seconds {
    shown: Vec<String>,
    last: Option<u64>,
}

impl Seconds {
    fn add(&mut self, v: &Field<f64>) {
        let Some(&s) = v.get() else { return };
        if self.last.replace(s.to_bits()) == Some(s.to_bits()) {
            return;
        }
        if let Some(s) = secs(v) {
            push(&mut self.shown, Some(s.as_str()));
        }
    }
}

/// `v` at the end of `list` unless it is there (owned only when it is new: this runs for
/// every test of every run).
fn push<Q>(list: &mut Vec<Q::Owned>, v: Option<&Q>)
where
    Q: ToOwned + PartialEq + ?Sized,
    Q::Owned: std::borrow::Borrow<Q>,
{
    use std::borrow::Borrow;
    if let Some(v) = v
        && !list.iter().any(|seen| seen.borrow() == v)
    {
        list.push(v.to_owned());
    }
}

impl TestsSeen {
    /// One more test, with its figures (their samples count its repeats).
    pub(crate) fn add(&mut self, t: &TestView, figures: &[crate::store::figures::Figures]) {
        push(&mut self.engine, t.engine.get().map(|e| e.0.as_str()));
        push(
            &mut self.io,
            t.direct
                .get()
                .map(|d| if *d { "direct" } else { "buffered" }),
        );
        self.runtime.add(match t.planned_runtime_s.get() {
            Some(_) => &t.planned_runtime_s,
            None => &t.runtime_s,
        });
        self.ramp.add(&t.ramp_s);
        push(&mut self.threads, t.threads.get().map(|e| e.0.as_str()));
        push(&mut self.times, t.times.get().map(Vec::len).as_ref());
        // Sample 0 is a test's summary, 1..=N its repeats; compare loads tests without their
        // per-repeat JSON, so the figures table is where the repeats are counted.
        let n = figures.iter().map(|f| f.sample).max().unwrap_or(0).max(1);
        push(&mut self.repeats, Some(&n));
    }
}

/// `1s`: seconds as the fingerprint shows them.
fn secs(v: &Field<f64>) -> Option<String> {
    v.get().map(|s| format!("{}s", round_secs(*s)))
}

/// The values seen, joined; `None` when none was.
fn joined<T: std::fmt::Display>(list: &[T]) -> Option<String> {
    (!list.is_empty()).then(|| {
        list.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The entries of one run, always the same keys in the same order.
pub fn of_run(run: &StoredRun, seen: &TestsSeen) -> Vec<(&'static str, Option<String>)> {
    let host: HostView = view(&run.host);
    let target: TargetView = view(&run.target);
    let extra: ExtraView = view(&Value::Object(run.extra.clone()));
    let tunables = extra.tunables.get();
    let queues: Vec<&QueueView> = tunables
        .and_then(|t| t.devices.get())
        .map(|d| d.iter().filter_map(Field::get).collect())
        .unwrap_or_default();
    let system = |f: fn(&TunablesView) -> &Field<Text>| tunables.map_or(&Field::Absent, f);
    let queue = |f: fn(&QueueView) -> &Field<Text>| per_device(&queues, f);
    let mut entries = vec![
        ("host", text(&host.hostname)),
        ("kernel", text(&host.kernel)),
        ("OS", text(&host.os)),
        ("CPU", text(&host.cpu_model)),
        ("CPUs", text(&host.cpus)),
        (
            "memory",
            host.mem_total_bytes
                .get()
                .map(|b| format!("{:.1} GiB", b / f64::from(1u32 << 30))),
        ),
        (
            "virtualization",
            or_if_recorded(&host.virtualization, "none detected"),
        ),
        ("THP", text(system(|t| &t.thp_enabled))),
        ("THP defrag", text(system(|t| &t.thp_defrag))),
        (
            "CPU governor",
            or_if_recorded(system(|t| &t.cpu_governor), "none (no cpufreq)"),
        ),
        ("mitigations", text(system(|t| &t.mitigations))),
        (
            "mitigations=",
            or_if_recorded(system(|t| &t.mitigations_cmdline), "not set"),
        ),
        ("target", text(&target.path)),
        ("filesystem", text(&target.filesystem)),
        ("mount options", text(&target.mount_options)),
        (
            "devices",
            target.devices.get().and_then(|d| {
                let names: Vec<&str> = d
                    .iter()
                    .filter_map(Field::get)
                    .map(String::as_str)
                    .collect();
                (!names.is_empty()).then(|| names.join(" → "))
            }),
        ),
        ("device model", text(&target.device_model)),
        (
            "rotational",
            target
                .rotational
                .get()
                .map(|r| if *r { "yes" } else { "no" }.to_string()),
        ),
        (
            "scheduler",
            queue(|q| &q.scheduler).or_else(|| text(&target.scheduler)),
        ),
        ("nr_requests", queue(|q| &q.nr_requests)),
        ("read_ahead_kb", queue(|q| &q.read_ahead_kb)),
        ("write cache", queue(|q| &q.write_cache)),
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
    entries.extend(method(run, &extra, &target, seen));
    entries
}

/// How the run measured: the options a person chooses, which change the figures as much as
/// the machine does (threshold, engine, size, runtime, repeats, and the options of `bench
/// cpu`, `bench mem` and `time`).
fn method(
    run: &StoredRun,
    extra: &ExtraView,
    target: &TargetView,
    seen: &TestsSeen,
) -> Vec<(&'static str, Option<String>)> {
    let repeats = extra
        .suite
        .get()
        .and_then(|s| s.repeat.get().map(|&n| u64::from(n)))
        .or_else(|| extra.repeat.get().copied())
        .map(|n| n.to_string())
        .or_else(|| {
            if run.kind == RunKind::Time {
                return joined(&seen.times);
            }
            joined(&seen.repeats)
        });
    match run.kind {
        RunKind::Disk => vec![
            (
                "threshold",
                extra
                    .judgement
                    .get()
                    .and_then(|j| j.threshold_ns.get())
                    .map(|ns| format_latency_ns(*ns)),
            ),
            ("engine", joined(&seen.engine)),
            ("I/O", joined(&seen.io)),
            ("size", target.region_bytes.get().map(|b| format_size(*b))),
            // The runtime asked for; runs stored before it was kept give their measured
            // seconds, rounded so that noise does not read as a changed setting (a busy
            // machine still stretched 0.3 s to 0.31 s). A suite's runtime changes show in its
            // `suite` entry.
            (
                "runtime",
                run.suite
                    .is_none()
                    .then(|| joined(&seen.runtime.shown))
                    .flatten(),
            ),
            ("ramp", joined(&seen.ramp.shown)),
            ("repeats", repeats),
        ],
        RunKind::Cpu | RunKind::Mem => vec![
            ("runtime", secs(&extra.runtime_s)),
            ("repeats", repeats),
            ("threads", joined(&seen.threads)),
        ],
        // Compared by `tacho drift`, not here: their documents are the fingerprint.
        RunKind::Check | RunKind::Snapshot => Vec::new(),
        // The side's settings are its method: compare lists `setting: A → B` under the table.
        RunKind::Experiment => vec![
            ("setting", text(&extra.setting)),
            ("measure", text(&extra.measure)),
            ("rounds", repeats),
        ],
        RunKind::Load => {
            let field = |key: &str| {
                run.target
                    .get(key)
                    .filter(|v| !v.is_null())
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            };
            vec![
                ("url", field("url")),
                ("method", field("method")),
                ("connections", field("connections")),
                ("mode", extra_text(&run.extra, "mode")),
            ]
        }
        RunKind::Time => vec![
            ("runs", repeats),
            (
                "order",
                extra
                    .interleaved
                    .get()
                    .map(|i| if *i { "interleaved" } else { "blocks" }.to_string()),
            ),
            ("shell", or_if_recorded(&extra.shell, "none (-N)")),
        ],
    }
}

/// A top-level text field of the document.
fn extra_text(extra: &serde_json::Map<String, serde_json::Value>, key: &str) -> Option<String> {
    extra.get(key).and_then(|v| v.as_str()).map(str::to_string)
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
fn text(field: &Field<Text>) -> Option<String> {
    field.get().map(|t| t.0.clone())
}

/// Like [`text`], but a field recorded as null means `absent` (e.g. no cpufreq), which is
/// different from a run that did not record the field at all.
fn or_if_recorded(field: &Field<Text>, absent: &str) -> Option<String> {
    match field {
        Field::Null => Some(absent.to_string()),
        _ => text(field),
    }
}

/// A queue setting: the value for one device, `dm-0 128, sda 256` for several.
fn per_device(devices: &[&QueueView], key: fn(&QueueView) -> &Field<Text>) -> Option<String> {
    let values: Vec<(String, String)> = devices
        .iter()
        .filter_map(|d| Some((text(&d.device)?, text(key(d))?)))
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

    /// What a loaded run's tests recorded of their method.
    fn seen(run: &StoredRun) -> TestsSeen {
        let mut seen = TestsSeen::default();
        for t in &run.tests {
            seen.add(&view(&t.json), &t.figures);
        }
        seen
    }

    fn table(runs: &[StoredRun]) -> Vec<FingerprintRow> {
        super::table(runs, &runs.iter().map(seen).collect::<Vec<_>>())
    }

    fn run(id: i64, host: Value, extra: Value) -> StoredRun {
        StoredRun {
            uuid: None,
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
        let devices: [QueueView; 2] = [
            view(&json!({"device": "dm-0", "nr_requests": 128})),
            view(&json!({"device": "sda", "nr_requests": 256})),
        ];
        let devices: Vec<&QueueView> = devices.iter().collect();
        assert_eq!(
            per_device(&devices, |q| &q.nr_requests).as_deref(),
            Some("dm-0 128, sda 256")
        );
        assert_eq!(per_device(&devices, |q| &q.write_cache), None);
    }

    /// Feeds the types that write a `bench disk` document through the views: a field renamed
    /// on either side leaves its entry (or the run's judgement, warnings, target) unknown and
    /// fails here.
    #[test]
    fn every_entry_reads_from_the_types_that_write_the_document() {
        use crate::bench::result::{Judgement, SuiteRef, TargetInfo, TestResult, Warning};
        use crate::io::{EngineKind, JobParams, JobSpec, Measured, Rw};
        use crate::kernel::host::Host;
        use crate::kernel::tunables::{QueueTunables, SystemTunables, Tunables};
        use std::time::Duration;
        let some = |s: &str| Some(s.to_string());
        let host = Host {
            hostname: some("db1"),
            machine_id: None,
            labels: Default::default(),
            kernel: some("6.18"),
            os: some("Debian"),
            cpu_model: some("EPYC"),
            cpus: Some(2),
            mem_total_bytes: Some(1 << 30),
            virtualization: some("kvm"),
            virtualization_evidence: Vec::new(),
            unreadable: Vec::new(),
        };
        let tunables = Tunables {
            system: SystemTunables {
                thp_enabled: some("never"),
                thp_defrag: some("madvise"),
                cpu_governor: some("performance"),
                mitigations: some("mitigated: spectre_v1"),
                mitigations_cmdline: some("auto"),
                vulnerabilities: Default::default(),
                unreadable: Vec::new(),
            },
            devices: vec![QueueTunables {
                device: "vda".into(),
                scheduler: some("none"),
                nr_requests: Some(256),
                read_ahead_kb: Some(128),
                write_cache: some("write back"),
            }],
        };
        let target = TargetInfo {
            path: "/data".into(),
            kind: crate::bench::result::Kind::Directory,
            region_bytes: 1 << 30,
            filesystem: some("ext4"),
            mount_point: some("/data"),
            mount_options: some("rw,relatime"),
            devices: vec!["vda".into()],
            device_model: some("virtio"),
            rotational: Some(false),
            scheduler: some("none"),
            logical_block_size: 512,
        };
        let spec = JobSpec::new(JobParams {
            rw: Rw::RandRead,
            bs: 4096,
            bssplit: Vec::new(),
            iodepth: 1,
            numjobs: 1,
            region_bytes: 1 << 30,
            runtime: Duration::from_secs(1),
            ramp: Duration::ZERO,
            io_limit: None,
            rwmixread: 50,
            sync: None,
            open_sync: None,
            direct: true,
            engine: EngineKind::IoUring,
            seed: 1,
        })
        .unwrap();
        let test = TestResult::new("t".into(), &spec, &[Measured::default()], Vec::new());
        let judgement = Judgement {
            status: crate::bench::result::Status::Pass,
            metric: "fdatasync p99",
            value_ns: 1,
            threshold_ns: 10_000_000,
        };
        let suite: SuiteRef = SuiteRef {
            name: "etcd".to_string(),
            version: 1,
            standard: true,
            repeat: 3,
            changed: Vec::new(),
        };
        let warning = Warning {
            code: crate::warning::Code::CacheSuspected,
            message: "served from cache".into(),
        };
        let extra = json!({"tunables": tunables, "judgement": judgement, "suite": suite,
                           "warnings": [warning]});
        let mut r = run(1, serde_json::to_value(&host).unwrap(), extra);
        r.target = serde_json::to_value(&target).unwrap();
        r.tests.push(crate::store::StoredTest {
            name: "t".into(),
            json: serde_json::to_value(&test).unwrap(),
            figures: Vec::new(),
        });
        // `suite` comes from its own columns, not from the document.
        let unknown: Vec<&str> = of_run(&r, &seen(&r))
            .into_iter()
            .filter(|(key, v)| v.is_none() && *key != "suite")
            .map(|(key, _)| key)
            .collect();
        assert!(
            unknown.is_empty(),
            "not read from the document: {unknown:?}"
        );
        let head = super::super::head::head(&r, &super::super::head::TestWarnings::of(&r));
        assert_eq!(
            head.judgement.map(|j| j.describe()).as_deref(),
            Some("PASS: fdatasync p99 1ns, limit 10.0ms")
        );
        assert_eq!(head.warnings, ["[cache-suspected]: served from cache"]);
        assert_eq!(head.target.as_deref(), Some("/data"));
    }
}
