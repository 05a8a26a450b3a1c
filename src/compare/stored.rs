//! The fields of a stored run's document that the fingerprint reads, as typed views: one
//! struct per object, named as the model types that write them (`kernel::host::Host`,
//! `kernel::tunables::Tunables`, `bench::result::{TargetInfo, TestResult}`), so a renamed
//! field fails the test that feeds those types through here instead of showing "unknown".
//!
//! Every field is a [`Field`]: runs from older tacho versions, other machines and fio imports
//! lack some, record others as null, or hold another type; none of that fails the view.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny};
use serde_json::Value;

/// One field of a stored document.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Field<T> {
    /// Not recorded (or of a type this tacho does not read).
    #[default]
    Absent,
    /// Recorded as null: the run looked and found nothing (no cpufreq, no hypervisor).
    Null,
    /// Recorded.
    Set(T),
}

impl<T> Field<T> {
    /// The value, when recorded.
    pub(super) fn get(&self) -> Option<&T> {
        match self {
            Field::Set(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Field::Null,
            v => T::deserialize(v).map_or(Field::Absent, Field::Set),
        })
    }
}

/// A scalar shown as text: a string as it is, a number or a boolean as JSON writes it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Text(pub(super) String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Text(s)),
            Value::Number(n) => Ok(Text(n.to_string())),
            Value::Bool(b) => Ok(Text(b.to_string())),
            other => Err(serde::de::Error::custom(format!("not a scalar: {other}"))),
        }
    }
}

/// `host` (written from `kernel::host::Host`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct HostView {
    pub(super) hostname: Field<Text>,
    pub(super) kernel: Field<Text>,
    pub(super) os: Field<Text>,
    pub(super) cpu_model: Field<Text>,
    pub(super) cpus: Field<Text>,
    pub(super) mem_total_bytes: Field<f64>,
    pub(super) virtualization: Field<Text>,
}

/// `target` (written from `bench::result::TargetInfo`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TargetView {
    pub(super) path: Field<Text>,
    pub(super) filesystem: Field<Text>,
    pub(super) mount_options: Field<Text>,
    pub(super) devices: Field<Vec<Field<String>>>,
    pub(super) device_model: Field<Text>,
    pub(super) rotational: Field<bool>,
    pub(super) scheduler: Field<Text>,
    pub(super) region_bytes: Field<u64>,
}

/// `tunables` (written from `kernel::tunables::Tunables`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TunablesView {
    pub(super) thp_enabled: Field<Text>,
    pub(super) thp_defrag: Field<Text>,
    pub(super) cpu_governor: Field<Text>,
    pub(super) mitigations: Field<Text>,
    pub(super) mitigations_cmdline: Field<Text>,
    pub(super) devices: Field<Vec<Field<QueueView>>>,
}

/// One of `tunables.devices` (written from `kernel::tunables::QueueTunables`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct QueueView {
    pub(super) device: Field<Text>,
    pub(super) scheduler: Field<Text>,
    pub(super) nr_requests: Field<Text>,
    pub(super) read_ahead_kb: Field<Text>,
    pub(super) write_cache: Field<Text>,
}

/// The document's other top-level fields that describe the method: `tunables`, the etcd
/// `judgement`, the `suite`, and the options of `bench cpu`, `bench mem` and `time`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ExtraView {
    pub(super) tunables: Field<TunablesView>,
    pub(super) judgement: Field<JudgementView>,
    pub(super) suite: Field<SuiteView>,
    pub(super) repeat: Field<u64>,
    pub(super) runtime_s: Field<f64>,
    pub(super) interleaved: Field<bool>,
    pub(super) shell: Field<Text>,
    pub(super) warnings: Field<Vec<Field<WarningView>>>,
}

/// `judgement` (written from `bench::result::Judgement`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct JudgementView {
    pub(super) status: Field<String>,
    pub(super) metric: Field<String>,
    pub(super) value_ns: Field<f64>,
    pub(super) threshold_ns: Field<f64>,
}

/// One of `warnings`, the run's or a test's (written from `bench::result::Warning`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct WarningView {
    pub(super) code: Field<String>,
    pub(super) message: Field<String>,
}

/// `suite` (written from `bench::result::SuiteRef`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SuiteView {
    pub(super) repeat: Field<u64>,
}

/// One test (written from `bench::result::TestResult`, or a cpu/mem/time test).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TestView {
    pub(super) engine: Field<Text>,
    pub(super) direct: Field<bool>,
    pub(super) runtime_s: Field<f64>,
    pub(super) ramp_s: Field<f64>,
    pub(super) threads: Field<Text>,
    pub(super) times: Field<Vec<IgnoredAny>>,
}

/// What a disk test did (written from `bench::result::TestResult` and `io::spec`): the fields
/// that decide whether two runs' tests are the same work, and the flush count.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct WorkView {
    pub(super) rw: Field<String>,
    pub(super) bs_bytes: Field<u64>,
    pub(super) iodepth: Field<u64>,
    pub(super) numjobs: Field<u64>,
    pub(super) rwmixread: Field<u64>,
    pub(super) sync_every: Field<SyncEveryView>,
    pub(super) sync: Field<SyncView>,
}

/// `sync_every` (written from `io::spec::SyncEvery`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SyncEveryView {
    pub(super) kind: Field<String>,
    pub(super) every: Field<u64>,
}

/// `sync` (written from `bench::result::SyncResult`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct SyncView {
    pub(super) count: Field<u64>,
}

/// The view of `value`; a value that is not an object reads as nothing recorded.
pub(super) fn view<T: Default + DeserializeOwned>(value: &Value) -> T {
    T::deserialize(value).unwrap_or_default()
}
