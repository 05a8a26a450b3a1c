//! `tacho experiment`: bad input exits 2 with one line before anything changes, and the revert
//! journal cannot be used by another user to make root apply values (a journal directory owned
//! by `nobody`, one anyone can write, a symlinked one, and journal files others own or can
//! write are refused, by `--recover` and by an ordinary start). `--change-cmd`/`--revert-cmd`
//! run in turns and after a SIGKILL from the journal (they change only a file of the test's).
//! The tests that change kernel settings are in tests/serial/experiment.rs.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const SWAPPINESS: &str = "/proc/sys/vm/swappiness";

fn experiment(journal: &Path, args: &[&str]) -> std::process::Output {
    let mut c = tacho();
    c.env("TACHO_EXPERIMENT_DIR", journal)
        .arg("experiment")
        .args(args);
    run_cmd(c)
}

#[test]
fn two_changes_without_together_exit_2_with_one_line() {
    let home = tempfile::tempdir().unwrap();
    let journal = home.path().join("j");
    let o = experiment(
        &journal,
        &[
            "--change",
            "thp.enabled=never",
            "--change",
            "vm.swappiness=10",
            "--measure",
            "bench cpu",
            "--yes",
        ],
    );
    let line = assert_error(&o);
    assert!(
        line.contains("one change at a time") && line.contains("--together"),
        "{line}"
    );
    assert!(!journal.exists(), "nothing made before the refusal");
}

#[test]
fn a_bad_setting_value_or_measure_exits_2_with_one_line() {
    let home = tempfile::tempdir().unwrap();
    let journal = home.path().join("j");
    for (args, says) in [
        (&["--change", "thp.enable=never"][..], "unknown setting"),
        (&["--change", "kernel.core_pattern=x"], "unknown setting"),
        (
            &["--change", "thp.enabled=sometimes"],
            "always, madvise, never",
        ),
        (&["--change", "vm.swappiness=1000"], "from 0 to 200"),
        (&["--change", "vm.swappiness"], "SETTING=VALUE"),
        (&["--change", "mount:data=noatime"], "names no mount point"),
        (
            &["--change", "mount:/data=lazytime"],
            "noatime, relatime, strictatime",
        ),
        (&["--change-cmd", "true"], "needs --revert-cmd"),
        (&["--revert-cmd", "true"], "without --change-cmd"),
        (
            &["--change-cmd", " ", "--revert-cmd", "true"],
            "--change-cmd ` ` is empty",
        ),
        (
            &[
                "--change",
                "vm.swappiness=10",
                "--change-cmd",
                "true",
                "--revert-cmd",
                "true",
            ],
            "one change at a time",
        ),
        (
            &["--measure", "bench cpu"],
            "give --change SETTING=VALUE (e.g. thp.enabled=never) or --change-cmd",
        ),
        (&["--change", "vm.swappiness=10"], "give --measure"),
        (
            &["--change", "vm.swappiness=10", "--measure", "rm -rf /"],
            "not a measuring command",
        ),
        (
            &["--change", "vm.swappiness=10", "--measure", "top"],
            "add --workload",
        ),
    ] {
        let mut all = args.to_vec();
        if !args.contains(&"--measure") && says != "give --measure" {
            all.extend(["--measure", "bench cpu"]);
        }
        all.push("--yes");
        let line = assert_error(&experiment(&journal, &all));
        assert!(line.contains(says), "{args:?}: {line}");
    }
    assert!(!journal.exists(), "nothing made before a refusal");
}

/// Puts back the swappiness read at the start, should a forged journal have changed it.
struct Swappiness(String);

impl Drop for Swappiness {
    fn drop(&mut self) {
        let _ = std::fs::write(SWAPPINESS, &self.0);
    }
}

/// A journal as tacho writes it, restoring vm.swappiness to `value` and, as a
/// `--revert-cmd`, creating `dir`'s `ran` file.
fn plant(dir: &Path, value: &str) -> std::path::PathBuf {
    let path = dir.join("1-1.json");
    let text = format!(
        r#"{{"schema":"tacho.experiment-journal.v1","pid":1,"started_unix_s":1,
            "changes":[{{"setting":"vm.swappiness","saved":{{"vm.swappiness":"{value}"}}}}],
            "revert_command":"touch {}"}}"#,
        dir.join("ran").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn chown_nobody(path: &Path) {
    std::os::unix::fs::lchown(path, Some(65534), Some(65534)).unwrap();
}

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Issue 34: the journal cannot be used by another user to make root apply values or run
/// commands. Each forged journal asks root to set vm.swappiness to another value and to run a
/// command; `--recover` refuses it (exit 2, one line naming what is wrong) and an ordinary
/// start says so in a note, the value stays and the command never runs. A journal in a
/// directory only root can write is applied (the control).
#[test]
fn a_journal_another_user_could_write_is_never_applied() {
    if !is_root() {
        skip("the journal's ownership checks are root's: run as root");
        return;
    }
    let now = std::fs::read_to_string(SWAPPINESS)
        .unwrap()
        .trim()
        .to_string();
    let _restore = Swappiness(now.clone());
    let other = if now == "17" { "18" } else { "17" };
    let home = tempfile::tempdir().unwrap();
    mode(home.path(), 0o755);
    let make = |name: &str| {
        let d = home.path().join(name);
        std::fs::create_dir(&d).unwrap();
        mode(&d, 0o700);
        d
    };
    let owned_by_nobody = make("nobody");
    plant(&owned_by_nobody, other);
    chown_nobody(&owned_by_nobody);
    let open_to_all = make("open");
    plant(&open_to_all, other);
    mode(&open_to_all, 0o777);
    let good = make("good");
    let link = home.path().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let nobodys_file = make("nobodys-file");
    chown_nobody(&plant(&nobodys_file, other));
    let writable_file = make("writable-file");
    mode(&plant(&writable_file, other), 0o666);
    plant(&good, other);

    for (dir, says) in [
        (&owned_by_nobody, "owned by uid 65534"),
        (&open_to_all, "not 0700"),
        (&link, "symbolic link"),
        (&nobodys_file, "not a regular root-owned file"),
        (&writable_file, "not a regular root-owned file"),
    ] {
        let line = assert_error(&experiment(dir, &["--recover"]));
        assert!(line.contains(says), "{}: {line}", dir.display());
        let mut c = tacho();
        c.env("TACHO_EXPERIMENT_DIR", dir)
            .args(["completions", "bash"]);
        let o = run_cmd(c);
        assert!(o.status.success());
        let note = stderr(&o);
        assert!(
            note.starts_with("tacho: note: experiment journals not restored")
                && note.contains(says),
            "{note}"
        );
        let value = std::fs::read_to_string(SWAPPINESS).unwrap();
        assert_eq!(
            value.trim(),
            now,
            "{}: the forged value was applied",
            dir.display()
        );
        assert!(
            !dir.join("ran").exists(),
            "{}: the forged command ran",
            dir.display()
        );
    }
    // The control: the same journal in a directory only root can write is applied.
    let good_journal = plant(&good, &now);
    let o = experiment(&good, &["--recover"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("vm.swappiness back to {now}")),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("--revert-cmd `touch ") && good.join("ran").exists(),
        "{}",
        stdout(&o)
    );
    assert!(!good_journal.exists(), "a restored journal is removed");
}

/// A root-owned 0700 directory whose `j` subdirectory tacho makes as its journal directory.
fn journal_home() -> (tempfile::TempDir, std::path::PathBuf) {
    let home = tempfile::tempdir().unwrap();
    mode(home.path(), 0o700);
    let dir = home.path().join("j");
    (home, dir)
}

/// `--change-cmd` and `--revert-cmd` writing a state file: (apply, revert).
fn state_commands(state: &Path) -> (String, String) {
    (
        format!("echo changed > {}", state.display()),
        format!("echo base > {}", state.display()),
    )
}

/// Issue 34: without `--rounds`, rounds are added past the first five while the effect's
/// interval is wider than `--precision`, up to `--max-rounds`, and the report says which of
/// the two stopped them.
#[test]
fn without_rounds_rounds_are_added_until_the_interval_is_narrow_or_the_most_ran() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let (_home, journal) = journal_home();
    let run = |workload: &str, extra: &[&str]| {
        let mut args = vec![
            "--change-cmd",
            "true",
            "--revert-cmd",
            "true",
            "--measure",
            "top",
            "--workload",
            workload,
            "--yes",
            "--json",
        ];
        args.extend(extra);
        let v = json_ok(&experiment(&journal, &args));
        let n = v["baseline"].as_array().unwrap().len();
        assert_eq!(v["changed"].as_array().unwrap().len(), n, "{v}");
        (v, n)
    };
    // Wall times of 10 to 90 ms (the shell's pid picks them): never within ±0.5%.
    let (v, n) = run(
        "sleep 0.0$(( $$ % 9 + 1 ))",
        &["--precision", "0.5", "--max-rounds", "7"],
    );
    assert_eq!(n, 7, "{v}");
    assert_eq!(v["rounds"]["max"], 7, "{v}");
    // A steady 200 ms sleep (a loaded machine adds tens of ms) is within ±100% at once: the
    // five rounds always run, no more.
    let (v, n) = run("sleep 0.2", &["--precision", "100"]);
    assert_eq!(n, 5, "{v}");
    assert_eq!(v["rounds"]["min"], 5, "{v}");
    // The text says why the rounds stopped.
    let o = experiment(
        &journal,
        &[
            "--change-cmd",
            "true",
            "--revert-cmd",
            "true",
            "--measure",
            "top",
            "--workload",
            "sleep 0.0$(( $$ % 9 + 1 ))",
            "--precision",
            "0.5",
            "--max-rounds",
            "5",
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("rounds: 5 a side, the most (--max-rounds); the interval is still"),
        "{}",
        stdout(&o)
    );
    // --rounds is exact, and says it does not mix with the adaptive flags.
    let o = tacho()
        .args([
            "experiment",
            "--change",
            "vm.swappiness=1",
            "--measure",
            "bench cpu",
        ])
        .args(["--rounds", "3", "--precision", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--precision"), "{}", stderr(&o));
    assert_empty(&journal);
}

/// Issue 34: `--change-cmd`/`--revert-cmd` run as a catalogue setting does: applied and
/// reverted once before measuring, the warm-up and the baseline rounds with the revert's
/// state, each changed round with the change's, and reverted at the end.
#[test]
fn a_command_pair_is_applied_in_its_rounds_and_reverted() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let (home, journal) = journal_home();
    let state = home.path().join("state");
    std::fs::write(&state, "base\n").unwrap();
    let log = home.path().join("seen");
    let (apply, revert) = state_commands(&state);
    let o = experiment(
        &journal,
        &[
            "--change-cmd",
            &apply,
            "--revert-cmd",
            &revert,
            "--measure",
            "top",
            "--workload",
            &format!("cat {} >> {}", state.display(), log.display()),
            "--rounds",
            "2",
            "--yes",
            "--json",
        ],
    );
    let v = json_ok(&o);
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["base", "base", "changed", "base", "changed"],
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "base\n");
    assert_eq!(v["changes"][0]["setting"], "change-cmd");
    assert_eq!(v["changes"][0]["to"], apply.as_str());
    assert_eq!(v["changes"][0]["revert_command"], revert.as_str());
    assert_eq!(v["reverted"], true);
    assert_empty(&journal);

    // A revert that fails is named, and the journal is kept for --recover.
    let o = experiment(
        &journal,
        &[
            "--change-cmd",
            "true",
            "--revert-cmd",
            "exit 3",
            "--measure",
            "top",
            "--workload",
            "true",
            "--yes",
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--revert-cmd `exit 3` failed") && err.contains("--recover"),
        "{err}"
    );
    assert_eq!(entries(&journal).len(), 1, "the journal is kept");
}

/// Issue 34: an experiment with a command pair killed with SIGKILL in a changed round is
/// reverted by `--recover`, which runs the `--revert-cmd` its journal holds.
#[test]
fn a_killed_command_experiment_is_reverted_by_recover() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let (home, journal) = journal_home();
    let state = home.path().join("state");
    std::fs::write(&state, "base\n").unwrap();
    let (apply, revert) = state_commands(&state);
    let mut c = tacho();
    c.env("TACHO_EXPERIMENT_DIR", &journal)
        .arg("experiment")
        .args(["--change-cmd", &apply, "--revert-cmd", &revert])
        .args(["--measure", "top", "--workload", "sleep 0.3"])
        .args(["--rounds", "50", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    // The change is applied and reverted at once before the rounds: wait until it holds.
    let start = std::time::Instant::now();
    let changed = || std::fs::read_to_string(&state).is_ok_and(|s| s == "changed\n");
    while !(changed() && {
        std::thread::sleep(std::time::Duration::from_millis(50));
        changed()
    }) {
        assert!(start.elapsed().as_secs() < 30, "never applied");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(changed(), "killed with the change applied");
    let o = experiment(&journal, &["--recover"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("--revert-cmd `echo base"),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "base\n");
    assert_empty(&journal);
}

/// Issue 34: a series (`--then`) keeps a step that wins, leaves out one that loses, measures
/// each step against the steps kept before it, says what the kept steps gave together and
/// that the last step paid nothing, and puts every setting back. The settings are the
/// read-ahead of two loop devices of the test's own; the workload sleeps as long as their sum
/// says, so the first step (256 → 32 KiB on A) is a win and the second (128 → 512 KiB on B) a
/// loss, whatever the noise.
#[test]
fn a_series_keeps_the_win_leaves_out_the_loss_and_reverts_everything() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let shm = Path::new("/dev/shm");
    let (Some(a), Some(b)) = (
        LoopDev::new_in("series a", 16 << 20, shm),
        LoopDev::new_in("series b", 16 << 20, shm),
    ) else {
        return;
    };
    let ra = |d: &LoopDev| format!("/sys/block/{}/queue/read_ahead_kb", d.name());
    std::fs::write(ra(&a), "256").unwrap();
    std::fs::write(ra(&b), "128").unwrap();
    let (_home, journal) = journal_home();
    let workload = format!(
        "sleep $(cat {} {} | awk '{{s += $1}} END {{print s / 1000}}')",
        ra(&a),
        ra(&b)
    );
    let o = experiment(
        &journal,
        &[
            "--change",
            &format!("block.{}.read_ahead_kb=32", a.name()),
            "--then",
            &format!("block.{}.read_ahead_kb=512", b.name()),
            "--measure",
            "top",
            "--workload",
            &workload,
            "--rounds",
            "5",
            "--yes",
            "--json",
        ],
    );
    let v = json_ok(&o);
    assert_eq!(v["schema"], "tacho.experiment-series.v1", "{v}");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{v}");
    assert_eq!(
        (&steps[0]["effect"]["verdict"], &steps[0]["kept"]),
        (&"win".into(), &true.into()),
        "{v}"
    );
    assert_eq!(
        (&steps[1]["effect"]["verdict"], &steps[1]["kept"]),
        (&"loss".into(), &false.into()),
        "{v}"
    );
    // Step 2's baseline ran with step 1 kept: 32 + 128 KiB, 0.16 s, not the first 0.384 s.
    let base2 = steps[1]["baseline"][0].as_f64().unwrap();
    assert!(base2 < 0.3, "{v}");
    // 0.384 s → 0.16 s: about −58%.
    let together = v["cumulative_pct"].as_f64().unwrap();
    assert!((-75.0..-40.0).contains(&together), "{v}");
    assert_eq!(v["unpaid_steps"], 1, "{v}");
    assert_eq!(v["reverted"], true, "{v}");
    let now = |d: &LoopDev| std::fs::read_to_string(ra(d)).unwrap().trim().to_string();
    assert_eq!((now(&a), now(&b)), ("256".into(), "128".into()));
    assert_empty(&journal);
    // The same setting twice in a series is refused before anything changes.
    let o = experiment(
        &journal,
        &[
            "--change",
            &format!("block.{}.read_ahead_kb=32", a.name()),
            "--then",
            &format!("block.{}.read_ahead_kb=64", a.name()),
            "--measure",
            "top",
            "--workload",
            "true",
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is given twice"), "{}", stderr(&o));
    assert_eq!(now(&a), "256");
}

/// Issue 34: a series killed with SIGKILL in its second step, with its first step (a command
/// pair) kept, is reverted by `--recover` from the series' journal: the kept command's revert
/// runs and the second step's setting is restored.
#[test]
fn a_killed_series_is_reverted_by_recover_with_its_kept_steps() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let Some(dev) = LoopDev::new_in("series kill", 16 << 20, Path::new("/dev/shm")) else {
        return;
    };
    let ra = format!("/sys/block/{}/queue/read_ahead_kb", dev.name());
    std::fs::write(&ra, "128").unwrap();
    let (home, journal) = journal_home();
    let state = home.path().join("state");
    std::fs::write(&state, "0.2\n").unwrap();
    let mut c = tacho();
    c.env("TACHO_EXPERIMENT_DIR", &journal)
        .arg("experiment")
        .arg("--change-cmd")
        .arg(format!("echo 0.02 > {}", state.display()))
        .arg("--revert-cmd")
        .arg(format!("echo 0.2 > {}", state.display()))
        .args(["--then", &format!("block.{}.read_ahead_kb=512", dev.name())])
        .args(["--measure", "top", "--workload"])
        .arg(format!("sleep $(cat {})", state.display()))
        .args(["--rounds", "5", "--yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    // Step 2 applies its change (with step 1 kept): wait until both hold.
    let start = std::time::Instant::now();
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let state_path = state.to_str().unwrap();
    while !(read(&ra).trim() == "512" && read(state_path).trim() == "0.02") {
        assert!(
            start.elapsed().as_secs() < 60 && child.try_wait().unwrap().is_none(),
            "step 2 never ran with step 1 kept"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let o = experiment(&journal, &["--recover"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&ra).trim(), "128", "{}", stdout(&o));
    assert_eq!(read(state_path).trim(), "0.2", "{}", stdout(&o));
    assert_empty(&journal);
}

/// Issue 34: the two sides are saved as runs of kind `experiment`, labelled with the user's
/// label and each side's settings, and `compare` of the pair reads the same rounds as the
/// verdict: the same change in percent. A figure the store has no column for (a percentage)
/// is not saved, and says so. The journal directory's parent does not exist yet (as
/// /var/lib/tacho on a fresh machine): both are made.
#[test]
fn the_sides_are_saved_as_runs_that_compare_reads_as_the_verdict() {
    if !is_root() {
        skip("experiment runs as root only");
        return;
    }
    let (home, _) = journal_home();
    let journal = home.path().join("lib/tacho/experiments");
    let db = home.path().join("runs.db");
    let page = home.path().join("report.html");
    let state = home.path().join("state");
    std::fs::write(&state, "0.05\n").unwrap();
    let (apply, revert) = (
        format!("echo 0.15 > {}", state.display()),
        format!("echo 0.05 > {}", state.display()),
    );
    let o = experiment(
        &journal,
        &[
            "--change-cmd",
            &apply,
            "--revert-cmd",
            &revert,
            "--measure",
            "top",
            "--workload",
            &format!("sleep $(cat {})", state.display()),
            "--rounds",
            "3",
            "--label",
            "sleepy",
            "--db",
            db.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
            "--yes",
            "--json",
        ],
    );
    let v = json_ok(&o);
    // The compare report of the pair, with both sides' settings, escaped.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("sleepy: changed change-cmd &#39;echo 0.15"),
        "{html}"
    );
    assert!(html.contains("workload wall time (s)"), "{html}");
    let err = stderr(&o);
    let saved = err
        .lines()
        .find_map(|l| l.split("(tacho compare ").nth(1))
        .unwrap_or_else(|| panic!("no saved line: {err}"));
    let ids: Vec<&str> = saved.trim_end_matches(')').split(' ').collect();
    assert_eq!(ids.len(), 2, "{err}");

    let list = tacho()
        .args(["runs", "list", "--json", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let list = json_ok(&list);
    let runs = list["runs"].as_array().unwrap_or_else(|| panic!("{list}"));
    let labels: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["label"].as_str().unwrap()))
        .collect();
    assert_eq!(labels.len(), 2, "{list}");
    assert!(labels.iter().all(|(k, _)| *k == "experiment"), "{labels:?}");
    assert!(
        labels
            .iter()
            .any(|(_, l)| l.starts_with("sleepy: baseline revert-cmd")),
        "{labels:?}"
    );
    assert!(
        labels
            .iter()
            .any(|(_, l)| l.starts_with("sleepy: changed change-cmd")),
        "{labels:?}"
    );

    let cmp = tacho()
        .args([
            "compare",
            ids[0],
            ids[1],
            "--json",
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let cmp = json_ok(&cmp);
    let rows = cmp["rows"].as_array().unwrap_or_else(|| panic!("{cmp}"));
    let row = rows
        .iter()
        .find(|r| r["metric"] == "lat_mean_ns")
        .unwrap_or_else(|| panic!("{cmp}"));
    let compared = row["cells"][1]["change_pct"].as_f64().unwrap();
    let judged = v["effect"]["change_pct"].as_f64().unwrap();
    assert!(
        (compared - judged).abs() < 1e-6 * judged.abs().max(1.0),
        "compare {compared} against the verdict's {judged}: {cmp}"
    );
    assert!(judged > 50.0, "0.05 s against 0.15 s: {v}");
    // The fleet store sees them too: pushed, and compared there the same.
    #[cfg(feature = "pg")]
    if let Some(pg) = crate::common::pg::TestDb::new("experiment_runs") {
        let o = run(&[
            "runs",
            "push",
            "--db",
            &pg.url,
            "--from",
            db.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let there = json_ok(&run(&["compare", "1", "2", "--json", "--db", &pg.url]));
        assert_eq!(there["rows"], cmp["rows"], "{there}");
    }

    let o = experiment(
        &journal,
        &[
            "--change-cmd",
            "true",
            "--revert-cmd",
            "true",
            "--measure",
            "top",
            "--workload",
            "sleep 0.05",
            "--figure",
            "machine-system",
            "--rounds",
            "2",
            "--db",
            db.to_str().unwrap(),
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not saved as runs: the store has no column for machine system CPU"),
        "{}",
        stderr(&o)
    );
    // The page is the saved pair's: without saving there is none to write.
    let o2 = experiment(
        &journal,
        &[
            "--change",
            "vm.swappiness=1",
            "--measure",
            "bench cpu",
            "--no-save",
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(o2.status.code(), Some(2), "{}", stderr(&o2));
    assert!(stderr(&o2).contains("--no-save"), "{}", stderr(&o2));
    assert_empty(&journal);
}
