//! Files tacho writes by name, in a directory another local user can write (mode 0777 without
//! the sticky bit): a link planted at the output's name, or an `hdd.N` name raced by `stress
//! --hdd`, must never make root write a file the link points at. The attacker's steps run as
//! `nobody` through `setpriv`; tacho runs as root.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

const SECRET: &[u8] = b"root's secret\n";

/// A shared 0777 directory and, out of the attacker's reach, a root 0600 victim file and the
/// name of a file that must never come to exist.
struct Scene {
    shared: tempfile::TempDir,
    _private: tempfile::TempDir,
    victim: PathBuf,
    absent: PathBuf,
}

impl Scene {
    /// `None` (after a SKIP line) when the attacker cannot be played: not root, or no setpriv.
    fn new() -> Option<Scene> {
        if !is_root() || !have_tool("setpriv") {
            skip("needs root and setpriv to act as another user");
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with setpriv"
            );
            return None;
        }
        let shared = tempfile::tempdir().unwrap();
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let private = tempfile::tempdir().unwrap();
        let victim = private.path().join("victim");
        std::fs::write(&victim, SECRET).unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let absent = private.path().join("created-through-a-link");
        Some(Scene {
            shared,
            _private: private,
            victim,
            absent,
        })
    }

    fn dir(&self) -> &Path {
        self.shared.path()
    }

    /// As `nobody`, plants `name` in the shared directory as a link to `target`.
    fn plant(&self, name: &str, target: &Path) -> PathBuf {
        let link = self.dir().join(name);
        let st = as_nobody("ln")
            .arg("-s")
            .arg(target)
            .arg(&link)
            .status()
            .unwrap();
        assert!(st.success(), "nobody could not plant {}", link.display());
        link
    }

    fn assert_victims_untouched(&self) {
        assert_eq!(
            std::fs::read(&self.victim).unwrap(),
            SECRET,
            "the victim was written"
        );
        let mode = std::fs::metadata(&self.victim)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!self.absent.exists(), "a file was created through a link");
    }
}

/// A results database with two stored runs, for the commands that read runs.
fn db_with_runs(dir: &Path) -> PathBuf {
    let db = dir.join("runs.db");
    for _ in 0..2 {
        let o = run(&[
            "time",
            "-N",
            "--runs",
            "2",
            "true",
            "--db",
            db.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    db
}

/// Runs `cmd` (with `OUT` where the output's name goes) against a link planted at that name:
/// one to the victim, and a dangling one into root's directory. Each must be refused in one
/// line, leave the link as it was and the victim untouched, and leave nothing behind.
fn refuses_a_planted_link(cmd: &[&str]) {
    let Some(scene) = Scene::new() else { return };
    let private_db = tempfile::tempdir().unwrap();
    let db = if cmd.contains(&"DB") {
        db_with_runs(private_db.path())
    } else {
        PathBuf::new()
    };
    for (kind, target) in [("victim", &scene.victim), ("absent", &scene.absent)] {
        let name = format!("out-{kind}.prom");
        let link = scene.plant(&name, target);
        let args: Vec<&str> = cmd
            .iter()
            .map(|a| match *a {
                "OUT" => link.to_str().unwrap(),
                "DB" => db.to_str().unwrap(),
                a => a,
            })
            .collect();
        let line = assert_error(&run(&args));
        assert!(line.contains(&name), "{args:?}: {line}");
        scene.assert_victims_untouched();
        let still = std::fs::read_link(&link);
        assert_eq!(
            still.ok().as_deref(),
            Some(target.as_path()),
            "{args:?}: link replaced"
        );
        std::fs::remove_file(&link).unwrap();
        assert_empty(scene.dir());
    }
}

const TIME: [&str; 6] = ["time", "-N", "--runs", "2", "true", "--no-save"];

#[test]
fn time_export_json() {
    refuses_a_planted_link(&[&TIME[..], &["--export-json", "OUT"]].concat());
}

#[test]
fn time_export_csv() {
    refuses_a_planted_link(&[&TIME[..], &["--export-csv", "OUT"]].concat());
}

#[test]
fn time_export_markdown() {
    refuses_a_planted_link(&[&TIME[..], &["--export-markdown", "OUT"]].concat());
}

#[test]
fn time_prom_textfile() {
    refuses_a_planted_link(&[&TIME[..], &["--prom-textfile", "OUT"]].concat());
}

#[test]
fn snapshot_output() {
    refuses_a_planted_link(&["snapshot", "-o", "OUT"]);
}

#[test]
fn runs_show_html() {
    refuses_a_planted_link(&["runs", "show", "1", "--html", "OUT", "--db", "DB"]);
}

#[test]
fn runs_export_output() {
    refuses_a_planted_link(&["runs", "export", "1", "-o", "OUT", "--db", "DB"]);
}

#[test]
fn compare_html() {
    refuses_a_planted_link(&["compare", "1", "2", "--html", "OUT", "--db", "DB"]);
}

#[test]
fn files_output() {
    refuses_a_planted_link(&["files", "--duration", "1s", "-o", "OUT"]);
}

/// Kills the attacker's loop when the test ends, however it ends.
struct Attacker(Child);

impl Drop for Attacker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stress_hdd_never_writes_through_a_planted_link() {
    let Some(scene) = Scene::new() else { return };
    let workers = 4;
    // As nobody, for the whole run: move any test directory that is not nobody's aside, put
    // a writable one of nobody's in its place, and keep planting hdd.N links to the victim.
    let script = format!(
        r#"d='{dir}'; v='{victim}'; n=0
        while :; do
          for x in "$d"/.tacho-stress.*; do
            [ -d "$x" ] || continue
            if [ ! -O "$x" ]; then
              n=$((n+1)); mv "$x" "$d/aside.$n" 2>/dev/null && mkdir -m 777 "$x" 2>/dev/null
            fi
            for i in $(seq 0 {last}); do ln -s "$v" "$x/hdd.$i" 2>/dev/null; done
          done
        done"#,
        dir = scene.dir().display(),
        victim = scene.victim.display(),
        last = workers - 1
    );
    let attacker = Attacker(
        as_nobody("sh")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let o = run(&[
        "stress",
        "--hdd",
        &workers.to_string(),
        "--hdd-bytes",
        "256K",
        "--hdd-dir",
        scene.dir().to_str().unwrap(),
        "--timeout",
        "3s",
        "--json",
    ]);
    drop(attacker);
    scene.assert_victims_untouched();
    // The attacker did reach the run: the test directory was moved aside at least once.
    assert!(
        entries(scene.dir()).iter().any(|e| e.starts_with("aside.")),
        "the attacker never moved the test directory: {:?}; tacho: {}",
        entries(scene.dir()),
        stderr(&o)
    );
}

#[test]
fn stress_hdd_leaves_another_users_stale_looking_directory_alone() {
    let Some(scene) = Scene::new() else { return };
    // No process has this pid: by name alone, a stale directory of a killed run.
    let theirs = scene.dir().join(".tacho-stress.2147483600");
    let st = as_nobody("sh")
        .arg("-c")
        .arg(format!(
            "mkdir '{0}' && echo mine > '{0}/hdd.0'",
            theirs.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let o = run(&[
        "stress",
        "--hdd",
        "1",
        "--hdd-bytes",
        "64K",
        "--hdd-dir",
        scene.dir().to_str().unwrap(),
        "--timeout",
        "1s",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(theirs.join("hdd.0")).ok().as_deref(),
        Some(&b"mine\n"[..]),
        "root removed a directory it does not own"
    );
}
