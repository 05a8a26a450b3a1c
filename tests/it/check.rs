//! `tacho check` through the binary on this machine: JSON schema, --only, --strict, scripts,
//! bad input, and that it writes nothing (a read-only mount namespace, and strace).

use crate::common::*;
use serde_json::Value;
use std::process::Command;

fn check_json(args: &[&str]) -> (Value, Option<i32>) {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    (parse_json(&o), o.status.code())
}

#[test]
fn json_has_every_field_of_every_finding() {
    let (v, code) = check_json(&[]);
    assert_eq!(code, Some(0), "without --strict, findings do not fail");
    assert_eq!(v["schema"], "tacho.check.v1");
    assert_eq!(v["profile"], "default");
    assert!(v["verdict"].as_str().is_some_and(|s| !s.is_empty()));
    let findings = v["findings"].as_array().unwrap();
    assert!(findings.len() >= 10, "{v}");
    for f in findings {
        for key in ["id", "group", "severity", "title", "why", "reference"] {
            assert!(
                f[key].as_str().is_some_and(|s| !s.is_empty()),
                "{key} in {f}"
            );
        }
        assert!(["ok", "info", "warn", "crit"].contains(&f["severity"].as_str().unwrap()));
        let evidence = f["evidence"].as_array().unwrap();
        for e in evidence {
            assert!(e["source"].as_str().is_some() && e["value"].as_str().is_some());
        }
        if f["severity"] == "warn" || f["severity"] == "crit" {
            assert!(!evidence.is_empty(), "a warning without evidence: {f}");
        }
    }
    // Rules that apply on any Linux machine.
    let ids: Vec<&str> = findings.iter().filter_map(|f| f["id"].as_str()).collect();
    for id in ["iommu_mode", "task_delayacct", "virtualization"] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let counts = &v["counts"];
    let total: u64 = ["ok", "info", "warn", "crit"]
        .iter()
        .map(|k| counts[k].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, findings.len());
}

#[test]
fn only_and_strict() {
    // Counts and listing come from one run: some figures (MemAvailable) move between runs.
    let (only, code) = check_json(&["--profile", "redis", "--only", "warn", "--strict"]);
    let bad = only["counts"]["warn"].as_u64().unwrap() + only["counts"]["crit"].as_u64().unwrap();
    assert!(
        only["counts"]["ok"].as_u64().unwrap() > 0,
        "ok findings are counted, not listed"
    );
    assert_eq!(only["only"], "warn");
    let listed = only["findings"].as_array().unwrap();
    assert_eq!(listed.len() as u64, bad);
    assert!(
        listed
            .iter()
            .all(|f| f["severity"] == "warn" || f["severity"] == "crit")
    );
    assert_eq!(code, Some(if bad > 0 { 1 } else { 0 }));

    // The table: verdict first, groups, the same exit code.
    let o = run(&["check", "--profile", "redis", "--strict"]);
    let text = stdout(&o);
    let first = text.lines().next().unwrap();
    let failed = !first.starts_with("no handbrake found");
    assert_eq!(o.status.code(), Some(i32::from(failed)), "{text}");
    assert!(
        text.lines().nth(1).unwrap().starts_with("profile redis: "),
        "{text}"
    );
    assert!(text.contains("\nKernel\n"), "{text}");
}

#[test]
fn emit_script_prints_apply_and_revert_and_both_parse() {
    let o = run(&["check", "--emit-script"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let (apply, revert) = text
        .split_once("# ===== revert script")
        .expect("both scripts");
    assert!(apply.starts_with("#!/bin/sh\n# tacho check: apply script"));
    assert!(revert.contains("#!/bin/sh\n# tacho check: revert script"));
    for script in [apply, revert] {
        let ok = Command::new("sh")
            .args(["-n", "-c", script])
            .status()
            .unwrap();
        assert!(ok.success(), "sh -n rejects:\n{script}");
    }
    let o = run(&["check", "--emit-script=apply"]);
    assert!(!stdout(&o).contains("revert script"));
    let o = run(&["check", "--emit-script=revert"]);
    assert!(stdout(&o).starts_with("#!/bin/sh\n# tacho check: revert script"));
}

#[test]
fn bad_input_is_one_line() {
    let line = assert_error(&run(&["check", "--profile", "mysql"]));
    assert!(
        line.contains("mysql") && line.contains("postgres"),
        "{line}"
    );
    let line = assert_error(&run(&["check", "--only", "severe"]));
    assert!(line.contains("warn"), "{line}");
    assert_error(&run(&["check", "--json", "--emit-script"]));
}

/// The same check, run where every mount is read-only (checked in mountinfo, without
/// writing anything), gives the same findings: it needs no write to work (the strace test
/// shows it attempts none).
#[test]
fn check_works_in_a_read_only_mount_namespace() {
    if !is_root() || !have_tool("unshare") {
        skip("check_works_in_a_read_only_mount_namespace: needs root and unshare");
        return;
    }
    let tacho = env!("CARGO_BIN_EXE_tacho");
    let script = format!(
        "for m in $(awk '{{print $5}}' /proc/self/mountinfo | sort -r); do \
         mount -o remount,bind,ro \"$m\" 2>/dev/null; done; \
         if awk '{{ o[$5] = $6 }} END {{ for (m in o) if (o[m] !~ /^ro(,|$)/) bad = 1; exit !bad }}' \
            /proc/self/mountinfo; \
         then echo NOT-READ-ONLY; exit 3; fi; \
         exec {tacho} check --json --profile postgres"
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    if !o.status.success() && stdout(&o).is_empty() {
        skip(&format!(
            "read-only namespace unavailable: {}",
            stderr(&o).trim()
        ));
        return;
    }
    assert_ne!(stdout(&o).trim(), "NOT-READ-ONLY");
    let ro = parse_json(&o);
    let (rw, _) = check_json(&["--profile", "postgres"]);
    // dirty_limits depends on MemAvailable, which moves between the two runs.
    let ids = |v: &Value| -> Vec<(String, String)> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] != "dirty_limits")
            .map(|f| {
                (
                    f["id"].to_string() + &f["subject"].to_string(),
                    f["severity"].to_string(),
                )
            })
            .collect()
    };
    assert_eq!(ids(&ro), ids(&rw));
}

/// No file is opened for writing, created, removed or renamed, nothing is written except to
/// stdout and stderr, and no ioctl sets anything.
#[test]
fn check_attempts_no_write_under_strace() {
    if !have_tool("strace") {
        skip("check_attempts_no_write_under_strace: strace is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trace");
    let o = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=open,openat,openat2,creat,write,pwrite64,writev,truncate,ftruncate,\
             rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,ioctl,mount,umount2",
            env!("CARGO_BIN_EXE_tacho"),
            "check",
            "--json",
        ])
        .output()
        .unwrap();
    if !o.status.success() {
        skip(&format!("strace could not trace: {}", stderr(&o).trim()));
        return;
    }
    let trace = std::fs::read_to_string(&log).unwrap();
    let mut offending = Vec::new();
    for line in trace.lines() {
        // "PID syscall(args) = result"
        let call = line.split_once(' ').map_or(line, |(_, c)| c).trim_start();
        let writes_file = call.starts_with("open")
            && ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"]
                .iter()
                .any(|f| call.contains(f));
        let writes_fd = ["write(", "pwrite64(", "writev("]
            .iter()
            .any(|w| call.starts_with(w))
            && !(call.starts_with("write(1,")
                || call.starts_with("write(2,")
                || call.starts_with("writev(1,")
                || call.starts_with("writev(2,"));
        let changes_tree = [
            "creat(",
            "truncate(",
            "ftruncate(",
            "rename",
            "unlink",
            "mkdir",
            "mount(",
            "umount2(",
        ]
        .iter()
        .any(|c| call.starts_with(c));
        let sets = call.starts_with("ioctl(") && call.contains("SET");
        if writes_file || writes_fd || changes_tree || sets {
            offending.push(line.to_string());
        }
    }
    assert!(
        trace.lines().count() > 20,
        "strace saw almost nothing:\n{trace}"
    );
    assert!(
        offending.is_empty(),
        "writes attempted:\n{}",
        offending.join("\n")
    );
}
