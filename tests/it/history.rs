//! `tacho record` and its replay (`tacho top --replay`, `--from/--to`), against the real
//! kernel: a named writer's burst on a loop device, kill -9 while recording, bad files.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::*;

const LIMIT: Duration = Duration::from_secs(60);

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// RFC 3339 of a Unix time, as an admin would type it.
fn rfc3339(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s as i64, 0)
        .unwrap()
        .to_rfc3339()
}

/// The latest recorded interval, once the history holds one ending after `after`.
fn wait_for_interval_after(history: &Path, after: f64) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let o = run(&[
            "top",
            "--replay",
            "--json",
            "--history",
            history.to_str().unwrap(),
        ]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            if v["time_unix_s"].as_f64().unwrap() > after {
                return v;
            }
        }
        assert!(
            start.elapsed() < LIMIT,
            "no sample after {after}: {}",
            stderr(&o)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kills the recorder when the test ends, passed or not.
struct Recorder(std::process::Child);

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Load-making process groups, killed whole on drop.
struct Load(Vec<std::process::Child>);

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: signals the process group this test started.
            unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

fn start_recorder(history: &Path, interval: &str) -> Recorder {
    recorder(tacho(), history, interval)
}

/// A recorder on a clock whose /proc/stat `btime` is 0.97 s before the real boot, the worst
/// rounding a machine can boot into (see tests/helpers/late_btime.py).
fn start_recorder_late_btime(history: &Path, interval: &str) -> Recorder {
    let mut command = Command::new(common::PYTHON);
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/helpers/late_btime.py"
        ))
        .arg(env!("CARGO_BIN_EXE_tacho"));
    recorder(command, history, interval)
}

fn recorder(mut command: Command, history: &Path, interval: &str) -> Recorder {
    let child = command
        .args(["record", "--interval", interval, "--history"])
        .arg(history)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start tacho record");
    Recorder(child)
}

/// A busy machine (issue 29: 40–48 MiB of 64 counted at a load of 10 on 2 CPUs): more CPU
/// workers than CPUs, and processes starting and exiting all the time. Returns once both are
/// seen working — the stress workers burning CPU and the loop forking — so no write is made
/// before the load is on.
fn busy_machine() -> Load {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let load = Load(vec![
        tacho()
            .args([
                "stress",
                "--cpu",
                &(2 * cpus).to_string(),
                "--timeout",
                "120s",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
        Command::new("sh")
            .args(["-c", "while :; do /bin/true; done"])
            .process_group(0)
            .spawn()
            .unwrap(),
    ]);
    let stress = load.0[0].id();
    let (cpu0, forks0) = (cpu_ticks(stress), forks());
    let start = Instant::now();
    // One CPU-second among the workers, and a hundred processes started since.
    while cpu_ticks(stress) < cpu0 + 100 || forks() < forks0 + 100 {
        assert!(
            start.elapsed() < LIMIT,
            "the load never started: stress {} ticks, {} forks",
            cpu_ticks(stress) - cpu0,
            forks() - forks0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    load
}

/// User + system clock ticks of a process, all its threads (0 once it is gone).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3 (state).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(14) + field(15)
}

/// Processes started since boot (/proc/stat `processes`).
fn forks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("processes ")?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn replay_names_the_writer_and_the_window_counts_its_bytes() {
    let Some(dev) = LoopDev::new("history burst", 128 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    // A copy of dd under a name no other process has.
    let name = format!("hburst{}", std::process::id() % 100_000);
    let writer = dir.path().join(&name);
    std::fs::copy("/bin/dd", &writer).unwrap();
    let _load = busy_machine();
    // A writer born within a second after a sample was skipped for its first interval where
    // btime's rounding hid its birth (issue 29: 40–48 of 64 MiB counted): the worst rounding.
    let _rec = start_recorder_late_btime(&history, "1s");
    wait_for_interval_after(&history, 0.0);

    // 64 MiB in 8 paced chunks; the writer then stays alive long enough for a sample to see
    // its last bytes (an exited process's counters are gone).
    const CHUNKS: u64 = 8;
    const CHUNK: u64 = 8 << 20;
    let t0 = now_unix();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for i in $(seq {CHUNKS}); do head -c {CHUNK} /dev/zero; sleep 0.4; done; sleep 2.5"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut feeder| {
            let input = feeder.stdout.take().unwrap();
            let s = Command::new(&writer)
                .args([
                    &format!("of={}", dev.path()),
                    "bs=1M",
                    "iflag=fullblock",
                    "oflag=direct",
                    "status=none",
                ])
                .stdin(input)
                .status();
            feeder.wait()?;
            s
        })
        .unwrap();
    assert!(status.success());
    let t1 = now_unix();
    wait_for_interval_after(&history, t1 + 1.0);

    // A moment inside the burst shows the writer and the device.
    // Inside the burst, and late enough that the sample before it already saw the writer.
    let at = rfc3339((t0 + 3.5).floor());
    let o = run(&[
        "top",
        "--replay",
        "--at",
        &at,
        "--json",
        "--history",
        history.to_str().unwrap(),
    ]);
    let moment = json_ok(&o);
    let procs = moment["processes"].as_array().unwrap();
    assert!(
        procs
            .iter()
            .any(|p| p["comm"] == name.as_str()
                && p["write_bytes_per_s"].as_f64().unwrap_or(0.0) > 0.0),
        "{name} not among the writers at {at}: {procs:?}"
    );
    let disks = moment["disks"].as_array().unwrap();
    assert!(
        disks
            .iter()
            .any(|d| d["name"] == dev.name().as_str()
                && d["wkb_per_s"].as_f64().unwrap_or(0.0) > 0.0),
        "{} not written at {at}: {disks:?}",
        dev.name()
    );

    // The window over the burst counts what was written, by the process and on the device.
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0.floor()),
        "--to",
        &rfc3339(t1.ceil() + 1.0),
        "--json",
        "--top",
        "1000",
        "--history",
        history.to_str().unwrap(),
    ]);
    let summary = json_ok(&o);
    assert_eq!(summary["schema"], "tacho.history.v1");
    let wrote = (CHUNKS * CHUNK) as f64;
    let within = |got: f64| (got - wrote).abs() <= 0.02 * wrote;
    let proc_bytes = summary["top_io"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == name.as_str())
        .map(|p| p["write_bytes"].as_f64().unwrap())
        .unwrap_or_default();
    assert!(
        within(proc_bytes),
        "{name} wrote {proc_bytes} bytes per the history, {wrote} really: {summary}"
    );
    let disk_bytes = summary["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == dev.name().as_str())
        .map(|d| d["write_bytes"].as_f64().unwrap())
        .unwrap_or_default();
    assert!(
        within(disk_bytes),
        "{} got {disk_bytes} bytes per the history, {wrote} really",
        dev.name()
    );

    // The text form names them too.
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0.floor()),
        "--to",
        &rfc3339(t1.ceil() + 1.0),
        "--history",
        history.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    assert!(text.contains(&name) && text.contains(&dev.name()), "{text}");

    // `report disk` tabulates the recorded days: the device's days add up to the burst (the
    // loop device is this test's own, so nothing else wrote to it).
    let o = run(&[
        "report",
        "disk",
        &dev.name(),
        "--history",
        history.to_str().unwrap(),
        "--json",
    ]);
    let report = json_ok(&o);
    // The burst's writer is among its day's top writers.
    let writers = report["writers"].as_array().unwrap();
    assert!(
        writers.iter().any(|d| d["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == name.as_str())),
        "{name} among the day's top writers: {writers:?}"
    );
    let days = report["daily"].as_array().unwrap();
    assert!(
        days.iter().all(|d| d["disk"] == dev.name().as_str()),
        "only the disk asked for: {days:?}"
    );
    let day_bytes: f64 = days
        .iter()
        .map(|d| d["bytes_written"].as_f64().unwrap_or_default())
        .sum();
    assert!(
        within(day_bytes),
        "{} wrote {day_bytes} bytes per the daily table, {wrote} really",
        dev.name()
    );
}

/// The writer exits right after its last write, under the same load: the bytes of its last
/// interval reach the history only through its exit record (taskstats), which must not be
/// lost to the load's exit storm. The window counts all of them, within 2%, and says no exit
/// record was lost (issue 29).
#[test]
fn a_writer_that_exits_at_once_is_counted_from_its_exit_record_under_load() {
    let Some(dev) = LoopDev::new("history exit", 128 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let name = format!("hexit{}", std::process::id() % 100_000);
    let writer = dir.path().join(&name);
    std::fs::copy("/bin/dd", &writer).unwrap();
    let _load = busy_machine();
    let _rec = start_recorder_late_btime(&history, "1s");
    wait_for_interval_after(&history, 0.0);

    // 64 MiB in 8 paced chunks; dd exits as soon as its input ends, after the last write.
    const CHUNKS: u64 = 8;
    const CHUNK: u64 = 8 << 20;
    let t0 = now_unix();
    let mut feeder = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for i in $(seq {CHUNKS}); do head -c {CHUNK} /dev/zero; sleep 0.4; done"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status = Command::new(&writer)
        .args([
            &format!("of={}", dev.path()),
            "bs=1M",
            "iflag=fullblock",
            "oflag=direct",
            "status=none",
        ])
        .stdin(feeder.stdout.take().unwrap())
        .status()
        .unwrap();
    feeder.wait().unwrap();
    assert!(status.success());
    let t1 = now_unix();
    wait_for_interval_after(&history, t1 + 1.0);

    let window = [
        "top",
        "--from",
        &rfc3339(t0.floor()),
        "--to",
        &rfc3339(t1.ceil() + 1.0),
        // Every process: on a shared machine others may write more than the writer.
        "--top",
        "1000",
        "--history",
        history.to_str().unwrap(),
    ];
    let summary = json_ok(&run(&[&window[..], &["--json"]].concat()));
    let text = stdout(&run(&window));
    // No exit record was lost in the window, and the text has no note saying one was.
    assert_eq!(summary["exit_overruns"], 0, "{summary}");
    assert!(!text.contains("exit records were lost"), "{text}");
    let wrote = (CHUNKS * CHUNK) as f64;
    let proc_bytes = summary["top_io"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["comm"] == name.as_str())
        .map(|p| p["write_bytes"].as_f64().unwrap())
        .sum::<f64>();
    assert!(
        (proc_bytes - wrote).abs() <= 0.02 * wrote,
        "{name} wrote {proc_bytes} bytes per the history, {wrote} really: {summary}"
    );
}

#[test]
fn kill_9_while_recording_loses_nothing_already_written() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let mut kills = 0;
    for i in 0..24u64 {
        let mut rec = start_recorder(&history, "100ms");
        if i == 0 {
            // Something is written before the kills begin, however long a loaded machine
            // takes to start the recorder (24 kills within its start-up recorded nothing).
            wait_for_interval_after(&history, 0.0);
        }
        // Kill at varying points of the write cycle.
        std::thread::sleep(Duration::from_millis(150 + (i * 37) % 400));
        rec.0.kill().unwrap();
        rec.0.wait().unwrap();
        kills += 1;
    }
    assert!(kills >= 20);
    let o = run(&[
        "top",
        "--from",
        "1h ago",
        "--json",
        "--history",
        history.to_str().unwrap(),
    ]);
    let summary = json_ok(&o);
    assert!(
        summary["intervals"].as_u64().unwrap() > 0,
        "nothing recorded: {summary}"
    );
    let o = run(&[
        "top",
        "--replay",
        "--batch",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_foreign_or_damaged_history_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not a database at all, just some text\n".repeat(200),
    )
    .unwrap();
    let foreign = dir.path().join("foreign.db");
    let o = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()",
        ])
        .arg(&foreign)
        .status()
        .unwrap();
    assert!(o.success());
    for file in [&junk, &foreign] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["top", "--replay", "--batch", "--history", f],
            vec!["top", "--from", "1h ago", "--history", f],
            vec!["record", "--count", "1", "--history", f],
        ] {
            let line = assert_error(&run(&args));
            assert!(line.contains("not a tacho history"), "{args:?}: {line}");
        }
    }
    let missing = dir.path().join("none.db");
    let line = assert_error(&run(&[
        "top",
        "--replay",
        "--batch",
        "--history",
        missing.to_str().unwrap(),
    ]));
    assert!(line.contains("tacho record"), "{line}");
    assert!(!missing.exists(), "a reader creates nothing");
    let line = assert_error(&run(&[
        "top",
        "--from",
        "next tuesday",
        "--history",
        junk.to_str().unwrap(),
    ]));
    assert!(line.contains("cannot read"), "{line}");
}

#[test]
fn print_unit_prints_the_shipped_unit() {
    let o = run(&["record", "--print-unit"]);
    assert!(o.status.success());
    let unit = std::fs::read_to_string("contrib/tacho-record.service").unwrap();
    assert_eq!(stdout(&o), unit);
    assert!(unit.contains("ExecStart=/usr/bin/tacho record"), "{unit}");
    // The binary under test is not the package's: the note says the unit runs the other one.
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_tacho")).unwrap();
    let note = stderr(&o);
    assert!(
        note.contains("/usr/bin/tacho") && note.contains(exe.to_str().unwrap()),
        "{note}"
    );
}

/// The hardening the package ships (`systemd-analyze security` scores it in
/// .ci/package_test): a read-only system but the history, no privilege gained, and of root's
/// capabilities only those `record` uses (tests/it/hostile_history.rs runs the recorder under
/// exactly this bounding set).
#[test]
fn the_shipped_unit_is_hardened() {
    let unit = std::fs::read_to_string("contrib/tacho-record.service").unwrap();
    let setting = |key: &str| -> Vec<&str> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .collect()
    };
    for (key, value) in [
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/var/lib/tacho/history"),
        ("NoNewPrivileges", "yes"),
        ("ProtectHome", "read-only"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
    ] {
        assert_eq!(setting(key), [value], "{key}");
    }
    let bounding = setting("CapabilityBoundingSet").concat();
    let mut caps: Vec<&str> = bounding.split_whitespace().collect();
    caps.sort_unstable();
    assert_eq!(
        caps,
        [
            "CAP_BPF",
            "CAP_DAC_OVERRIDE",
            "CAP_DAC_READ_SEARCH",
            "CAP_NET_ADMIN",
            "CAP_PERFMON",
            "CAP_SYS_PTRACE"
        ]
    );
    assert!(setting("AmbientCapabilities").is_empty(), "{unit}");
}

#[test]
fn a_full_disk_is_one_complaint_and_the_recorder_goes_on() {
    if !is_root() {
        skip("history disk full: needs root to mount a tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&["-t", "tmpfs", "-o", "size=256k", "tmpfs"], dir.path())
        .expect("cannot mount a tmpfs");
    // The tmpfs root is world-writable (1777): the recorder makes its own private directory.
    let history = dir.path().join("private/history.db");
    let log = logs.path().join("stderr");
    let mut rec = Recorder(
        tacho()
            .args(["record", "--interval", "100ms", "--history"])
            .arg(&history)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("disk is full")
    {
        assert!(rec.0.try_wait().unwrap().is_none(), "the recorder stopped");
        assert!(start.elapsed() < LIMIT, "the tmpfs never filled");
        std::thread::sleep(Duration::from_millis(100));
    }
    // It keeps sampling (and failing to store) for a while without dying or repeating itself.
    let full_at = Instant::now();
    while full_at.elapsed() < Duration::from_secs(2) {
        assert!(
            rec.0.try_wait().unwrap().is_none(),
            "the recorder died on a full disk"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(rec.0.id() as i32, libc::SIGTERM) };
    let status = wait_limited(&mut rec.0, LIMIT);
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "the recorder ended with {status}: {err}");
    let complaints: Vec<&str> = err.lines().filter(|l| l.starts_with("tacho: ")).collect();
    assert_eq!(complaints.len(), 1, "one line per full-disk episode: {err}");
    assert!(complaints[0].contains("disk is full"), "{err}");
    let o = run(&[
        "top",
        "--from",
        "1h ago",
        "--json",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(json_ok(&o)["intervals"].as_u64().unwrap() > 0);
}

#[test]
fn a_history_under_a_directory_others_can_swap_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // World-writable without the sticky bit: anyone could rename `private` and put their own
    // directory (or a link) in its place between the recorder's checks and its writes.
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let history = open.join("private/history.db");
    let line = assert_error(&run(&[
        "record",
        "--count",
        "1",
        "--history",
        history.to_str().unwrap(),
    ]));
    assert!(
        line.contains(open.to_str().unwrap()) && line.contains("--history"),
        "{line}"
    );
    assert!(!open.join("private").exists(), "nothing created: {line}");
    // With the sticky bit, as /tmp has, the recorder's own directory is safe.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = run(&[
        "record",
        "--count",
        "1",
        "--history",
        history.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(history.exists());
}

#[test]
fn replay_shows_the_tcp_traffic_of_the_moment() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let _rec = start_recorder(&history, "500ms");
    wait_for_interval_after(&history, 0.0);
    // This test process sends 4 MB/s over loopback for 2 s, itself the sender.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        std::io::copy(&mut s, &mut std::io::sink()).unwrap()
    });
    let mut out = std::net::TcpStream::connect(addr).unwrap();
    for _ in 0..40 {
        std::io::Write::write_all(&mut out, &[0u8; 200_000]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let t1 = now_unix();
    // The last interval of the transfer, replayed.
    let v = wait_for_interval_after(&history, t1);
    drop(out);
    reader.join().unwrap();
    let o = run(&[
        "top",
        "--replay",
        "--at",
        &rfc3339(t1 - 0.6),
        "--json",
        "--history",
        history.to_str().unwrap(),
    ]);
    let moment = json_ok(&o);
    let me = std::process::id();
    let sender = moment["connections"]["by_process"]
        .as_array()
        .unwrap_or_else(|| panic!("no connections in the replay: {moment}"))
        .iter()
        .find(|g| g["pid"].as_u64() == Some(u64::from(me)))
        .unwrap_or_else(|| panic!("pid {me} not among {}", moment["connections"]));
    assert!(sender["tx_bytes_per_s"].as_f64().unwrap() > 1e6, "{sender}");
    assert!(v["time_unix_s"].as_f64().unwrap() > t1);
}

/// One name everywhere: `record --history FILE` writes what `top --history FILE` reads; the old
/// `--file` still works and is no longer shown (issue 29).
#[test]
fn record_takes_the_same_history_option_as_its_readers() {
    let dir = tempfile::tempdir().unwrap();
    for (option, name) in [("--history", "new.db"), ("--file", "old.db")] {
        let history = dir.path().join(name);
        let h = history.to_str().unwrap();
        let o = run(&["record", "--count", "2", "--interval", "100ms", option, h]);
        assert!(o.status.success(), "{option}: {}", stderr(&o));
        json_ok(&run(&["top", "--replay", "--json", "--history", h]));
    }
    let help = stdout(&run(&["record", "--help"]));
    assert!(help.contains("--history <PATH>"), "{help}");
    assert!(!help.contains("--file"), "{help}");
}

/// The recorder traces block I/O as live `top` does: a shell loop's short-lived `dd`s replay as
/// the writers, exactly (eBPF), not as "~100% of writes likely from bash" (issue 29).
#[cfg(feature = "bpf")]
#[test]
fn replay_blames_short_lived_writers_as_live_top_does() {
    if !is_root() {
        skip("replay_blames_short_lived_writers: eBPF tracing needs root");
        return;
    }
    let Some(dev) = LoopDev::direct_on_disk("history blame") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let _rec = start_recorder(&history, "1s");
    wait_for_interval_after(&history, 0.0);
    let t0 = now_unix();
    let script = format!(
        "end=$(($(date +%s) + 5)); while [ $(date +%s) -lt $end ]; do \
         dd if=/dev/zero of={} bs=4k count=200 oflag=direct,dsync status=none; done",
        dev.path()
    );
    assert!(
        Command::new("sh")
            .args(["-c", &script])
            .status()
            .unwrap()
            .success()
    );
    let t1 = now_unix();
    wait_for_interval_after(&history, t1 + 1.0);
    let name = dev.name();
    let mut blamed = Vec::new();
    // The first moment whose verdict knew dd's share exactly, and from what.
    let mut exact_at: Option<(f64, String)> = None;
    for at in [(t0 + 2.5).floor(), (t0 + 3.5).floor(), (t1 - 1.0).floor()] {
        let o = run(&[
            "top",
            "--replay",
            "--at",
            &rfc3339(at),
            "--json",
            "--history",
        ]
        .into_iter()
        .chain([history.to_str().unwrap()])
        .collect::<Vec<_>>());
        let moment = json_ok(&o);
        for f in moment["findings"].as_array().unwrap() {
            if f["subject"] != name.as_str() {
                continue;
            }
            for c in f["culprits"].as_array().unwrap() {
                let how = c["attribution"]["kind"].as_str().unwrap().to_string();
                if c["comm"] == "dd" && how == "exact" && exact_at.is_none() {
                    let source = c["attribution"]["source"].as_str().unwrap();
                    exact_at = Some((at, source.to_string()));
                }
                blamed.push((c["comm"].as_str().unwrap().to_string(), how));
            }
        }
    }
    assert!(!blamed.is_empty(), "no verdict on {name} in the replay");
    // The text replay of that moment says how dd's share was known, as the JSON does.
    if let Some((at, source)) = &exact_at {
        let o = run(&[
            "top",
            "--replay",
            "--at",
            &rfc3339(*at),
            "--history",
            history.to_str().unwrap(),
        ]);
        let text = stdout(&o);
        assert!(
            text.lines()
                .any(|l| l.contains("dd") && l.contains(&format!("exact: {source}"))),
            "no \"exact: {source}\" for dd in the text replay: {text}"
        );
    }
    assert!(
        blamed
            .iter()
            .any(|(comm, how)| comm == "dd" && how == "exact"),
        "{blamed:?}"
    );
    assert!(
        !blamed
            .iter()
            .any(|(comm, _)| comm == "sh" || comm == "bash"),
        "the shell was blamed: {blamed:?}"
    );
}
