//! `bench disk --fio-job`: job files modelled on fio's own examples/ (ssd-test, fio-rand-RW,
//! fio-seq-write, tiobench-example, cmdprio-bssplit), written here with a temporary target.
//! Round trip: every option of every job means the same in the fio command tacho prints for
//! it; an option tacho does not carry out is refused by name.

use crate::common;
use crate::common::{assert_error, have_tool, json_ok, on_terminal, run, stdout, tacho};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `ssd-test.fio`: globals, four jobs each behind a stonewall.
const SSD_TEST: &str = "# Do some important numbers on SSD drives\n[global]\nbs=4k\n\
ioengine=io_uring\niodepth=4\nsize=4m\ndirect=1\nruntime=1\ndirectory=@DIR@\n\
filename=ssd.test.file\n\n[seq-read]\nrw=read\nstonewall\n\n[rand-read]\nrw=randread\n\
stonewall\n\n[seq-write]\nrw=write\nstonewall\n\n[rand-write]\nrw=randwrite\nstonewall\n";

/// `fio-rand-RW.fio`: a time-based mixed job, rwmixread and rwmixwrite both given.
const RAND_RW: &str = "; fio-rand-RW.job for fiotest\n\n[global]\nname=fio-rand-RW\n\
filename=@DIR@/ssd.test.file\nrw=randrw\nrwmixread=60\nrwmixwrite=40\nbs=4K\ndirect=0\n\
numjobs=4\ntime_based\nruntime=2\n\n[file1]\nsize=4M\nioengine=io_uring\niodepth=16\n";

/// `fio-seq-write.fio`: sequential buffered writes, time based.
const SEQ_WRITE: &str = "; fio-seq-write.job for fiotest\n\n[global]\nname=fio-seq-write\n\
filename=@DIR@/ssd.test.file\nrw=write\nbs=256K\ndirect=0\nnumjobs=1\ntime_based\n\
runtime=2\n\n[file1]\nsize=4M\nioengine=io_uring\niodepth=16\n";

/// `tiobench-example.fio` (bs for its bsrange=4k-4k), with an inline comment.
const TIOBENCH: &str = "; tiobench like setup\n\n[global]\ndirect=1\nsize=4m\nbs=4k\n\
numjobs=4\t; 4 simultaneous threads for each job\ndirectory=@DIR@\nfilename=ssd.test.file\n\
\n[f1]\nrw=write\n\n[f2]\nstonewall\nrw=randwrite\n\n[f3]\nstonewall\nrw=read\n\n\
[f4]\nstonewall\nrw=randread\n";

/// `cmdprio-bssplit.fio`'s mix, an etcd-like fdatasync job and O_DSYNC writes.
const MIXES: &str = "[global]\nfilename=@DIR@/ssd.test.file\nsize=4m\nioengine=psync\n\
randseed=42\nruntime=1\ntime_based\ngroup_reporting\n\n[mix]\nrw=randread\n\
bssplit=4k/50:64k/30:1m/20\n\n[wal]\nstonewall\nrw=write\nbs=4k\nioengine=sync\n\
fdatasync=1\ndirect=0\n\n[dsync]\nwait_for_previous\nrw=randwrite\nsync=dsync\n\
ramp_time=500ms\nrandseed=7\n";

/// Writes the job file with `@DIR@` standing for `dir`, and the data file its jobs name.
fn job_file(dir: &Path, text: &str) -> (std::path::PathBuf, String) {
    let text = text.replace("@DIR@", dir.to_str().unwrap());
    std::fs::write(dir.join("ssd.test.file"), vec![1u8; 4 << 20]).unwrap();
    let path = dir.join("job.fio");
    std::fs::write(&path, &text).unwrap();
    (path, text)
}

/// This test's own reading of a job file: each job's options, globals before it first.
fn jobs_of(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut global = BTreeMap::new();
    let mut jobs: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut in_global = false;
    for line in text.lines() {
        let line = line.split([';', '#']).next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_global = name == "global";
            if !in_global {
                jobs.push((name.to_string(), global.clone()));
            }
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or((line, "1"));
        let map = if in_global {
            &mut global
        } else {
            &mut jobs.last_mut().unwrap().1
        };
        map.insert(k.trim().to_string(), v.trim().to_string());
    }
    jobs
}

/// `--key=value` (and bare `--key`) of one printed fio line.
fn printed_options(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .skip(1)
        .map(|a| {
            let a = a.trim_start_matches("--").trim_matches('\'');
            let (k, v) = a.split_once('=').unwrap_or((a, "1"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn bytes(v: &str) -> u64 {
    let v = v.to_ascii_lowercase();
    let (n, shift) = match v.chars().last().unwrap() {
        'k' => (&v[..v.len() - 1], 10),
        'm' => (&v[..v.len() - 1], 20),
        'g' => (&v[..v.len() - 1], 30),
        _ => (&v[..], 0),
    };
    n.parse::<u64>().unwrap() << shift
}

fn seconds(v: &str) -> f64 {
    match v.strip_suffix("ms") {
        Some(ms) => ms.parse::<f64>().unwrap() / 1000.0,
        None => v.trim_end_matches('s').parse().unwrap(),
    }
}

fn mix(v: &str) -> Vec<(u64, u64)> {
    v.split(':')
        .map(|p| {
            let (s, pct) = p.split_once('/').unwrap();
            (bytes(s), pct.parse().unwrap())
        })
        .collect()
}

/// Asserts that `printed` means what `job` says, option by option.
fn assert_same_meaning(
    name: &str,
    job: &BTreeMap<String, String>,
    printed: &BTreeMap<String, String>,
) {
    let got = |k: &str| {
        printed
            .get(k)
            .unwrap_or_else(|| panic!("[{name}] printed no --{k}: {printed:?}"))
            .as_str()
    };
    let engine = job.get("ioengine").map_or("io_uring", String::as_str);
    // fio's psync and sync ignore iodepth; tacho prints its threads as jobs.
    let threads = if engine == "io_uring" {
        1
    } else {
        job.get("iodepth").map_or(1, |d| d.parse().unwrap())
    };
    for (k, v) in job {
        match k.as_str() {
            "name" | "group_reporting" | "stonewall" | "wait_for_previous" => {}
            "rw" => assert_eq!(got("rw"), v, "[{name}] rw"),
            "bs" | "size" => assert_eq!(bytes(got(k)), bytes(v), "[{name}] {k}"),
            "iodepth" if engine == "io_uring" => assert_eq!(got(k), v, "[{name}] {k}"),
            "iodepth" => {}
            "numjobs" => assert_eq!(
                got(k).parse::<u32>().unwrap(),
                v.parse::<u32>().unwrap() * threads,
                "[{name}] numjobs"
            ),
            "ioengine" | "randseed" | "fdatasync" | "fsync" | "sync" | "direct" => {
                assert_eq!(got(k), v, "[{name}] {k}")
            }
            "rwmixread" => assert_eq!(got(k), v, "[{name}] rwmixread"),
            "rwmixwrite" => assert_eq!(
                got("rwmixread").parse::<u8>().unwrap(),
                100 - v.parse::<u8>().unwrap(),
                "[{name}] rwmixwrite"
            ),
            "runtime" | "ramp_time" => assert_eq!(seconds(got(k)), seconds(v), "[{name}] {k}"),
            "time_based" => assert!(printed.contains_key("time_based"), "[{name}] time_based"),
            "bssplit" => assert_eq!(mix(got(k)), mix(v), "[{name}] bssplit"),
            "filename" => {
                let want = match job.get("directory") {
                    Some(d) => format!("{d}/{v}"),
                    None => v.clone(),
                };
                assert_eq!(got("filename"), want, "[{name}] filename");
            }
            "directory" => {}
            other => panic!("[{name}]: the test does not know {other}"),
        }
    }
    if !job.contains_key("time_based") {
        // fio's size-based job: it ends after its size.
        assert_eq!(
            bytes(got("io_size")),
            bytes(&job["size"]),
            "[{name}] size-based"
        );
        assert!(!printed.contains_key("time_based"));
    }
    if !job.contains_key("direct") {
        assert_eq!(
            got("direct"),
            "1",
            "[{name}] tacho's default, O_DIRECT, said"
        );
    }
}

#[test]
fn every_option_of_fios_examples_round_trips_through_print_fio() {
    for example in [SSD_TEST, RAND_RW, SEQ_WRITE, TIOBENCH, MIXES] {
        let dir = tempfile::tempdir().unwrap();
        let (path, text) = job_file(dir.path(), example);
        let o = run(&[
            "bench",
            "disk",
            "--fio-job",
            path.to_str().unwrap(),
            "--print-fio",
        ]);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let out = stdout(&o);
        let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("fio ")).collect();
        let jobs = jobs_of(&text);
        assert_eq!(lines.len(), jobs.len(), "{out}");
        for ((name, job), line) in jobs.iter().zip(&lines) {
            assert_same_meaning(name, job, &printed_options(line));
            if have_tool("fio") {
                let p = Command::new("sh")
                    .args(["-c", &format!("fio --parse-only {}", &line[4..])])
                    .output()
                    .unwrap();
                assert!(p.status.success(), "fio refused {line}");
            }
        }
    }
}

#[test]
fn a_job_file_runs_its_jobs_in_order_under_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let text = SSD_TEST
        .replace("runtime=1", "runtime=300ms")
        .replace("filename=ssd.test.file\n", "");
    let (path, _) = job_file(dir.path(), &text);
    std::fs::remove_file(dir.path().join("ssd.test.file")).unwrap();
    let doc = json_ok(&run(&[
        "bench",
        "disk",
        "--fio-job",
        path.to_str().unwrap(),
        "--json",
        "--no-probe-cache",
    ]));
    let names: Vec<&str> = common::tests_of(&doc)
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seq-read", "rand-read", "seq-write", "rand-write"]);
    assert_eq!(doc["target"]["region_bytes"], 4 << 20);
    // Only the job file is left: tacho's test file is gone.
    assert_eq!(common::entries(dir.path()), ["job.fio"]);
}

#[test]
fn what_tacho_does_not_do_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refuse = |text: &str, says: &str| {
        let (path, _) = job_file(dir.path(), text);
        let err = assert_error(&run(&[
            "bench",
            "disk",
            "--fio-job",
            path.to_str().unwrap(),
        ]));
        assert!(err.contains(says), "{says}: {err}");
    };
    refuse(
        "[j]\nsize=4m\nrw=randread\nverify=crc32c\n",
        "verify is not an option",
    );
    refuse("[j]\nsize=4m\nbsrange=4k-4k\n", "bsrange is not an option");
    refuse("[j]\nsize=4m\nioengine=mmap\n", "ioengine=mmap");
    refuse("[a]\nsize=4m\n[b]\nsize=4m\n", "add stonewall to [b]");
    refuse(
        "[a]\nsize=4m\nfilename=/x/a\n[b]\nstonewall\nsize=4m\nfilename=/x/b\n",
        "two targets",
    );
    refuse("[a]\nsize=4m\n[b]\nstonewall\nsize=8m\n", "different sizes");
    refuse("[a]\nrw=read\n", "give size=");
    let err = assert_error(&run(&[
        "bench",
        "disk",
        "--fio-job",
        "/nonexistent/job.fio",
    ]));
    assert!(err.contains("cannot read the job file"), "{err}");
    let err = assert_error(&run(&[
        "bench",
        "disk",
        "--fio-job",
        "x.fio",
        "--rw",
        "read",
    ]));
    assert!(err.contains("--fio-job") || err.contains("--rw"), "{err}");
}

/// Most job files begin with `ioengine=libaio` under `[global]`: those jobs run on io_uring
/// (both submit asynchronous direct I/O) with a note saying so; and a mistake in a `[global]`
/// line is blamed on `[global]`, where it is written, not on the job that inherits it.
#[test]
fn libaio_jobs_run_on_io_uring_with_a_note_and_global_lines_are_blamed_on_global() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[global]\nioengine=libaio\ndirect=1\nsize=4m\nruntime=300ms\ntime_based\n\
filename=@DIR@/ssd.test.file\n\n[rand-read]\nrw=randread\niodepth=8\n";
    let (path, _) = job_file(dir.path(), text);
    let doc = json_ok(&run(&[
        "bench",
        "disk",
        "--fio-job",
        path.to_str().unwrap(),
        "--json",
        "--no-save",
        "--no-probe-cache",
    ]));
    let test = &common::tests_of(&doc)[0];
    assert_eq!(test["name"], "rand-read");
    assert_eq!(test["engine"], "io_uring", "{test}");
    let note = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "fio-libaio-as-io-uring")
        .unwrap_or_else(|| panic!("no libaio note: {}", doc["warnings"]));
    let message = note["message"].as_str().unwrap();
    assert!(message.contains("[global] line 2"), "{message}");

    let (path, _) = job_file(
        dir.path(),
        "[global]\nsize=4m\nbogus=1\n\n[job1]\nrw=read\n",
    );
    let err = assert_error(&run(&[
        "bench",
        "disk",
        "--fio-job",
        path.to_str().unwrap(),
    ]));
    assert!(err.contains("[global] line 3: bogus"), "{err}");
    assert!(!err.contains("[job1]"), "{err}");
}

/// A job file is read with a cap: `/dev/zero` (which never ends) is an error, not an
/// out-of-memory kill (issue 28).
#[test]
fn an_endless_job_file_is_refused_at_one_mebibyte() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--fio-job",
        "/dev/zero",
    ]);
    let err = assert_error(&o);
    assert!(err.contains("larger than 1 MiB"), "{err}");
    assert!(common::entries(dir.path()).is_empty(), "left files behind");
}

/// Buffers that cannot fit in memory are refused with the figures before anything is
/// written: `--bs 256M --iodepth 64` on the command line, numjobs × iodepth in a job file.
#[test]
fn io_buffers_beyond_available_memory_are_refused_with_the_figure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let avail: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .expect("MemAvailable")
        * 1024;
    // Twice what is available, in 256 MiB blocks: more than any machine can give.
    let depth = (2 * avail / (256 << 20) + 1).to_string();
    let o = run(&[
        "bench",
        "disk",
        d,
        "--rw",
        "randread",
        "--bs",
        "256M",
        "--iodepth",
        &depth,
        "--size",
        "1G",
    ]);
    let err = assert_error(&o);
    assert!(err.contains("for I/O buffers"), "{err}");
    // The buffers asked for (256 MiB per I/O in flight) and the memory available, as figures.
    assert!(
        err.contains(&format!("(block size 256MiB × iodepth {depth} × 1 job)")),
        "{err}"
    );
    let need = figure_between(&err, "needs about ", " of memory");
    let asked = (256u64 << 20) * depth.parse::<u64>().unwrap();
    assert!(
        need >= asked as f64 && need < asked as f64 * 1.01,
        "{err}: {need} for {asked}"
    );
    assert_near_available(&err, avail);
    let job = dir.path().join("big.fio");
    // 256 jobs of 4096 I/Os in flight (the most a job file may ask), in blocks big enough.
    let bs = (2 * avail / (256 * 4096)).div_ceil(4096) * 4096;
    std::fs::write(
        &job,
        format!("[big]\nrw=randread\nbs={bs}\niodepth=4096\nnumjobs=256\nsize=1G\n"),
    )
    .unwrap();
    let o = run(&["bench", "disk", d, "--fio-job", job.to_str().unwrap()]);
    let err = assert_error(&o);
    assert!(err.contains("for I/O buffers"), "{err}");
    assert!(err.contains("× iodepth 4096 × 256 jobs)"), "{err}");
    let need = figure_between(&err, "needs about ", " of memory");
    assert!(need >= (bs * 4096 * 256) as f64, "{err}: {need}");
    assert_near_available(&err, avail);
    assert_eq!(common::entries(dir.path()), vec!["big.fio".to_string()]);
}

/// The figure (`50.0 GiB`) between `before` and `after` in `text`, in bytes.
fn figure_between(text: &str, before: &str, after: &str) -> f64 {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?}: {text}"))
        + before.len();
    let len = text[start..]
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?}: {text}"));
    let (number, unit) = text[start..start + len]
        .split_once(' ')
        .unwrap_or_else(|| panic!("not a figure: {text}"));
    let scale = match unit {
        "B" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "PiB" => 1 << 50,
        other => panic!("unit {other:?}: {text}"),
    };
    number.parse::<f64>().unwrap() * scale as f64
}

/// The refusal names the memory available, within what it may have changed by since the
/// test read it (and the figure's rounding).
fn assert_near_available(err: &str, avail: u64) {
    let said = figure_between(err, "more than half of the ", " available");
    let avail = avail as f64;
    assert!(
        (said - avail).abs() < avail * 0.1,
        "{err}: {avail} bytes available when the test read it"
    );
}

/// A job's name comes from its file: on the progress bar (a terminal) it is escaped like any
/// text from a file, so an ESC c in it does not reset the terminal, and braces in it are
/// shown, not taken for the bar's own fields.
#[test]
fn a_jobs_name_on_the_progress_bar_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("hostile.fio");
    std::fs::write(
        &job,
        format!(
            "[global]\nfilename={}\nsize=4m\nioengine=psync\nruntime=1\ntime_based\n\n\
             [\u{1b}cpwn {{msg}}]\nrw=read\n",
            dir.path().join("f").display()
        ),
    )
    .unwrap();
    let mut cmd = tacho();
    cmd.args(["bench", "disk", "--no-probe-cache", "--fio-job"])
        .arg(&job);
    let (drawn, o) = on_terminal(cmd, 120, true);
    assert!(o.status.success(), "{drawn}");
    assert!(!drawn.contains("\u{1b}cpwn"), "ESC c reached the terminal");
    assert!(drawn.contains("\\ecpwn {msg} ["), "{drawn:?}");
}
