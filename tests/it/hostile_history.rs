//! The history of `tacho record` among hostile local users and hostile files (issue 28): where
//! the recorder may put it, what readers create, what a crafted history can make a reader do,
//! and what the shipped unit lets the recorder see. The attacker's steps run as `nobody`
//! through `setpriv`; tacho runs as root. `fs.protected_symlinks`, `protected_regular` and
//! `protected_fifos` are 0 on the test machines, as on many servers; the attacks do not rely
//! on it otherwise.

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const NOBODY: u32 = 65534;

/// Whether `nobody` can be played here (root and setpriv); says why not otherwise.
fn can_play_nobody(test: &str) -> bool {
    if is_root() && have_tool("setpriv") {
        return true;
    }
    skip(&format!("{test}: needs root and setpriv to act as nobody"));
    false
}

/// A directory searchable by all, with `shared` in it: root's, mode 1777, as /tmp.
fn sticky_arena() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (root, shared)
}

fn record_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = tacho();
    cmd.current_dir(dir).arg("record").args(args);
    run_cmd(cmd)
}

#[test]
fn a_bare_history_name_in_a_shared_directory_is_refused_and_foreign_companions_too() {
    if !can_play_nobody("bare history name") {
        return;
    }
    let (_root, shared) = sticky_arena();
    // nobody prepares SQLite's companions, open to all, to read the samples through them.
    for name in ["history.db-wal", "history.db-shm"] {
        let st = as_nobody("sh")
            .arg("-c")
            .arg(format!("touch {name} && chmod 666 {name}"))
            .current_dir(&shared)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let planted = entries(&shared);
    for how in ["--history", "env", "--dir"] {
        let mut cmd = tacho();
        cmd.current_dir(&shared).args(["record", "--count", "1"]);
        match how {
            "--history" => cmd.args(["--history", "history.db"]),
            "--dir" => cmd.args(["--dir", "."]),
            _ => cmd.env("TACHO_HISTORY", "history.db"),
        };
        let line = assert_error(&run_cmd(cmd));
        assert!(
            line.contains(shared.to_str().unwrap()) && line.contains("--history"),
            "{how}: {line}"
        );
        assert_eq!(entries(&shared), planted, "{how}: nothing made");
        for name in &planted {
            let m = std::fs::metadata(shared.join(name)).unwrap();
            assert_eq!(m.uid(), NOBODY, "{how}: {name} was taken over");
            assert_eq!(m.len(), 0, "{how}: {name} was written");
        }
    }
    // In a private directory, a bare name is fine; a companion of another user's is not.
    let private = tempfile::tempdir().unwrap();
    let o = record_in(private.path(), &["--count", "1", "--history", "history.db"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let other = tempfile::tempdir().unwrap();
    let wal = other.path().join("history.db-wal");
    std::fs::write(&wal, b"").unwrap();
    std::os::unix::fs::chown(&wal, Some(NOBODY), Some(NOBODY)).unwrap();
    let line = assert_error(&record_in(
        other.path(),
        &["--count", "1", "--history", "history.db"],
    ));
    assert!(line.contains("history.db-wal"), "{line}");
    assert_eq!(entries(other.path()), ["history.db-wal"], "nothing made");
}

#[test]
fn a_history_directory_reached_through_another_users_link_is_refused_before_anything_is_made() {
    if !can_play_nobody("history through a link") {
        return;
    }
    let (_root, shared) = sticky_arena();
    // Root's private directory, where nobody would like the recorder to make things.
    let target = tempfile::tempdir().unwrap();
    let st = as_nobody("ln")
        .arg("-s")
        .arg(target.path())
        .arg(shared.join("h"))
        .status()
        .unwrap();
    assert!(st.success());
    for file in ["h/sub/history.db", "h/history.db", "h/../h/sub/history.db"] {
        let path = shared.join(file);
        let line = assert_error(&run(&[
            "record",
            "--count",
            "1",
            "--history",
            path.to_str().unwrap(),
        ]));
        assert!(line.contains("link of another user"), "{file}: {line}");
        assert_empty(target.path());
    }
}

#[test]
fn readers_create_nothing_beside_a_users_history_or_on_a_read_only_filesystem() {
    if !can_play_nobody("readers create nothing") {
        return;
    }
    // nobody's own history, in nobody's directory, recorded and stopped.
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = top.path().join("nobody");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let history = theirs.join("h/history.db");
    let o = as_nobody(env!("CARGO_BIN_EXE_tacho"))
        .args(["record", "--count", "3", "--interval", "100ms", "--history"])
        .arg(&history)
        .env("TACHO_DB", theirs.join("runs.db"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = history.parent().unwrap();
    assert_eq!(entries(dir), ["history.db"]);
    read_everything(&history);
    assert_eq!(entries(dir), ["history.db"], "a reader created files");

    // A history on a filesystem mounted read-only since it was recorded.
    let mount_dir = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&["-t", "tmpfs", "-o", "size=8m", "tmpfs"], mount_dir.path())
        .expect("cannot mount a tmpfs");
    let history = mount_dir.path().join("h/history.db");
    let o = run(&[
        "record",
        "--count",
        "3",
        "--interval",
        "100ms",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    sh(
        "mount",
        &["-o", "remount,ro", mount_dir.path().to_str().unwrap()],
    );
    read_everything(&history);
}

/// Replays, summarises and tabulates `history`, each successfully.
fn read_everything(history: &Path) {
    let h = history.to_str().unwrap();
    for args in [
        vec!["top", "--replay", "--batch", "--history", h],
        vec!["top", "--from", "1h ago", "--json", "--history", h],
        vec!["report", "disk", "--json", "--history", h],
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_full_filesystem_at_start_is_named_with_its_fix_and_nothing_is_left() {
    if !is_root() {
        skip("history full at start: needs root to mount a tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&["-t", "tmpfs", "-o", "size=512k", "tmpfs"], dir.path())
        .expect("cannot mount a tmpfs");
    let private = dir.path().join("p");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let history = private.join("history.db");
    let h = history.to_str().unwrap();
    let fill = |name: &str| {
        // Fails with ENOSPC once the filesystem is full, as meant.
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4k", "status=none"])
            .stderr(Stdio::null())
            .arg(format!("of={}", dir.path().join(name).display()))
            .status();
    };
    // A new history on a full filesystem.
    fill("filler");
    let line = assert_error(&run(&["record", "--count", "1", "--history", h]));
    assert!(
        line.contains("full")
            && line.contains(private.to_str().unwrap())
            && line.contains("--history"),
        "{line}"
    );
    assert_empty(&private);
    // A history that exists, on a filesystem that filled up since.
    std::fs::remove_file(dir.path().join("filler")).unwrap();
    let o = run(&["record", "--count", "1", "--history", h]);
    assert!(o.status.success(), "{}", stderr(&o));
    fill("filler");
    let line = assert_error(&run(&["record", "--count", "1", "--history", h]));
    assert!(
        line.contains("full") && line.contains(private.to_str().unwrap()),
        "{line}"
    );
    assert!(!line.contains("I/O error"), "{line}");
}

#[test]
fn three_recorders_starting_together_on_a_new_file_all_start() {
    for round in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let history = dir.path().join("history.db");
        let children: Vec<_> = (0..3)
            .map(|_| {
                tacho()
                    .args(["record", "--count", "1", "--history"])
                    .arg(&history)
                    .spawn_piped()
            })
            .collect();
        for child in children {
            let o = wait_output(child, Duration::from_secs(60));
            assert!(o.status.success(), "round {round}: {}", stderr(&o));
        }
    }
}

/// Hostile variants of a real history, made by Python's sqlite3 and zlib (fast at building
/// bombs; zlib rows, history version 1's, are still read): argv[1] the recorded history,
/// argv[2] the directory for the variants. A recorder's first row is a whole sample in zstd.
const CRAFT: &str = r#"
import json, os, shutil, sqlite3, subprocess, sys, zlib
def unpack(data):
    return subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
src, out = sys.argv[1], sys.argv[2]
def copy(name):
    shutil.copy(src, f"{out}/{name}.db")
    c = sqlite3.connect(f"{out}/{name}.db")
    return c, c.execute("select id, unix_s, data from samples order by id").fetchall()
def rewrite(name, edit):
    c, rows = copy(name)
    rid, t, data = rows[0]
    rec = json.loads(unpack(data))
    t = edit(rec)
    # Added, not put in its place: the rows after the first are compressed against it.
    c.execute("insert into samples (unix_s, data) values (?, ?)",
              (t, zlib.compress(json.dumps(rec).encode())))
    c.commit(); c.close()
def at(rec, t):
    rec["sample"]["unix_time_s"] = t
    return t
rewrite("negative", lambda r: at(r, -1e30))
rewrite("huge", lambda r: at(r, 1e300))
rewrite("interval", lambda r: (r.update(interval_s=1e308), r["sample"]["unix_time_s"])[1])
rewrite("ticks", lambda r: (r.update(ticks_per_s=0), r["sample"]["unix_time_s"])[1])
c, rows = copy("bomb")
t0 = rows[-1][1]
z = zlib.compressobj(9)
bomb = z.compress(b" " * (200 << 20)) + z.flush()
for i in range(4):
    c.execute("insert into samples (unix_s, data) values (?, ?)", (t0 + 0.01 * (i + 1), bomb))
c.commit(); c.close()
c, rows = copy("big_value")
c.execute("insert into samples (unix_s, data) values (?, ?)", (rows[-1][1] + 0.01, os.urandom(20 << 20)))
c.commit(); c.close()
c, rows = copy("garbage")
t0 = rows[-1][1]
c.execute("insert into samples (unix_s, data) values (?, ?)", (t0 + 0.01, zlib.compress(b'{"sample": [1, 2')))
c.execute("insert into samples (unix_s, data) values (?, ?)", (t0 + 0.02, "text, not a blob"))
c.execute("insert into samples (unix_s, data) values (?, ?)", ("a time", b"x"))
c.commit(); c.close()
def schema(name, ddl):
    c = sqlite3.connect(f"{out}/{name}.db")
    c.executescript(ddl + "; PRAGMA application_id = 1953002356; PRAGMA user_version = 1;")
    c.close()
schema("recursive_view", "CREATE VIEW samples AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i AS id, 1.0e9 + i AS unix_s, x'00' AS data FROM n")
schema("zeroblob_view", "CREATE TABLE t (i INTEGER); INSERT INTO t VALUES (1), (2), (3); CREATE VIEW samples AS SELECT i AS id, 1.0e9 + i AS unix_s, zeroblob(900000000) AS data FROM t")
schema("generated", "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s REAL NOT NULL, data BLOB AS (zeroblob(900000000))); INSERT INTO samples (unix_s) VALUES (1.0e9), (1.0e9 + 1)")
schema("columns", "CREATE TABLE samples (id INTEGER PRIMARY KEY, unix_s TEXT, data TEXT, more BLOB)")
"#;

/// What each crafted variant's refusal says; `huge` is read by `top --from … --to now`, whose
/// window leaves out its sample of the year 10^292.
const REFUSALS: [(&str, &str); 11] = [
    ("big_value.db", "a value over 16 MiB"),
    ("bomb.db", "a decompression bomb"),
    ("columns.db", "not the table tacho records"),
    ("garbage.db", "damaged sample"),
    ("generated.db", "not the table tacho records"),
    ("huge.db", "is not a sample time"),
    ("interval.db", "is not a recorder's"),
    ("negative.db", "is not a sample time"),
    ("recursive_view.db", "not the table tacho records"),
    ("ticks.db", "ticks/s is not a kernel's"),
    ("zeroblob_view.db", "not the table tacho records"),
];

#[test]
fn hostile_histories_are_refused_in_one_line_without_a_panic_a_hang_or_a_bloat() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let o = run(&[
        "record",
        "--count",
        "4",
        "--interval",
        "100ms",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let variants = dir.path().join("variants");
    std::fs::create_dir(&variants).unwrap();
    let source = variants.join("source");
    std::fs::copy(&history, &source).unwrap();
    // Where the tests run as root, nobody crafts the variants in a directory of theirs, and
    // root's readers meet nobody's files.
    let mut craft = if is_root() && have_tool("setpriv") {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for path in [&variants, &source] {
            std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        as_nobody(PYTHON)
    } else {
        Command::new(PYTHON)
    };
    let st = craft
        .args(["-c", CRAFT])
        .arg(&source)
        .arg(&variants)
        .status()
        .unwrap();
    assert!(st.success());
    let mut names = entries(&variants);
    names.retain(|n| n.ends_with(".db"));
    assert_eq!(names, REFUSALS.map(|(n, _)| n), "the variants made");
    // What reading the real history takes, the base of the 20 MiB value's bound.
    let (o, plain_rss) = run_measured(&[
        "top",
        "--replay",
        "--batch",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (name, refusal) in REFUSALS {
        let file = variants.join(name);
        let f = file.to_str().unwrap();
        for args in [
            vec!["top", "--replay", "--batch", "--history", f],
            vec![
                "top",
                "--from",
                "1970-01-01T00:00:00Z",
                "--json",
                "--history",
                f,
            ],
            vec!["report", "disk", "--json", "--history", f],
        ] {
            let (o, rss) = run_measured(&args);
            if name == "huge.db" && args[1] == "--from" {
                json_ok(&o);
            } else {
                let line = assert_error(&o);
                assert!(line.contains(refusal), "{name} {args:?}: {line}");
            }
            assert!(
                rss < 256 << 20,
                "{name} {args:?}: {} MiB resident",
                rss >> 20
            );
            // The 20 MiB value is refused before it is read: holding it would take 20 MiB
            // in SQLite and 20 more in tacho.
            if name == "big_value.db" {
                assert!(
                    rss < plain_rss + (16 << 20),
                    "{args:?}: {} MiB resident, {} MiB for the real history",
                    rss >> 20,
                    plain_rss >> 20
                );
            }
        }
    }
}

#[test]
fn the_shipped_unit_leaves_the_recorder_its_network() {
    let unit = std::fs::read_to_string("contrib/tacho-record.service").unwrap();
    assert!(
        !unit.lines().any(|l| l.trim() == "PrivateNetwork=yes"),
        "a private network namespace has nothing but lo"
    );
    let families: Vec<&str> = unit
        .lines()
        .find_map(|l| l.strip_prefix("RestrictAddressFamilies="))
        .expect("the unit restricts address families")
        .split_whitespace()
        .collect();
    for needed in ["AF_UNIX", "AF_NETLINK"] {
        assert!(families.contains(&needed), "{needed} not in {families:?}");
    }
    if !is_root() || std::env::consts::ARCH != "x86_64" {
        skip("the unit's address families are reproduced with a seccomp filter on x86-64 as root");
        return;
    }
    // The recorder under the unit's families sees TCP connections and says nothing; under
    // AF_UNIX alone (the unit before) it says, once, that it cannot.
    let dir = tempfile::tempdir().unwrap();
    let record = |families: &[&str]| {
        let numbers: Vec<u32> = families.iter().map(|f| family_number(f)).collect();
        let mut cmd = tacho();
        cmd.args(["record", "--count", "2", "--interval", "200ms", "--history"])
            .arg(dir.path().join("history.db"));
        let filter = socket_filter(&numbers);
        // SAFETY: between fork and exec the closure only calls prctl with a filter built
        // before the fork; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || restrict_sockets(&filter));
        }
        run_cmd(cmd)
    };
    let o = record(&families);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("TCP connections"), "{}", stderr(&o));
    let o = record(&["AF_UNIX"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("TCP connections cannot be read").count(),
        1,
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_shipped_unit_s_capabilities_leave_the_recorder_its_exit_records_and_its_tracer() {
    let unit = std::fs::read_to_string("contrib/tacho-record.service").unwrap();
    let caps: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit bounds its capabilities")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_lowercase())
        .collect();
    if !is_root() || !have_tool("setpriv") {
        skip("the unit's capability bounding set is reproduced with setpriv as root");
        return;
    }
    // The recorder under exactly the unit's bounding set, as systemd starts it.
    let dir = tempfile::tempdir().unwrap();
    let record = |caps: &[String]| {
        let mut bounding = String::from("-all");
        for c in caps {
            bounding.push_str(",+");
            bounding.push_str(c);
        }
        let history = dir.path().join(format!("h{}.db", caps.len()));
        let mut cmd = Command::new("setpriv");
        cmd.args(["--bounding-set", &bounding])
            .arg(env!("CARGO_BIN_EXE_tacho"))
            .args(["record", "--count", "2", "--interval", "200ms", "--history"])
            .arg(history)
            .stdin(Stdio::null());
        let o = run_cmd(cmd);
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let err = record(&caps);
    for lost in ["exit between samples", "block I/O is not traced"] {
        assert!(!err.contains(lost), "under {caps:?}: {err}");
    }
    // Without CAP_NET_ADMIN the kernel refuses the exit records, and the recorder says so
    // once (it used to take another request's acknowledgement for the refusal's, silently).
    let fewer: Vec<String> = caps.into_iter().filter(|c| c != "net_admin").collect();
    let err = record(&fewer);
    assert_eq!(
        err.matches("processes that exit between samples are not recorded")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("CAP_NET_ADMIN"), "{err}");
}

#[test]
fn record_says_once_when_it_sees_no_network_but_lo() {
    if !is_root() || !have_tool("unshare") {
        skip("no network but lo: needs root and unshare for a network namespace");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("unshare");
    cmd.arg("--net")
        .arg(env!("CARGO_BIN_EXE_tacho"))
        .args(["record", "--count", "3", "--interval", "100ms", "--history"])
        .arg(dir.path().join("history.db"))
        .env("TACHO_DB", scratch_db())
        .stdin(Stdio::null());
    let o = run_cmd(cmd);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o)
            .matches("no network interface but lo is visible")
            .count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// Linux's number of an address family as systemd names it.
fn family_number(name: &str) -> u32 {
    match name {
        "AF_UNIX" => 1,
        "AF_INET" => 2,
        "AF_INET6" => 10,
        "AF_NETLINK" => 16,
        "AF_PACKET" => 17,
        other => panic!("no number for {other}"),
    }
}

/// A classic BPF seccomp program that lets `socket(2)` create only the given families (the
/// others fail with EAFNOSUPPORT), as systemd's RestrictAddressFamilies= does on x86-64.
fn socket_filter(families: &[u32]) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const ARCH_X86_64: u32 = 0xc000_003e;
    const NR_SOCKET: u32 = 41;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let n = families.len() as u8;
    // Instructions: 0 arch, 1 check, 2 nr, 3 check, 4 family, 5.. one per family, then
    // deny at 5 + n and allow at 6 + n.
    let allow = 6 + n;
    let mut prog = vec![
        stmt(LD_W_ABS, 4),
        libc::sock_filter {
            code: JEQ_K,
            jt: 0,
            jf: allow - 2,
            k: ARCH_X86_64,
        },
        stmt(LD_W_ABS, 0),
        libc::sock_filter {
            code: JEQ_K,
            jt: 0,
            jf: allow - 4,
            k: NR_SOCKET,
        },
        stmt(LD_W_ABS, 16),
    ];
    for (i, &f) in families.iter().enumerate() {
        prog.push(libc::sock_filter {
            code: JEQ_K,
            jt: allow - (5 + i as u8) - 1,
            jf: 0,
            k: f,
        });
    }
    prog.push(stmt(RET_K, 0x0005_0000 | libc::EAFNOSUPPORT as u32));
    prog.push(stmt(RET_K, 0x7fff_0000));
    prog
}

/// Installs `filter` on the calling process (after `no_new_privs`, which seccomp needs).
fn restrict_sockets(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with integer arguments, then with a pointer to a program that outlives
    // the call.
    let rc = unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -1
        } else {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            )
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A history of `nobody`'s whose 62 samples each list 5,500 processes (1 MiB of JSON, 40 KiB
/// compressed: within every bound of a row), made from the real history argv[1] (its first
/// row, a whole sample in zstd) as argv[2], in version 1's zlib rows.
const DENSE: &str = r#"
import json, random, shutil, sqlite3, subprocess, sys, zlib
shutil.copy(sys.argv[1], sys.argv[2])
c = sqlite3.connect(sys.argv[2])
t0, data = c.execute("select max(unix_s), (select data from samples order by id limit 1) from samples").fetchone()
rec = json.loads(subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout)
one = rec["sample"]["processes"]["processes"][0]
r = random.Random(1)
rec["sample"]["processes"]["processes"] = [
    dict(one, pid=100000 + i, utime=r.getrandbits(12)) for i in range(5500)]
c.execute("delete from samples")
for k in range(62):
    rec["sample"]["unix_time_s"] = t0 + k
    c.execute("insert into samples (unix_s, data) values (?, ?)",
              (t0 + k, zlib.compress(json.dumps(rec, separators=(",", ":")).encode(), 9)))
c.commit()
"#;

#[test]
fn a_replay_holds_a_few_samples_not_its_whole_window() {
    if !can_play_nobody("dense replay") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let history = top.path().join("history.db");
    let o = run(&[
        "record",
        "--count",
        "2",
        "--interval",
        "100ms",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let theirs = top.path().join("nobody");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let dense = theirs.join("history.db");
    let st = Command::new(PYTHON)
        .args(["-c", DENSE])
        .arg(&history)
        .arg(&dense)
        .status()
        .unwrap();
    assert!(st.success());
    std::os::unix::fs::chown(&dense, Some(NOBODY), Some(NOBODY)).unwrap();
    let replay = |h: &Path| {
        let (o, rss) = run_measured(&[
            "top",
            "--replay",
            "--json",
            "--history",
            h.to_str().unwrap(),
        ]);
        json_ok(&o);
        rss
    };
    let plain = replay(&history);
    // The 61 samples of the replayed window, all held, took 77 MiB more here (and 2.3 GB for
    // samples at the 32 MiB bound); read a few at a time, one sample's worth more.
    let rss = replay(&dense);
    assert!(
        rss < plain + (32 << 20),
        "{} MiB resident, {} MiB for a real history",
        rss >> 20,
        plain >> 20
    );
}
