//! The config file (`--config`, `TACHO_CONFIG`, `/etc/tacho/tacho.toml`): each key is read
//! and used by the command it is for, a flag (or the environment) beats it, an unknown key or
//! bad value exits 2 naming it and its line, and a file others could have written is refused.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A config file of `text` in `dir`, mode 0644.
fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("tacho.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// `tacho --config FILE ARGS…` without `TACHO_DB`, so the file's store is not shadowed.
fn with_config(file: &Path, args: &[&str]) -> Output {
    let mut cmd = tacho();
    cmd.env_remove("TACHO_DB")
        .arg("--config")
        .arg(file)
        .args(args);
    run_cmd(cmd)
}

/// The `config show` line of `name`.
fn shown(o: &Output, name: &str) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in\n{}", stdout(o)))
        .to_owned()
}

#[test]
fn db_url_names_the_results_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("from-config.db");
    let file = config(
        dir.path(),
        &format!("db_url = {:?}\n", db.to_str().unwrap()),
    );
    let o = with_config(&file, &["config", "show"]);
    assert!(shown(&o, "db").contains("from-config.db"), "{}", stdout(&o));
    assert!(shown(&o, "db").ends_with(":1)"), "{}", stdout(&o));
    // A run imported without --db goes there, and is listed from there.
    let doc = serde_json::json!({
        "schema": "tacho.bench.v1",
        "host": {"hostname": "cfg-host"},
        "suite": {"name": "quick", "version": 1},
        "tests": [{"name": "t", "rw": "randread", "bs_bytes": 4096, "iodepth": 1, "numjobs": 1,
                   "read": {"iops": 450.0, "bw_bytes_per_s": 1_843_200.0,
                            "lat_ns": {"p99": 2_000_000.0}}}],
    });
    let run = dir.path().join("run.json");
    std::fs::write(&run, doc.to_string()).unwrap();
    let o = with_config(&file, &["runs", "import", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(db.exists(), "the run went elsewhere: {}", stderr(&o));
    let o = with_config(&file, &["runs", "list"]);
    assert!(stdout(&o).contains("cfg-host"), "{}", stdout(&o));
}

#[test]
fn db_url_file_is_read_and_its_password_not_shown() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("db-url");
    std::fs::write(&url, "postgres://tacho:s3cret@db.example/tacho\n").unwrap();
    std::fs::set_permissions(&url, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = config(
        dir.path(),
        &format!("\ndb_url_file = {:?}\n", url.to_str().unwrap()),
    );
    let o = with_config(&file, &["config", "show"]);
    let line = shown(&o, "db");
    assert!(
        line.contains("db.example") && line.ends_with(":2)"),
        "{line}"
    );
    assert!(!stdout(&o).contains("s3cret"), "{}", stdout(&o));
    // The URL file is held to the config file's rules.
    std::fs::set_permissions(&url, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = with_config(&file, &["config", "show"]);
    let e = assert_error(&o);
    assert!(
        e.contains("line 2: db_url_file") && e.contains("chmod go-w"),
        "{e}"
    );
}

#[test]
fn labels_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "[labels]\nrole = \"db\"\ndc = \"fra1\"\n");
    let o = with_config(&file, &["config", "show"]);
    assert!(shown(&o, "labels.role").contains(" db "), "{}", stdout(&o));
    assert!(shown(&o, "labels.role").ends_with(":2)"), "{}", stdout(&o));
    assert!(shown(&o, "labels.dc").contains("fra1"), "{}", stdout(&o));
}

#[test]
fn listen_is_where_a_bare_listen_serves_and_a_flag_beats_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = config(dir.path(), &format!("[top]\nlisten = \":{port}\"\n"));
    let mut top = Killed(
        tacho()
            .arg("--config")
            .arg(&file)
            .args(["top", "--json", "--interval", "200ms", "--count", "50"])
            .arg("--listen")
            .spawn_piped(),
    );
    let mut first = String::new();
    BufReader::new(top.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "no sample: {first}");
    assert!(http_get(port, "/metrics").contains("tacho_interval_seconds"));
    drop(top);
    let o = with_config(&file, &["config", "show", "--listen", "127.0.0.1:1"]);
    assert!(
        shown(&o, "top.listen").contains("(flag --listen)"),
        "{}",
        stdout(&o)
    );
    // Without the file's address, a bare --listen says what to give.
    let empty = config(dir.path(), "");
    let e = assert_error(&with_config(
        &empty,
        &["top", "--json", "--count", "1", "--listen"],
    ));
    assert!(e.contains("--listen needs an address"), "{e}");
}

#[test]
fn web_config_is_read_and_a_flag_beats_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-web.yml");
    let file = config(
        dir.path(),
        &format!("[top]\nweb_config = {:?}\n", missing.to_str().unwrap()),
    );
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let top = ["top", "--json", "--count", "1", "--listen", &listen];
    let e = assert_error(&with_config(&file, &top));
    assert!(
        e.contains("no-such-web.yml"),
        "the file's web config was not read: {e}"
    );
    let good = dir.path().join("web.yml");
    std::fs::write(&good, "{}\n").unwrap();
    let mut args = top.to_vec();
    args.extend(["--web-config", good.to_str().unwrap()]);
    let o = with_config(&file, &args);
    // 1 would be a warning in the sample: it ran.
    assert!(o.status.code() != Some(2), "{}", stderr(&o));
    assert!(stdout(&o).starts_with('{'), "{}", stderr(&o));
}

/// The recorder's start-up line says the interval and retention it uses.
fn record_line(file: &Path, flags: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let mut args = vec![
        "record",
        "--count",
        "1",
        "--history",
        history.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let o = with_config(file, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
        .lines()
        .find(|l| l.starts_with("recording to "))
        .unwrap_or_else(|| panic!("no start-up line: {}", stderr(&o)))
        .to_owned()
}

#[test]
fn record_interval_and_keep_are_read_and_flags_beat_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(
        dir.path(),
        "[record]\ninterval = \"300ms\"\nkeep = \"2d\"\n",
    );
    let line = record_line(&file, &[]);
    assert!(line.contains("every 0.3s (keep 2d,"), "{line}");
    let line = record_line(&file, &["--interval", "200ms", "--keep", "3h"]);
    assert!(line.contains("every 0.2s (keep 3h,"), "{line}");
    let o = with_config(&file, &["config", "show", "--keep", "2w"]);
    assert!(
        shown(&o, "record.interval").ends_with(":2)"),
        "{}",
        stdout(&o)
    );
    assert!(
        shown(&o, "record.keep").contains("14d  (flag --keep)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_environment_beats_the_file_and_a_flag_beats_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "db_url = \"/var/tmp/from-file.db\"\n");
    let mut cmd = tacho();
    cmd.env("TACHO_DB", "/var/tmp/from-env.db");
    cmd.env("TACHO_CONFIG", &file).args(["config", "show"]);
    let o = run_cmd(cmd);
    assert!(
        shown(&o, "db").contains("from-env.db  (env TACHO_DB)"),
        "{}",
        stdout(&o)
    );
    let mut cmd = tacho();
    cmd.env("TACHO_DB", "/var/tmp/from-env.db")
        .env("TACHO_CONFIG", &file);
    cmd.args(["config", "show", "--db", "/var/tmp/from-flag.db"]);
    let o = run_cmd(cmd);
    assert!(shown(&o, "db").contains("(flag --db)"), "{}", stdout(&o));
}

#[test]
fn an_unknown_key_or_a_bad_value_exits_2_naming_it_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "[record]\ninterval = \"10s\"\nretention = \"7d\"\n",
            "line 3: unknown key `retention`",
        ),
        (
            "# tacho\ndatabase = \"x\"\n",
            "line 2: unknown key `database`",
        ),
        ("[top]\nlisten = \"somewhere\"\n", "line 2: top.listen"),
        (
            "[record]\ninterval = \"5ms\"\n",
            "line 2: record.interval: the interval must be",
        ),
    ] {
        let file = config(dir.path(), text);
        // Any command that reads it refuses it, before doing anything.
        for args in [&["config", "show"][..], &["check"]] {
            let e = assert_error(&with_config(&file, args));
            assert!(e.contains(want), "{args:?} {text:?}: {e}");
            assert!(e.contains("tacho.toml"), "{e}");
        }
    }
    let e = assert_error(&with_config(&dir.path().join("absent.toml"), &["check"]));
    assert!(e.contains("absent.toml does not exist"), "{e}");
}

#[test]
fn a_file_others_could_write_or_own_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "[record]\ninterval = \"1s\"\n");
    for mode in [0o666, 0o664] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = assert_error(&with_config(&file, &["config", "show"]));
        assert!(
            e.contains("can be written by its group or by others"),
            "{mode:o}: {e}"
        );
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A FIFO is not read (nor waited on).
    let fifo = dir.path().join("fifo.toml");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let e = assert_error(&with_config(&fifo, &["config", "show"]));
    assert!(e.contains("is not a regular file"), "{e}");
    if !is_root() {
        return skip("a config file of another owner: needs root to chown it");
    }
    // Another user's file, even unwritable by others, could have been anything.
    std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
    let e = assert_error(&with_config(&file, &["config", "show"]));
    assert!(
        e.contains("owned by uid 65534, neither root nor you"),
        "{e}"
    );
    // Reached through a symlink, the file is judged as opened, not by the link.
    let link = dir.path().join("link.toml");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let e = assert_error(&with_config(&link, &["config", "show"]));
    assert!(e.contains("owned by uid 65534"), "{e}");
}
