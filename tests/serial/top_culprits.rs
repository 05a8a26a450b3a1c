//! `tacho top` names who is responsible: real load (writers on loop devices, CPU burners, a
//! process thrashing under a cgroup memory limit, a writer that exits mid-interval), checked
//! in the JSON and the verdict text of the running binary. Every wait is on a sample that
//! shows the condition, with a generous limit.

use crate::common::cgroup::Cgroup;
use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
#[cfg(feature = "bpf")]
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// Samples are awaited this long: the VM is shared and slow at times.
const LIMIT: Duration = Duration::from_secs(90);

/// A running `tacho top --json`, its lines read as they come; killed on drop.
struct Top {
    child: Child,
    lines: Receiver<String>,
}

impl Top {
    /// `tacho top --json` attributing from cgroup counters and /proc (the path without eBPF,
    /// which these tests are about) with `extra` arguments.
    fn start(extra: &[&str]) -> Top {
        Self::start_with(&[&["--no-ebpf"], extra].concat())
    }

    fn start_with(args: &[&str]) -> Top {
        let mut child = tacho()
            .args(["top", "--json", "--interval", "1s", "--top", "1000"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start tacho top");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Top { child, lines }
    }

    /// The first sample for which `ok` holds; panics with the last sample after [`LIMIT`].
    fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + LIMIT;
        let mut last = Value::Null;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            assert_eq!(v["schema"], "tacho.top.v3");
            if ok(&v) {
                return v;
            }
            last = v;
        }
        panic!(
            "no sample showed {what} within {LIMIT:?}; last findings: {:#}",
            last["findings"]
        );
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Child processes killed (and reaped) on drop, so cgroups can be removed after them.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A shell loop in its own process group, killed whole (its children included) on drop.
#[cfg(feature = "bpf")]
struct Group(Child);

#[cfg(feature = "bpf")]
impl Group {
    fn shell(script: &str) -> Group {
        Group(
            Command::new("sh")
                .args(["-c", script])
                .process_group(0)
                .spawn()
                .unwrap(),
        )
    }
}

#[cfg(feature = "bpf")]
impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: signals the process group this test started.
        unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Python that writes 1 MiB blocks with O_DIRECT over the first `size` bytes of `dev`,
/// round and round (for `seconds`, when given), then prints how much it wrote.
const WRITER: &str = r#"
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
size, limit = int(sys.argv[2]), float(sys.argv[3])
buf = mmap.mmap(-1, 1 << 20)
off, done, start = 0, 0, time.monotonic()
while limit <= 0 or time.monotonic() - start < limit:
    done += os.pwrite(fd, buf, off)
    off = (off + (1 << 20)) % size
print(done, flush=True)
"#;

fn writer(dev: &LoopDev, size: u64, seconds: f64) -> Command {
    let mut c = Command::new("python3");
    c.args([
        "-c",
        WRITER,
        dev.path(),
        &size.to_string(),
        &seconds.to_string(),
    ]);
    c
}

fn devno(dev: &LoopDev) -> String {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(dev.path()).unwrap().rdev();
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

fn findings<'a>(s: &'a Value, subject: &str) -> Vec<&'a Value> {
    s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["subject"] == subject)
        .collect()
}

/// Findings about `device`: its own, or one that names it (an I/O stall names the busiest
/// device and its writers when the device itself is not busy enough for a verdict).
#[cfg(feature = "bpf")]
fn about<'a>(s: &'a Value, device: &str) -> Vec<&'a Value> {
    s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["subject"] == device
                || f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("device {device} ")))
        })
        .collect()
}

fn culprit_pids(f: &Value) -> Vec<u64> {
    f["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["pid"].as_u64())
        .collect()
}

#[test]
fn each_loop_device_names_its_own_writer_and_not_the_other() {
    let _machine = kernel_wide();
    const SIZE: u64 = 64 << 20;
    let test = "culprit_disks";
    let (Some(a), Some(b)) = (LoopDev::new(test, SIZE), LoopDev::new(test, SIZE)) else {
        return;
    };
    let Some(cg) = Cgroup::new(
        "blkio",
        &format!("tacho-itest-{test}-{}", std::process::id()),
    ) else {
        return;
    };
    // A throttle rule far above any speed makes the kernel count this cgroup's bytes on a
    // (v1 counts only on devices with a rule): a's writer is attributed exactly, b's from
    // its open descriptor.
    cg.set(
        "blkio.throttle.write_bps_device",
        &format!("{} {}", devno(&a), 1u64 << 40),
    );
    let top = Top::start(&[]);
    let mut procs = Procs(Vec::new());
    let mut wa = cg.command(&["python3", "-c", WRITER, a.path(), &SIZE.to_string(), "0"]);
    procs.0.push(wa.stdout(Stdio::null()).spawn().unwrap());
    procs
        .0
        .push(writer(&b, SIZE, 0.0).stdout(Stdio::null()).spawn().unwrap());
    let (pa, pb) = (u64::from(procs.0[0].id()), u64::from(procs.0[1].id()));
    let (na, nb) = (a.name(), b.name());
    let s = top.wait_for("both devices naming their writers", |s| {
        let fa = findings(s, &na);
        let fb = findings(s, &nb);
        fa.iter().any(|f| culprit_pids(f).first() == Some(&pa))
            && fb.iter().any(|f| culprit_pids(f).first() == Some(&pb))
    });
    eprintln!("{}", s["verdict"]);
    for f in findings(&s, &na) {
        assert!(!culprit_pids(f).contains(&pb), "{na} blamed on {pb}: {f:#}");
        let c = &f["culprits"][0];
        assert_eq!(c["attribution"]["kind"], "exact", "{c:#}");
        assert!(
            c["attribution"]["source"]
                .as_str()
                .unwrap()
                .contains("blkio")
        );
        assert!(c["share_pct"].as_f64().unwrap() > 50.0, "{c:#}");
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains(&format!("of writes from python3 (pid {pa}")),
            "{f:#}"
        );
    }
    for f in findings(&s, &nb) {
        assert!(!culprit_pids(f).contains(&pa), "{nb} blamed on {pa}: {f:#}");
        let c = &f["culprits"][0];
        // b has no rule of ours, but a loop device reused from an earlier run may still count
        // per cgroup (the kernel keeps throttling on for a queue once a rule was set); then
        // the root cgroup's counters name b's writer exactly, as the one with b open.
        let message = f["message"].as_str().unwrap();
        if c["attribution"]["kind"] == "likely" {
            let reason = c["attribution"]["reason"].as_str().unwrap();
            assert!(reason.contains(b.path()), "{c:#}");
            assert!(
                message.contains(&format!("likely from python3 (pid {pb}")),
                "{f:#}"
            );
        } else {
            let source = c["attribution"]["source"].as_str().unwrap();
            assert!(!source.contains("tacho-itest"), "{c:#}");
            assert!(
                message.contains(&format!("from python3 (pid {pb}")),
                "{f:#}"
            );
        }
    }
    drop(top);
    drop(procs);
}

#[cfg(feature = "bpf")]
#[test]
fn with_ebpf_each_loop_device_names_its_own_writer_exactly() {
    let _machine = kernel_wide();
    const SIZE: u64 = 64 << 20;
    let test = "culprit_ebpf";
    if !is_root() {
        return skip(&format!("{test}: eBPF tracing needs root"));
    }
    let (Some(a), Some(b)) = (LoopDev::new(test, SIZE), LoopDev::new(test, SIZE)) else {
        return;
    };
    // No cgroup rules and no --no-ebpf: as root, top traces every request's submitter.
    let top = Top::start_with(&[]);
    let mut procs = Procs(Vec::new());
    for dev in [&a, &b] {
        procs.0.push(
            writer(dev, SIZE, 0.0)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let (pa, pb) = (u64::from(procs.0[0].id()), u64::from(procs.0[1].id()));
    let (na, nb) = (a.name(), b.name());
    let s = top.wait_for("both devices naming their writers", |s| {
        findings(s, &na)
            .iter()
            .any(|f| culprit_pids(f).first() == Some(&pa))
            && findings(s, &nb)
                .iter()
                .any(|f| culprit_pids(f).first() == Some(&pb))
    });
    for (name, mine, other) in [(&na, pa, pb), (&nb, pb, pa)] {
        for f in findings(&s, name) {
            assert!(
                !culprit_pids(f).contains(&other),
                "{name} blamed on {other}: {f:#}"
            );
            let c = &f["culprits"][0];
            assert_eq!(c["pid"].as_u64(), Some(mine), "{c:#}");
            assert_eq!(c["attribution"]["kind"], "exact", "{c:#}");
            let source = c["attribution"]["source"].as_str().unwrap();
            assert!(source.contains("eBPF"), "{c:#}");
            assert!(c["share_pct"].as_f64().unwrap() > 99.0, "{c:#}");
            // The tracer's own figures for it on the device: its row's IOPS, p99 and queued
            // share, said in the verdict after its share.
            let row = s["block_io_processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["pid"].as_u64() == Some(mine) && r["device"] == name.as_str())
                .unwrap_or_else(|| panic!("no block_io_processes row for {mine}: {s:#}"));
            assert!(c["iops"].as_f64().unwrap() > 0.0, "{c:#}");
            assert_eq!(c["iops"], row["iops"], "{c:#} vs {row:#}");
            assert_eq!(c["lat_p99_ms"], row["lat_p99_ms"], "{c:#} vs {row:#}");
            assert_eq!(c["queued_pct"], row["queued_pct"], "{c:#} vs {row:#}");
            let message = f["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("(pid {mine}")) && message.contains(" IOPS (p99 "),
                "{message}"
            );
        }
    }
}

#[test]
fn a_cpu_burner_is_named_in_the_cpu_verdict_with_its_user_time() {
    let _machine = kernel_wide();
    if !is_root() {
        skip("culprit_cpu: needs root to raise the burners' priority over the shared VM's load");
        return;
    }
    let top = Top::start(&[]);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut procs = Procs(Vec::new());
    for _ in 0..=cpus {
        procs.0.push(
            Command::new("nice")
                .args(["-n", "-10", "python3", "-c", "while True: pass"])
                .spawn()
                .unwrap(),
        );
    }
    let burners: Vec<u64> = procs.0.iter().map(|c| u64::from(c.id())).collect();
    // The burners are one command: named as one culprit (python3: N processes) with the
    // largest under it, or alone when only one of them was busy in the interval.
    let pids = |c: &Value| -> Vec<u64> {
        let mut all: Vec<u64> = c["pid"].as_u64().into_iter().collect();
        if let Some(members) = c["members"].as_array() {
            all.extend(members.iter().filter_map(|m| m["pid"].as_u64()));
        }
        all
    };
    let names_a_burner = |c: &Value| pids(c).iter().any(|p| burners.contains(p));
    let s = top.wait_for("a burner named in cpu_saturated", |s| {
        s["findings"].as_array().unwrap().iter().any(|f| {
            f["code"] == "cpu_saturated"
                && f["culprits"].as_array().unwrap().iter().any(names_a_burner)
        })
    });
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "cpu_saturated")
        .unwrap();
    eprintln!("{}", f["message"]);
    let c = f["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| names_a_burner(c))
        .unwrap();
    assert_eq!(c["comm"], "python3");
    // A pure-Python loop spends its time in user mode.
    assert!(
        c["user_pct"].as_f64().unwrap() > c["system_pct"].as_f64().unwrap(),
        "{c:#}"
    );
    let message = f["message"].as_str().unwrap();
    let named = match (c["pid"].as_u64(), c["processes"].as_u64()) {
        (Some(pid), _) => format!("python3 (pid {pid}"),
        (None, Some(n)) => format!("python3: {n} processes"),
        _ => panic!("neither a process nor a group: {c:#}"),
    };
    assert!(message.contains(&named), "{f:#}");
}

#[test]
fn a_process_thrashing_under_a_memory_limit_is_named_in_the_memory_verdict() {
    let _machine = kernel_wide();
    const SIZE: u64 = 256 << 20;
    let test = "culprit_memory";
    let Some(dev) = LoopDev::new(test, SIZE) else {
        return;
    };
    let Some(cg) = Cgroup::new(
        "memory",
        &format!("tacho-itest-{test}-{}", std::process::id()),
    ) else {
        return;
    };
    cg.set("memory.limit_in_bytes", &(32u64 << 20).to_string());
    let top = Top::start(&[]);
    // Maps the whole device and reads every page, round and round: with 32 MiB allowed for
    // 256 MiB of pages, each pass faults them in from the device again.
    let thrash = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, int(sys.argv[2]), prot=mmap.PROT_READ)
while True:
    for off in range(0, len(m), 4096):
        m[off]
"#;
    let mut procs = Procs(Vec::new());
    procs.0.push(
        cg.command(&["python3", "-c", thrash, dev.path(), &SIZE.to_string()])
            .spawn()
            .unwrap(),
    );
    let pid = u64::from(procs.0[0].id());
    let s = top.wait_for("the thrasher named in a memory verdict", |s| {
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["subject"] == "memory" && culprit_pids(f).contains(&pid))
    });
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["subject"] == "memory" && culprit_pids(f).contains(&pid))
        .unwrap();
    eprintln!("{}", f["message"]);
    let c = f["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .unwrap();
    assert!(c["major_faults_per_s"].as_f64().unwrap() > 0.0, "{c:#}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains(&format!("(pid {pid}")),
        "{f:#}"
    );
    drop(top);
    drop(procs);
}

/// `top --accumulate` once its first sample is in, or `None` (skipped) where exit accounting
/// is unavailable: it needs root, and as another user the note says so.
fn accumulating_with_exits(test: &str) -> Option<Top> {
    let top = Top::start(&["--accumulate"]);
    let first = top.wait_for("a first sample", |_| true);
    let no_exits = first["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("exit between samples"));
    if no_exits {
        skip(&format!(
            "{test}: exit accounting unavailable here (needs root)"
        ));
        return None;
    }
    Some(top)
}

/// The totals' row of `pid`, once a sample shows it exited.
fn exited_in_totals(top: &Top, pid: u64) -> Value {
    let s = top.wait_for("the exited process in the totals", |s| {
        s["accumulated"]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["pid"] == pid && p["exited"] == true)
    });
    s["accumulated"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap()
        .clone()
}

#[test]
fn a_writer_that_exits_mid_interval_keeps_its_bytes() {
    let _machine = kernel_wide();
    const SIZE: u64 = 64 << 20;
    let Some(dev) = LoopDev::new("culprit_exited", SIZE) else {
        return;
    };
    let Some(top) = accumulating_with_exits("culprit_exited") else {
        return;
    };
    let child = writer(&dev, SIZE, 0.3)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = u64::from(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let written: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(written > 0);
    // The writer lived 0.3 s inside one 1 s interval: /proc never showed it to a sample.
    let p = exited_in_totals(&top, pid);
    assert_eq!(p["comm"], "python3");
    // Direct writes are counted when submitted: the record has them all, and no more than
    // the interpreter's own few.
    let w = p["write_bytes"].as_u64().unwrap();
    assert!(w >= written && w < written + (1 << 20), "{w} vs {written}");
}

#[test]
fn a_writer_holding_a_stalling_fuse_file_is_named_without_stalling_top() {
    let _machine = kernel_wide();
    const SIZE: u64 = 64 << 20;
    let test = "culprit_fuse";
    let Some(dev) = LoopDev::new(test, SIZE) else {
        return;
    };
    let backing = tempfile::tempdir().unwrap();
    let stall_dir = tempfile::tempdir().unwrap();
    let stall = stall_dir.path().join("stall");
    let fuse = FuseMount::start(
        backing.path(),
        &["--stall-getattr", stall.to_str().unwrap()],
    );
    let held = fuse.path().join("held");
    // Holds a file of the FUSE mount open for writing, then writes to the loop device.
    let hold = format!(
        "import sys; f = open({:?}, 'w'); print('open', flush=True); \
         code = sys.argv[1]; sys.argv = sys.argv[1:]; exec(code)",
        held.display()
    );
    let mut procs = Procs(Vec::new());
    let mut w = Command::new("python3")
        .args(["-c", &hold, WRITER, dev.path(), &SIZE.to_string(), "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(w.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "open");
    let pid = u64::from(w.id());
    procs.0.push(w);
    // From here every stat on the mount waits (once the kernel's 1 s attribute cache ends),
    // until the guard removes the file, before the mount is unmounted.
    std::fs::write(&stall, "").unwrap();
    let _unstall = Unstall(stall.clone());
    let top = Top::start(&[]);
    let name = dev.name();
    let s = top.wait_for("the writer named while its FUSE file stalls stat", |s| {
        findings(s, &name)
            .iter()
            .any(|f| culprit_pids(f).contains(&pid))
    });
    assert!(s["verdict"].is_string());
}

/// Removes the stall file on drop, so the FUSE mount can be unmounted after a failure too.
struct Unstall(PathBuf);

impl Drop for Unstall {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A shell loop's short-lived `dd`s are one command's writes: the verdict folds them into one
/// culprit ("from dd: N processes, M exited") with the largest under it, instead of naming
/// three equal strangers and leaving the rest unnamed (issue 29).
#[cfg(feature = "bpf")]
#[test]
fn a_shell_loops_short_lived_writers_are_one_culprit() {
    let _machine = kernel_wide();
    const SIZE: u64 = 64 << 20;
    let test = "culprit_fold";
    if !is_root() {
        return skip(&format!("{test}: eBPF tracing needs root"));
    }
    let Some(dev) = LoopDev::new(test, SIZE) else {
        return;
    };
    // The loop in a unit of its own, so the verdict has one to name ("in tacho-fold-….scope").
    let unit = format!("tacho-fold-{}.scope", std::process::id());
    let Some(cgroup) = v2_cgroup(test, &unit) else {
        return;
    };
    let top = Top::start_with(&[]);
    let script = format!(
        "echo $$ > '{}/cgroup.procs' && while :; do dd if=/dev/zero of={} bs=1M count=8 \
         oflag=direct status=none; done",
        cgroup.0.display(),
        dev.path()
    );
    let _loop = Group::shell(&script);
    let name = dev.name();
    let s = top.wait_for("dd's processes folded in the verdict", |s| {
        about(s, &name).iter().any(|f| {
            let c = &f["culprits"][0];
            c["comm"] == "dd" && c["processes"].as_u64().is_some_and(|n| n >= 2)
        })
    });
    let f = about(&s, &name)
        .into_iter()
        .find(|f| f["culprits"][0]["processes"].is_u64())
        .unwrap();
    let c = &f["culprits"][0];
    assert!(c["pid"].is_null(), "{c:#}");
    assert!(c["share_pct"].as_f64().unwrap() > 80.0, "{c:#}");
    let members = c["members"].as_array().unwrap();
    assert!(
        !members.is_empty()
            && members
                .iter()
                .all(|m| m["comm"] == "dd" && m["pid"].is_u64()),
        "{c:#}"
    );
    let n = c["processes"].as_u64().unwrap();
    // Every process's own row is kept up to the bound (256), the rest counted: a dd of 8 MiB
    // into a RAM-backed loop device lasts a few milliseconds, so a second can hold more.
    let left_out = c["members_left_out"].as_u64().unwrap_or(0);
    assert_eq!(members.len() as u64, n.min(256), "{c:#}");
    assert_eq!(members.len() as u64 + left_out, n, "{c:#}");
    let exited = c["exited_processes"].as_u64().unwrap();
    let listed_exited = members.iter().filter(|m| m["exited"] == true).count() as u64;
    assert!(
        listed_exited <= exited && exited <= listed_exited + left_out,
        "{c:#}"
    );
    assert_eq!(c["unit"], unit.as_str(), "{c:#}");
    let message = f["message"].as_str().unwrap();
    // One dd at a time, each ending within the interval: all but at most the running one
    // exited.
    assert!(exited + 1 >= n && exited > 0, "{c:#}");
    assert!(
        message.contains(&format!(
            "from dd: {n} processes, {exited} exited, in {unit}"
        )),
        "{message}"
    );
    // Only one dd at a time: no other row names dd alone.
    let alone = f["culprits"].as_array().unwrap()[1..]
        .iter()
        .filter(|c| c["comm"] == "dd")
        .count();
    assert_eq!(alone, 0, "{f:#}");
}

/// A cgroup v2 directory named `name` (a unit's name), removed on drop; `None` (said) where
/// there is no v2 hierarchy.
#[cfg(feature = "bpf")]
fn v2_cgroup(test: &str, name: &str) -> Option<crate::common::cgroup::Cgroup> {
    if std::path::Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
        crate::common::cgroup::Cgroup::new("unified", name)
    } else if std::path::Path::new("/sys/fs/cgroup/cgroup.procs").exists() {
        // A pure v2 host: the hierarchy is mounted at /sys/fs/cgroup itself.
        crate::common::cgroup::Cgroup::new("", name)
    } else {
        skip(&format!("{test}: no cgroup v2 hierarchy"));
        None
    }
}

/// A loop device through the page cache of a file on the disk: the disk's writes are done by
/// the flusher, but the verdict follows the loop device to its writer (`dd`, through loopN)
/// instead of naming the kernel's worker (issue 29: "vda saturated … 97% of writes from
/// kworker/…-flush").
#[cfg(feature = "bpf")]
#[test]
fn a_disk_written_through_a_loop_device_names_the_loops_writer() {
    let _machine = kernel_wide();
    let test = "culprit_through_loop";
    if !is_root() {
        return skip(&format!("{test}: eBPF tracing needs root"));
    }
    let image = tempfile::Builder::new()
        .suffix(".img")
        .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    image.as_file().set_len(512 << 20).unwrap();
    let Some(dev) = LoopDev::attach(test, image, &[]) else {
        return;
    };
    // The disk holding the image, as top names it (its whole disk).
    let disk = {
        use std::os::unix::fs::MetadataExt;
        let st = std::fs::metadata(dev.image()).unwrap().dev();
        let sys = format!("/sys/dev/block/{}:{}", libc::major(st), libc::minor(st));
        let real = std::fs::canonicalize(&sys).unwrap();
        let name = |p: &std::path::Path| p.file_name().unwrap().to_str().unwrap().to_string();
        if real.join("partition").exists() {
            name(real.parent().unwrap())
        } else {
            name(&real)
        }
    };
    let top = Top::start_with(&[]);
    let script = format!(
        "while :; do dd if=/dev/zero of={} bs=1M count=256 oflag=direct conv=fdatasync \
         status=none; done",
        dev.path()
    );
    let _writer = Group::shell(&script);
    let through = format!("serves {}", dev.name());
    let s = top.wait_for("the disk's writes followed through the loop device", |s| {
        about(s, &disk).iter().any(|f| {
            f["culprits"].as_array().unwrap().iter().any(|c| {
                c["comm"] == "dd"
                    && c["attribution"]["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains(&through))
            })
        })
    });
    for f in about(&s, &disk) {
        for c in f["culprits"].as_array().unwrap() {
            let comm = c["comm"].as_str().unwrap();
            assert!(
                !(comm.contains("flush") || comm.contains("writeback") || comm.contains("-loop")),
                "a kernel worker is still blamed: {f:#}"
            );
        }
    }
}

/// System time above user time points at `tacho profile`, which names the kernel functions
/// behind it, not at a tool the admin may not have (perf top).
#[test]
fn high_system_time_points_at_tacho_profile() {
    let _machine = kernel_wide();
    if !is_root() {
        skip(
            "cpu_system_high: needs root to raise the burners' priority over the shared VM's load",
        );
        return;
    }
    let top = Top::start(&[]);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut procs = Procs(Vec::new());
    for _ in 0..=cpus {
        // Reading zeros in 1 MiB blocks: nearly all of dd's time is the kernel clearing them.
        procs.0.push(
            Command::new("nice")
                .args(["-n", "-10", "dd", "if=/dev/zero", "of=/dev/null", "bs=1M"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let s = top.wait_for("cpu_system_high", |s| {
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "cpu_system_high")
    });
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "cpu_system_high")
        .unwrap();
    let message = f["message"].as_str().unwrap();
    if !message.contains("compaction stalls") {
        assert!(message.contains("tacho profile"), "{message}");
        assert!(!message.contains("perf top"), "{message}");
    }
}

/// A process that exits between samples is known only by its exit record: its name, when not
/// UTF-8, keeps its bytes there too (the CI run that showed `tacho\u{fffd}\u{fffd} (pid N,
/// exited)` in a verdict, while the live processes beside it showed `\xff`).
#[test]
fn a_process_that_exits_mid_interval_keeps_a_name_that_is_not_utf8() {
    let _machine = kernel_wide();
    let Some(top) = accumulating_with_exits("culprit_exited_name") else {
        return;
    };
    // Renames itself, burns 0.3 s of CPU and exits, inside one 1 s interval.
    let script = "import ctypes, time\n\
                  ctypes.CDLL(None).prctl(15, b'gone\\xff\\xfe', 0, 0, 0)\n\
                  end = time.monotonic() + 0.3\n\
                  while time.monotonic() < end: pass\n";
    let child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot start python3");
    let pid = u64::from(child.id());
    assert!(child.wait_with_output().unwrap().status.success());
    let p = exited_in_totals(&top, pid);
    assert_eq!(p["comm_hex"], "676f6e65fffe", "{p:#}");
    assert!(!p["comm"].as_str().unwrap().is_empty(), "{p:#}");
}
