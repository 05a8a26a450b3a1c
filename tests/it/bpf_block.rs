//! eBPF block I/O attribution (`tacho top --latency`): each writer on its own device, and the
//! fallback with a note when the kernel refuses BPF.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    Killed, LoopDev, SpawnPiped, TOP_LATENCY, assert_attributed, direct_writer, is_root, run, skip,
    stderr, stdout, tacho, wait_output, writes_on,
};

/// One sample of `top --batch --latency` run under `setpriv` with these options.
fn latency_under_setpriv(options: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(options)
        .arg(env!("CARGO_BIN_EXE_tacho"))
        .args([
            "top",
            "--batch",
            "--latency",
            "--interval",
            "200ms",
            "--count",
            "1",
        ])
        .stdin(Stdio::null());
    wait_output(cmd.spawn_piped(), Duration::from_secs(60))
}

#[test]
fn two_writers_on_two_loop_devices_are_each_attributed_to_their_own() {
    let test = "two_writers_on_two_loop_devices_are_each_attributed_to_their_own";
    let (Some(a), Some(b)) = (LoopDev::new(test, 64 << 20), LoopDev::new(test, 64 << 20)) else {
        return;
    };
    let (wa, wb) = (direct_writer(a.path()), direct_writer(b.path()));
    let out = wait_output(
        tacho().args(TOP_LATENCY).spawn_piped(),
        Duration::from_secs(60),
    );
    let doc = assert_attributed(&out, &a, wa.0.id(), "a");
    assert_attributed(&out, &b, wb.0.id(), "b");
    for (dev, pid, other) in [(&a, wa.0.id(), &b), (&b, wb.0.id(), &a)] {
        let elsewhere: u64 = doc["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["op"] == "write" && p["pid"] == pid)
            .filter(|p| p["device"] == other.name().as_str())
            .map(|p| p["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(
            elsewhere,
            0,
            "writer {pid} of {} attributed to {}: {doc}",
            dev.name(),
            other.name()
        );
    }
}

#[test]
fn without_bpf_top_latency_falls_back_with_a_note() {
    if !is_root() {
        skip("without_bpf_top_latency_falls_back_with_a_note: needs root to drop to nobody");
        return;
    }
    let out = latency_under_setpriv(&["--reuid=nobody", "--regid=nogroup", "--clear-groups"]);
    let err = stderr(&out);
    assert!(err.contains("note: eBPF tracing needs root"), "{err}");
    assert_eq!(err.matches("eBPF").count(), 1, "the note once: {err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "no /proc figures: {err}"
    );
}

/// Writes 16 MiB through the page cache of the device, without syncing, then waits to be killed.
const BUFFERED: &str = r#"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
for _ in range(256):
    os.write(fd, b"x" * 65536)
print("written", flush=True)
time.sleep(600)
"#;

#[test]
fn a_buffered_writer_flushed_by_a_kworker_is_attributed_to_the_writer() {
    let test = "a_buffered_writer_flushed_by_a_kworker_is_attributed_to_the_writer";
    let Some(dev) = LoopDev::new(test, 64 << 20) else {
        return;
    };
    // The kernel's flusher writes dirty pages back after vm.dirty_expire_centisecs (30 s by
    // default, machine-wide, so not changed here): trace one interval longer than that.
    let expire_s: u64 = std::fs::read_to_string("/proc/sys/vm/dirty_expire_centisecs")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(30, |c| c.div_ceil(100));
    let interval = format!("{}s", expire_s + 12);
    let tracer = tacho()
        .args([
            "top",
            "--json",
            "--latency",
            "--interval",
            &interval,
            "--count",
            "1",
        ])
        .spawn_piped();
    // Give the tracer time to attach before the pages are dirtied (it attaches in well under a
    // second; the interval is long, so this start-up margin costs nothing in accuracy).
    std::thread::sleep(Duration::from_secs(2));
    let mut w = Killed(
        Command::new("python3")
            .args(["-c", BUFFERED, dev.path()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot start python3"),
    );
    let pid = w.0.id();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(w.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "written");
    let out = wait_output(tracer, Duration::from_secs(expire_s + 60));
    assert!(out.status.success(), "tacho failed: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
    let name = dev.name();
    let (by_writer, total) = writes_on(&doc, &name, pid);
    assert!(
        total >= 16 << 20,
        "{name}: only {total} bytes written back: {text}"
    );
    assert!(
        by_writer as f64 >= 0.99 * total as f64,
        "{name}: writer {pid} has {by_writer} of {total} bytes: {text}"
    );
}

#[test]
fn root_without_capabilities_is_refused_bpf_and_falls_back_with_a_note() {
    if !is_root() {
        skip("root_without_capabilities_is_refused_bpf_and_falls_back_with_a_note: needs root");
        return;
    }
    // Root with an empty bounding set: the probe passes (uid 0), the kernel refuses bpf().
    let out = latency_under_setpriv(&["--bounding-set=-all"]);
    let err = stderr(&out);
    assert!(err.contains("note: eBPF tracing refused"), "{err}");
    assert!(err.contains("bpf() not permitted"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "no /proc figures: {err}"
    );
}

/// `top --latency` leads every interval with the verdict `top` gives, in text (its first line)
/// and in JSON (`verdict`).
#[test]
fn top_latency_leads_with_the_verdict() {
    if !is_root() {
        skip("top_latency_leads_with_the_verdict: needs root for eBPF");
        return;
    }
    let each = ["top", "--latency", "--count", "2", "--interval", "300ms"];
    let mut batch = each.to_vec();
    batch.push("--batch");
    let o = run(&batch);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    let heads: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("Block latency"))
        .collect();
    assert_eq!(heads.len(), 2, "{text}");
    for i in heads {
        // The verdict is top's own line, whatever it says (a finding, or "no bottleneck").
        let verdict = lines[..i].last().copied().unwrap_or("");
        assert!(
            !verdict.trim().is_empty() && !verdict.starts_with(' '),
            "no verdict before the figures:\n{text}"
        );
    }
    let mut json = each.to_vec();
    json.push("--json");
    let o = run(&json);
    for line in stdout(&o).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            v["verdict"].as_str().is_some_and(|s| !s.is_empty()),
            "{line}"
        );
    }
}
