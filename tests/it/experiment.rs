//! `tacho experiment`: bad input exits 2 with one line before anything changes, and the revert
//! journal cannot be used by another user to make root apply values (a journal directory owned
//! by `nobody`, one anyone can write, a symlinked one, and journal files others own or can
//! write are refused, by `--recover` and by an ordinary start). The tests that change settings
//! are in tests/serial/experiment.rs.

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
        (&["--measure", "bench cpu"], "give --change"),
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

/// A journal as tacho writes it, restoring vm.swappiness to `value`.
fn plant(dir: &Path, value: &str) -> std::path::PathBuf {
    let path = dir.join("1-1.json");
    let text = format!(
        r#"{{"schema":"tacho.experiment-journal.v1","pid":1,"started_unix_s":1,
            "changes":[{{"setting":"vm.swappiness","saved":{{"vm.swappiness":"{value}"}}}}]}}"#
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

/// Issue 34: the journal cannot be used by another user to make root apply values. Each
/// forged journal asks root to set vm.swappiness to another value; `--recover` refuses it
/// (exit 2, one line naming what is wrong) and an ordinary start says so in a note, and the
/// value stays. A journal in a directory only root can write is applied (the control).
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
    assert!(!good_journal.exists(), "a restored journal is removed");
}
