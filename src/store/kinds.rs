//! Runs of `bench cpu`, `bench mem` and `time` as stored runs: their documents
//! (`tacho.cpu.v1`, `tacho.mem.v1`, `tacho.time.v1`) split into tests whose figures sit where
//! the store indexes them (see [`super::figures::DIRECTIONS`]), so `compare` lines them up
//! and tests their repeats like disk tests.
//!
//! Read through the writers' own types in their read-back form ([`crate::form`]):
//! `cpubench::Pass<Read>`, `membench::LevelResult<Read>`, `timing::result::CommandResult<Read>`,
//! the same way for a document saved by `--json` and one the running command saves. A missing
//! figure is refused, by name; a missing description (`op`, `spread_pct`, `threads`,
//! `size_bytes`) is stored as null. A writer's renamed field is renamed here too, so importing
//! the documents of tacho 0.1.0 (the goldens of `tests/it/schema_golden.rs`) fails on it. A
//! time result is kept whole (hyperfine's keys as they are) with the figures added.

use super::run::Invalid;
use super::run::{NewRun, NewTest};
use super::run::{RunKind, RunSource, RunStatus};
use super::stored::{Field, Read, view};
use super::version::{DocKind, Schema, SchemaError};
use crate::cpubench::{KernelResult, Pass};
use crate::membench::{Figures, LevelResult, Spread};
use crate::timing::result::CommandResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The fields of a cpu, mem or time document read here, besides `host` and the fields kept
/// whole in `extra`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DocumentView {
    tool_version: Field<String>,
    suite_version: Field<i64>,
    interrupted: Field<bool>,
    /// A snapshot's time (one collected from a host and imported later).
    taken_at_unix_s: Field<i64>,
    /// `tacho.cpu.v1`.
    single_thread: Field<Pass<Read>>,
    all_threads: Field<Pass<Read>>,
    /// `tacho.mem.v1`.
    levels: Field<Vec<Field<LevelResult<Read>>>>,
    /// `tacho.time.v1` (written from `timing::result::TimedCommand`), each kept whole and its
    /// figures read as a `CommandResult`.
    results: Field<Vec<Value>>,
    /// `tacho.load.v1` (written from `load::Step`), each kept whole with its figures added.
    steps: Field<Vec<Value>>,
    /// `tacho.load.v1`'s knee (`load::knee::Knee`).
    knee: Field<LoadKnee>,
}

/// The figure of a load run's knee read here.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LoadKnee {
    rps: Field<f64>,
}

/// Splits a `tacho.cpu.v1`, `tacho.mem.v1` or `tacho.time.v1` document into a run.
pub fn to_run(doc: &Value, source: RunSource) -> Result<NewRun, Invalid> {
    let obj = doc
        .as_object()
        .ok_or("the document must be a JSON object")?;
    let schema = obj.get("schema").and_then(Value::as_str).unwrap_or("");
    let kind = match Schema::parse(schema) {
        Ok(s) if s.kind != DocKind::Bench => s.kind.run_kind(),
        Err(newer @ SchemaError::Newer { .. }) => return Err(Invalid(newer.to_string())),
        _ => return Err(Invalid(format!("unknown schema {schema:?}"))),
    };
    let fields: DocumentView = view(doc);
    let (tests, consumed): (Vec<NewTest>, &[&str]) = match kind {
        RunKind::Cpu => (cpu_tests(&fields)?, &["single_thread", "all_threads"]),
        RunKind::Mem => (mem_tests(&fields)?, &["levels"]),
        RunKind::Time => (time_tests(&fields)?, &["results"]),
        RunKind::Load => (load_tests(&fields)?, &["steps"]),
        // Kept whole: drift reads the document, and there are no figures to compare.
        RunKind::Check | RunKind::Snapshot | RunKind::Disk | RunKind::Experiment => {
            (Vec::new(), &[])
        }
    };
    if let Some(v) = obj.get("host").filter(|h| !h.is_object()) {
        return Err(Invalid(format!(
            "\"host\" is {}; it must be an object",
            crate::text::json_kind(v)
        )));
    }
    let own = ["schema", "tool_version", "host", "suite_version", "target"];
    Ok(NewRun {
        uuid: None,
        kind,
        source,
        label: None,
        created_at: None,
        created_unix: fields.taken_at_unix_s.get().copied(),
        status: if fields.interrupted.get() == Some(&true) {
            RunStatus::Interrupted
        } else {
            RunStatus::Finished
        },
        tool_version: fields.tool_version.get().cloned(),
        suite: fields.suite_version.get().map(|v| (kind.to_string(), *v)),
        host: obj.get("host").cloned().unwrap_or_else(|| json!({})),
        target: match kind {
            RunKind::Load => obj
                .get("target")
                .filter(|t| t.is_object())
                .cloned()
                .ok_or("\"target\" must be an object")?,
            _ => json!({}),
        },
        extra: obj
            .iter()
            .filter(|(k, _)| !own.contains(&k.as_str()) && !consumed.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tests,
    })
}

/// A figure the test cannot do without.
fn number(field: &Field<f64>, key: &str) -> Result<f64, Invalid> {
    field
        .get()
        .copied()
        .ok_or_else(|| Invalid(format!("\"{key}\" must be a number")))
}

fn text<'a>(field: &'a Field<String>, key: &str) -> Result<&'a str, Invalid> {
    field
        .get()
        .map(String::as_str)
        .ok_or_else(|| Invalid(format!("\"{key}\" must be a string")))
}

/// `{"ops_per_s": …}`: a CPU test's figure, in direction `run`.
#[derive(Serialize)]
struct Ops {
    ops_per_s: f64,
}

/// One repeat of a CPU test.
#[derive(Serialize)]
struct OpsRepeat {
    run: Ops,
}

/// A kernel's test, or (without `kernel`, `op` and `spread_pct`) a pass's score.
#[derive(Serialize)]
struct CpuTest<'a> {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<&'a str>,
    threads: &'a Field<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    op: Option<&'a Field<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spread_pct: Option<&'a Field<f64>>,
    run: Ops,
    repeats: Vec<OpsRepeat>,
}

fn ops_repeats(values: impl IntoIterator<Item = f64>) -> Vec<OpsRepeat> {
    values
        .into_iter()
        .map(|ops_per_s| OpsRepeat {
            run: Ops { ops_per_s },
        })
        .collect()
}

/// The two passes' kernels, one test each (`primes 1 thread`, `primes all threads`), and
/// each pass's score (the geometric mean of its kernels, per repeat too).
fn cpu_tests(doc: &DocumentView) -> Result<Vec<NewTest>, Invalid> {
    let mut tests = Vec::new();
    let none = KernelResult::<Read>::default();
    for (key, pass, title) in [
        ("single_thread", &doc.single_thread, "1 thread"),
        ("all_threads", &doc.all_threads, "all threads"),
    ] {
        let pass = pass
            .get()
            .ok_or_else(|| Invalid(format!("\"{key}\" must be an object")))?;
        let kernels = pass
            .kernels
            .get()
            .ok_or_else(|| Invalid(format!("\"{key}.kernels\" must be an array")))?;
        let mut per_kernel: Vec<Vec<f64>> = Vec::new();
        for k in kernels {
            let k = k.get().unwrap_or(&none);
            let name = text(&k.name, "name")?;
            let repeats: Vec<f64> = k
                .repeats_ops_per_s
                .get()
                .map(|r| r.iter().filter_map(Field::get).copied().collect())
                .unwrap_or_default();
            tests.push(NewTest::of(&CpuTest {
                name: format!("{name} {title}"),
                kernel: Some(name),
                threads: &pass.threads,
                op: Some(&k.op),
                spread_pct: Some(&k.spread_pct),
                run: Ops {
                    ops_per_s: number(&k.ops_per_s, "ops_per_s")?,
                },
                repeats: ops_repeats(repeats.iter().copied()),
            })?);
            per_kernel.push(repeats);
        }
        if kernels.is_empty() {
            continue;
        }
        // A repeat's score exists when every kernel finished that repeat.
        let rounds = per_kernel.iter().map(Vec::len).min().unwrap_or(0);
        let scores = (0..rounds)
            .filter_map(|i| crate::stats::geometric_mean(per_kernel.iter().map(|k| k[i])));
        tests.push(NewTest::of(&CpuTest {
            name: format!("score {title}"),
            kernel: None,
            threads: &pass.threads,
            op: None,
            spread_pct: None,
            run: Ops {
                ops_per_s: number(&pass.ops_per_s, "ops_per_s")?,
            },
            repeats: ops_repeats(scores),
        })?);
    }
    Ok(tests)
}

/// `{"bw_bytes_per_s": …}`.
#[derive(Serialize)]
struct Bandwidth {
    bw_bytes_per_s: f64,
}

/// The read direction of a memory test: bandwidth, and the random-access latency.
#[derive(Serialize)]
struct ReadFigures {
    bw_bytes_per_s: f64,
    lat_ns: Mean,
}

/// `{"mean": …}`.
#[derive(Serialize)]
struct Mean {
    mean: f64,
}

/// One sample of a memory test.
#[derive(Serialize)]
struct MemFigures {
    read: ReadFigures,
    write: Bandwidth,
    copy: Bandwidth,
}

/// A level on one thread or on all threads.
#[derive(Serialize)]
struct MemTest<'a> {
    #[serde(flatten)]
    figures: MemFigures,
    name: String,
    level: &'a str,
    threads: &'a Field<usize>,
    size_bytes: &'a Field<u64>,
    spread_pct: &'a Field<Spread>,
    repeats: Vec<MemFigures>,
}

/// A level's (or a repeat's) bandwidths as read, write and copy, its random-access latency
/// as the read latency: `[read, write, copy, latency]` as the document has them.
fn mem_figures([read, write, copy, latency]: [&Field<f64>; 4]) -> Result<MemFigures, Invalid> {
    // In the order the figures were checked before the views (the message names the first).
    let read = number(read, "read_bytes_per_s")?;
    let latency = number(latency, "latency_ns")?;
    Ok(MemFigures {
        read: ReadFigures {
            bw_bytes_per_s: read,
            lat_ns: Mean { mean: latency },
        },
        write: Bandwidth {
            bw_bytes_per_s: number(write, "write_bytes_per_s")?,
        },
        copy: Bandwidth {
            bw_bytes_per_s: number(copy, "copy_bytes_per_s")?,
        },
    })
}

/// The fields a level and its all-threads pass both have.
struct LevelPass<'a> {
    threads: &'a Field<usize>,
    size_bytes: &'a Field<u64>,
    figures: [&'a Field<f64>; 4],
    spread_pct: &'a Field<Spread>,
    repeats: &'a Field<Vec<Field<Figures<Read>>>>,
}

/// Each level on one thread and on all threads: bandwidths as read, write and copy, the
/// random-access latency as the read latency.
fn mem_tests(doc: &DocumentView) -> Result<Vec<NewTest>, Invalid> {
    let none = Figures::<Read>::default();
    let test = |name: String, level: &str, pass: LevelPass| {
        let figures = mem_figures(pass.figures)?;
        let repeats = pass
            .repeats
            .get()
            .map(|r| {
                r.iter()
                    .map(|r| {
                        let r = r.get().unwrap_or(&none);
                        mem_figures([&r.read, &r.write, &r.copy, &r.latency_ns])
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        NewTest::of(&MemTest {
            figures,
            name,
            level,
            threads: pass.threads,
            size_bytes: pass.size_bytes,
            spread_pct: pass.spread_pct,
            repeats,
        })
    };
    let levels = doc
        .levels
        .get()
        .ok_or_else(|| Invalid("\"levels\" must be an array".into()))?;
    let one = Field::Set(1);
    let no_level = LevelResult::<Read>::default();
    let mut tests = Vec::new();
    for l in levels {
        let l = l.get().unwrap_or(&no_level);
        let level = text(&l.name, "name")?;
        let pass = LevelPass {
            threads: &one,
            size_bytes: &l.size_bytes,
            figures: [
                &l.read_bytes_per_s,
                &l.write_bytes_per_s,
                &l.copy_bytes_per_s,
                &l.latency_ns,
            ],
            spread_pct: &l.spread_pct,
            repeats: &l.repeats,
        };
        tests.push(test(format!("{level} 1 thread"), level, pass)?);
        if let Some(Some(all)) = l.all_threads.get() {
            let pass = LevelPass {
                threads: &all.threads,
                size_bytes: &all.size_bytes,
                figures: [
                    &all.read_bytes_per_s,
                    &all.write_bytes_per_s,
                    &all.copy_bytes_per_s,
                    &all.latency_ns,
                ],
                spread_pct: &all.spread_pct,
                repeats: &all.repeats,
            };
            tests.push(test(format!("{level} all threads"), level, pass)?);
        }
    }
    Ok(tests)
}

/// `{"lat_ns": …}`: a timed command's wall time, in direction `wall`.
#[derive(Serialize)]
struct Wall<T> {
    lat_ns: T,
}

/// The wall time's figures, in nanoseconds.
#[derive(Serialize)]
struct WallFigures {
    mean: f64,
    p50: f64,
    max: f64,
}

/// One run of a timed command, as a repeat.
#[derive(Serialize)]
struct WallRepeat {
    wall: Wall<Mean>,
}

/// One test per command, named by it: hyperfine's keys as they are, plus every run's wall
/// time as a repeat, so a later run of the same command is tested against all of them.
fn time_tests(doc: &DocumentView) -> Result<Vec<NewTest>, Invalid> {
    let ns = |s: f64| s * 1e9;
    let results = doc
        .results
        .get()
        .ok_or_else(|| Invalid("\"results\" must be an array".into()))?;
    let mut tests = Vec::new();
    for r in results {
        let figures: CommandResult<Read> = view(r);
        let command = text(&figures.command, "command")?;
        let times: Vec<f64> = figures
            .times
            .get()
            .ok_or("\"times\" must be an array")?
            .iter()
            .filter_map(Field::get)
            .copied()
            .collect();
        let mut t: Map<String, Value> = r
            .as_object()
            .cloned()
            .ok_or("every result must be an object")?;
        let wall = Wall {
            lat_ns: WallFigures {
                mean: ns(number(&figures.mean, "mean")?),
                p50: ns(number(&figures.median, "median")?),
                max: ns(number(&figures.max, "max")?),
            },
        };
        let repeats: Vec<WallRepeat> = times
            .iter()
            .map(|&s| WallRepeat {
                wall: Wall {
                    lat_ns: Mean { mean: ns(s) },
                },
            })
            .collect();
        t.insert("name".into(), json!(command));
        t.insert("wall".into(), json!(wall));
        t.insert("repeats".into(), json!(repeats));
        tests.push(NewTest::from(&Value::Object(t)));
    }
    Ok(tests)
}

/// One test per step, named by its offered rate (`offered 200 rps`): the step kept whole,
/// with its achieved rate as the IOPS and its latency in direction `run`; and the knee
/// (`knee`), its rate as the IOPS, so `compare` lines up the steps and the knees of two runs.
fn load_tests(doc: &DocumentView) -> Result<Vec<NewTest>, Invalid> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct StepView {
        offered_rps: Field<f64>,
        achieved_rps: Field<f64>,
        latency_ns: Field<Value>,
    }
    let steps = doc
        .steps
        .get()
        .ok_or_else(|| Invalid("\"steps\" must be an array".into()))?;
    let mut tests = Vec::new();
    for step in steps {
        let figures: StepView = view(step);
        let offered = number(&figures.offered_rps, "offered_rps")?;
        let achieved = number(&figures.achieved_rps, "achieved_rps")?;
        let mut t: Map<String, Value> = step
            .as_object()
            .cloned()
            .ok_or("every step must be an object")?;
        let mut run = json!({ "iops": achieved });
        if let Some(lat) = figures.latency_ns.get().filter(|l| l.is_object()) {
            run["lat_ns"] = lat.clone();
        }
        t.insert("name".into(), json!(format!("offered {offered} rps")));
        t.insert("run".into(), run);
        tests.push(NewTest::from(&Value::Object(t)));
    }
    if let Some(rps) = doc.knee.get().and_then(|k| k.rps.get()) {
        tests.push(NewTest::from(
            &json!({"name": "knee", "run": {"iops": rps}}),
        ));
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
    fn load_steps_and_the_knee_are_tests() {
        let lat =
            json!({"mean": 2e6, "p50": 1e6, "p90": 3e6, "p99": 5e6, "p99_9": 6e6, "max": 7e6});
        let doc = json!({
            "schema": "tacho.load.v1", "host": {}, "mode": "ramp",
            "target": {"url": "http://127.0.0.1:80/", "connections": 4},
            "steps": [
                {"offered_rps": 100.0, "achieved_rps": 99.5, "latency_ns": lat, "bent": []},
                {"offered_rps": 200.0, "achieved_rps": 150.0, "latency_ns": null, "bent": ["x"]}],
            "knee": {"rps": 150.0, "held": 0, "bent": 1}
        });
        let run = to_run(&doc, RunSource::Bench).unwrap();
        assert_eq!(run.kind, RunKind::Load);
        assert_eq!(run.target["connections"], 4);
        assert_eq!(run.extra["mode"], "ramp");
        let tests: Vec<Value> = run.tests.iter().map(NewTest::value).collect();
        let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["offered 100 rps", "offered 200 rps", "knee"]);
        let f = of_test(&tests[0]);
        assert_eq!((f[0].direction, f[0].iops), ("run", Some(99.5)));
        assert_eq!(f[0].lat_ns[3], Some(5e6));
        assert_eq!(of_test(&tests[1])[0].lat_ns[3], None);
        assert_eq!(of_test(&tests[2])[0].iops, Some(150.0));
        assert_eq!(tests[1]["bent"][0], "x");
        let bad = |doc: Value| to_run(&doc, RunSource::Import).unwrap_err().0;
        assert!(bad(json!({"schema": "tacho.load.v1", "target": {}})).contains("steps"));
        assert!(bad(json!({"schema": "tacho.load.v1", "steps": []})).contains("target"));
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
