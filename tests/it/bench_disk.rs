//! `tacho bench disk` end to end on small test files: the JSON document, the figures in it,
//! every engine, sync counts and mixed tests. Every run must leave its directory empty.

use crate::common::*;
use serde_json::Value;

/// Runs one tiny custom test in a fresh tempdir and returns the report.
fn bench_in_tempdir(extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "disk", dir.path().to_str().unwrap(), "--json"];
    args.extend_from_slice(TINY);
    args.extend_from_slice(extra);
    let v = json_ok(&run(&args));
    assert_empty(dir.path());
    v
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer in {v}"))
}

fn f64_of(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// Checks one direction (`read` or `write`) of a test: positive rates, bytes = ios × bs, and
/// ordered latency percentiles.
fn check_direction(test: &Value, dir: &str) -> u64 {
    let d = &test[dir];
    assert!(d.is_object(), "{dir} missing in {test}");
    let bs = u64_of(test, "bs_bytes");
    let ios = u64_of(d, "ios");
    assert!(ios > 0, "{dir}.ios = 0");
    assert!(f64_of(d, "iops") > 0.0);
    assert!(f64_of(d, "bw_bytes_per_s") > 0.0);
    assert_eq!(u64_of(d, "bytes"), ios * bs, "{dir}.bytes != ios * bs");
    check_latency(&d["lat_ns"]);
    ios
}

fn check_latency(lat: &Value) {
    let keys = ["p50", "p90", "p99", "p99_9", "p99_99", "max"];
    let values: Vec<u64> = keys.iter().map(|k| u64_of(lat, k)).collect();
    for (pair, names) in values.windows(2).zip(keys.windows(2)) {
        assert!(
            pair[0] <= pair[1],
            "{} ({}) > {} ({}) in {lat}",
            names[0],
            pair[0],
            names[1],
            pair[1]
        );
    }
    let mean = u64_of(lat, "mean");
    assert!(mean > 0, "mean latency 0 in {lat}");
    assert!(mean <= values[5], "mean above max in {lat}");
}

fn check_common(test: &Value) {
    for key in ["rw", "engine", "name"] {
        assert!(test[key].is_string(), "{key} missing in {test}");
    }
    assert!(u64_of(test, "bs_bytes") > 0);
    assert!(u64_of(test, "iodepth") >= 1);
    assert!(u64_of(test, "numjobs") >= 1);
    assert!(test["direct"].is_boolean());
    assert!(f64_of(test, "runtime_s") > 0.0);
    assert!(f64_of(&test["cpu"], "user_s") >= 0.0);
    assert!(f64_of(&test["cpu"], "sys_s") >= 0.0);
    assert!(test["device"].is_array());
    assert!(test["warnings"].is_array());
}

#[test]
fn buffered_randread_in_a_directory_reports_the_full_schema() {
    let v = bench_in_tempdir(&["--buffered", "--rw", "randread", "--bs", "4k"]);
    assert_eq!(v["schema"], "tacho.bench.v1");
    assert!(v["tool_version"].is_string());
    assert!(v["host"].is_object());
    assert_eq!(v["target"]["kind"], "directory");
    assert_eq!(u64_of(&v["target"], "region_bytes"), 8 << 20);
    assert_eq!(v["interrupted"], false);
    // 8 MiB of buffered I/O fits in any page cache: the run must say so.
    assert!(warning_codes(&v).contains(&"fits-in-ram".to_owned()));
    let tests = tests_of(&v);
    assert_eq!(tests.len(), 1);
    let t = &tests[0];
    check_common(t);
    assert_eq!(t["rw"], "randread");
    assert_eq!(u64_of(t, "bs_bytes"), 4096);
    assert_eq!(u64_of(t, "iodepth"), 1);
    assert_eq!(u64_of(t, "numjobs"), 1);
    assert_eq!(t["direct"], false);
    let runtime = f64_of(t, "runtime_s");
    assert!(
        (0.2..5.0).contains(&runtime),
        "runtime_s {runtime} for --runtime 300ms"
    );
    check_direction(t, "read");
    assert!(t.get("write").is_none(), "a read test has no write figures");
    assert!(
        t.get("sync").is_none(),
        "no sync without --fsync/--fdatasync"
    );
}

#[test]
fn buffered_write_reports_write_figures() {
    let v = bench_in_tempdir(&["--buffered", "--rw", "write", "--bs", "64k"]);
    let t = &tests_of(&v)[0];
    check_common(t);
    assert_eq!(t["rw"], "write");
    assert_eq!(u64_of(t, "bs_bytes"), 65536);
    check_direction(t, "write");
    assert!(t.get("read").is_none());
}

#[test]
fn fdatasync_every_write_is_counted() {
    let v = bench_in_tempdir(&["--buffered", "--rw", "randwrite", "--fdatasync", "1"]);
    let t = &tests_of(&v)[0];
    let writes = check_direction(t, "write");
    let sync = &t["sync"];
    let count = u64_of(sync, "count");
    assert!(count > 0, "no fdatasync counted: {t}");
    // One fdatasync per write; a write in flight at the end may miss its sync.
    let diff = writes.abs_diff(count);
    assert!(
        diff <= 1 + writes / 100,
        "sync.count {count} vs {writes} writes"
    );
    check_latency(&sync["lat_ns"]);
    assert_eq!(t["sync_every"]["kind"], "fdatasync");
    assert_eq!(u64_of(&t["sync_every"], "every"), 1);
}

/// With repeats, every figure of a row comes from the same data (all repeats pooled): the
/// rate is the I/Os over the repeats' time together, and with a flush after every write the
/// flush rate printed under it equals it (issue 29: 2.23k IOPS beside 3.46k flushes/s).
#[test]
fn a_rows_figures_come_from_the_same_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = |json: bool| {
        let mut a = vec!["bench", "disk", d, "--size", "4M", "--runtime", "300ms"];
        a.extend([
            "--buffered",
            "--rw",
            "write",
            "--bs",
            "4k",
            "--engine",
            "sync",
        ]);
        a.extend(["--fdatasync", "1", "--repeat", "3"]);
        if json {
            a.push("--json");
        }
        a
    };
    let v = json_ok(&run(&args(true)));
    let t = &tests_of(&v)[0];
    let secs: f64 = t["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| f64_of(r, "runtime_s"))
        .sum();
    // The row says which data it uses: all three repeats, pooled.
    assert_eq!(t["pooled_repeats"], 3, "{t}");
    assert_eq!(t["repeats"].as_array().unwrap().len(), 3);
    let w = &t["write"];
    let pooled = u64_of(w, "ios") as f64 / secs;
    assert!(
        (f64_of(w, "iops") - pooled).abs() <= pooled * 1e-9,
        "IOPS {} is not the pooled {pooled}",
        w["iops"]
    );
    let flushes = u64_of(&t["sync"], "count") as f64 / secs;
    assert!(
        (flushes - pooled).abs() <= pooled * 0.01 + 3.0 / secs,
        "{flushes} flushes/s beside {pooled} IOPS"
    );
    // The table shows the same two rates (three significant digits each).
    let text = stdout(&run(&args(false)));
    let rate = |prefix: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} row in {text}"));
        line.trim_start()[prefix.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert!(
        text.contains("figures pool all 3 repeats"),
        "the table does not say its figures pool the repeats: {text}"
    );
    let name = t["name"].as_str().unwrap();
    let (iops, flush) = (rate(name), rate("└ fdatasync (flushes/s)"));
    let num = |s: &str| -> f64 {
        let (n, m) = match s.strip_suffix('k') {
            Some(n) => (n, 1e3),
            None => (s, 1.0),
        };
        n.parse::<f64>().unwrap() * m
    };
    assert!(
        (num(&iops) - num(&flush)).abs() <= num(&iops) * 0.02,
        "table: {iops} IOPS beside {flush} flushes/s in {text}"
    );
}

#[test]
fn fsync_every_four_writes() {
    let v = bench_in_tempdir(&["--buffered", "--rw", "write", "--fsync", "4"]);
    let t = &tests_of(&v)[0];
    let writes = check_direction(t, "write");
    let count = u64_of(&t["sync"], "count");
    assert!(count > 0);
    let expected = writes / 4;
    assert!(
        count.abs_diff(expected) <= 1 + expected / 50,
        "sync.count {count} vs {writes} writes / 4"
    );
}

#[test]
fn mixed_randrw_keeps_the_read_share() {
    let v = bench_in_tempdir(&[
        "--buffered",
        "--rw",
        "randrw",
        "--rwmixread",
        "70",
        "--randseed",
        "7",
    ]);
    let t = &tests_of(&v)[0];
    assert_eq!(u64_of(t, "rwmixread"), 70);
    let reads = check_direction(t, "read");
    let writes = check_direction(t, "write");
    let share = reads as f64 / (reads + writes) as f64;
    assert!(
        (0.62..=0.78).contains(&share),
        "read share {share:.3} ({reads} reads, {writes} writes) for --rwmixread 70"
    );
}

#[test]
fn engine_psync_runs() {
    let v = bench_in_tempdir(&[
        "--buffered",
        "--rw",
        "randread",
        "--engine",
        "psync",
        "--iodepth",
        "2",
    ]);
    let t = &tests_of(&v)[0];
    assert_eq!(t["engine"], "psync");
    assert_eq!(u64_of(t, "iodepth"), 2);
    check_direction(t, "read");
}

#[test]
fn engine_sync_runs() {
    let v = bench_in_tempdir(&[
        "--buffered",
        "--rw",
        "write",
        "--engine",
        "sync",
        "--bs",
        "2300",
        "--fdatasync",
        "1",
    ]);
    let t = &tests_of(&v)[0];
    assert_eq!(t["engine"], "sync");
    assert_eq!(u64_of(t, "bs_bytes"), 2300);
    let writes = check_direction(t, "write");
    let count = u64_of(&t["sync"], "count");
    assert!(writes.abs_diff(count) <= 1 + writes / 100);
}

#[test]
fn engine_io_uring_direct_with_two_jobs() {
    // Direct I/O in a directory on the disk (the tempdir); if the filesystem under the
    // tempdir has no O_DIRECT, tacho must say so in one line rather than fail oddly.
    let dir = tempfile::tempdir().unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &[
            "--json",
            "--rw",
            "randread",
            "--engine",
            "io_uring",
            "--iodepth",
            "4",
            "--numjobs",
            "2",
        ],
    );
    let o = run(&args);
    if o.status.code() == Some(2) && stderr(&o).contains("O_DIRECT") {
        skip("engine_io_uring_direct_with_two_jobs: the tempdir's filesystem has no O_DIRECT");
        assert_empty(dir.path());
        return;
    }
    let v = json_ok(&o);
    assert_empty(dir.path());
    let t = &tests_of(&v)[0];
    if t["engine"] == "psync" {
        skip("engine_io_uring_direct_with_two_jobs: io_uring is blocked here, psync was used");
    } else {
        assert_eq!(t["engine"], "io_uring");
    }
    assert_eq!(t["direct"], true);
    assert_eq!(u64_of(t, "iodepth"), 4);
    assert_eq!(u64_of(t, "numjobs"), 2);
    check_direction(t, "read");
}

#[test]
fn table_output_without_json() {
    let dir = tempfile::tempdir().unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--buffered", "--rw", "randread"],
    );
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.trim().is_empty());
    assert!(
        serde_json::from_str::<Value>(&out).is_err(),
        "table output is not JSON"
    );
    assert_empty(dir.path());
}

#[test]
fn quick_suite_runs_with_tiny_settings() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--json",
        "--buffered",
        "--size",
        "8M",
        "--runtime",
        "200ms",
        "--ramp",
        "0s",
    ]);
    let v = json_ok(&o);
    assert_empty(dir.path());
    assert_eq!(v["suite"]["name"], "quick");
    assert!(v["suite"]["version"].as_u64().is_some());
    for t in tests_of(&v) {
        check_common(t);
    }
}

#[test]
fn completions_and_man() {
    for shell in ["bash", "zsh", "fish"] {
        let o = run(&["completions", shell]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "completions {shell}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).contains("tacho"), "completions {shell}");
    }
    let o = run(&["man"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains(".TH"), "man page is roff");
}

/// Lines of a disk report on a terminal narrower than it: COLUMNS (over the terminal's own
/// 160) makes it 80 wide; the verdict and warnings wrap at words and the table leaves out its
/// least important columns, while piped output keeps every column on one line each.
#[test]
fn on_a_narrow_terminal_the_report_fits_and_piped_it_stays_wide() {
    let dir = tempfile::tempdir().unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--suite", "quick", "--ramp", "0"],
    );
    let mut cmd = tacho();
    cmd.args(&args).env("COLUMNS", "80");
    let (shown, o) = on_terminal(cmd, 160, false);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(shown.contains("SEQ1M Q8T1 read"), "{shown}");
    assert_eq!(wider_than(&shown, 80), Vec::<String>::new(), "{shown}");
    let header = shown.lines().find(|l| l.starts_with("test ")).unwrap();
    for kept in ["IOPS", "bandwidth", "p99"] {
        assert!(header.contains(kept), "{header}");
    }
    assert!(!header.contains("max"), "{header}");

    let piped = run(&args);
    assert!(piped.status.success(), "{}", stderr(&piped));
    let text = stdout(&piped);
    let header = text.lines().find(|l| l.starts_with("test ")).unwrap();
    for all in ["IOPS", "mean", "p99.9", "max", "spread"] {
        assert!(header.contains(all), "{header}");
    }
    assert!(header.len() > 100, "{header}");
    assert_empty(dir.path());
}

/// `bench disk --json` carries `verdict`: the words the text report leads with.
#[test]
fn json_has_the_verdict_the_text_leads_with() {
    let v = bench_in_tempdir(&["--rw", "randread", "--buffered"]);
    let verdict = v["verdict"]
        .as_str()
        .unwrap_or_else(|| panic!("no verdict in {v}"));
    assert!(
        verdict.contains("IOPS") || verdict.contains("read"),
        "{verdict}"
    );
    // The same run's text would lead with the same words; a second run differs in figures
    // only, so compare what comes before the first figure.
    let dir = tempfile::tempdir().unwrap();
    let text = stdout(&run(&tiny_disk(
        dir.path().to_str().unwrap(),
        &["--rw", "randread", "--buffered"],
    )));
    let first = text.lines().next().unwrap();
    let words = |s: &str| {
        s.split(|c: char| c.is_ascii_digit())
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(words(verdict), words(first), "{verdict}\n{first}");
}

/// Parses `--iodepth_batch_submit=N` out of the first fio line of `--print-fio`.
fn printed_batch(printed: &str) -> usize {
    let line = printed
        .lines()
        .find(|l| l.starts_with("fio "))
        .unwrap_or_else(|| panic!("no fio line in {printed}"));
    line.split(' ')
        .find_map(|a| a.strip_prefix("--iodepth_batch_submit="))
        .unwrap_or_else(|| panic!("no --iodepth_batch_submit in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn io_uring_hands_the_kernel_as_many_ios_per_call_as_print_fio_says() {
    let test = "io_uring_hands_the_kernel_as_many_ios_per_call_as_print_fio_says";
    if !have_tool("strace") {
        skip(&format!("{test}: strace is not installed"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    let options = [
        "--rw",
        "randread",
        "--engine",
        "io_uring",
        "--iodepth",
        "8",
        "--buffered",
        "--json",
    ];
    let mut print = options.to_vec();
    print.push("--print-fio");
    let batch = printed_batch(&stdout(&run(&tiny_disk(target, &print))));

    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("trace");
    let tacho = tacho();
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=io_uring_enter", "-o"])
        .arg(&trace)
        .arg(tacho.get_program())
        .args(tiny_disk(target, &options));
    for (key, value) in tacho.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let v = json_ok(&run_cmd(cmd));
    assert_empty(dir.path());
    if tests_of(&v)[0]["engine"] != "io_uring" {
        skip(&format!("{test}: io_uring is blocked here"));
        return;
    }
    // `PID io_uring_enter(FD, TO_SUBMIT, MIN_COMPLETE, FLAGS, ...`: how many I/Os each call
    // handed over.
    let text = std::fs::read_to_string(&trace).unwrap();
    let submitted: Vec<usize> = text
        .lines()
        .filter_map(|l| l.split_once("io_uring_enter(").map(|(_, args)| args))
        .map(|args| args.split(", ").nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(!submitted.is_empty(), "no io_uring_enter traced: {text}");
    assert_eq!(
        submitted.iter().max(),
        Some(&batch),
        "the engine's largest submission is not --print-fio's {batch}: {submitted:?}"
    );
}
