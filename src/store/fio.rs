//! fio's `--output-format=json` as a tacho run: each job becomes a test with tacho's field
//! names, so existing fio results join `compare`.
//!
//! fio lists the clones of a `numjobs=N` job separately unless `group_reporting` is set; they
//! are merged into one test here (rates summed, latencies weighted by I/O count, which is exact
//! for means and an approximation for percentiles, said in the test's warnings).

use super::run::Invalid;
use super::run::{NewRun, NewTest, RunKind, RunSource, RunStatus};
use crate::units::parse_size;
use serde_json::{Map, Value, json};

/// fio's percentile keys for the percentiles tacho reports.
const PERCENTILES: [(&str, &str); 5] = [
    ("p50", "50.000000"),
    ("p90", "90.000000"),
    ("p99", "99.000000"),
    ("p99_9", "99.900000"),
    ("p99_99", "99.990000"),
];

/// Converts one fio JSON document.
pub fn to_run(doc: &Value) -> Result<NewRun, Invalid> {
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or("fio JSON without a \"jobs\" array")?;
    let global = doc.get("global options").and_then(Value::as_object);
    // Clones of one job share its name; keep the order of first appearance.
    let mut groups: Vec<(String, Vec<&Value>)> = Vec::new();
    for job in jobs {
        let name = job
            .get("jobname")
            .and_then(Value::as_str)
            .ok_or("a fio job without \"jobname\"")?;
        match groups.iter_mut().find(|(n, _)| n == name) {
            Some((_, clones)) => clones.push(job),
            None => groups.push((name.to_string(), vec![job])),
        }
    }
    let mut warnings = Vec::new();
    let mut tests = Vec::new();
    for (name, clones) in &groups {
        match test_of(name, clones, global) {
            Ok(test) => tests.push(test),
            Err(why) => warnings.push(json!({
                "code": "fio-job-skipped",
                "message": format!("fio job {name:?} was not imported: {why}"),
            })),
        }
    }
    if tests.is_empty() {
        return Err(Invalid(
            "no fio job could be imported (tacho compares read/write jobs only)".into(),
        ));
    }
    let option = |key: &str| global.and_then(|g| g.get(key)).and_then(Value::as_str);
    let devices: Vec<Value> = doc
        .get("disk_util")
        .and_then(Value::as_array)
        .map(|d| d.iter().filter_map(|u| u.get("name").cloned()).collect())
        .unwrap_or_default();
    let mut extra = Map::new();
    extra.insert(
        "fio".into(),
        json!({
            "version": doc.get("fio version"),
            "global_options": doc.get("global options"),
        }),
    );
    extra.insert("warnings".into(), Value::Array(warnings));
    Ok(NewRun {
        uuid: None,
        kind: RunKind::Disk,
        source: RunSource::Fio,
        label: None,
        created_at: None,
        created_unix: doc.get("timestamp").and_then(Value::as_i64),
        status: RunStatus::Finished,
        tool_version: doc
            .get("fio version")
            .and_then(Value::as_str)
            .map(str::to_string),
        suite: None,
        host: json!({}),
        target: json!({
            "path": option("filename").or(option("directory")).unwrap_or(""),
            "kind": "fio",
            "devices": devices,
        }),
        extra,
        tests: tests.iter().map(NewTest::from).collect(),
    })
}

/// One tacho test from the clones of one fio job.
fn test_of(
    name: &str,
    clones: &[&Value],
    global: Option<&Map<String, Value>>,
) -> Result<Value, Invalid> {
    let first = clones[0];
    let opt = |key: &str| {
        first
            .get("job options")
            .and_then(|o| o.get(key))
            .or_else(|| global.and_then(|g| g.get(key)))
            .and_then(Value::as_str)
    };
    // `rw=randread:8` adds an offset modifier; the pattern is before the colon.
    let rw_text = opt("rw").or(opt("readwrite")).unwrap_or("read");
    let rw = match rw_text.split(':').next().unwrap_or("") {
        "read" => "read",
        "write" => "write",
        "randread" => "randread",
        "randwrite" => "randwrite",
        "rw" | "readwrite" => "rw",
        "randrw" => "randrw",
        other => return Err(Invalid(format!("rw={other} has no tacho equivalent"))),
    };
    // `bs=4k,8k` sets reads and writes apart; the first is the read size.
    let bs_text = opt("bs").or(opt("blocksize")).unwrap_or("4k");
    let bs = parse_size(bs_text.split(',').next().unwrap_or(""))
        .map_err(|e| Invalid(format!("bs={bs_text}: {e}")))?;
    let number = |key: &str, default: u64| -> Result<u64, Invalid> {
        opt(key).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| Invalid(format!("{key}={v} is not a number")))
        })
    };
    let runtime_s = clones
        .iter()
        .filter_map(|c| c.get("job_runtime").and_then(Value::as_f64))
        .fold(0.0, f64::max)
        / 1000.0;
    let mut test = Map::new();
    test.insert("name".into(), json!(name));
    test.insert("rw".into(), json!(rw));
    test.insert("bs_bytes".into(), json!(bs));
    test.insert("iodepth".into(), json!(number("iodepth", 1)?));
    test.insert("numjobs".into(), json!(clones.len()));
    test.insert("direct".into(), json!(opt("direct") == Some("1")));
    test.insert("engine".into(), json!(opt("ioengine").unwrap_or("psync")));
    test.insert("runtime_s".into(), json!(runtime_s));
    if rw == "rw" || rw == "randrw" {
        let mix = match (opt("rwmixread"), opt("rwmixwrite")) {
            (Some(_), _) | (None, None) => number("rwmixread", 50)?,
            (None, Some(_)) => 100u64.saturating_sub(number("rwmixwrite", 50)?),
        };
        test.insert("rwmixread".into(), json!(mix));
    }
    for kind in ["fsync", "fdatasync"] {
        let every = number(kind, 0)?;
        if every > 0 {
            test.insert("sync_every".into(), json!({"kind": kind, "every": every}));
        }
    }
    let mut warnings = Vec::new();
    let mut from_clat = false;
    for dir in ["read", "write"] {
        if let Some((d, clat)) = direction(clones, dir) {
            from_clat |= clat;
            test.insert(dir.into(), d);
        }
    }
    if let Some(sync) = sync_of(clones) {
        test.insert("sync".into(), sync);
    }
    let (usr, sys) = clones.iter().fold((0.0, 0.0), |(u, s), c| {
        let pct = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let secs = c.get("job_runtime").and_then(Value::as_f64).unwrap_or(0.0) / 1000.0;
        (
            u + pct("usr_cpu") / 100.0 * secs,
            s + pct("sys_cpu") / 100.0 * secs,
        )
    });
    test.insert("cpu".into(), json!({"user_s": usr, "sys_s": sys}));
    if from_clat {
        warnings.push(json!({
            "code": "fio-clat",
            "message": "latency percentiles are fio's completion latency (clat), which leaves \
                        out submission; tacho's run from submission to completion",
        }));
    }
    if clones.len() > 1 {
        warnings.push(json!({
            "code": "fio-clones-merged",
            "message": format!(
                "fio reported the {} clones of this job separately; rates are summed and latency \
                 percentiles are I/O-weighted averages (run fio with --group_reporting for exact \
                 percentiles)",
                clones.len()
            ),
        }));
    }
    test.insert("warnings".into(), Value::Array(warnings));
    Ok(Value::Object(test))
}

/// One direction of one job in fio 3's units: fio 2.x (and 3.0) wrote bandwidth in KiB/s
/// (`bw`, no `bw_bytes`), `io_bytes` in KiB (no `io_kbytes`), latencies in microseconds
/// (`clat`, `lat`, with `clat.percentile` in µs too) rather than `clat_ns`/`lat_ns`, and the
/// oldest had no `total_ios`.
fn in_fio3_units(d: &Value) -> Value {
    let mut out = d.as_object().cloned().unwrap_or_default();
    let num = |k: &str| d.get(k).and_then(Value::as_f64);
    if out.get("bw_bytes").is_none() {
        if let Some(kib) = num("bw") {
            out.insert("bw_bytes".into(), json!(kib * 1024.0));
        }
        if let (None, Some(kib)) = (out.get("io_kbytes"), num("io_bytes")) {
            out.insert("io_bytes".into(), json!(kib * 1024.0));
        }
    }
    if let (None, Some(iops), Some(ms)) = (out.get("total_ios"), num("iops"), num("runtime")) {
        out.insert("total_ios".into(), json!((iops * ms / 1000.0).round()));
    }
    for key in ["clat", "lat"] {
        let ns_key = format!("{key}_ns");
        if out.contains_key(&ns_key) {
            continue;
        }
        if let Some(us) = d.get(key).and_then(Value::as_object) {
            out.insert(ns_key, micros_to_nanos(us));
        }
    }
    Value::Object(out)
}

/// A latency object of fio 2 (µs) in nanoseconds, percentiles included.
fn micros_to_nanos(us: &Map<String, Value>) -> Value {
    let scale = |v: &Value| v.as_f64().map_or(Value::Null, |x| json!(x * 1000.0));
    let mut ns = Map::new();
    for (k, v) in us {
        let v = match (k.as_str(), v) {
            ("percentile", Value::Object(p)) => {
                Value::Object(p.iter().map(|(q, x)| (q.clone(), scale(x))).collect())
            }
            ("min" | "max" | "mean" | "stddev", _) => scale(v),
            _ => v.clone(),
        };
        ns.insert(k.clone(), v);
    }
    Value::Object(ns)
}

/// One direction over all clones; `None` when no clone did I/O that way. The flag says whether
/// percentiles came from clat (fio reports total-latency percentiles only with lat_percentiles).
fn direction(clones: &[&Value], dir: &str) -> Option<(Value, bool)> {
    let parts: Vec<Value> = clones
        .iter()
        .filter_map(|c| c.get(dir))
        .map(in_fio3_units)
        .collect();
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let ios: f64 = parts.iter().map(|d| f(d, "total_ios")).sum();
    if ios <= 0.0 {
        return None;
    }
    let weighted = |get: &dyn Fn(&Value) -> Option<f64>| -> Option<f64> {
        let mut sum = 0.0;
        for d in &parts {
            sum += get(d)? * f(d, "total_ios");
        }
        Some(sum / ios)
    };
    let has_lat_pct = parts
        .iter()
        .all(|d| d.pointer("/lat_ns/percentile").is_some());
    let pct_source = if has_lat_pct { "lat_ns" } else { "clat_ns" };
    let mut lat = Map::new();
    lat.insert(
        "mean".into(),
        json!(weighted(&|d| d.pointer("/lat_ns/mean")?.as_f64()).map(f64::round)),
    );
    for (key, fio_key) in PERCENTILES {
        let value = weighted(&|d| d.get(pct_source)?.get("percentile")?.get(fio_key)?.as_f64());
        lat.insert(key.into(), json!(value.map(f64::round)));
    }
    let max = parts
        .iter()
        .filter_map(|d| d.pointer("/lat_ns/max").and_then(Value::as_f64))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    lat.insert("max".into(), json!(max));
    Some((
        json!({
            "iops": parts.iter().map(|d| f(d, "iops")).sum::<f64>(),
            "bw_bytes_per_s": parts.iter().map(|d| f(d, "bw_bytes")).sum::<f64>(),
            "ios": ios as u64,
            "bytes": parts.iter().map(|d| f(d, "io_bytes")).sum::<f64>() as u64,
            "lat_ns": lat,
        }),
        !has_lat_pct,
    ))
}

/// fsync/fdatasync latency, when the job flushed: clones' percentiles weighted by their flush
/// counts, as [`direction`] weights I/Os. fio 3.x leaves `sync.total_ios` at 0 and counts the
/// flushes only in `sync.lat_ns.N`.
fn sync_of(clones: &[&Value]) -> Option<Value> {
    let parts: Vec<(&Value, f64)> = clones
        .iter()
        .filter_map(|c| {
            let sync = c.get("sync")?;
            let lat = sync.get("lat_ns")?;
            let count = sync
                .get("total_ios")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .or_else(|| lat.get("N").and_then(Value::as_u64))?;
            (count > 0).then_some((lat, count as f64))
        })
        .collect();
    let count: f64 = parts.iter().map(|(_, n)| n).sum();
    if count <= 0.0 {
        return None;
    }
    let weighted = |get: &dyn Fn(&Value) -> Option<f64>| -> Option<f64> {
        let mut sum = 0.0;
        for (lat, n) in &parts {
            sum += get(lat)? * n;
        }
        Some((sum / count).round())
    };
    let mut lat = Map::new();
    lat.insert("mean".into(), json!(weighted(&|l| l.get("mean")?.as_f64())));
    for (key, fio_key) in PERCENTILES {
        let value = weighted(&|l| l.get("percentile")?.get(fio_key)?.as_f64());
        lat.insert(key.into(), json!(value));
    }
    let max = parts
        .iter()
        .filter_map(|(l, _)| l.get("max").and_then(Value::as_f64))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    lat.insert("max".into(), json!(max));
    Some(json!({"count": count as u64, "lat_ns": lat}))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/fio/three-jobs.json");

    #[test]
    fn real_fio_output_becomes_three_tests() {
        let doc: Value = serde_json::from_str(FIXTURE).unwrap();
        let run = to_run(&doc).unwrap();
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        assert_eq!(run.source, RunSource::Fio);
        assert_eq!(run.tool_version.as_deref(), Some("fio-3.33"));
        assert_eq!(run.created_unix, doc["timestamp"].as_i64());
        assert_eq!(run.target["devices"][0], "vda");
        let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["randread-4k-q16", "seqwrite-1m", "randrw-4k-2jobs"]);

        let rr = &tests[0];
        let job = &doc["jobs"][0];
        assert_eq!(
            (rr["rw"].as_str(), rr["bs_bytes"].as_u64()),
            (Some("randread"), Some(4096))
        );
        assert_eq!(
            (rr["iodepth"].as_u64(), rr["numjobs"].as_u64()),
            (Some(16), Some(1))
        );
        assert_eq!(rr["engine"], "io_uring");
        assert_eq!(rr["direct"], true);
        assert_eq!(rr["read"]["iops"], job["read"]["iops"]);
        assert_eq!(
            rr["read"]["bw_bytes_per_s"].as_f64(),
            job["read"]["bw_bytes"].as_f64()
        );
        assert_eq!(
            rr["read"]["lat_ns"]["p99"].as_f64(),
            job["read"]["clat_ns"]["percentile"]["99.000000"].as_f64()
        );
        assert!(rr.get("write").is_none(), "no writes in a randread job");
        assert_eq!(rr["warnings"][0]["code"], "fio-clat");

        let mixed = &tests[2];
        let (a, b) = (&doc["jobs"][2], &doc["jobs"][3]);
        assert_eq!(mixed["numjobs"], 2);
        assert_eq!(mixed["rwmixread"], 70);
        let sum = a["write"]["iops"].as_f64().unwrap() + b["write"]["iops"].as_f64().unwrap();
        assert!((mixed["write"]["iops"].as_f64().unwrap() - sum).abs() < 1e-6);
        assert!(
            mixed["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["code"] == "fio-clones-merged")
        );
    }

    #[test]
    fn unsupported_jobs_are_skipped_with_a_warning() {
        let doc = json!({
            "fio version": "fio-3.33",
            "jobs": [
                {"jobname": "trim", "job options": {"rw": "trim"}},
                {"jobname": "r", "job options": {"bs": "4k,8k"},
                 "read": {"total_ios": 10, "iops": 5.0, "bw_bytes": 20480, "io_bytes": 40960}}
            ]
        });
        let run = to_run(&doc).unwrap();
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        assert_eq!(run.tests.len(), 1);
        assert_eq!(tests[0]["rw"], "read");
        assert_eq!(tests[0]["bs_bytes"], 4096);
        assert_eq!(run.extra["warnings"][0]["code"], "fio-job-skipped");
        assert!(to_run(&json!({"fio version": "x", "jobs": []})).is_err());
        assert!(to_run(&json!({"fio version": "x"})).is_err());
        assert!(to_run(&json!({"fio version": "x", "jobs": [{"jobname": "a", "job options": {"bs": "huge"}}]})).is_err());
    }
}
