//! Every bad input: exit code 2, one line on stderr starting `tacho: `, nothing on stdout, and
//! nothing left in the target directory.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Runs `bench disk DIR <args>` in a fresh tempdir, asserts the error contract and that the
/// directory stays empty, and returns the stderr line.
fn refused_in_tempdir(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let line = refused_in(dir.path(), args);
    assert_empty(dir.path());
    line
}

fn refused_in(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["bench", "disk", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    // Keep a mistakenly accepted run short.
    if !args.contains(&"--runtime") && !args.iter().any(|a| a.starts_with("--runtime=")) {
        all.extend_from_slice(&["--runtime", "200ms"]);
    }
    if !args.contains(&"--size") {
        all.extend_from_slice(&["--size", "8M"]);
    }
    let o = run(&all);
    let line = assert_error(&o);
    assert!(
        !line.contains("panicked"),
        "a panic is not an error message: {line}"
    );
    line
}

fn assert_mentions(line: &str, words: &[&str]) {
    for w in words {
        assert!(
            line.to_lowercase().contains(&w.to_lowercase()),
            "expected '{w}' in: {line}"
        );
    }
}

#[test]
fn zero_block_size() {
    let line = refused_in_tempdir(&["--rw", "randread", "--bs", "0"]);
    assert_mentions(&line, &["block size"]);
}

#[test]
fn zero_iodepth() {
    let line = refused_in_tempdir(&["--rw", "randread", "--iodepth", "0"]);
    assert_mentions(&line, &["--iodepth"]);
}

#[test]
fn zero_numjobs() {
    let line = refused_in_tempdir(&["--rw", "randread", "--numjobs", "0"]);
    assert_mentions(&line, &["--numjobs"]);
}

#[test]
fn unknown_rw() {
    let line = refused_in_tempdir(&["--rw", "foo"]);
    assert_mentions(&line, &["foo", "randread"]);
}

#[test]
fn rwmixread_above_100() {
    let line = refused_in_tempdir(&["--rw", "randrw", "--rwmixread", "101"]);
    assert_mentions(&line, &["--rwmixread"]);
}

#[test]
fn rwmixread_on_a_pure_pattern() {
    let line = refused_in_tempdir(&["--rw", "randread", "--rwmixread", "70"]);
    assert_mentions(&line, &["--rwmixread", "randrw"]);
}

#[test]
fn iodepth_with_the_sync_engine() {
    let line = refused_in_tempdir(&["--rw", "randread", "--iodepth", "32", "--engine", "sync"]);
    assert_mentions(&line, &["--iodepth", "sync"]);
}

#[test]
fn suite_with_the_sync_engine() {
    let line = refused_in_tempdir(&["--engine", "sync"]);
    assert_mentions(&line, &["sync"]);
}

#[test]
fn direct_block_size_not_a_multiple_of_512() {
    let line = refused_in_tempdir(&["--rw", "randread", "--bs", "1000", "--direct"]);
    assert_mentions(&line, &["1000", "--buffered"]);
}

#[test]
fn negative_runtime() {
    refused_in_tempdir(&["--rw", "randread", "--runtime", "-5s"]);
    let line = refused_in_tempdir(&["--rw", "randread", "--runtime=-5s"]);
    assert_mentions(&line, &["negative"]);
}

#[test]
fn runtime_not_a_duration() {
    let line = refused_in_tempdir(&["--rw", "randread", "--runtime", "abc"]);
    assert_mentions(&line, &["abc"]);
    let line = refused_in_tempdir(&["--rw", "randread", "--runtime", "5 parsecs"]);
    assert_mentions(&line, &["parsecs"]);
}

#[test]
fn zero_runtime() {
    let line = refused_in_tempdir(&["--rw", "randread", "--runtime", "0s"]);
    assert_mentions(&line, &["--runtime"]);
}

#[test]
fn bad_size() {
    refused_in_tempdir(&["--rw", "randread", "--size", "lots"]);
    refused_in_tempdir(&["--rw", "randread", "--size", "-1M"]);
}

#[test]
fn size_smaller_than_a_block() {
    let line = refused_in_tempdir(&["--rw", "randread", "--size", "4k", "--bs", "1M"]);
    assert_mentions(&line, &["--size"]);
}

#[test]
fn missing_target() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = run(&[
        "bench",
        "disk",
        missing.to_str().unwrap(),
        "--rw",
        "randread",
        "--runtime",
        "200ms",
    ]);
    let line = assert_error(&o);
    assert_mentions(&line, &["nope", "does not exist"]);
    assert_empty(dir.path());
}

#[test]
fn size_larger_than_free_space() {
    let line = refused_in_tempdir(&["--rw", "randwrite", "--size", "100T"]);
    assert_mentions(&line, &["free space", "--size"]);
}

#[test]
fn size_larger_than_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small");
    std::fs::write(&file, vec![1u8; 64 << 10]).unwrap();
    let o = run(&[
        "bench",
        "disk",
        file.to_str().unwrap(),
        "--buffered",
        "--rw",
        "randread",
        "--size",
        "1M",
        "--runtime",
        "200ms",
    ]);
    let line = assert_error(&o);
    assert_mentions(&line, &["--size"]);
    assert_eq!(entries(dir.path()), vec!["small"]);
}

#[test]
fn unknown_suite() {
    let line = refused_in_tempdir(&["--suite", "nope"]);
    assert_mentions(&line, &["nope"]);
}

#[test]
fn custom_option_without_rw() {
    let line = refused_in_tempdir(&["--bs", "4k"]);
    assert_mentions(&line, &["--bs", "--rw"]);
    let line = refused_in_tempdir(&["--suite", "quick", "--iodepth", "4"]);
    assert_mentions(&line, &["--iodepth"]);
}

#[test]
fn suite_and_rw_together() {
    refused_in_tempdir(&["--suite", "quick", "--rw", "randread"]);
}

#[test]
fn fsync_on_a_read_pattern() {
    let line = refused_in_tempdir(&["--rw", "read", "--fsync", "1"]);
    assert_mentions(&line, &["--rw read"]);
    refused_in_tempdir(&["--rw", "randread", "--fdatasync", "1"]);
}

#[test]
fn fsync_and_fdatasync_together() {
    refused_in_tempdir(&["--rw", "write", "--fsync", "1", "--fdatasync", "1"]);
}

#[test]
fn unknown_engine_and_option() {
    refused_in_tempdir(&["--rw", "read", "--engine", "libaio"]);
    refused_in_tempdir(&["--rw", "read", "--no-such-option"]);
}

#[test]
fn target_that_is_not_a_file_directory_or_device() {
    let o = run(&[
        "bench",
        "disk",
        "/dev/null",
        "--rw",
        "read",
        "--runtime",
        "200ms",
    ]);
    let line = assert_error(&o);
    assert_mentions(&line, &["/dev/null"]);
}

#[test]
fn read_only_filesystem() {
    if !is_root() {
        skip("read_only_filesystem: needs root to mount a read-only tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _mount = match MountGuard::mount(&["-t", "tmpfs", "-o", "ro,size=32M", "tmpfs"], dir.path())
    {
        Ok(m) => m,
        Err(e) => {
            skip(&format!("read_only_filesystem: cannot mount tmpfs: {e}"));
            return;
        }
    };
    for extra in [&["--buffered"][..], &[]] {
        let mut args = vec!["--rw", "randwrite"];
        args.extend_from_slice(extra);
        let line = refused_in(dir.path(), &args);
        assert_mentions(&line, &["read-only"]);
        assert_empty(dir.path());
    }
    // Even a read test needs a test file, which cannot be created.
    let line = refused_in(dir.path(), &["--rw", "randread", "--buffered"]);
    assert_mentions(&line, &["read-only"]);
    assert_empty(dir.path());
}

/// How to run a command as nobody, when running as root.
fn as_nobody() -> Option<Command> {
    let probe = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .arg("true")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let setpriv = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ];
    if probe("setpriv", &setpriv) {
        let mut c = Command::new("setpriv");
        c.args(setpriv);
        return Some(c);
    }
    if probe("runuser", &["-u", "nobody", "--"]) {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]);
        return Some(c);
    }
    None
}

#[test]
fn no_permission_to_create_the_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = if is_root() {
        let Some(cmd) = as_nobody() else {
            skip("no_permission: running as root and neither setpriv nor runuser works");
            return;
        };
        cmd
    } else {
        Command::new("env")
    };
    // A 0700 directory owned by root (or, for a normal user, a 0500 one of their own).
    use std::os::unix::fs::PermissionsExt;
    let mode = if is_root() { 0o700 } else { 0o500 };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    cmd.arg(env!("CARGO_BIN_EXE_tacho")).args([
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--rw",
        "randread",
        "--size",
        "8M",
        "--runtime",
        "200ms",
    ]);
    let o = run_cmd(cmd);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let line = assert_error(&o);
    assert_mentions(&line, &["permission"]);
    assert_empty(dir.path());
}

#[test]
fn zero_size_names_the_option() {
    // A directory is never "empty" in the sense of the file/device message: the fault is --size.
    let line = refused_in_tempdir(&["--rw", "randread", "--size", "0"]);
    assert_mentions(&line, &["--size"]);
    assert!(!line.contains("is empty"), "blames the target: {line}");
}

/// `files --sector` without root would examine a handful of files and answer "no file": it
/// says that it needs root instead (issue 29).
#[test]
fn files_sector_without_root_says_it_needs_root() {
    let mut cmd = if is_root() {
        let Some(cmd) = as_nobody() else {
            skip("files_sector_without_root: neither setpriv nor runuser works");
            return;
        };
        cmd
    } else {
        Command::new("env")
    };
    let o = cmd
        .arg(env!("CARGO_BIN_EXE_tacho"))
        .args(["files", "--sector", "/dev/vda", "2048"])
        .output()
        .unwrap();
    let err = assert_error(&o);
    assert!(err.contains("needs root"), "{err}");
}

/// A typo in a path is reported, not obeyed: only the last directory is ever made (where the
/// help says it is), a reader does not take a missing database for an empty one, and nothing
/// is created (issue 30).
#[test]
fn a_path_under_a_missing_directory_is_refused_and_nothing_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let deeper = missing.join("deeper");
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "record".into(),
                "--count".into(),
                "1".into(),
                "--dir".into(),
                p(&deeper.join("x")),
            ],
            "missing",
        ),
        (
            vec![
                "record".into(),
                "--count".into(),
                "1".into(),
                "--history".into(),
                p(&deeper.join("h.db")),
            ],
            "missing",
        ),
        (
            vec![
                "time".into(),
                "--runs".into(),
                "1".into(),
                "--db".into(),
                p(&missing.join("x.db")),
                "true".into(),
            ],
            "missing",
        ),
        (vec!["files".into(), "--path".into(), p(&deeper)], "--path"),
        // Its directory exists: still a typo (`--path /nonexistent` watched nothing).
        (vec!["files".into(), "--path".into(), p(&missing)], "--path"),
        (
            vec![
                "runs".into(),
                "list".into(),
                "--db".into(),
                p(&dir.path().join("typo.db")),
            ],
            "typo.db",
        ),
    ];
    for (args, word) in cases {
        let line = assert_error(&run(&args));
        assert_mentions(&line, &[word]);
        assert_empty(dir.path());
    }
    // The documented last level is still made: `record --dir` makes its directory.
    let made = dir.path().join("new");
    let o = run(&["record", "--count", "1", "--dir", &p(&made)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(made.join("history.db").exists());
}

/// A full filesystem mounted read-only is "read-only", not "0.0 GiB free of 0.0 GiB".
#[test]
fn a_full_read_only_filesystem_is_called_read_only() {
    if !is_root() {
        skip("full read-only filesystem: needs root to mount a tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&["-t", "tmpfs", "-o", "size=4M", "tmpfs"], dir.path())
        .expect("cannot mount a tmpfs");
    let _ = std::fs::write(dir.path().join("fill"), vec![0u8; 8 << 20]);
    sh("mount", &["-o", "remount,ro", dir.path().to_str().unwrap()]);
    let line = refused_in(dir.path(), &["--rw", "randread", "--size", "1M"]);
    assert_mentions(&line, &["read-only"]);
    assert!(!line.contains("free space"), "{line}");
    let line = assert_error(&run(&[
        "stress",
        "--hdd",
        "1",
        "--hdd-bytes",
        "1M",
        "--hdd-dir",
        dir.path().to_str().unwrap(),
    ]));
    assert_mentions(&line, &["read-only"]);
    assert_eq!(entries(dir.path()), ["fill"]);
}

/// Without root, where the default results directory cannot be made, `time` and `bench cpu`
/// say so before they run anything, as `bench disk` does (issue 30).
#[test]
fn an_unwritable_results_directory_is_found_before_the_work() {
    if !is_root() {
        skip("unwritable results directory: needs root to run as nobody");
        return;
    }
    if as_nobody().is_none() {
        skip("unwritable results directory: neither setpriv nor runuser works");
        return;
    }
    // Where nobody's `time` run would leave its mark.
    let open = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = open.path().join("ran");
    let touch = format!("touch {}", marker.display());
    for args in [
        vec!["time", "--runs", "3", touch.as_str()],
        vec!["bench", "cpu", "--runtime", "200ms", "--kernel", "primes"],
    ] {
        let mut cmd = as_nobody().unwrap();
        cmd.arg(env!("CARGO_BIN_EXE_tacho"))
            .args(&args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent/home");
        let line = assert_error(&run_cmd(cmd));
        assert_mentions(&line, &["results database", "--db"]);
        assert!(!marker.exists(), "{args:?}: the work ran first");
    }
}

#[test]
fn a_tacho_bpf_pin_other_than_0_or_1_is_refused_before_anything_runs() {
    for value in ["off", "no", "2", "0 "] {
        let o = tacho()
            .env("TACHO_BPF_PIN", value)
            .args(["top", "--json", "--count", "1", "--interval", "100ms"])
            .output()
            .unwrap();
        let line = assert_error(&o);
        assert_mentions(
            &line,
            &[&format!("TACHO_BPF_PIN={value}:"), "set it to 0", "or 1"],
        );
    }
}
