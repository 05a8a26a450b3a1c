//! Text chosen by another local user never becomes a command or a terminal control: a mount
//! point in `check --emit-script`, a process name in `top`, a directory name in `files`, a label
//! and a test name from an imported file in `runs` and `compare`. JSON keeps the exact bytes.

use crate::common::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ESC_NAME: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
const ESC_NAME_ESCAPED: &str = r"\e]0;pwned\a\e[2J";

/// A name no other test or run uses.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn assert_no_escape_byte(what: &str, bytes: &[u8]) {
    assert!(
        !bytes.iter().any(|&b| b == 0x1b || b == 0x07 || b == b'\r'),
        "{what} holds a raw control character:\n{}",
        String::from_utf8_lossy(bytes)
    );
}

/// The bytes of a `*_hex` field, the documented lossless form of a name that is not UTF-8.
fn unhex(field: &Value) -> Vec<u8> {
    let hex = field
        .as_str()
        .unwrap_or_else(|| panic!("no *_hex field for a name that is not UTF-8: {field}"));
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits"))
        .collect()
}

/// A child killed and reaped on drop, whatever the test's outcome.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `cond` holds, at most `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn needs(test: &str, tools: &[&str]) -> bool {
    if !is_root() {
        skip(&format!("{test}: needs root"));
        return false;
    }
    if let Some(t) = tools.iter().find(|t| !have_tool(t)) {
        skip(&format!("{test}: {t} is not installed"));
        return false;
    }
    true
}

// ---------------------------------------------------------------- check --emit-script

/// An ext4 on a loop device mounted with `options` at `dir`; None (skipped) without loop devices.
fn ext4_mount(test: &str, dir: &Path, options: &str) -> Option<(LoopDev, MountGuard)> {
    let dev = LoopDev::new(test, 64 << 20)?;
    assert!(dev.mkfs_ext4(), "mkfs.ext4 failed");
    let guard = MountGuard::mount(&["-o", options, dev.path()], dir).expect("cannot mount");
    Some((dev, guard))
}

#[test]
fn emit_script_never_runs_a_hostile_mount_point() {
    let test = "emit_script_never_runs_a_hostile_mount_point";
    if !needs(test, &["mkfs.ext4", "unshare", "bash"]) {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let marker = unique("PWNED");
    // The mount point is `…/x⏎touch /tmp/PWNED-… #`: written raw after a `#` it ends the
    // comment and the next line runs touch.
    let mp = base
        .path()
        .join("x\ntouch ")
        .join("tmp")
        .join(format!("{marker} #"));
    std::fs::create_dir_all(&mp).unwrap();
    // strictatime and data=journal: each is a warning whose finding names the mount point.
    let Some((_dev, _mount)) = ext4_mount(test, &mp, "strictatime,data=journal") else {
        return;
    };
    let stub = tempfile::tempdir().unwrap();
    let log = stub.path().join("touched");
    let touch = stub.path().join("touch");
    std::fs::write(
        &touch,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&touch, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    for kind in ["apply", "revert"] {
        let o = run(&["check", &format!("--emit-script={kind}")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let script = stdout(&o);
        let file = stub.path().join(format!("{kind}.sh"));
        std::fs::write(&file, &script).unwrap();
        let syntax = Command::new("bash").arg("-n").arg(&file).output().unwrap();
        assert!(
            syntax.status.success(),
            "bash -n {kind}: {}",
            String::from_utf8_lossy(&syntax.stderr)
        );
        // Run every line (set -e dropped) in a private mount namespace where /etc and /sys
        // are empty tmpfs and PATH holds only the stub touch: nothing real can change, and a
        // touch that runs is logged.
        // The last line proves the script ran to its end with the stub.
        let relaxed = script.replace("\nset -e\n", "\n:\n") + "\ntouch ran-to-the-end\n";
        std::fs::write(&file, relaxed).unwrap();
        let o = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(
                "mount -t tmpfs tacho-etc /etc && mount -t tmpfs tacho-sys /sys && \
                 { PATH=\"$1\" /bin/sh \"$2\" >/dev/null 2>&1; exit 0; }",
            )
            .arg("sh")
            .arg(stub.path())
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let touched = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            touched.contains("ran-to-the-end"),
            "the {kind} script did not run"
        );
        assert!(
            !touched.contains(&marker),
            "running the {kind} script ran touch {touched}"
        );
        assert!(!Path::new("/tmp").join(&marker).exists());
        assert!(
            script.contains(&format!("x\\ntouch /tmp/{marker} #")),
            "the {kind} script does not name the mount point escaped:\n{script}"
        );
        for line in script.lines() {
            assert!(
                !line.trim_start().starts_with("touch"),
                "the {kind} script runs touch: {line:?}\n{script}"
            );
        }
    }
}

fn atime_severity(mp: &Path) -> String {
    let o = run(&["check", "--json"]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let v = parse_json(&o);
    let subject = mp.to_str().unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "atime" && f["subject"] == subject)
        .unwrap_or_else(|| panic!("no atime finding for {subject}"))["severity"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_strictatime_mount_is_judged_strictatime() {
    let test = "a_strictatime_mount_is_judged_strictatime";
    if !needs(test, &["mkfs.ext4"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((_dev, _mount)) = ext4_mount(test, dir.path(), "strictatime") else {
        return;
    };
    assert_eq!(atime_severity(dir.path()), "warn");
    sh(
        "mount",
        &["-o", "remount,relatime", dir.path().to_str().unwrap()],
    );
    assert_eq!(atime_severity(dir.path()), "ok");
}

// ---------------------------------------------------------------- top

/// A python3 process that names itself `name` (prctl PR_SET_NAME) and spins, so it shows in
/// `top --sort cpu`; returned once the kernel reports the new name. It is `nobody`'s where the
/// tests run as root (any user names their own processes), the test user's otherwise.
fn named_spinner(name: &[u8]) -> Killed {
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    let script = format!(
        "import ctypes\n\
         ctypes.CDLL(None).prctl(15, bytes.fromhex('{hex}'), 0, 0, 0)\n\
         while True: pass\n"
    );
    let mut cmd = if is_root() && have_tool("setpriv") {
        as_nobody(PYTHON)
    } else {
        Command::new("python3")
    };
    let child = cmd
        .args(["-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot start python3");
    let comm = PathBuf::from(format!("/proc/{}/comm", child.id()));
    let child = Killed(child);
    let mut want = name.to_vec();
    want.push(b'\n');
    wait_for(Duration::from_secs(30), "the new process name", || {
        std::fs::read(&comm).is_ok_and(|c| c == want)
    });
    child
}

#[test]
fn top_prints_a_hostile_process_name_escaped_and_json_keeps_its_bytes() {
    if !have_tool("python3") {
        skip("top_prints_a_hostile_process_name_escaped: python3 is not installed");
        return;
    }
    let esc = named_spinner(ESC_NAME.as_bytes());
    let o = run(&[
        "top",
        "--batch",
        "--count",
        "1",
        "--interval",
        "1s",
        "--sort",
        "cpu",
        "--top",
        "1000",
    ]);
    // 1 is a finding (this busy machine): still a full report.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    assert_no_escape_byte("top --batch", &o.stdout);
    let pid = esc.0.id().to_string();
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.trim_start().starts_with(&pid) && l.contains(ESC_NAME_ESCAPED)),
        "no line for pid {pid} with {ESC_NAME_ESCAPED}:\n{}",
        stdout(&o)
    );
    drop(esc);

    // Not UTF-8: `comm` shows U+FFFD, `comm_hex` keeps the bytes.
    let bad = named_spinner(b"tacho\xff\xfe");
    let o = run(&[
        "top",
        "--json",
        "--count",
        "1",
        "--interval",
        "1s",
        "--sort",
        "cpu",
        "--top",
        "1000",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(o.stdout.split(|&b| b == b'\n').next().unwrap())
        .expect("top --json prints JSON");
    let p = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == bad.0.id())
        .unwrap_or_else(|| panic!("pid {} not listed: {v}", bad.0.id()));
    assert_eq!(p["comm"], "tacho\u{fffd}\u{fffd}");
    assert_eq!(p["comm_hex"], "746163686ffffe");
}

/// Renames itself to bytes that are not UTF-8 (prctl), then `SCRIPT` (python, `sys.argv[1]`
/// is its argument); prints its pid first.
fn renamed_python(name: &[u8], script: &str, arg: &str) -> Killed {
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    let script = format!(
        "import ctypes, os, sys\n\
         ctypes.CDLL(None).prctl(15, bytes.fromhex('{hex}'), 0, 0, 0)\n\
         print(os.getpid(), flush=True)\n{script}"
    );
    let mut child = Command::new("python3")
        .args(["-c", &script, arg])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot start python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Killed(child)
}

#[test]
fn names_that_are_not_utf8_print_their_bytes_in_top_and_connections_keep_them() {
    if !needs(
        "names_that_are_not_utf8_print_their_bytes_in_top",
        &["python3"],
    ) {
        return;
    }
    // A busy process named `tacho\xff\xfe`: its lines in the table and in the accumulated
    // totals show those bytes.
    let bad = named_spinner(b"tacho\xff\xfe");
    let o = run(&[
        "top",
        "--batch",
        "--accumulate",
        "--count",
        "1",
        "--interval",
        "1s",
        "--sort",
        "cpu",
        "--top",
        "1000",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let pid = bad.0.id().to_string();
    let text = stdout(&o);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(&format!("{pid} ")))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "pid {pid} in the table and the totals:\n{text}"
    );
    for line in lines {
        assert!(line.contains(r"tacho\xff\xfe"), "{line}");
    }
    drop(bad);

    // A TCP sender with such a name: the connection and its process group keep the bytes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
            });
        }
    });
    let sender = renamed_python(
        b"send\xff",
        "import socket, time\n\
         s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
         while True:\n    s.sendall(b'x' * 65536)\n    time.sleep(0.01)\n",
        &port,
    );
    let o = run(&["top", "--json", "--count", "2", "--interval", "1s"]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let last: Value = serde_json::from_slice(
        o.stdout
            .split(|&b| b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap(),
    )
    .unwrap();
    let pid = sender.0.id();
    let conns = &last["connections"];
    let conn = conns["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .unwrap_or_else(|| panic!("no connection of pid {pid}: {conns}"));
    assert_eq!(conn["comm"], "send\u{fffd}");
    assert_eq!(unhex(&conn["comm_hex"]), b"send\xff");
    let group = conns["by_process"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["pid"] == pid)
        .unwrap_or_else(|| panic!("no group of pid {pid}: {conns}"));
    let mut key = b"send\xff".to_vec();
    key.extend(format!(" (pid {pid})").bytes());
    assert_eq!(unhex(&group["key_hex"]), key);
}

#[cfg(feature = "bpf")]
#[test]
fn files_bytes_prints_names_that_are_not_utf8_by_their_bytes() {
    if !needs("files_bytes_prints_names_that_are_not_utf8", &["python3"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = tacho()
        .args(["files", "--bytes", "--duration", "4", "--path"])
        .arg(dir.path())
        .spawn_piped();
    // Counting has begun once tacho says so.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // A writer named `w\xff` writes a file named `f\xfe` and keeps it open a while.
    let writer = renamed_python(
        b"w\xff",
        "import time\n\
         f = open(os.path.join(os.fsencode(sys.argv[1]), b'f\\xfe'), 'wb', buffering=0)\n\
         for _ in range(10): f.write(b'x' * 1000)\n\
         time.sleep(3)\n",
        dir.path().to_str().unwrap(),
    );
    let o = wait_output(child, Duration::from_secs(60));
    drop(writer);
    let text = stdout(&o);
    assert!(o.status.success(), "{first}{}", stderr(&o));
    assert!(!text.contains('\u{fffd}'), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains(r"w\xff"))
        .unwrap_or_else(|| panic!("no line for the writer w\\xff ({first}):\n{text}"));
    assert!(line.ends_with(r"/f\xfe"), "{line}");
}

// ---------------------------------------------------------------- files

/// `tacho files ARGS` started and watching; its stdout lines arrive on the channel.
struct Files {
    child: Killed,
    lines: mpsc::Receiver<Vec<u8>>,
    seen: Vec<Vec<u8>>,
}

impl Files {
    fn start(args: &[&OsStr]) -> Files {
        let (mut child, mut err, _) = start_files_watch(args);
        std::thread::spawn(move || {
            let _ = err.read_to_end(&mut Vec::new());
        });
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).split(b'\n').map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Files {
            child: Killed(child),
            lines,
            seen: Vec::new(),
        }
    }

    /// Lines printed until one contains `needle` (at most 30 s), then stops tacho.
    fn until(mut self, needle: &[u8]) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self
            .seen
            .iter()
            .any(|l| l.windows(needle.len()).any(|w| w == needle))
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "no line with {:?} in:\n{}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.seen.join(&b'\n'))
                ),
            }
        }
        // SAFETY: kill with a pid we spawned and a valid signal.
        unsafe { libc::kill(self.child.0.id() as i32, libc::SIGINT) };
        let _ = wait_limited(&mut self.child.0, Duration::from_secs(30));
        self.seen.extend(self.lines.try_iter());
        self.seen
    }
}

/// Runs python3 `script` in `dir` to its end.
fn python_in(dir: &Path, script: &str) {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot start python3");
    assert!(wait_limited(&mut child, Duration::from_secs(60)).success());
}

#[test]
fn files_cannot_be_made_to_print_a_forged_line() {
    if !needs("files_cannot_be_made_to_print_a_forged_line", &["python3"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hostile = dir.path().join("x\nsshd(1): W /etc");
    std::fs::create_dir_all(&hostile).unwrap();
    let files = Files::start(&[OsStr::new("--path"), dir.path().as_os_str()]);
    python_in(
        dir.path(),
        "open('x\\nsshd(1): W /etc/shadow-victim', 'w').write('x')\nopen('done', 'w').write('x')\n",
    );
    let lines = files.until(b"/done");
    assert_no_escape_byte("files", &lines.join(&b'\n'));
    for l in &lines {
        assert!(
            !l.starts_with(b"sshd(1)"),
            "forged line: {}",
            String::from_utf8_lossy(l)
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| String::from_utf8_lossy(l).contains(r"/x\nsshd(1): W /etc/shadow-victim")),
        "the write is not shown escaped"
    );
}

#[test]
fn files_json_keeps_names_that_are_not_utf8_apart() {
    if !needs(
        "files_json_keeps_names_that_are_not_utf8_apart",
        &["python3"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = Files::start(&[
        OsStr::new("--json"),
        OsStr::new("--path"),
        dir.path().as_os_str(),
    ]);
    python_in(
        dir.path(),
        "for n in (b'name\\xff', b'name\\xfe', b'done'):\n    open(n, 'wb').write(b'x')\n",
    );
    let lines = files.until(b"/done\"");
    let mut names: Vec<Vec<u8>> = Vec::new();
    for l in &lines {
        let v: Value = serde_json::from_slice(l).expect("JSON line");
        let Some(path) = v["path"].as_str() else {
            continue;
        };
        if !path.starts_with(dir.path().to_str().unwrap()) || path.ends_with("/done") {
            continue;
        }
        // The documented lossless form: `path_hex` when the bytes are not UTF-8.
        let bytes = unhex(&v["path_hex"]);
        if !names.contains(&bytes) {
            names.push(bytes);
        }
    }
    let want = |tail: &[u8]| [dir.path().as_os_str().as_bytes(), b"/", tail].concat();
    names.sort();
    assert_eq!(names, vec![want(b"name\xfe"), want(b"name\xff")]);
}

// ---------------------------------------------------------------- runs and compare

#[test]
fn runs_and_compare_escape_labels_and_test_names_from_imported_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let fio = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio/three-jobs.json"
    ))
    .unwrap();
    let fio = fio.replace("\"randread-4k-q16\"", "\"rand\\u001b[2Jread\"");
    // The label of an imported fio file is taken from its name.
    let file = dir.path().join(format!("{ESC_NAME}.json"));
    std::fs::write(&file, fio).unwrap();
    let db_s = db.to_str().unwrap();
    for _ in 0..2 {
        let o = run(&[
            OsStr::new("runs"),
            OsStr::new("import"),
            OsStr::new("--db"),
            OsStr::new(db_s),
            file.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_no_escape_byte("runs import", &o.stdout);
    }
    let list = run(&["runs", "list", "--db", db_s]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    assert_no_escape_byte("runs list", &list.stdout);
    assert!(
        stdout(&list).contains(ESC_NAME_ESCAPED),
        "{}",
        stdout(&list)
    );
    let show = run(&["runs", "show", "1", "--db", db_s]);
    assert_no_escape_byte("runs show", &show.stdout);
    assert!(
        stdout(&show).contains(r"rand\e[2Jread"),
        "{}",
        stdout(&show)
    );
    for format in [None, Some("--markdown"), Some("--csv")] {
        let mut args = vec!["compare", "1", "2", "--db", db_s];
        args.extend(format);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{format:?}: {}", stderr(&o));
        assert_no_escape_byte(&format!("compare {format:?}"), &o.stdout);
        // Markdown escapes `[` as well: `\e\[2J`.
        assert!(stdout(&o).contains(r"\e"), "{format:?}: {}", stdout(&o));
    }
    // JSON keeps the label exactly.
    let v = json_ok(&run(&["runs", "list", "--db", db_s, "--json"]));
    assert_eq!(v["runs"][0]["label"], format!("fio {ESC_NAME}.json"));
}

// ---------------------------------------------------------------- snapshot

#[test]
fn snapshot_keeps_mount_points_that_are_not_utf8_apart() {
    if !needs("snapshot_keeps_mount_points_that_are_not_utf8_apart", &[]) {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let names: [&[u8]; 2] = [b"m\xff", b"m\xfe"];
    let mut guards = Vec::new();
    let mut want = Vec::new();
    for name in names {
        let dir = base.path().join(OsStr::from_bytes(name));
        std::fs::create_dir(&dir).unwrap();
        guards.push(
            MountGuard::mount(&["-t", "tmpfs", "-o", "size=1m", "tacho-itest"], &dir).unwrap(),
        );
        want.push(dir.as_os_str().as_bytes().to_vec());
    }
    let v = json_ok(&run(&["snapshot"]));
    let prefix = base.path().to_str().unwrap();
    let mut got: Vec<Vec<u8>> = v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["mount_point"].as_str().unwrap().starts_with(prefix))
        .map(|m| unhex(&m["mount_point_hex"]))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

/// The verdict's culprits show a name that is not UTF-8 by its bytes, as the table does, and
/// the JSON keeps them in `comm_hex` (issue 28: U+FFFD in `top --batch`).
#[test]
fn verdicts_name_culprits_that_are_not_utf8_by_their_bytes() {
    if !needs("verdicts_name_culprits_that_are_not_utf8", &["python3"]) {
        return;
    }
    // More spinners than CPUs: a CPU verdict that must name them.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<Killed> = (0..=cpus).map(|_| named_spinner(b"spin\xff\xfe")).collect();
    let mut found = None;
    for _ in 0..10 {
        let o = run(&["top", "--json", "--count", "2", "--interval", "1s"]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
        let last = stdout(&o).lines().last().unwrap_or_default().to_string();
        let v: serde_json::Value = serde_json::from_str(&last).unwrap();
        let cpu = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "cpu_saturated")
            .cloned();
        if let Some(f) = cpu.filter(|f| f["message"].as_str().unwrap().contains(r"spin\xff\xfe")) {
            found = Some(f);
            break;
        }
    }
    drop(spinners);
    let f = found.expect("no CPU verdict named the spinners by their bytes");
    let message = f["message"].as_str().unwrap();
    assert!(!message.contains('\u{fffd}'), "{message}");
    assert!(
        f["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["comm_hex"] == "7370696efffe"),
        "{f:#}"
    );
}
