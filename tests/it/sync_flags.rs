//! dd's flags: `--sync dsync|sync` opens the target with O_DSYNC / O_SYNC (seen by strace),
//! `--print-fio` says `--sync=` in lines fio itself accepts, and the `dd` suite.

use crate::common;
use crate::common::{assert_error, have_tool, run, skip, stdout, tacho};
use std::process::Command;

/// The open calls of a tiny write test with `extra` options, as strace shows them.
fn opens_of(extra: &[&str]) -> Option<String> {
    if !have_tool("strace") {
        skip("strace is not installed (apt-get install strace)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let target = dir.path().join("t");
    std::fs::create_dir(&target).unwrap();
    let bin = tacho().get_program().to_owned();
    let o = Command::new("strace")
        .args(["-f", "-e", "trace=open,openat", "-o"])
        .arg(&trace)
        .arg(bin)
        .args(["bench", "disk"])
        .arg(&target)
        .args([
            "--rw",
            "write",
            "--size",
            "8M",
            "--runtime",
            "300ms",
            "--json",
        ])
        .args(["--no-probe-cache"])
        .args(extra)
        .env("TACHO_DB", dir.path().join("db"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&trace).unwrap();
    // The workers reopen the test file through /proc/self/fd.
    Some(
        text.lines()
            .filter(|l| l.contains("/proc/self/fd/"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn sync_dsync_opens_with_o_dsync_and_sync_with_o_sync() {
    let Some(plain) = opens_of(&[]) else {
        return;
    };
    assert!(!plain.is_empty());
    assert!(
        !plain.contains("O_DSYNC") && !plain.contains("O_SYNC"),
        "{plain}"
    );
    let dsync = opens_of(&["--sync", "dsync"]).unwrap();
    assert!(dsync.contains("O_DSYNC"), "{dsync}");
    assert!(!dsync.contains("O_SYNC"), "{dsync}");
    let sync = opens_of(&["--sync", "sync"]).unwrap();
    assert!(sync.contains("O_SYNC"), "{sync}");
}

/// Runs every fio line of `--print-fio` through `fio --parse-only`.
fn fio_accepts(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = stdout(&o);
    for line in text.lines().filter(|l| l.starts_with("fio ")) {
        let check = format!("fio --parse-only {}", &line[4..]);
        let p = Command::new("sh").args(["-c", &check]).output().unwrap();
        assert!(
            p.status.success(),
            "fio refused: {line}\n{}",
            String::from_utf8_lossy(&p.stderr)
        );
    }
    text
}

#[test]
fn print_fio_says_sync_in_lines_fio_accepts() {
    if !have_tool("fio") {
        skip("fio is not installed (apt-get install fio)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let text = fio_accepts(&[
        "bench",
        "disk",
        d,
        "--rw",
        "write",
        "--sync",
        "dsync",
        "--print-fio",
    ]);
    assert!(text.contains(" --sync=dsync "), "{text}");
    let text = fio_accepts(&["bench", "disk", d, "--suite", "dd", "--print-fio"]);
    assert!(
        text.contains(" --sync=dsync ") && text.contains(" --sync=sync "),
        "{text}"
    );
    assert!(text.contains(" --unlink=1 "), "the new-file row: {text}");
}

#[test]
fn sync_on_a_read_test_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = assert_error(&run(&[
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--rw",
        "randread",
        "--sync",
        "dsync",
    ]));
    assert!(err.contains("--sync"), "{err}");
    let err = assert_error(&run(&["bench", "disk", ".", "--sync", "dsync"]));
    assert!(err.contains("--sync describes a custom test"), "{err}");
}

#[test]
fn the_dd_suite_explains_each_row() {
    let text = stdout(&run(&["bench", "disk", "--list-suites"]));
    let dd = text.split("\ndd v1").nth(1).expect("dd is listed");
    for row in [
        "buffered, new file",
        "buffered, overwrite",
        "direct",
        "dsync",
        "sync",
    ] {
        assert!(dd.contains(row), "{row}: {dd}");
    }
    assert!(
        dd.contains("oflag=dsync") && dd.contains("into a new file"),
        "{dd}"
    );
    assert!(dd.contains("O_DSYNC") && dd.contains("O_SYNC"), "{dd}");
}

#[test]
fn the_dd_suite_runs_and_says_what_each_row_measures() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--suite",
        "dd",
        "--size",
        "4M",
        "--repeat",
        "2",
        "--no-probe-cache",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("what each row measures:"), "{text}");
    assert!(text.contains("dsync: dd oflag=dsync"), "{text}");
    common::assert_empty(dir.path());
}
