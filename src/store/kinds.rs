//! Runs of `bench cpu`, `bench mem` and `time` as stored runs: their documents
//! (`tacho.cpu.v1`, `tacho.mem.v1`, `tacho.time.v1`) split into tests whose figures sit where
//! the store indexes them (see [`super::figures::DIRECTIONS`]), so `compare` lines them up
//! and tests their repeats like disk tests.
//!
//! Read from `serde_json::Value`, like fio's JSON, so a document saved by `--json` imports the
//! same way the running command saves it.

use super::run::Invalid;
use super::run::{NewRun, NewTest};
use super::run::{RunKind, RunSource, RunStatus};
use serde_json::{Map, Value, json};

/// The kind a document's schema stands for, when it is one of these three.
pub fn kind_of_schema(schema: &str) -> Option<RunKind> {
    match schema {
        "tacho.cpu.v1" => Some(RunKind::Cpu),
        "tacho.mem.v1" => Some(RunKind::Mem),
        "tacho.time.v1" => Some(RunKind::Time),
        "tacho.check.v1" => Some(RunKind::Check),
        crate::snapshot::SCHEMA => Some(RunKind::Snapshot),
        _ => None,
    }
}

/// Splits a `tacho.cpu.v1`, `tacho.mem.v1` or `tacho.time.v1` document into a run.
pub fn to_run(doc: &Value, source: RunSource) -> Result<NewRun, Invalid> {
    let obj = doc
        .as_object()
        .ok_or("the document must be a JSON object")?;
    let schema = obj.get("schema").and_then(Value::as_str).unwrap_or("");
    let kind =
        kind_of_schema(schema).ok_or_else(|| Invalid(format!("unknown schema {schema:?}")))?;
    let (tests, consumed): (Vec<Value>, &[&str]) = match kind {
        RunKind::Cpu => (cpu_tests(obj)?, &["single_thread", "all_threads"]),
        RunKind::Mem => (mem_tests(obj)?, &["levels"]),
        RunKind::Time => (time_tests(obj)?, &["results"]),
        // Kept whole: drift reads the document, and there are no figures to compare.
        RunKind::Check | RunKind::Snapshot | RunKind::Disk => (Vec::new(), &[]),
    };
    if let Some(v) = obj.get("host").filter(|h| !h.is_object()) {
        return Err(Invalid(format!(
            "\"host\" is {}; it must be an object",
            crate::text::json_kind(v)
        )));
    }
    let own = ["schema", "tool_version", "host", "suite_version"];
    let suite = obj
        .get("suite_version")
        .and_then(Value::as_i64)
        .map(|v| (kind.to_string(), v));
    Ok(NewRun {
        uuid: None,
        kind,
        source,
        label: None,
        created_at: None,
        // A snapshot says when it was taken (one collected from a host and imported later).
        created_unix: obj.get("taken_at_unix_s").and_then(Value::as_i64),
        status: if obj.get("interrupted").and_then(Value::as_bool) == Some(true) {
            RunStatus::Interrupted
        } else {
            RunStatus::Finished
        },
        tool_version: obj
            .get("tool_version")
            .and_then(Value::as_str)
            .map(str::to_string),
        suite,
        host: obj.get("host").cloned().unwrap_or_else(|| json!({})),
        target: json!({}),
        extra: obj
            .iter()
            .filter(|(k, _)| !own.contains(&k.as_str()) && !consumed.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tests: tests.iter().map(NewTest::from).collect(),
    })
}

fn array<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a Vec<Value>, Invalid> {
    obj.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| Invalid(format!("\"{key}\" must be an array")))
}

fn number(obj: &Value, key: &str) -> Result<f64, Invalid> {
    obj.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| Invalid(format!("\"{key}\" must be a number")))
}

fn text<'a>(obj: &'a Value, key: &str) -> Result<&'a str, Invalid> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Invalid(format!("\"{key}\" must be a string")))
}

/// The two passes' kernels, one test each (`primes 1 thread`, `primes all threads`), and
/// each pass's score (the geometric mean of its kernels, per repeat too).
fn cpu_tests(obj: &Map<String, Value>) -> Result<Vec<Value>, Invalid> {
    let mut tests = Vec::new();
    for (key, title) in [
        ("single_thread", "1 thread"),
        ("all_threads", "all threads"),
    ] {
        let pass = obj
            .get(key)
            .filter(|p| p.is_object())
            .ok_or_else(|| Invalid(format!("\"{key}\" must be an object")))?;
        let threads = pass.get("threads").cloned().unwrap_or(Value::Null);
        let kernels = pass
            .get("kernels")
            .and_then(Value::as_array)
            .ok_or_else(|| Invalid(format!("\"{key}.kernels\" must be an array")))?;
        let mut per_kernel: Vec<Vec<f64>> = Vec::new();
        for k in kernels {
            let name = text(k, "name")?;
            let repeats: Vec<f64> = k
                .get("repeats_ops_per_s")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            tests.push(json!({
                "name": format!("{name} {title}"),
                "kernel": name,
                "threads": threads,
                "op": k.get("op"),
                "spread_pct": k.get("spread_pct"),
                "run": {"ops_per_s": number(k, "ops_per_s")?},
                "repeats": repeats.iter().map(|r| json!({"run": {"ops_per_s": r}})).collect::<Vec<_>>(),
            }));
            per_kernel.push(repeats);
        }
        if kernels.is_empty() {
            continue;
        }
        // A repeat's score exists when every kernel finished that repeat.
        let rounds = per_kernel.iter().map(Vec::len).min().unwrap_or(0);
        let scores: Vec<Value> = (0..rounds)
            .filter_map(|i| crate::stats::geometric_mean(per_kernel.iter().map(|k| k[i])))
            .map(|s| json!({"run": {"ops_per_s": s}}))
            .collect();
        tests.push(json!({
            "name": format!("score {title}"),
            "threads": threads,
            "run": {"ops_per_s": number(pass, "ops_per_s")?},
            "repeats": scores,
        }));
    }
    Ok(tests)
}

/// Each level on one thread and on all threads: bandwidths as read, write and copy, the
/// random-access latency as the read latency.
fn mem_tests(obj: &Map<String, Value>) -> Result<Vec<Value>, Invalid> {
    let figures = |f: &Value| -> Result<Value, Invalid> {
        Ok(json!({
            "read": {
                "bw_bytes_per_s": number(f, "read_bytes_per_s")?,
                "lat_ns": {"mean": number(f, "latency_ns")?},
            },
            "write": {"bw_bytes_per_s": number(f, "write_bytes_per_s")?},
            "copy": {"bw_bytes_per_s": number(f, "copy_bytes_per_s")?},
        }))
    };
    let test = |name: String, level: &str, threads: &Value, f: &Value| -> Result<Value, Invalid> {
        let mut t = figures(f)?;
        let repeats = f
            .get("repeats")
            .and_then(Value::as_array)
            .map(|r| r.iter().map(figures).collect::<Result<Vec<_>, _>>())
            .transpose()?
            .unwrap_or_default();
        let extra = json!({
            "name": name,
            "level": level,
            "threads": threads,
            "size_bytes": f.get("size_bytes"),
            "spread_pct": f.get("spread_pct"),
            "repeats": repeats,
        });
        if let (Some(t), Value::Object(extra)) = (t.as_object_mut(), extra) {
            t.extend(extra);
        }
        Ok(t)
    };
    let mut tests = Vec::new();
    for l in array(obj, "levels")? {
        let level = text(l, "name")?;
        tests.push(test(format!("{level} 1 thread"), level, &json!(1), l)?);
        if let Some(all) = l.get("all_threads").filter(|a| a.is_object()) {
            let threads = all.get("threads").cloned().unwrap_or(Value::Null);
            tests.push(test(format!("{level} all threads"), level, &threads, all)?);
        }
    }
    Ok(tests)
}

/// One test per command, named by it: hyperfine's keys as they are, plus every run's wall
/// time as a repeat, so a later run of the same command is tested against all of them.
fn time_tests(obj: &Map<String, Value>) -> Result<Vec<Value>, Invalid> {
    let ns = |s: f64| s * 1e9;
    let mut tests = Vec::new();
    for r in array(obj, "results")? {
        let command = text(r, "command")?;
        let times: Vec<f64> = r
            .get("times")
            .and_then(Value::as_array)
            .ok_or("\"times\" must be an array")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let mut t = r
            .as_object()
            .cloned()
            .ok_or("every result must be an object")?;
        t.insert("name".into(), json!(command));
        t.insert(
            "wall".into(),
            json!({"lat_ns": {
                "mean": ns(number(r, "mean")?),
                "p50": ns(number(r, "median")?),
                "max": ns(number(r, "max")?),
            }}),
        );
        t.insert(
            "repeats".into(),
            times
                .iter()
                .map(|&s| json!({"wall": {"lat_ns": {"mean": ns(s)}}}))
                .collect(),
        );
        tests.push(Value::Object(t));
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::figures::of_test;

    #[test]
    fn cpu_kernels_and_scores() {
        let doc = json!({
            "schema": "tacho.cpu.v1", "tool_version": "0.1.0", "suite_version": 1,
            "host": {"hostname": "a"}, "scaling": 1.9, "interrupted": false,
            "single_thread": {"threads": 1, "ops_per_s": 20.0, "kernels": [
                {"name": "primes", "op": "p", "ops_per_s": 10.0, "repeats_ops_per_s": [10.0, 9.0]},
                {"name": "hash", "op": "h", "ops_per_s": 40.0, "repeats_ops_per_s": [40.0, 36.0]}]},
            "all_threads": {"threads": 2, "ops_per_s": 38.0, "kernels": [
                {"name": "primes", "op": "p", "ops_per_s": 19.0, "repeats_ops_per_s": [19.0]},
                {"name": "hash", "op": "h", "ops_per_s": 76.0, "repeats_ops_per_s": [76.0]}]}
        });
        let run = to_run(&doc, RunSource::Bench).unwrap();
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        assert_eq!(run.kind, RunKind::Cpu);
        assert_eq!(run.suite, Some(("cpu".into(), 1)));
        assert_eq!(run.extra["scaling"], 1.9);
        assert!(!run.extra.contains_key("single_thread"));
        let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "primes 1 thread",
                "hash 1 thread",
                "score 1 thread",
                "primes all threads",
                "hash all threads",
                "score all threads"
            ]
        );
        let f = of_test(&tests[0]);
        assert_eq!((f[0].direction, f[0].ops_per_s), ("run", Some(10.0)));
        assert_eq!(f[2].ops_per_s, Some(9.0));
        // Repeat 2's score: geometric mean of 9 and 36.
        let score = of_test(&tests[2]);
        assert!((score[2].ops_per_s.unwrap() - 18.0).abs() < 1e-9);
    }

    #[test]
    fn mem_levels_by_threads() {
        let f = json!({"read_bytes_per_s": 8.0, "write_bytes_per_s": 4.0,
                       "copy_bytes_per_s": 2.0, "latency_ns": 90.0});
        let doc = json!({
            "schema": "tacho.mem.v1", "suite_version": 1, "host": {},
            "levels": [{"name": "DRAM", "size_bytes": 1, "read_bytes_per_s": 8.0,
                "write_bytes_per_s": 4.0, "copy_bytes_per_s": 2.0, "latency_ns": 90.0,
                "repeats": [f, f],
                "all_threads": {"threads": 2, "size_bytes": 1, "read_bytes_per_s": 16.0,
                    "write_bytes_per_s": 8.0, "copy_bytes_per_s": 4.0, "latency_ns": 95.0}}]
        });
        let run = to_run(&doc, RunSource::Import).unwrap();
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        assert_eq!(run.tests.len(), 2);
        assert_eq!(tests[1]["name"], "DRAM all threads");
        let figs = of_test(&tests[0]);
        // Sample 0 and two repeats, each with read, write and copy.
        assert_eq!(figs.len(), 9);
        let copy = figs.iter().find(|f| f.direction == "copy").unwrap();
        assert_eq!(copy.bw_bytes_per_s, Some(2.0));
        assert_eq!(figs[0].lat_ns[0], Some(90.0));
    }

    #[test]
    fn time_commands_keep_hyperfine_keys() {
        let doc = json!({
            "schema": "tacho.time.v1", "host": {}, "interleaved": true,
            "results": [{"command": "sleep 0.1", "mean": 0.2, "median": 0.15, "max": 0.3,
                         "min": 0.1, "times": [0.1, 0.3], "exit_codes": [0, 0]}]
        });
        let run = to_run(&doc, RunSource::Bench).unwrap();
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        assert_eq!((run.kind, run.suite.clone()), (RunKind::Time, None));
        let t = &tests[0];
        assert_eq!(
            (t["name"].as_str(), t["min"].as_f64()),
            (Some("sleep 0.1"), Some(0.1))
        );
        let f = of_test(t);
        assert_eq!((f[0].direction, f[0].lat_ns[0]), ("wall", Some(2e8)));
        assert_eq!(f[2].lat_ns[0], Some(3e8));
    }

    #[test]
    fn malformed_documents_say_what_is_wrong() {
        let bad = |doc: Value| to_run(&doc, RunSource::Import).unwrap_err().0;
        assert!(bad(json!({"schema": "tacho.mem.v1"})).contains("levels"));
        assert!(
            bad(json!({"schema": "tacho.cpu.v1", "single_thread": 3})).contains("single_thread")
        );
        assert!(
            bad(json!({"schema": "tacho.time.v1", "results": [{"command": "x"}]}))
                .contains("times")
        );
        assert!(bad(json!([1])).contains("object"));
    }
}
