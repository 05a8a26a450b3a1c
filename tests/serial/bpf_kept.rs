//! The block tracer kept loaded between runs (`src/bpf/pin.rs`), end to end, in a mount
//! namespace of the test's own with a bpffs at /sys/fs/bpf, as systemd mounts one at boot:
//! the first run pins, the next reuses without loading anything and attributes I/O as well.
//! Here, not in `tests/it`: exact attribution wants no other test's loop device busy beside
//! it, and its writers would disturb the tests there that read every device.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::MutexGuard;
use std::time::Duration;

use crate::common::{
    LoopDev, SpawnPiped, TOP_LATENCY, assert_attributed, direct_writer, have_tool, is_root,
    kernel_wide, skip, stderr, wait_output,
};

/// A process holding a private mount namespace with a bpffs at /sys/fs/bpf; the namespace
/// and its pins go when it is killed. Holds the kernel-wide lock meanwhile.
struct Namespace {
    holder: Child,
    _lock: MutexGuard<'static, ()>,
}

impl Namespace {
    fn new(test: &str) -> Option<Namespace> {
        let lock = kernel_wide();
        if !is_root() || !have_tool("unshare") || !have_tool("nsenter") {
            skip(&format!("{test}: needs root, unshare and nsenter"));
            return None;
        }
        let mut holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t bpf bpf /sys/fs/bpf && echo ready && exec sleep 300")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("unshare runs");
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "ready",
            "mounting a bpffs in a namespace failed"
        );
        Some(Namespace {
            holder,
            _lock: lock,
        })
    }

    /// `program` run in the namespace to its end (at most a minute), output captured.
    fn run(&self, program: &str, prepare: impl FnOnce(&mut Command)) -> Output {
        let mut cmd = self.command(program);
        prepare(&mut cmd);
        wait_output(cmd.spawn_piped(), Duration::from_secs(60))
    }

    /// `program` run in the namespace.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(self.holder.id().to_string())
            .args(["-m", "--"])
            .arg(program)
            .stdin(Stdio::null());
        cmd
    }

    /// The entries of /sys/fs/bpf/tacho in the namespace (none when it is missing).
    fn sets(&self) -> Vec<String> {
        let out = self
            .command("sh")
            .args(["-c", "ls /sys/fs/bpf/tacho 2>/dev/null || true"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

#[test]
fn a_second_run_reuses_the_kept_tracer_and_attributes_as_the_first() {
    let test = "a_second_run_reuses_the_kept_tracer_and_attributes_as_the_first";
    if !have_tool("strace") {
        skip(&format!("{test}: strace is not installed"));
        return;
    }
    let Some(ns) = Namespace::new(test) else {
        return;
    };
    let (Some(a), Some(b)) = (LoopDev::new(test, 64 << 20), LoopDev::new(test, 64 << 20)) else {
        return;
    };
    let tacho = env!("CARGO_BIN_EXE_tacho");

    let writer = direct_writer(a.path());
    let first = ns.run(tacho, |c| {
        c.args(TOP_LATENCY);
    });
    assert_attributed(&first, &a, writer.0.id(), "first run");
    drop(writer);
    let sets = ns.sets();
    assert!(
        sets.len() == 1 && sets[0].starts_with("block-"),
        "the first run kept one set: {sets:?}"
    );

    // The second run, on another device, under strace: nothing is loaded, only reopened.
    let trace = tempfile::NamedTempFile::new().unwrap();
    let writer = direct_writer(b.path());
    let second = ns.run("strace", |c| {
        c.args(["-f", "-e", "trace=bpf", "-o"])
            .arg(trace.path())
            .arg(tacho)
            .args(TOP_LATENCY);
    });
    assert_attributed(&second, &b, writer.0.id(), "second run");
    let calls = std::fs::read_to_string(trace.path()).unwrap();
    assert!(
        !calls.contains("BPF_PROG_LOAD"),
        "the second run loaded programs:\n{calls}"
    );
    assert!(
        calls.contains("BPF_OBJ_GET") && calls.contains("BPF_RAW_TRACEPOINT_OPEN"),
        "the second run did not reopen and attach the kept set:\n{calls}"
    );
    assert_eq!(ns.sets(), sets, "the second run pinned another set");
}

#[test]
fn tacho_bpf_pin_0_keeps_nothing() {
    let Some(ns) = Namespace::new("tacho_bpf_pin_0_keeps_nothing") else {
        return;
    };
    let out = ns.run(env!("CARGO_BIN_EXE_tacho"), |c| {
        c.env("TACHO_BPF_PIN", "0")
            .args(["top", "--json", "--interval", "100ms", "--count", "1"]);
    });
    // 1 says a sample had a warning (the I/O pressure other tests leave, say).
    assert!(
        matches!(out.status.code(), Some(0 | 1)) && out.stdout.starts_with(b"{"),
        "tacho failed ({}): {}",
        out.status,
        stderr(&out)
    );
    assert_eq!(ns.sets(), Vec::<String>::new(), "a set was kept");
}

#[test]
fn a_recorder_loads_its_tracer_for_itself_and_keeps_nothing() {
    let Some(ns) = Namespace::new("a_recorder_loads_its_tracer_for_itself_and_keeps_nothing")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = ns.run(env!("CARGO_BIN_EXE_tacho"), |c| {
        c.args(["record", "--interval", "100ms", "--count", "2", "--dir"])
            .arg(dir.path());
    });
    assert!(
        out.status.success(),
        "tacho record failed: {}",
        stderr(&out)
    );
    // A recorder runs for days: holding the kept set would make every `top` load its own.
    assert_eq!(ns.sets(), Vec::<String>::new(), "the recorder kept a set");
}
