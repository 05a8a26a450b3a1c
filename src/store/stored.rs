//! The fields of a stored run's document that tacho reads back (the store: the run header
//! and the suite; `compare`: what the fingerprint and the test match read), as typed views:
//! one struct per object, named as the model types that write them (`kernel::host::Host`,
//! `kernel::tunables::Tunables`, `bench::result::{TargetInfo, TestResult}`), so a renamed
//! field fails the test that feeds those types through here instead of showing "unknown".
//! The run header ([`RunView`]) is written through the same type.
//!
//! Every field is a [`Field`]: runs from older tacho versions, other machines and fio imports
//! lack some, record others as null, or hold another type; none of that fails the view. A
//! struct is read only from an object (serde's derived structs also take an array, element by
//! element as the fields in order, which no stored document means: see [`ObjectsOnly`]).

use crate::bench::result::SuiteRef;
use crate::form::{Form, Leaf};
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// One field of a stored document.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Field<T> {
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
    pub(crate) fn get(&self) -> Option<&T> {
        match self {
            Field::Set(v) => Some(v),
            _ => None,
        }
    }
}

impl<T> From<Option<T>> for Field<T> {
    /// `Some` is recorded; `None` is recorded as null (looked, found nothing).
    fn from(v: Option<T>) -> Field<T> {
        v.map_or(Field::Null, Field::Set)
    }
}

impl<T: Serialize> Serialize for Field<T> {
    /// A recorded value as itself, anything else as null (an absent field is left out by the
    /// struct holding it, with `skip_serializing_if = "Field::is_absent"`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Set(v) => v.serialize(s),
            _ => s.serialize_none(),
        }
    }
}

impl<T> Field<T> {
    /// Not in the document at all.
    pub(crate) fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Field::Null,
            v => T::deserialize(ObjectsOnly(v)).map_or(Field::Absent, Field::Set),
        })
    }
}

/// A deserializer that reads a struct only from an object: given an array, serde's derived
/// structs would take its elements as the fields in order (`"judgement": ["fail", …]` as a
/// judgement), which a stored document never means. Everything else is `D`'s own.
struct ObjectsOnly<D>(D);

/// Forwards `deserialize_*` methods that take only a visitor to the wrapped deserializer.
macro_rules! forward {
    ($($method:ident)*) => {
        $(fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
            self.0.$method(v)
        })*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectsOnly<D> {
    type Error = D::Error;

    forward! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_option(SomeObjectsOnly(v))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, v)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, MapOnly(v))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// An `Option`'s visitor whose value, when there is one, is read as [`ObjectsOnly`] too.
struct SomeObjectsOnly<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for SomeObjectsOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.0.visit_some(ObjectsOnly(d))
    }
}

/// A struct's visitor that accepts only a map (every other shape is the default: an error).
struct MapOnly<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for MapOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

/// As a stored document is read back: each field absent, null or recorded (see
/// [`crate::form`]).
// Clone, Copy and PartialEq so a derive on a struct of this form can have them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Read;

impl Form for Read {
    type Of<T: Leaf> = Field<T>;

    fn is_empty<T: Leaf>(list: &Field<Vec<T>>) -> bool {
        list.get().is_none_or(Vec::is_empty)
    }
}

/// A scalar shown as text: a string as it is, a number or a boolean as JSON writes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Text(pub(crate) String);

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
pub(crate) struct HostView {
    pub(crate) hostname: Field<Text>,
    pub(crate) kernel: Field<Text>,
    pub(crate) os: Field<Text>,
    pub(crate) cpu_model: Field<Text>,
    pub(crate) cpus: Field<Text>,
    pub(crate) mem_total_bytes: Field<f64>,
    pub(crate) virtualization: Field<Text>,
}

/// `target` (written from `bench::result::TargetInfo`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TargetView {
    pub(crate) path: Field<Text>,
    pub(crate) filesystem: Field<Text>,
    pub(crate) mount_options: Field<Text>,
    pub(crate) devices: Field<Vec<Field<String>>>,
    pub(crate) device_model: Field<Text>,
    pub(crate) rotational: Field<bool>,
    pub(crate) scheduler: Field<Text>,
    pub(crate) region_bytes: Field<u64>,
}

/// `tunables` (written from `kernel::tunables::Tunables`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TunablesView {
    pub(crate) thp_enabled: Field<Text>,
    pub(crate) thp_defrag: Field<Text>,
    pub(crate) cpu_governor: Field<Text>,
    pub(crate) mitigations: Field<Text>,
    pub(crate) mitigations_cmdline: Field<Text>,
    pub(crate) devices: Field<Vec<Field<QueueView>>>,
}

/// One of `tunables.devices` (written from `kernel::tunables::QueueTunables`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct QueueView {
    pub(crate) device: Field<Text>,
    pub(crate) scheduler: Field<Text>,
    pub(crate) nr_requests: Field<Text>,
    pub(crate) read_ahead_kb: Field<Text>,
    pub(crate) write_cache: Field<Text>,
}

/// The document's other top-level fields that describe the method: `tunables`, the etcd
/// `judgement`, the `suite`, and the options of `bench cpu`, `bench mem` and `time`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ExtraView {
    pub(crate) tunables: Field<TunablesView>,
    pub(crate) judgement: Field<JudgementView>,
    pub(crate) suite: Field<SuiteView>,
    pub(crate) repeat: Field<u64>,
    pub(crate) runtime_s: Field<f64>,
    pub(crate) interleaved: Field<bool>,
    pub(crate) shell: Field<Text>,
    /// An experiment side's settings (`thp.enabled=never`) and measure.
    pub(crate) setting: Field<Text>,
    pub(crate) measure: Field<Text>,
    pub(crate) warnings: Field<Vec<Field<WarningView>>>,
    pub(crate) precondition: Field<PreconditionView>,
}

/// `precondition` (written from `bench::sustained::Precondition`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PreconditionView {
    pub(crate) steady: Field<bool>,
    pub(crate) rounds_iops: Field<Vec<Field<f64>>>,
}

/// `judgement` (written from `bench::result::Judgement`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct JudgementView {
    pub(crate) status: Field<String>,
    pub(crate) metric: Field<String>,
    pub(crate) value_ns: Field<f64>,
    pub(crate) threshold_ns: Field<f64>,
}

/// One of `warnings`, the run's or a test's (written from `bench::result::Warning`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WarningView {
    pub(crate) code: Field<String>,
    pub(crate) message: Field<String>,
}

/// `suite`, as read back (`standard` is absent from runs saved before it was written).
pub(crate) type SuiteView = SuiteRef<Read>;

/// The top-level fields of a `tacho.bench.v1` document the store keeps in its own columns
/// (besides `host`, `target` and `tests`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct DocumentView {
    pub(crate) tool_version: Field<String>,
    pub(crate) run: Field<RunView>,
    pub(crate) suite: Field<SuiteView>,
    /// `true` when a signal stopped the run.
    pub(crate) interrupted: Field<bool>,
}

/// `run`: where a run came from, as `runs export` writes it and `runs import` reads it back
/// (a live `--json` document has none).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunView {
    /// The run's id in the store that exported it.
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub(crate) id: Field<i64>,
    pub(crate) label: Field<String>,
    /// RFC 3339 UTC.
    pub(crate) created_at: Field<String>,
    /// A `RunKind` word (a run without one is a disk run).
    pub(crate) kind: Field<String>,
    /// A `RunStatus` word.
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub(crate) status: Field<String>,
    /// A `RunSource` word.
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub(crate) source: Field<String>,
    /// The id the run was given on the host that made it.
    pub(crate) uuid: Field<String>,
}

/// One test (written from `bench::result::TestResult`, or a cpu/mem/time test).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TestView {
    pub(crate) engine: Field<Text>,
    pub(crate) direct: Field<bool>,
    pub(crate) runtime_s: Field<f64>,
    pub(crate) planned_runtime_s: Field<f64>,
    pub(crate) ramp_s: Field<f64>,
    pub(crate) threads: Field<Text>,
    pub(crate) times: Field<Vec<IgnoredAny>>,
}

/// A test's warnings (written from `bench::result::TestResult`): only the field read, as a run
/// may hold many tests.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TestWarningsView {
    pub(crate) warnings: Field<Vec<Field<WarningView>>>,
}

/// What `compare` reads of a stored test, read from its JSON text in one pass: the fields of
/// [`WorkView`], [`TestView`] and [`TestWarningsView`] (the per-second figures are not read:
/// a comparison's tests are summaries without them, see `Store::load_summary`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CompareTestView {
    rw: Field<String>,
    bs_bytes: Field<u64>,
    iodepth: Field<u64>,
    numjobs: Field<u64>,
    rwmixread: Field<u64>,
    sync_every: Field<SyncEveryView>,
    sync: Field<SyncView>,
    engine: Field<Text>,
    direct: Field<bool>,
    runtime_s: Field<f64>,
    planned_runtime_s: Field<f64>,
    ramp_s: Field<f64>,
    threads: Field<Text>,
    times: Field<Vec<IgnoredAny>>,
    warnings: Field<Vec<Field<WarningView>>>,
}

impl CompareTestView {
    /// The view split into the views it is made of.
    pub(crate) fn split(self) -> (WorkView, TestView, TestWarningsView) {
        (
            WorkView {
                rw: self.rw,
                bs_bytes: self.bs_bytes,
                iodepth: self.iodepth,
                numjobs: self.numjobs,
                rwmixread: self.rwmixread,
                sync_every: self.sync_every,
                sync: self.sync,
            },
            TestView {
                engine: self.engine,
                direct: self.direct,
                runtime_s: self.runtime_s,
                planned_runtime_s: self.planned_runtime_s,
                ramp_s: self.ramp_s,
                threads: self.threads,
                times: self.times,
            },
            TestWarningsView {
                warnings: self.warnings,
            },
        )
    }
}

/// What a disk test did (written from `bench::result::TestResult` and `io::spec`): the fields
/// that decide whether two runs' tests are the same work, and the flush count.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WorkView {
    pub(crate) rw: Field<String>,
    pub(crate) bs_bytes: Field<u64>,
    pub(crate) iodepth: Field<u64>,
    pub(crate) numjobs: Field<u64>,
    pub(crate) rwmixread: Field<u64>,
    pub(crate) sync_every: Field<SyncEveryView>,
    pub(crate) sync: Field<SyncView>,
}

/// `sync_every` (written from `io::spec::SyncEvery`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SyncEveryView {
    pub(crate) kind: Field<String>,
    pub(crate) every: Field<u64>,
}

/// `sync` (written from `bench::result::SyncResult`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SyncView {
    pub(crate) count: Field<u64>,
}

/// A disk test's per-second figures and its cliff (written from
/// `bench::result::{TestResult, TimelinePoint}` and `bench::sustained::Cliff`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PerSecondView {
    pub(crate) timeline: Field<Vec<PointView>>,
    pub(crate) cliff: Field<CliffView>,
}

/// One second of a test's timeline.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PointView {
    pub(crate) repeat: Field<u64>,
    pub(crate) t_s: Field<u64>,
    pub(crate) bw_bytes_per_s: Field<f64>,
}

/// Where a sustained test's write rate fell.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CliffView {
    pub(crate) bytes_before: Field<u64>,
    pub(crate) at_s: Field<f64>,
    pub(crate) before_bytes_per_s: Field<f64>,
    pub(crate) after_bytes_per_s: Field<f64>,
    pub(crate) after_pct: Field<f64>,
}

/// The view of `value`; a value that is not an object reads as nothing recorded.
pub(crate) fn view<T: Default + DeserializeOwned>(value: &Value) -> T {
    T::deserialize(ObjectsOnly(value)).unwrap_or_default()
}

/// As [`view`], read straight from a document's JSON text (no tree of values built first).
pub(crate) fn view_text<T: Default + DeserializeOwned>(text: &str) -> T {
    let mut de = serde_json::Deserializer::from_str(text);
    T::deserialize(ObjectsOnly(&mut de)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_header_reads_back_as_written_and_odd_fields_read_as_unrecorded() {
        let header = RunView {
            id: Field::Set(3),
            label: None.into(),
            created_at: Field::Set("2026-11-25T02:07:31Z".into()),
            kind: Field::Set("cpu".into()),
            status: Field::Set("finished".into()),
            source: Field::Set("bench".into()),
            uuid: Some("2c76c0a2-8f8c-4738-924d-febf836124ca".to_string()).into(),
        };
        let written = serde_json::to_string(&header).unwrap();
        assert_eq!(
            written,
            "{\"id\":3,\"label\":null,\"created_at\":\"2026-11-25T02:07:31Z\",\"kind\":\"cpu\",\
             \"status\":\"finished\",\"source\":\"bench\",\
             \"uuid\":\"2c76c0a2-8f8c-4738-924d-febf836124ca\"}"
        );
        let back: RunView = view(&serde_json::from_str(&written).unwrap());
        assert_eq!((back.id, back.label), (Field::Set(3), Field::Null));
        assert_eq!(back.kind.get().map(String::as_str), Some("cpu"));
        // From an older or hand-made document: wrong types are not recorded, nothing fails.
        let odd: RunView = view(&json!({"kind": 7, "uuid": ["x"], "label": "a"}));
        assert_eq!((odd.kind, odd.uuid), (Field::Absent, Field::Absent));
        assert_eq!(odd.label, Field::Set("a".to_string()));
        let suite: SuiteView = view(&json!({"name": "quick", "version": 2.5, "changed": [1, "x"]}));
        assert_eq!(
            (suite.version, suite.standard),
            (Field::Absent, Field::Absent)
        );
        assert_eq!(
            suite.changed,
            Field::Set(vec![Field::Absent, Field::Set("x".to_string())])
        );
    }

    #[test]
    fn an_array_is_not_read_as_a_struct_field_by_field() {
        let extra: ExtraView = view(&json!({
            "judgement": ["fail", "fdatasync p99", 2e6, 1e6],
            "suite": {"name": "etcd", "version": 1},
            "warnings": [["spread", "varied"], {"code": "steal"}],
        }));
        assert!(extra.judgement.is_absent());
        assert_eq!(extra.suite.get().and_then(|s| s.version.get()), Some(&1));
        let warnings = extra.warnings.get().unwrap();
        assert!(warnings[0].is_absent());
        assert_eq!(warnings[1].get().unwrap().code.get().unwrap(), "steal");
        let work: WorkView = view(&json!(["randread", 4096, 1, 1, 100]));
        assert_eq!((work.rw, work.bs_bytes), (Field::Absent, Field::Absent));
        // Nor inside an Option.
        let some: Field<Option<SyncView>> = view(&json!([3]));
        assert!(some.is_absent());
        let some: Field<Option<SyncView>> = view(&json!({"count": 3}));
        assert_eq!(some.get().unwrap().as_ref().unwrap().count, Field::Set(3));
    }
}
