//! `tacho files --pid P --derive-job` (eBPF, root): a process appending 2,300-byte records,
//! each followed by fdatasync, yields a fio job with bs=2300 and fdatasync=1 that fio accepts
//! and `bench disk --fio-job` runs; a process that does no I/O yields one line and exit 2.
//! `bench disk --like-pid` runs that job on a target and sets its rates against the writer's.
//! Four threads flushing one file at once give parallel jobs (numjobs), fsync kept apart.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Appends 2300-byte records to the file named by argv[1], each followed by fdatasync, until
/// killed; says "ready" once the first is written.
const WAL_WRITER: &str = r#"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
first = True
while True:
    os.write(fd, b"w" * 2300)
    os.fdatasync(fd)
    if first:
        print("ready", flush=True)
        first = False
    time.sleep(0.002)
"#;

/// A child process killed and reaped on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Python running `script` on `file`, once it has said it is ready (its first line).
fn started(script: &str, file: &std::path::Path) -> Process {
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    Process(child)
}

fn derive(pid: u32, out: &std::path::Path) -> std::process::Output {
    run(&[
        "files",
        "--pid",
        &pid.to_string(),
        "--derive-job",
        "--duration",
        "1s",
        "-o",
        out.to_str().unwrap(),
    ])
}

#[test]
fn a_wal_writer_yields_a_job_that_fio_accepts_and_tacho_runs() {
    if !is_root() {
        skip("derive-job test: needs root for eBPF");
        return;
    }
    if !have_tool("fio") {
        skip("derive-job test: fio is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let writer = started(WAL_WRITER, &dir.path().join("wal"));
    let job = dir.path().join("app.fio");
    let o = derive(writer.0.id(), &job);
    drop(writer);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&job).unwrap();
    for line in [
        "rw=write",
        "bs=2300",
        "fdatasync=1",
        "ioengine=sync",
        "numjobs=1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
    }
    assert!(
        text.contains(&format!("# file1: {}", dir.path().join("wal").display())),
        "{text}"
    );
    // Each kind of flush counted apart; one thread, so one call in flight at most.
    assert!(text.contains(" (0 fsync, "), "{text}");
    assert!(
        text.contains(" fdatasync, 0 sync_file_range), one per 1 write;"),
        "{text}"
    );
    assert!(
        text.contains("concurrency: observed: 1 thread of"),
        "{text}"
    );
    let fio = Command::new("fio")
        .arg("--parse-only")
        .arg(&job)
        .output()
        .unwrap();
    assert!(
        fio.status.success(),
        "{}",
        String::from_utf8_lossy(&fio.stderr)
    );
    // In memory: the job is buffered, and a test file there needs no free share of a disk.
    let bench = tempfile::tempdir_in("/dev/shm").unwrap();
    let v = json_ok(&run(&[
        "bench",
        "disk",
        bench.path().to_str().unwrap(),
        "--fio-job",
        job.to_str().unwrap(),
        "--json",
        "--no-save",
    ]));
    let t = &v["tests"][0];
    assert_eq!(t["bs_bytes"], 2300, "{t}");
    assert_eq!(t["sync_every"]["kind"], "fdatasync", "{t}");
    assert_eq!(t["sync_every"]["every"], 1, "{t}");
    assert!(t["sync"]["count"].as_u64().unwrap() > 0, "{t}");
}

#[test]
fn a_process_without_io_yields_one_line_and_no_file() {
    if !is_root() {
        skip("derive-job test: needs root for eBPF");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let idle = Process(Command::new("sleep").arg("30").spawn().unwrap());
    let job = dir.path().join("app.fio");
    let o = derive(idle.0.id(), &job);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains("no reads or writes of process") && last.contains("--duration"),
        "{err}"
    );
    assert!(!job.exists());
    // A process that is not there is said at once.
    let o = derive(u32::MAX >> 2, &job);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("there is no process"), "{}", stderr(&o));
    assert!(!job.exists());
}

#[test]
fn like_pid_runs_the_writers_pattern_and_says_whether_the_target_holds_it() {
    if !is_root() {
        skip("like-pid test: needs root for eBPF");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let writer = started(WAL_WRITER, &dir.path().join("wal"));
    // In memory: the job is buffered, and a test file there needs no free share of a disk.
    let bench = tempfile::tempdir_in("/dev/shm").unwrap();
    let pid = writer.0.id().to_string();
    let target = bench.path().to_str().unwrap();
    let o = run(&[
        "bench",
        "disk",
        target,
        "--like-pid",
        &pid,
        "--duration",
        "1s",
        "--json",
        "--no-save",
    ]);
    drop(writer);
    let v = json_ok(&o);
    let t = &v["tests"][0];
    assert_eq!(t["bs_bytes"], 2300, "{t}");
    assert_eq!(t["sync_every"]["kind"], "fdatasync", "{t}");
    assert_eq!(t["sync_every"]["every"], 1, "{t}");
    let like = &v["like"];
    assert_eq!(like["pid"].to_string(), pid, "{like}");
    let f = &like["files"][0];
    assert_eq!(
        f["path"].as_str(),
        dir.path().join("wal").to_str(),
        "{like}"
    );
    let rate = |side: &str, what: &str| f[side][what].as_f64().unwrap();
    assert!(rate("needed", "write_bytes_per_s") > 0.0, "{like}");
    assert!(rate("needed", "syncs_per_s") > 0.0, "{like}");
    assert_eq!(rate("needed", "read_bytes_per_s"), 0.0, "{like}");
    assert!(f["process_sync_mean_ns"].as_f64().unwrap() > 0.0, "{like}");
    // The job's own figures, as the test reports them.
    let seconds: f64 = t["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runtime_s"].as_f64().unwrap())
        .sum();
    let syncs = t["sync"]["count"].as_f64().unwrap() / seconds;
    assert!(
        (rate("achieved", "syncs_per_s") - syncs).abs() <= 1e-6 * syncs,
        "{like}"
    );
    assert_eq!(
        rate("achieved", "write_bytes_per_s"),
        t["write"]["bw_bytes_per_s"].as_f64().unwrap()
    );
    assert_eq!(f["sync_lat_ns"], t["sync"]["lat_ns"], "{like}");
    let headroom = (rate("achieved", "write_bytes_per_s") / rate("needed", "write_bytes_per_s"))
        .min(syncs / rate("needed", "syncs_per_s"));
    let said = f["headroom"].as_f64().unwrap();
    assert!(
        (said - headroom).abs() <= 1e-6 * headroom,
        "{said} {headroom}"
    );
    assert_eq!(f["holds"], headroom >= 1.0, "{like}");
}

#[test]
fn like_pid_of_no_process_or_of_one_without_io_exits_2_in_one_line() {
    if !is_root() {
        skip("like-pid test: needs root for eBPF");
        return;
    }
    let bench = tempfile::tempdir_in("/dev/shm").unwrap();
    let target = bench.path().to_str().unwrap();
    let gone = (u32::MAX >> 2).to_string();
    let o = run(&["bench", "disk", target, "--like-pid", &gone, "--no-save"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("there is no process"), "{}", stderr(&o));
    let idle = Process(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = idle.0.id().to_string();
    let o = run(&[
        "bench",
        "disk",
        target,
        "--like-pid",
        &pid,
        "--duration",
        "1s",
        "--no-save",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(last.contains("no reads or writes of process"), "{err}");
    assert!(err.trim().lines().count() <= 2, "{err}");
    assert_empty(bench.path());
}

/// Four threads append to one file (argv[1]) and fsync it, each in a loop, until killed; says
/// "ready" once they run.
const THREADED_WRITER: &str = r#"
import os, sys, threading
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
def work():
    while True:
        os.write(fd, b"t" * 4096)
        os.fsync(fd)
for _ in range(4):
    threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"#;

#[test]
fn threads_flushing_at_once_give_parallel_jobs_and_fsync() {
    if !is_root() {
        skip("derive-job test: needs root for eBPF");
        return;
    }
    // On a disk, where fsync waits for the device: /var/tmp, not a tmpfs.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let writer = started(THREADED_WRITER, &dir.path().join("log"));
    let job = dir.path().join("app.fio");
    let o = derive(writer.0.id(), &job);
    drop(writer);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.lines().any(|l| l == "fsync=1"), "{text}");
    assert!(
        text.contains(" fdatasync, 0 sync_file_range), one per 1 write;"),
        "{text}"
    );
    let numjobs: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("numjobs="))
        .and_then(|n| n.parse().ok())
        .expect("numjobs");
    let threads: u32 = text
        .split("concurrency: observed: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the threads doing file I/O");
    assert_eq!(threads, 4, "{text}");
    assert!((2..=4).contains(&numjobs), "{text}");
}
