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

/// Each script is whole on its own, for its own file: no single file that applies and then
/// undoes what it applied (issue 30).
#[test]
fn emit_script_prints_apply_or_revert_each_a_script_alone() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["apply", "revert"] {
        let o = run(&["check", &format!("--emit-script={kind}")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let script = stdout(&o);
        assert!(
            script.starts_with(&format!("#!/bin/sh\n# tacho check: {kind} script")),
            "{script}"
        );
        let other = if kind == "apply" { "revert" } else { "apply" };
        assert!(!script.contains(&format!("{other} script")), "{script}");
        let file = dir.path().join(format!("{kind}.sh"));
        std::fs::write(&file, &script).unwrap();
        for shell in ["sh", "bash"] {
            let o = Command::new(shell).arg("-n").arg(&file).output().unwrap();
            assert!(
                o.status.success(),
                "{shell} -n {kind}: {}\n{script}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    // Alone, the option does not guess which: "both" in one file undid itself when run.
    let line = assert_error(&run(&["check", "--emit-script"]));
    assert!(line.contains("--emit-script"), "{line}");
}

/// Non-comment lines of a script.
fn commands(script: &str) -> Vec<&str> {
    script
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Two SSD-like filesystems that are never trimmed: each is trimmed once, alone (not
/// `fstrim -a` per mount), no command is written twice (the timer, a cron file), and one
/// mounted under /tmp, where any user could have made its directory, is left to the admin
/// (issue 30). The cron file's commands are run against a scratch directory.
#[test]
fn emit_script_trims_each_mount_once_and_leaves_other_users_mounts_alone() {
    let test = "emit_script_trims_each_mount_once";
    if !is_root() || !have_tool("mkfs.ext4") {
        skip(&format!("{test}: needs root and mkfs.ext4"));
        return;
    }
    let ours = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let theirs = tempfile::tempdir().unwrap();
    let points = [
        ours.path().join("a"),
        ours.path().join("b"),
        theirs.path().join("c"),
    ];
    let mut devs = Vec::new();
    let mut mounts = Vec::new();
    for mp in &points {
        std::fs::create_dir(mp).unwrap();
        let Some(dev) = LoopDev::new(test, 64 << 20) else {
            return;
        };
        assert!(dev.mkfs_ext4());
        mounts.push(MountGuard::mount(&[dev.path()], mp).expect("cannot mount"));
        devs.push(dev);
    }
    let script = |kind: &str| {
        let o = run(&["check", &format!("--emit-script={kind}")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    let (apply, revert) = (script("apply"), script("revert"));
    for s in [&apply, &revert] {
        let lines = commands(s);
        let mut unique = lines.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), lines.len(), "a command written twice:\n{s}");
        assert!(!s.contains("fstrim -a"), "every filesystem trimmed:\n{s}");
    }
    let timer = apply.contains("\nsystemctl enable --now fstrim.timer\n");
    let scratch = tempfile::tempdir().unwrap();
    let to_scratch = |line: &str| {
        line.replace(
            "/etc/cron.weekly/",
            &format!("{}/", scratch.path().display()),
        )
    };
    // Where systemd runs, the timer serves every mount (written once, checked above).
    for mp in points[..2].iter().filter(|_| !timer) {
        let mp = mp.to_str().unwrap();
        let trim = format!("fstrim -v {mp}");
        assert_eq!(
            commands(&apply).iter().filter(|l| **l == trim).count(),
            1,
            "{apply}"
        );
        // The cron file, made in a scratch directory: a script that trims this mount alone.
        let persist = commands(&apply)
            .into_iter()
            .find(|l| l.contains("cron.weekly") && l.contains(mp))
            .unwrap_or_else(|| panic!("no cron file for {mp}:\n{apply}"));
        let o = Command::new("sh")
            .args(["-e", "-c", &to_scratch(persist)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let made = entries(scratch.path());
        assert_eq!(made.len(), 1, "{made:?}");
        let cron = std::fs::read_to_string(scratch.path().join(&made[0])).unwrap();
        assert_eq!(cron, format!("#!/bin/sh\nexec fstrim {mp}\n"));
        // Its revert, in the same scratch directory, removes it.
        let undo = commands(&revert)
            .into_iter()
            .find(|l| l.contains(&made[0]))
            .unwrap_or_else(|| panic!("no revert for {}:\n{revert}", made[0]));
        let o = Command::new("sh")
            .args(["-e", "-c", &to_scratch(undo)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_empty(scratch.path());
    }
    let c = points[2].to_str().unwrap();
    for s in [&apply, &revert] {
        assert!(
            commands(s).iter().all(|l| !l.contains(c)),
            "a command for another user's mount {c}:\n{s}"
        );
    }
    assert!(
        apply.contains(&format!("# not written: {c} is another user's mount")),
        "{apply}"
    );
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
    assert_error(&run(&["check", "--json", "--emit-script=apply"]));
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

/// On a terminal 80 columns wide (COLUMNS over the terminal's 200), the verdict, titles,
/// evidence and reasons wrap at words; the commands to fix, persist and revert stay whole
/// (a command broken over lines could not be copied and run), and piped output stays wide.
#[test]
fn on_a_narrow_terminal_check_wraps_its_prose_and_keeps_commands_whole() {
    let command = |l: &str| {
        let l = l.trim_start();
        ["fix", "persist", "revert"]
            .iter()
            .any(|c| l.starts_with(&format!("{c}: ")) || l.starts_with(&format!("{c} (by hand): ")))
    };
    let commands = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| command(l))
            .map(str::to_string)
            .collect()
    };
    // The machine can change between the two runs (other tests mount and unmount filesystems,
    // each with its own fstrim finding): the pair is run again until both saw the same one.
    let mut attempts = 0;
    let (shown, piped) = loop {
        let mut cmd = tacho();
        cmd.arg("check").env("COLUMNS", "80");
        let (shown, o) = on_terminal(cmd, 200, false);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
        let piped = stdout(&run(&["check"]));
        attempts += 1;
        if commands(&shown) == commands(&piped) || attempts == 5 {
            break (shown, piped);
        }
    };
    let wide: Vec<String> = wider_than(&shown, 80)
        .into_iter()
        .filter(|l| !command(l))
        .collect();
    assert_eq!(wide, Vec::<String>::new(), "{shown}");
    assert!(
        piped.lines().any(|l| l.chars().count() > 80 && !command(l)),
        "nothing to wrap: {piped}"
    );
    // The commands are the same lines as piped, whole.
    assert_eq!(commands(&shown), commands(&piped));
}
