//! `tacho files` end to end: real file operations by real processes, watched through fanotify,
//! asserted event by event; include and exclude filters; summary; queue overflow; privilege
//! refusal; and sector-to-file mapping on ext4, XFS and btrfs loop devices.
//!
//! Workloads are small python3 scripts: one process can create, write, read, rename and
//! delete, set its own command name (so filters have something distinct to match), fork, and
//! stay alive until tacho has read its events.

use crate::common::*;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Skips (visibly) unless root and python3 are available.
fn can_watch(test: &str) -> bool {
    if !is_root() {
        skip(&format!("{test}: fanotify needs root"));
        return false;
    }
    if !have_tool("python3") {
        skip(&format!("{test}: python3 (the workload) is not installed"));
        return false;
    }
    true
}

/// A running `tacho files --json`, ready (its marks are set) when `start` returns.
struct Watch {
    child: Child,
    stderr_head: String,
    /// Drains stdout all along, so a full pipe never blocks tacho.
    stdout: std::thread::JoinHandle<()>,
    /// What tacho has printed so far.
    printed: Arc<Mutex<Vec<u8>>>,
}

impl Watch {
    fn start(args: &[&str]) -> Watch {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        Watch::start_text(&all)
    }

    fn start_text(args: &[&str]) -> Watch {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let (mut child, err, mut head) = start_files_watch(&args);
        // Keep what the reader already buffered past that line (notes follow it).
        head.push_str(&String::from_utf8_lossy(err.buffer()));
        child.stderr = Some(err.into_inner());
        let mut out = child.stdout.take().unwrap();
        let printed = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&printed);
        let stdout = std::thread::spawn(move || {
            let mut chunk = [0u8; 65536];
            loop {
                let n = out.read(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Watch {
            child,
            stderr_head: head,
            stdout,
            printed,
        }
    }

    /// Waits (at most 60 s) until the JSON lines printed so far satisfy `done`.
    fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let start = Instant::now();
        loop {
            let lines: Vec<Value> = {
                let bytes = self.printed.lock().unwrap();
                // Only whole lines: the last one may still be on its way.
                let whole = &bytes[..bytes.iter().rposition(|b| *b == b'\n').unwrap_or(0)];
                whole
                    .split(|b| *b == b'\n')
                    .filter_map(|l| serde_json::from_slice(l).ok())
                    .collect()
            };
            if done(&lines) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "never saw {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Ctrl-C, then the JSON lines and stderr.
    fn stop(self) -> (Vec<Value>, String) {
        let (stdout, stderr) = self.stop_text();
        let lines = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        (lines, stderr)
    }

    /// Ctrl-C, then stdout and stderr.
    fn stop_text(mut self) -> (String, String) {
        // No pause: the workload's events are queued by now, and tacho reads what is queued
        // before it stops.
        // SAFETY: kill with a pid we spawned and a valid signal.
        unsafe { libc::kill(self.pid(), libc::SIGINT) };
        let mut err = self.child.stderr.take().unwrap();
        let status = wait_limited(&mut self.child, Duration::from_secs(30));
        self.stdout.join().unwrap();
        let stdout = String::from_utf8(std::mem::take(&mut *self.printed.lock().unwrap()))
            .expect("tacho prints UTF-8");
        let mut stderr = self.stderr_head;
        err.read_to_string(&mut stderr).unwrap();
        assert_eq!(status.code(), Some(0), "stderr: {stderr}");
        (stdout, stderr)
    }
}

/// Runs a python3 workload in `dir` to the end; returns its pid.
fn workload(dir: &Path, script: &str) -> i32 {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot start python3");
    let pid = child.id() as i32;
    let status = wait_limited(&mut child, Duration::from_secs(60));
    assert!(status.success(), "workload failed");
    pid
}

/// Sets the process name, creates, writes, reads, renames and deletes, then lingers so its
/// name can still be read when tacho gets to the events.
fn basic_script(comm: &str) -> String {
    format!(
        r#"
import os, time
open('/proc/self/comm', 'w').write('{comm}')
with open('a.txt', 'w') as f:
    f.write('hello')
with open('a.txt') as f:
    f.read()
os.rename('a.txt', 'b.txt')
os.unlink('b.txt')
time.sleep(0.8)
"#
    )
}

fn events(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l.get("ops").is_some()).collect()
}

fn trailer(lines: &[Value]) -> &Value {
    let last = lines.last().expect("no output");
    assert_eq!(last["schema"], "tacho.files.v1", "trailer: {last}");
    last
}

fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    (dir, canonical)
}

/// Letters seen for `path` by `pid`.
fn letters(events: &[&Value], pid: i32, path: &Path) -> String {
    let path = path.to_str().unwrap();
    events
        .iter()
        .filter(|e| e["pid"] == pid && e["path"] == path)
        .map(|e| e["ops"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_operation_of_a_process_is_seen_with_its_pid_name_and_path() {
    if !can_watch("every_operation") {
        return;
    }
    let (_guard, dir) = tempdir();
    let watch = Watch::start(&["--path", dir.to_str().unwrap()]);
    let tacho_pid = watch.pid();
    let pid = workload(&dir, &basic_script("tacho-wl-basic"));
    let (lines, stderr) = watch.stop();
    assert_eq!(lines[0]["schema"], "tacho.files.v1");
    let evs = events(&lines);
    for e in &evs {
        for key in ["ts", "pid", "comm", "ops", "path"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
        assert!(e["ts"].as_f64().unwrap() > 1e9);
        assert_ne!(e["pid"], tacho_pid, "tacho's own activity shown: {e}");
        assert_eq!(
            e["pid"],
            pid,
            "only the workload touches {}: {e}",
            dir.display()
        );
        assert_eq!(e["comm"], "tacho-wl-basic", "{e}");
    }
    let a = letters(&evs, pid, &dir.join("a.txt"));
    let b = letters(&evs, pid, &dir.join("b.txt"));
    for op in ['+', 'O', 'W', 'C', 'R', '<'] {
        assert!(a.contains(op), "a.txt lacks {op}: {a:?}; stderr: {stderr}");
    }
    for op in ['>', 'D'] {
        assert!(b.contains(op), "b.txt lacks {op}: {b:?}");
    }
    let t = trailer(&lines);
    assert_eq!(t["events_shown"].as_u64().unwrap(), evs.len() as u64);
    assert_eq!(t["overflows"], 0);
    assert_eq!(t["interrupted"], true, "stopped with Ctrl-C");
}

#[test]
fn include_and_exclude_filters_let_only_the_chosen_through() {
    if !can_watch("filters") {
        return;
    }
    let (_guard, dir) = tempdir();
    let d = dir.to_str().unwrap();
    // Two workloads with different names in their own subdirectories.
    let one = dir.join("one");
    let two = dir.join("two");
    std::fs::create_dir(&one).unwrap();
    std::fs::create_dir(&two).unwrap();

    let by_comm = Watch::start(&["--path", d, "--comm", "tacho-wl-one"]);
    let excl_comm = Watch::start(&["--path", d, "--exclude-comm", "tacho-wl-one"]);
    let writes = Watch::start(&["--path", d, "--ops", "W"]);
    let pid_one = workload(&one, &basic_script("tacho-wl-one"));
    let pid_two = workload(&two, &basic_script("tacho-wl-two"));

    let (lines, _) = by_comm.stop();
    let evs = events(&lines);
    assert!(!evs.is_empty());
    assert!(
        evs.iter().all(|e| e["pid"] == pid_one),
        "--comm let others through"
    );
    let (lines, _) = excl_comm.stop();
    let evs = events(&lines);
    assert!(evs.iter().any(|e| e["pid"] == pid_two));
    assert!(
        evs.iter().all(|e| e["pid"] != pid_one),
        "--exclude-comm ignored"
    );
    let (lines, _) = writes.stop();
    let evs = events(&lines);
    assert!(evs.len() >= 2, "both workloads write");
    assert!(evs.iter().all(|e| e["ops"].as_str().unwrap().contains('W')));

    // --pid needs the process to exist when tacho starts: the workload waits for a go file.
    let go = dir.join("go");
    let waiting = format!(
        "import os, time\nwhile not os.path.exists('{}'): time.sleep(0.02)\n{}",
        go.display(),
        basic_script("tacho-wl-pid")
    );
    let mut a = spawn_python(&one, &waiting);
    let mut b = spawn_python(&two, &waiting);
    let (a_pid, b_pid) = (a.id(), b.id());
    let a_arg = a_pid.to_string();
    let only_a = Watch::start(&["--path", d, "--pid", &a_arg]);
    let not_a = Watch::start(&["--path", d, "--exclude-pid", &a_arg]);
    std::fs::write(&go, b"").unwrap();
    assert!(wait_limited(&mut a, Duration::from_secs(30)).success());
    assert!(wait_limited(&mut b, Duration::from_secs(30)).success());
    let (lines, _) = only_a.stop();
    let evs = events(&lines);
    assert!(!evs.is_empty(), "--pid showed nothing");
    assert!(evs.iter().all(|e| e["pid"] == a_pid));
    let (lines, _) = not_a.stop();
    let evs = events(&lines);
    assert!(evs.iter().all(|e| e["pid"] != a_pid));
    assert!(evs.iter().any(|e| e["pid"] == b_pid));
}

fn spawn_python(dir: &Path, script: &str) -> Child {
    Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot start python3")
}

#[test]
fn pid_covers_threads_and_children_only_when_asked() {
    if !can_watch("children") {
        return;
    }
    let (_guard, dir) = tempdir();
    let d = dir.to_str().unwrap();
    let go = dir.join("go");
    // The parent writes from a second thread, then forks a child that writes and lingers.
    let script = format!(
        r#"
import os, time, threading
while not os.path.exists('{go}'): time.sleep(0.02)
t = threading.Thread(target=lambda: open('thread.txt', 'w').write('t'))
t.start(); t.join()
pid = os.fork()
if pid == 0:
    open('/proc/self/comm', 'w').write('tacho-wl-child')
    open('child.txt', 'w').write('c')
    time.sleep(0.8)
    os._exit(0)
os.waitpid(pid, 0)
# A grandchild that is gone long before tacho reads its event.
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        open('brief.txt', 'w').write('b')
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.3)
"#,
        go = go.display()
    );
    let mut parent = spawn_python(&dir, &script);
    let parent_pid = parent.id();
    let parent_arg = parent_pid.to_string();
    let plain = Watch::start(&["--path", d, "--pid", &parent_arg]);
    let family = Watch::start(&["--path", d, "--pid", &parent_arg, "--children"]);
    std::fs::write(&go, b"").unwrap();
    assert!(wait_limited(&mut parent, Duration::from_secs(30)).success());
    let thread_txt = dir.join("thread.txt");
    let child_txt = dir.join("child.txt");
    let (lines, _) = plain.stop();
    let evs = events(&lines);
    let paths: Vec<&str> = evs.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert!(
        paths.contains(&thread_txt.to_str().unwrap()),
        "thread's write: {paths:?}"
    );
    assert!(
        !paths.contains(&child_txt.to_str().unwrap()),
        "child without --children"
    );
    let (lines, _) = family.stop();
    let evs = events(&lines);
    let child: Vec<_> = evs
        .iter()
        .filter(|e| e["path"] == child_txt.to_str().unwrap())
        .collect();
    assert!(!child.is_empty(), "--children missed the child: {evs:?}");
    assert!(child.iter().all(|e| e["comm"] == "tacho-wl-child"));
    assert!(child.iter().all(|e| e["pid"] != parent_pid));
    let brief = dir.join("brief.txt");
    assert!(
        evs.iter().any(|e| e["path"] == brief.to_str().unwrap()),
        "--children missed a short-lived grandchild: {evs:?}"
    );
}

#[test]
fn summary_ranks_the_most_written_file_first() {
    if !can_watch("summary") {
        return;
    }
    let (_guard, dir) = tempdir();
    let out_file = dir.join("events.log");
    let watch = Watch::start(&[
        "--path",
        dir.to_str().unwrap(),
        "--summary",
        "--output",
        out_file.to_str().unwrap(),
    ]);
    let script = r#"
import time
open('/proc/self/comm', 'w').write('tacho-wl-sum')
# Spaced out, so the kernel cannot merge the writes into one queued event.
for i in range(30):
    with open('hot.log', 'a') as f:
        f.write('x')
    time.sleep(0.03)
open('cold.txt', 'w').write('y')
time.sleep(0.5)
"#;
    let pid = workload(&dir, script);
    let (lines, _) = watch.stop();
    // With --output, stdout holds only the trailer; the events are in the file.
    assert_eq!(lines.len(), 1, "{lines:?}");
    let summary = &trailer(&lines)["summary"];
    let hot = dir.join("hot.log");
    assert_eq!(
        summary["files"][0]["path"],
        hot.to_str().unwrap(),
        "{summary}"
    );
    assert!(summary["files"][0]["by_op"]["W"].as_u64().unwrap() >= 1);
    assert!(
        summary["verdict"]
            .as_str()
            .unwrap()
            .starts_with("most written: "),
        "{summary}"
    );
    assert_eq!(summary["processes"][0]["pid"], pid);
    let log = std::fs::read_to_string(&out_file).unwrap();
    assert!(log.lines().count() >= 3, "events in --output file: {log}");
    assert!(
        !log.contains(out_file.to_str().unwrap()),
        "tacho's own writes to its output are never shown"
    );
}

#[test]
fn text_output_is_fatrace_style_and_the_summary_leads_with_a_verdict() {
    if !can_watch("text") {
        return;
    }
    let (_guard, dir) = tempdir();
    let watch = Watch::start_text(&["--path", dir.to_str().unwrap(), "--timestamps"]);
    let pid = workload(&dir, &basic_script("tacho-wl-text"));
    let (text, _) = watch.stop_text();
    // `HH:MM:SS.micros comm(pid): OPS path`; OPS may hold merged letters ("D>").
    let prefix = format!("tacho-wl-text({pid}):");
    let b_txt = dir.join("b.txt").display().to_string();
    let deleted = text.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 4
            && f[0].len() == 15
            && f[0].as_bytes()[2] == b':'
            && f[1] == prefix
            && f[2].contains('D')
            && f[3] == b_txt
    });
    assert!(deleted, "no timestamped D line for {b_txt} in {text}");

    let o = run(&[
        "files",
        "--path",
        dir.to_str().unwrap(),
        "--duration",
        "300ms",
        "--summary",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("no file activity matched in "),
        "{}",
        stdout(&o)
    );
}

#[test]
fn queue_overflow_is_reported_and_unbounded_queue_prevents_it() {
    if !can_watch("overflow") {
        return;
    }
    let (_guard, dir) = tempdir();
    let d = dir.to_str().unwrap();
    let bounded = Watch::start(&["--path", d, "--ops", "+"]);
    let unbounded = Watch::start(&["--path", d, "--ops", "+", "--unbounded-queue"]);
    // Stopped watchers cannot read: 20000 creates (distinct names never merge) overflow the
    // default queue of 16384 events.
    for w in [&bounded, &unbounded] {
        // SAFETY: kill with a pid we spawned and a valid signal.
        unsafe { libc::kill(w.pid(), libc::SIGSTOP) };
    }
    workload(
        &dir,
        "import os\nos.mkdir('many')\nfor i in range(20000): open(f'many/{i}', 'w').close()",
    );
    for w in [&bounded, &unbounded] {
        // SAFETY: as above.
        unsafe { libc::kill(w.pid(), libc::SIGCONT) };
    }
    // Each prints what it read as it goes: wait for the overflow, and for every create.
    bounded.wait_for("the overflow", |lines| {
        lines.iter().any(|l| l["overflow"] == true)
    });
    unbounded.wait_for("20000 creates", |lines| {
        events(lines)
            .iter()
            .filter(|e| e["path"].as_str().is_some_and(|p| p.contains("/many/")))
            .count()
            == 20000
    });
    let (lines, stderr) = bounded.stop();
    let t = trailer(&lines);
    assert!(t["overflows"].as_u64().unwrap() >= 1, "{t}");
    assert_eq!(t["lost_events_min"], t["overflows"]);
    assert!(lines.iter().any(|l| l["overflow"] == true));
    assert!(stderr.contains("overflowed"), "{stderr}");
    let (lines, _) = unbounded.stop();
    let t = trailer(&lines);
    assert_eq!(t["overflows"], 0, "{t}");
    let creates = events(&lines)
        .iter()
        .filter(|e| e["path"].as_str().unwrap().contains("/many/"))
        .count();
    assert_eq!(creates, 20000);
}

#[test]
fn without_cap_sys_admin_it_says_what_is_needed() {
    let o = if is_root() {
        if !have_tool("setpriv") {
            skip("without_cap_sys_admin: setpriv is not installed");
            return;
        }
        let mut cmd = Command::new("setpriv");
        cmd.args(["--bounding-set", "-sys_admin", "--"])
            .arg(env!("CARGO_BIN_EXE_tacho"))
            .args(["files", "--duration", "1s"]);
        run_cmd(cmd)
    } else {
        run(&["files", "--duration", "1s"])
    };
    let line = assert_error(&o);
    assert!(
        line.contains("CAP_SYS_ADMIN") && line.contains("sudo"),
        "{line}"
    );
}

#[test]
fn bad_input_is_refused_with_one_line() {
    let (_guard, dir) = tempdir();
    let existing = dir.join("exists.log");
    std::fs::write(&existing, b"keep").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["files", "--ops", "RX"], "'X'"),
        (&["files", "--pid", "0"], "process id"),
        (&["files", "--pid", "2147483000"], "no such process"),
        (&["files", "--children"], "--pid"),
        (&["files", "--comm", "a-name-longer-than-15"], "15 bytes"),
        (&["files", "--output", existing.to_str().unwrap()], "exists"),
        (&["files", "--mount", "/nonexistent/tacho"], "--mount"),
        (&["files", "--duration", "-1s"], "duration"),
        (
            &["files", "--sector", "/dev/null", "x"],
            "not a sector number",
        ),
        (&["files", "--sector", "/dev/null"], "SECTOR"),
        (
            &["files", "--sector", "/dev/null", "1"],
            "not a block device",
        ),
        (
            &["files", "--sector", "/dev/null", "1", "--pid", "1"],
            "cannot be used",
        ),
    ];
    for (args, expected) in cases {
        let line = assert_error(&run(args));
        assert!(
            line.contains(expected),
            "{args:?}: {line:?} lacks {expected:?}"
        );
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep");
}

/// Makes `fs` on a loop device, mounts it, writes a file of random bytes, finds where one
/// 4 KiB block of it landed by searching the raw image (independent of FIEMAP), and asks
/// tacho which file owns that sector.
fn sector_maps_back(fs: &str, mkfs: &str, mkfs_args: &[&str]) {
    let test = format!("sector_{fs}");
    if !have_tool(mkfs) {
        skip(&format!("{test}: {mkfs} is not installed"));
        return;
    }
    let Some(dev) = LoopDev::new(&test, 320 << 20) else {
        return;
    };
    let o = Command::new(mkfs)
        .args(mkfs_args)
        .arg(&dev.dev)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{mkfs}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (_guard, mnt) = tempdir();
    let _mount = match MountGuard::mount(&[dev.path()], &mnt) {
        Ok(m) => m,
        Err(e) => {
            skip(&format!("{test}: cannot mount {fs}: {e}"));
            return;
        }
    };
    let file = mnt.join("data/payload.bin");
    std::fs::create_dir(mnt.join("data")).unwrap();
    let mut rng = fastrand::Rng::with_seed(u64::from(std::process::id()));
    let content: Vec<u8> = (0..256 * 1024).map(|_| rng.u8(..)).collect();
    std::fs::write(&file, &content).unwrap();
    std::fs::File::open(&file).unwrap().sync_all().unwrap();
    let probe_offset = 64 * 1024;
    let probe = &content[probe_offset..probe_offset + 4096];
    let image = dev.content();
    let byte = (0..image.len() - 4096)
        .step_by(512)
        .find(|&at| &image[at..at + 4096] == probe)
        .expect("the file's block is on the device");
    let sector = (byte / 512).to_string();
    let o = run(&["files", "--sector", dev.path(), &sector, "0", "--json"]);
    let v = json_ok(&o);
    assert_eq!(v["schema"], "tacho.files.sector.v1");
    assert_eq!(v["fs_type"], fs);
    let owners = v["sectors"][0]["owners"].as_array().unwrap();
    assert_eq!(owners.len(), 1, "{v}");
    assert_eq!(owners[0]["path"], file.to_str().unwrap());
    assert_eq!(owners[0]["offset_bytes"], probe_offset as u64);
    assert!(
        v["sectors"][1]["owners"].as_array().unwrap().is_empty(),
        "sector 0 is no file's"
    );
    assert!(v["sectors"][1]["note"].is_string());

    let o = run(&["files", "--sector", dev.path(), &sector]);
    let text = stdout(&o);
    assert!(text.starts_with("1 of 1 sector on"), "{text}");
    assert!(text.contains(&format!(
        "{sector}: {} (offset {probe_offset})",
        file.display()
    )));
    let past = ((320u64 << 20) / 512).to_string();
    let line = assert_error(&run(&["files", "--sector", dev.path(), &past]));
    assert!(line.contains("past the end"), "{line}");
}

#[test]
fn sector_of_a_file_on_ext4_maps_back_to_its_path() {
    sector_maps_back("ext4", "mkfs.ext4", &["-q", "-F"]);
}

#[test]
fn sector_of_a_file_on_xfs_maps_back_to_its_path() {
    sector_maps_back("xfs", "mkfs.xfs", &["-q", "-f"]);
}

#[test]
fn sector_of_a_file_on_btrfs_maps_back_to_its_path() {
    sector_maps_back("btrfs", "mkfs.btrfs", &["-q", "-f"]);
}

#[test]
fn sector_of_an_unmounted_device_is_refused() {
    let Some(dev) = LoopDev::new("sector_unmounted", 8 << 20) else {
        return;
    };
    let line = assert_error(&run(&["files", "--sector", dev.path(), "8"]));
    assert!(line.contains("not mounted"), "{line}");
}

#[test]
fn filesystems_without_file_handles_are_watched_by_descriptor() {
    if !can_watch("descriptor_mode") {
        return;
    }
    // procfs cannot encode file handles: tacho falls back to one open descriptor per event,
    // which reports R W O C but no create, delete or move.
    let watch = Watch::start(&[
        "--mount",
        "/proc",
        "--path",
        "/proc/loadavg",
        "--comm",
        "tacho-wl-proc",
    ]);
    let (_guard, dir) = tempdir();
    let pid = workload(
        &dir,
        "import time\nopen('/proc/self/comm', 'w').write('tacho-wl-proc')\n\
         for i in range(3): open('/proc/loadavg').read()\ntime.sleep(0.5)",
    );
    let (lines, stderr) = watch.stop();
    assert!(stderr.contains("only R W O C"), "{stderr}");
    let evs = events(&lines);
    assert!(!evs.is_empty(), "no events on /proc/loadavg");
    for e in &evs {
        assert_eq!(e["pid"], pid, "{e}");
        assert_eq!(e["path"], "/proc/loadavg");
    }
    let ops: String = evs.iter().map(|e| e["ops"].as_str().unwrap()).collect();
    assert!(
        ops.contains('O') && ops.contains('R') && ops.contains('C'),
        "{ops}"
    );

    let line = assert_error(&run(&["files", "--mount", "/proc", "--ops", "+D"]));
    assert!(line.contains("cannot report create"), "{line}");
}

/// A full filesystem under `-o FILE`: one line naming it and the fix, and no 0-byte or
/// half-written file left to pass for a complete log (issue 30).
#[test]
fn output_on_a_full_filesystem_is_named_and_removed() {
    if !can_watch("output_on_a_full_filesystem") {
        return;
    }
    let full = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&["-t", "tmpfs", "-o", "size=1M", "tmpfs"], full.path())
        .expect("cannot mount a tmpfs");
    let _ = std::fs::write(full.path().join("fill"), vec![0u8; 2 << 20]);
    let (_guard, dir) = tempdir();
    let busy = dir.join("busy.txt");
    std::fs::write(&busy, "x").unwrap();
    // Events to write while the watch lasts.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::read(&busy);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = full.path().join("events.log");
    let o = run(&[
        "files",
        "--path",
        dir.to_str().unwrap(),
        "--duration",
        "2s",
        "-o",
        out.to_str().unwrap(),
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err.lines().last().unwrap_or_default();
    assert!(line.contains("full") && line.contains("-o FILE"), "{err}");
    assert_eq!(entries(full.path()), ["fill"], "{err}");
}
