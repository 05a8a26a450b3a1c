//! `tacho files --bytes` (eBPF, root): bytes per process and file exactly as written, an
//! fdatasync loop's sync count and latency with the `bench disk` test that mimics it, and the
//! fallback with a note when the kernel refuses bpf().

use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Writes 100, 200 and 300 writes of 1000 bytes to a, b and c, then 50 times 2300 bytes each
/// followed by fdatasync to wal; keeps the files open a moment so their paths can be seen.
const WRITER: &str = r#"
import os, sys, time
d = sys.argv[1]
fs = {n: open(os.path.join(d, n), "wb", buffering=0) for n in ("a", "b", "c", "wal")}
for n, k in (("a", 100), ("b", 200), ("c", 300)):
    for _ in range(k):
        fs[n].write(b"x" * 1000)
for _ in range(50):
    fs["wal"].write(b"w" * 2300)
    os.fdatasync(fs["wal"].fileno())
time.sleep(1.5)
print(os.getpid())
"#;

/// Runs `tacho files --bytes --json` over `dir` while `writer` runs; returns the document
/// and the writer's pid.
fn count(dir: &Path, wrap: Option<&str>) -> (Value, String, u32) {
    let tacho = env!("CARGO_BIN_EXE_tacho");
    let mut cmd = match wrap {
        Some(helper) => {
            let mut c = Command::new("python3");
            c.arg(helper).arg(tacho);
            c
        }
        None => Command::new(tacho),
    };
    cmd.args(["files", "--bytes", "--json", "--duration", "4", "--path"])
        .arg(dir)
        .stdin(Stdio::null());
    let mut child = cmd.spawn_piped();
    // Counting has begun once tacho says so (or it fell back).
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        writer.status.success(),
        "{}",
        String::from_utf8_lossy(&writer.stderr)
    );
    let pid: u32 = String::from_utf8_lossy(&writer.stdout)
        .trim()
        .parse()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = serde_json::from_str(&text).unwrap_or(Value::Null);
    (doc, first + &rest, pid)
}

fn file<'a>(doc: &'a Value, dir: &Path, name: &str, pid: u32) -> &'a Value {
    let path = dir.join(name);
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pid"] == pid && f["path"].as_str() == path.to_str())
        .unwrap_or_else(|| panic!("no {name} of pid {pid} in {doc}"))
}

#[test]
fn bytes_per_file_and_sync_latency_are_counted_exactly() {
    if !is_root() {
        skip("bytes_per_file_and_sync_latency_are_counted_exactly: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (doc, err, pid) = count(dir.path(), None);
    assert_eq!(doc["schema"], "tacho.files.bytes.v1", "{err}");
    for (name, writes) in [("a", 100u64), ("b", 200), ("c", 300)] {
        let f = file(&doc, dir.path(), name, pid);
        assert_eq!(f["write_bytes"], writes * 1000, "{name}: {f}");
        assert_eq!(f["writes"], writes, "{name}: {f}");
        assert_eq!(f["read_bytes"], 0, "{name}: {f}");
        assert_eq!(f["syncs"], 0, "{name}: {f}");
        assert_eq!(f["comm"], "python3");
    }
    let wal = file(&doc, dir.path(), "wal", pid);
    assert_eq!(wal["syncs"], 50, "{wal}");
    assert_eq!(wal["write_bytes"], 50 * 2300, "{wal}");
    assert_eq!(wal["write_min_bytes"], 2300);
    assert_eq!(wal["write_max_bytes"], 2300);
    let p50 = wal["sync_p50_ns"].as_f64().unwrap();
    let p99 = wal["sync_p99_ns"].as_f64().unwrap();
    assert!(p50 > 0.0 && p99 >= p50, "{wal}");
    assert_eq!(wal["suggestion"], "tacho bench disk --suite etcd");
}

#[test]
fn without_bpf_files_bytes_falls_back_with_a_note() {
    if !is_root() {
        skip("without_bpf_files_bytes_falls_back_with_a_note: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let helper = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/nobpf.py");
    let (doc, err, _) = count(dir.path(), Some(helper));
    assert!(err.contains("note: eBPF tracing refused"), "{err}");
    assert!(err.contains("without byte counts"), "{err}");
    // The watch without bytes still ran: fanotify events as JSON lines, not the bytes document.
    assert!(
        doc.is_null() || doc["schema"] != "tacho.files.bytes.v1",
        "{doc}"
    );
    assert!(err.contains("watching"), "{err}");
}

/// tacho with `args`, once its first line on stderr (which must hold `says`) shows it has begun.
fn started(args: &[&str], says: &str) -> std::process::Child {
    let mut child = tacho()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains(says), "{first}");
    // The rest is drained so tacho's last lines on stderr do not meet a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

/// Writes 1000 bytes 100 times to a and 50000 bytes once to b, closing each at once (faster
/// than tacho looks at /proc/PID/fd), then reads a back.
const QUICK_WRITER: &str = r#"
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "a"), "wb", buffering=0) as f:
    for _ in range(100):
        f.write(b"x" * 1000)
with open(os.path.join(d, "b"), "wb", buffering=0) as f:
    f.write(b"y" * 50000)
with open(os.path.join(d, "a"), "rb", buffering=0) as f:
    assert len(f.read()) == 100000
"#;

/// `tacho files MODE --json` over `dir` for 3 s while QUICK_WRITER runs there; its document.
fn under_quick_writer(mode: &str, says: &str, dir: &Path) -> Value {
    let path = dir.to_str().unwrap();
    let args = ["files", mode, "--json", "--duration", "3", "--path", path];
    let child = started(&args, says);
    let writer = Command::new("python3")
        .args(["-c", QUICK_WRITER])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        writer.status.success(),
        "{}",
        String::from_utf8_lossy(&writer.stderr)
    );
    let out = wait_output(child, Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_summary_counts_bytes_per_file_beside_its_events() {
    let test = "the_summary_counts_bytes_per_file_beside_its_events";
    if !is_root() {
        return skip(&format!("{test}: needs root"));
    }
    let dir = tempfile::tempdir().unwrap();
    let trailer = under_quick_writer("--summary", "watching", dir.path());
    let files = trailer["summary"]["files"].as_array().unwrap();
    let row = |name: &str| {
        let path = dir.path().join(name);
        files
            .iter()
            .find(|f| f["path"].as_str() == path.to_str())
            .unwrap_or_else(|| panic!("no {name} in {trailer}"))
    };
    // Named from the watch's events though each was closed within milliseconds.
    assert_eq!(row("a")["write_bytes"], 100_000, "{trailer}");
    assert_eq!(row("a")["read_bytes"], 100_000, "{trailer}");
    assert_eq!(row("b")["write_bytes"], 50_000, "{trailer}");
    assert_eq!(row("b")["read_bytes"], 0, "{trailer}");
    let python = trailer["summary"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == "python3")
        .unwrap_or_else(|| panic!("no python3 in {trailer}"));
    assert_eq!(python["write_bytes"], 150_000, "{trailer}");
}

#[test]
fn reads_and_writes_through_io_uring_are_counted() {
    let test = "reads_and_writes_through_io_uring_are_counted";
    if !is_root() {
        return skip(&format!("{test}: needs root"));
    }
    if !have_tool("fio") {
        return skip(&format!("{test}: fio is not installed"));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = tacho()
        .args([
            "files",
            "--bytes",
            "--json",
            "--duration",
            "4",
            "--comm",
            "fio",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("counting bytes"), "{first}");
    // 8 MiB written then read in 4 KiB requests through io_uring: no read or write syscall
    // carries the data.
    for rw in ["write", "read"] {
        let fio = Command::new("fio")
            .args([
                "--name=uring",
                "--bs=4k",
                "--size=8m",
                "--ioengine=io_uring",
                "--iodepth=8",
            ])
            .arg(format!("--rw={rw}"))
            .arg(format!("--directory={}", dir.path().display()))
            .output()
            .unwrap();
        assert!(
            fio.status.success(),
            "{}",
            String::from_utf8_lossy(&fio.stderr)
        );
    }
    let out = wait_output(child, Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["files"].as_array().unwrap();
    let wrote = rows
        .iter()
        .find(|f| f["write_bytes"] == 8 << 20)
        .unwrap_or_else(|| panic!("no file with 8 MiB written in {doc}"));
    assert_eq!(wrote["writes"], 2048, "{wrote}");
    let read = rows
        .iter()
        .find(|f| f["read_bytes"] == 8 << 20 && f["inode"] == wrote["inode"])
        .unwrap_or_else(|| panic!("the same file's 8 MiB read back is missing in {doc}"));
    assert_eq!(read["reads"], 2048, "{read}");
}

#[test]
fn bytes_of_files_closed_at_once_are_named_from_the_watch() {
    let test = "bytes_of_files_closed_at_once_are_named_from_the_watch";
    if !is_root() {
        return skip(&format!("{test}: needs root"));
    }
    let dir = tempfile::tempdir().unwrap();
    let doc = under_quick_writer("--bytes", "counting bytes", dir.path());
    let sum = |name: &str, key: &str| -> u64 {
        let path = dir.path().join(name);
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"].as_str() == path.to_str())
            .map(|f| f[key].as_u64().unwrap())
            .sum()
    };
    // Each file was opened, written and closed within milliseconds, between two looks at
    // the writer's descriptors: only the watch's events can name it.
    assert_eq!(sum("a", "write_bytes"), 100_000, "{doc}");
    assert_eq!(sum("a", "read_bytes"), 100_000, "{doc}");
    assert_eq!(sum("b", "write_bytes"), 50_000, "{doc}");
}

/// Writes 5000 bytes to a file, closes and deletes it, then writes 777 bytes to a new file
/// that received the same inode number (tried until the filesystem reuses one), and keeps
/// that one open a moment; prints the pid, the two names and the inode.
const REUSER: &str = r#"
import os, sys, time
d = sys.argv[1]
for i in range(50):
    a, b = os.path.join(d, "old%d" % i), os.path.join(d, "new%d" % i)
    fd = os.open(a, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"x" * 5000)
    os.close(fd)
    ino = os.stat(a).st_ino
    os.unlink(a)
    fd = os.open(b, os.O_CREAT | os.O_WRONLY, 0o644)
    if os.fstat(fd).st_ino == ino:
        os.write(fd, b"y" * 777)
        time.sleep(1.5)
        print(os.getpid(), "old%d" % i, "new%d" % i, ino)
        sys.exit(0)
    os.close(fd)
sys.exit("the filesystem never reused an inode number")
"#;

/// A deleted file's bytes are never given to the file that reuses its inode number, and the
/// deleted one is never named after it (issue 29: 5,777 bytes in 2 writes shown for a file that
/// had 777).
#[test]
fn a_reused_inode_number_keeps_two_files_apart() {
    if !is_root() {
        skip("a_reused_inode_number: files --bytes needs root (eBPF)");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let args = [
        "files",
        "--bytes",
        "--json",
        "--duration",
        "4",
        "--comm",
        "python3",
    ];
    let child = started(&args, "counting bytes");
    let writer = Command::new("python3")
        .args(["-c", REUSER])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        writer.status.success(),
        "{}",
        String::from_utf8_lossy(&writer.stderr)
    );
    let said = String::from_utf8_lossy(&writer.stdout).into_owned();
    let words: Vec<&str> = said.split_whitespace().collect();
    let (pid, old, new): (u64, &str, &str) = (words[0].parse().unwrap(), words[1], words[2]);
    let ino: u64 = words[3].parse().unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<&Value> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["pid"] == pid && f["inode"] == ino)
        .collect();
    let new_path = dir.path().join(new);
    let new_row = rows
        .iter()
        .find(|f| f["path"].as_str() == new_path.to_str())
        .unwrap_or_else(|| panic!("no row for {new}: {rows:?}"));
    assert_eq!(
        (new_row["write_bytes"].as_u64(), new_row["writes"].as_u64()),
        (Some(777), Some(1))
    );
    let old_row = rows
        .iter()
        .find(|f| f["name"] == old)
        .unwrap_or_else(|| panic!("no row for the deleted {old}: {rows:?}"));
    assert_eq!(old_row["write_bytes"].as_u64(), Some(5000), "{old_row}");
    // Never another file's name: no path, or its own (marked deleted).
    if let Some(p) = old_row["path"].as_str() {
        assert!(p.contains(old), "{old} named {p}");
    }
    assert_ne!(old_row["generation"], new_row["generation"]);
}

/// fio's libaio engine (as InnoDB and other databases write) submits with io_submit, which
/// passes no read or write syscall: its bytes are counted at submission, for its file, as fio
/// reports them, by `--bytes` and by `--summary` (issue 29: `--bytes` did not list fio at
/// all), and no other file is given any of them. fio submits at most `iodepth` (8) iocbs per
/// io_submit here, within the 128 the tracer reads of one call.
#[test]
fn libaio_reads_and_writes_are_counted_for_their_file() {
    if !is_root() {
        skip("libaio_reads_and_writes: files --bytes needs root (eBPF)");
        return;
    }
    if !have_tool("fio") {
        skip("libaio_reads_and_writes: fio is not installed");
        return;
    }
    for (mode, says) in [("--bytes", "counting bytes"), ("--summary", "watching")] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let (doc, job) = under_libaio_fio(mode, says, dir.path(), &["--iodepth=8"]);
        let rows = match mode {
            "--bytes" => &doc["files"],
            _ => &doc["summary"]["files"],
        }
        .as_array()
        .unwrap_or_else(|| panic!("{mode}: no files in {doc}"));
        let file = dir.path().join("fiofile");
        let is_fios = |f: &&Value| {
            f["path"].as_str() == file.to_str() && (mode == "--summary" || f["comm"] == "fio")
        };
        let row = rows
            .iter()
            .find(is_fios)
            .unwrap_or_else(|| panic!("{mode}: fio's libaio file is not counted: {doc}"));
        // Laying the file out is written by plain write() calls, before the timed jobs.
        let written = row["write_bytes"].as_u64().unwrap();
        let read = row["read_bytes"].as_u64().unwrap();
        assert_eq!(
            read,
            job["read"]["io_bytes"].as_u64().unwrap(),
            "{mode}: {row}"
        );
        assert!(
            written >= job["write"]["io_bytes"].as_u64().unwrap(),
            "{mode}: {written} written < fio's {}: {row}",
            job["write"]["io_bytes"]
        );
        // Only fio touched the directory, and only its one file: no other row has bytes.
        let others: Vec<&Value> = rows
            .iter()
            .filter(|f| !is_fios(f))
            .filter(|f| {
                f["read_bytes"].as_u64().unwrap_or(0) + f["write_bytes"].as_u64().unwrap_or(0) > 0
            })
            .collect();
        assert!(
            others.is_empty(),
            "{mode}: fio's bytes went elsewhere: {others:?}"
        );
    }
}

/// An io_submit of more requests than the tracer reads of one call (128) is not counted in
/// silence: each request is either in fio's row or in the process's "not counted" figure, which
/// the text report prints as a line naming fio (issue 29, item 7).
#[test]
fn libaio_submits_past_the_bound_are_said_not_counted() {
    if !is_root() || !have_tool("fio") {
        skip("libaio_submits_past_the_bound: needs root (eBPF) and fio");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Laid out beforehand, so every request fio makes goes through io_submit.
    let file = std::fs::File::create(dir.path().join("fiofile")).unwrap();
    file.set_len(32 << 20).unwrap();
    let batch = ["--iodepth=256", "--iodepth_batch_submit=256"];
    let (doc, job) = under_libaio_fio("--bytes", "counting bytes", dir.path(), &batch);
    let fios = |v: &&Value| v["comm"] == "fio";
    let row = doc["files"].as_array().unwrap().iter().find(fios);
    let row = row.unwrap_or_else(|| panic!("fio is not counted: {doc}"));
    let short = doc["uncounted"].as_array().unwrap().iter().find(fios);
    let short = short.unwrap_or_else(|| panic!("fio's uncounted requests are not said: {doc}"));
    assert_eq!(short["pid"], row["pid"], "{doc}");
    let not_counted = short["requests_not_counted"].as_u64().unwrap();
    assert!(not_counted > 0, "{short}");
    let counted = row["reads"].as_u64().unwrap() + row["writes"].as_u64().unwrap();
    let issued =
        job["read"]["total_ios"].as_u64().unwrap() + job["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(counted + not_counted, issued, "{row} {short}");
    // The text report says it in one line, with fio's name.
    let args = [
        "files",
        "--bytes",
        "--duration",
        "3",
        "--path",
        dir.path().to_str().unwrap(),
    ];
    let child = started(&args, "counting bytes");
    libaio_fio(dir.path(), &batch);
    let out = wait_output(child, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("not counted: fio (pid ")
            && l.contains("an io_submit of more than 128")),
        "{text}"
    );
}

/// `tacho files MODE --json --path DIR` while fio's libaio engine, with `extra` arguments,
/// reads and writes `DIR/fiofile`: tacho's document and fio's job.
fn under_libaio_fio(mode: &str, says: &str, dir: &Path, extra: &[&str]) -> (Value, Value) {
    let path = dir.to_str().unwrap();
    let args = ["files", mode, "--json", "--duration", "6", "--path", path];
    let child = started(&args, says);
    let job = libaio_fio(dir, extra);
    let out = wait_output(child, Duration::from_secs(60));
    assert!(out.status.success(), "{mode}: {out:?}");
    (serde_json::from_slice(&out.stdout).unwrap(), job)
}

/// fio's libaio engine reading and writing `dir/fiofile` (16 KiB, direct), with `extra`
/// arguments: its job's report.
fn libaio_fio(dir: &Path, extra: &[&str]) -> Value {
    let fio = Command::new("fio")
        .arg(format!("--filename={}", dir.join("fiofile").display()))
        .args(["--name=aio", "--ioengine=libaio", "--direct=1"])
        .args(["--rw=randrw", "--bs=16k", "--size=32M", "--io_size=64M"])
        .args(extra)
        .arg("--output-format=json")
        .output()
        .unwrap();
    assert!(
        fio.status.success(),
        "{}",
        String::from_utf8_lossy(&fio.stderr)
    );
    let report: Value = serde_json::from_slice(&fio.stdout).unwrap();
    report["jobs"][0].clone()
}

/// `files --bytes` lists the `--top N` busiest pairs (20 by default, 0 all) and says how many
/// more there are; tacho's own reads (of /proc, of its BPF objects) are never among them.
#[test]
fn bytes_lists_the_top_pairs_and_never_tacho_itself() {
    if !is_root() {
        skip("bytes_lists_the_top_pairs_and_never_tacho_itself: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tacho"))
        .args(["files", "--bytes", "--duration", "4", "--top", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let me = child.id();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(writer.status.success());
    let out = wait_output(child, Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{first}{text}");
    let rows: Vec<&str> = text
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with(' '))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        text.lines()
            .any(|l| l.ends_with("more; --top 0 lists them all)")),
        "{text}"
    );
    let pids: Vec<&str> = rows
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(!pids.contains(&me.to_string().as_str()), "{text}");
}
