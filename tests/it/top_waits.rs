//! `top --waits` (eBPF, root): the traced half of `top`'s wait findings, for programs built
//! by `profile_offcpu`'s tests. The findings from counters alone are in `tests/serial`, where
//! no other test's load can outrank them.

/// `top --waits` (eBPF, root): who waits on what, named by the `waiting` finding and listed in
/// the `waits` section, for programs built here (those of `profile_offcpu`'s tests).
#[cfg(all(feature = "profile", feature = "bpf"))]
mod traced {
    use crate::common::netns::NetnsPair;
    use crate::common::*;
    use crate::profile_offcpu::{CLIENT, FSYNCER, Program, build, slow_server, slow_server_at};
    use serde_json::Value;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    /// Runs `top --json --waits` until a line satisfies `ok` (then stops it) or `count`
    /// samples went by; returns that line, or `None` with every line printed.
    fn waits_line(count: &str, ok: impl Fn(&Value) -> bool) -> Option<Value> {
        let mut top = Killed(
            tacho()
                .args([
                    "top",
                    "--json",
                    "--waits",
                    "--interval",
                    "1s",
                    "--count",
                    count,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot start tacho top"),
        );
        let out = BufReader::new(top.0.stdout.take().unwrap());
        let mut seen = Vec::new();
        for line in out.lines().map_while(Result::ok) {
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            if ok(&v) {
                return Some(v);
            }
            seen.push(line);
        }
        eprintln!("{}", seen.join("\n"));
        None
    }

    /// The `waiting` finding whose culprit is `pid` (or a folded culprit's member).
    fn waiting_for(v: &Value, pid: u32) -> Option<Value> {
        let names = |c: &Value| {
            c["pid"] == pid
                || c["members"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["pid"] == pid))
        };
        v["findings"]
            .as_array()?
            .iter()
            .find(|f| {
                f["code"] == "waiting"
                    && f["culprits"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(names))
            })
            .cloned()
    }

    /// `pid`'s row in the `waits` section.
    fn waits_row(v: &Value, pid: u32) -> Option<Value> {
        v["waits"]["processes"]
            .as_array()?
            .iter()
            .find(|p| p["pid"] == pid)
            .cloned()
    }

    fn root_or_skip(test: &str) -> bool {
        if !is_root() {
            skip(&format!("{test}: needs root"));
            return false;
        }
        true
    }

    #[test]
    fn a_client_of_a_slow_server_is_named_waiting_on_its_address() {
        if !root_or_skip("a_client_of_a_slow_server_is_named_waiting_on_its_address") {
            return;
        }
        // The client and its server each in a network namespace of their own, as a
        // container and its database would be: the peer is found in the client's namespace.
        let test = "a_client_of_a_slow_server_is_named_waiting_on_its_address";
        let pair = NetnsPair::new(test).expect("network namespaces");
        let port = slow_server_at(Some(&pair.b), &pair.addr_b);
        let dir = tempfile::tempdir().unwrap();
        // A name of its own: profile_offcpu's clients, run beside it, would fold with it.
        let client = build(dir.path(), "waitclient", CLIENT);
        let mut cmd = NetnsPair::exec(&pair.a, client.to_str().unwrap());
        cmd.args([port.to_string(), pair.addr_b.clone()]);
        let program = Program::start(cmd);
        let pid = program.pid;
        let line = waits_line("20", |v| waiting_for(v, pid).is_some())
            .expect("no waiting finding names the client");
        let f = waiting_for(&line, pid).unwrap();
        let peer = format!("{}:{port}", pair.addr_b);
        let msg = f["message"].as_str().unwrap();
        assert!(msg.starts_with(&format!("waitclient (pid {pid}")), "{msg}");
        assert!(
            msg.contains(&format!(
                "of its time waiting on network replies from {peer}, mean wait"
            )),
            "{msg}"
        );
        assert_eq!(f["subject"], peer.as_str(), "{f}");
        assert_eq!(f["severity"], "info", "{f}");
        assert_eq!(f["culprits"][0]["comm"], "waitclient", "{f}");
        // The waits section: the network most of its time, on that peer.
        let row = waits_row(&line, pid).expect("a waits row");
        let net = &row["classes"][0];
        assert_eq!(net["class"], "network", "{row}");
        assert_eq!(net["on"], peer.as_str(), "{row}");
        assert!(net["pct"].as_f64().unwrap() >= 80.0, "{row}");
        let mean = net["mean_wait_ms"].as_f64().unwrap();
        assert!((45.0..=500.0).contains(&mean), "{row}");
        // The server side (this test's threads) is never named.
        let me = std::process::id();
        assert!(waiting_for(&line, me).is_none(), "{line}");
    }

    #[test]
    fn an_fsync_loop_is_named_waiting_in_fsync_on_its_device() {
        if !root_or_skip("an_fsync_loop_is_named_waiting_in_fsync_on_its_device") {
            return;
        }
        // On a disk (not tmpfs, where fsync waits for nothing): beside the build.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let bin = build(dir.path(), "waitfsyncer", FSYNCER);
        let mut cmd = Command::new(bin);
        cmd.arg(dir.path().join("data"));
        let program = Program::start(cmd);
        let pid = program.pid;
        let dev = {
            use std::os::unix::fs::MetadataExt;
            let d = std::fs::metadata(dir.path()).unwrap().dev();
            std::fs::read_link(format!(
                "/sys/dev/block/{}:{}",
                libc::major(d),
                libc::minor(d)
            ))
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
        };
        // Its row says the disk and the device in every interval; the finding comes when no
        // disk finding explains the wait (a shared CI disk may be busy in some intervals).
        let line = waits_line("30", |v| waiting_for(v, pid).is_some());
        match line {
            Some(line) => {
                let f = waiting_for(&line, pid).unwrap();
                let msg = f["message"].as_str().unwrap();
                assert!(msg.starts_with(&format!("waitfsyncer (pid {pid}")), "{msg}");
                assert!(
                    msg.contains(&format!("of its time in fsync on {dev}, mean wait")),
                    "{msg}"
                );
                let row = waits_row(&line, pid).unwrap();
                assert_eq!(row["classes"][0]["class"], "disk", "{row}");
                assert_eq!(row["classes"][0]["on"], dev.as_str(), "{row}");
                assert_eq!(row["classes"][0]["call"], "fsync", "{row}");
            }
            None => {
                // Every interval had a disk finding: then the row still names the wait.
                let line = waits_line("5", |v| waits_row(v, pid).is_some())
                    .expect("no waits row for the fsync loop");
                let row = waits_row(&line, pid).unwrap();
                assert_eq!(row["classes"][0]["class"], "disk", "{row}");
                assert!(
                    line["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|f| f["code"] == "disk_busy" || f["code"] == "disk_saturated"),
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn a_recorded_history_replays_the_same_waiting_finding() {
        if !root_or_skip("a_recorded_history_replays_the_same_waiting_finding") {
            return;
        }
        let port = slow_server();
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(build(dir.path(), "recclient", CLIENT));
        cmd.arg(port.to_string());
        let program = Program::start(cmd);
        let pid = program.pid;
        let db = dir.path().join("history.db");
        let db = db.to_str().unwrap();
        let o = run(&[
            "record",
            "--waits",
            "--interval",
            "1s",
            "--count",
            "3",
            "--file",
            db,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("waits are not recorded"),
            "{}",
            stderr(&o)
        );
        let o = run(&["top", "--replay", "--json", "--history", db]);
        let v: Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        let f = waiting_for(&v, pid).unwrap_or_else(|| panic!("no waiting finding: {v}"));
        assert!(
            f["message"].as_str().unwrap().contains(&format!(
                "of its time waiting on network replies from 127.0.0.1:{port}"
            )),
            "{f}"
        );
        let row = waits_row(&v, pid).expect("a waits row in the replay");
        assert_eq!(row["classes"][0]["class"], "network", "{row}");
    }

    /// Sleeps 100 ms at a time, forever: idle.
    const NAPPER: &str = r#"
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    printf("%d\n", getpid()); fflush(stdout);
    struct timespec t = {0, 100000000};
    for (;;) nanosleep(&t, 0);
}
"#;

    #[test]
    fn an_idle_process_sleeps_and_is_never_named_waiting() {
        if !root_or_skip("an_idle_process_sleeps_and_is_never_named_waiting") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let program = Program::start(Command::new(build(dir.path(), "napper", NAPPER)));
        let pid = program.pid;
        // Five samples, each checked; none is accepted, so all are seen.
        let rows = std::cell::Cell::new(0);
        let accepted = waits_line("5", |v| {
            assert!(waiting_for(v, pid).is_none(), "{v}");
            if let Some(row) = waits_row(v, pid) {
                let sleep = &row["classes"][0];
                assert_eq!(sleep["class"], "sleep", "{row}");
                assert!(sleep["pct"].as_f64().unwrap() >= 80.0, "{row}");
                assert_eq!(sleep["call"], "clock_nanosleep", "{row}");
                rows.set(rows.get() + 1);
            }
            false
        });
        assert!(accepted.is_none());
        // Its row is there when it is among the processes kept (64, those stalled first): at
        // most the five intervals.
        assert!(rows.get() <= 5, "{} rows", rows.get());
    }

    #[test]
    fn without_root_top_waits_says_once_that_waits_are_not_measured() {
        let test = "without_root_top_waits_says_once_that_waits_are_not_measured";
        if !root_or_skip(test) {
            return;
        }
        if !have_tool("setpriv") {
            return skip(&format!("{test}: setpriv is not installed"));
        }
        let o = as_nobody(env!("CARGO_BIN_EXE_tacho"))
            .args([
                "top",
                "--json",
                "--waits",
                "--interval",
                "1s",
                "--count",
                "2",
            ])
            .output()
            .unwrap();
        let text = stdout(&o);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        for v in &lines {
            assert!(v.get("waits").is_none(), "{v}");
            let notes: Vec<&str> = v["notes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|n| n.as_str())
                .filter(|n| n.starts_with("waits are not measured"))
                .collect();
            assert_eq!(notes.len(), 1, "{v}");
            assert!(notes[0].contains("eBPF tracing needs root"), "{}", notes[0]);
            assert!(
                notes[0].ends_with("/proc shows only the tasks blocked on I/O"),
                "{}",
                notes[0]
            );
        }
    }
}
