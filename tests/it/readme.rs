//! The README's examples, run as a newcomer runs them: every line of every ```sh block that
//! runs tacho (`tacho …`, `sudo tacho …`, `cargo run --release -- …`) goes through the built
//! binary, through bash (so its redirections, pipes, `;` and `&&` work as written), in the
//! block's order, in a directory of the block's own with its own results store and history.
//! A line runs as written except where [`INSTEAD`] bounds it (a device, the network, a long
//! runtime) or [`PLACES`] moves a path of the README's servers into that directory. A line
//! that runs no tacho is listed in [`NOT_TACHO`]; an entry of any table that matches no README
//! line fails the test, so the tables follow the README and nothing is skipped unseen.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const README: &str = include_str!("../../README.md");

/// A line that hangs is a failure, not a stuck suite.
const LINE_LIMIT: Duration = Duration::from_secs(60);

/// Lines of the blocks that run no tacho, and why the test does not run them.
const NOT_TACHO: &[(&str, &str)] = &[
    ("cargo test", "the test suite this test belongs to"),
    (
        "echo never > /sys/kernel/mm/transparent_hugepage/enabled",
        "it changes the machine's THP setting under every other test",
    ),
    (
        "cargo install cargo-deb --locked",
        "it builds cargo-deb from crates.io (minutes); .ci/run installs it",
    ),
    (
        "contrib/deb/build",
        "a release build of every crate (minutes); .ci/package_test builds the package with the \
         same script",
    ),
    (
        "sudo apt install ./target/debian/tacho_*_amd64.deb",
        "it installs into this machine; .ci/package_test installs the package into a clean \
         Debian root, runs it there, removes and purges it",
    ),
    (
        "sudo systemctl enable --now tacho-record",
        "it starts a service on this machine; .ci/package_test enables the installed unit in its \
         root, tests/it/history.rs runs the recorder",
    ),
    (
        "export TACHO_DB='postgres://tacho@db.example/results'",
        "a setting for the lines after it; each line runs in a shell of its own",
    ),
];

/// The lines run otherwise: (as the README writes it, what runs, why). Applied before
/// [`PLACES`]. `@LOOPNAME@` is the kernel name of `@LOOP@` (below), `@MOUNTPOINT@` where
/// `@MOUNTED@` is mounted. `@PID@` is this test's pid, `@PG@` a database of the test's own on the server
/// `TACHO_TEST_PG` names, `@HTTP@` the loopback address of an HTTP server of the test's own.
const INSTEAD: &[(&str, &str, &str)] = &[
    (
        "sudo tacho experiment --change block.sda.scheduler=mq-deadline --measure 'bench disk /data --suite iometer'",
        "sudo tacho experiment --change block.@LOOPNAME@.scheduler=mq-deadline --measure 'time -r 2 true' --rounds 2 --yes",
        "the machine's disk is not the test's to change, the iometer suite runs minutes, and \
         stdin is not a terminal to confirm on",
    ),
    (
        "sudo tacho experiment --change thp.enabled=never --measure top --workload 'redis-benchmark -q -n 100000 -t set' --figure system",
        "sudo tacho experiment --change block.@LOOPNAME@.read_ahead_kb=512 --measure top --workload true --figure system --rounds 2 --yes",
        "THP is kernel-wide, under every other test (tests/serial/experiment.rs tries THP \
         always against never under load); no Redis here",
    ),
    (
        "sudo tacho experiment --change vm.dirty_ratio=5 --measure \"time -r 3 'cp big.log copy.log && sync'\" --json > dirty.json",
        "sudo tacho experiment --change block.@LOOPNAME@.read_ahead_kb=64 --measure \"time -r 2 'cp big.log copy.log'\" --rounds 2 --yes --json > dirty.json",
        "a vm sysctl is kernel-wide, under every other test; sync flushes every disk",
    ),
    (
        "sudo tacho experiment --change mount:/data=noatime --measure \"time -r 3 'tar cf /dev/null /data'\"",
        "sudo tacho experiment --change mount:@MOUNTPOINT@=noatime --measure \"time -r 2 'tar cf /dev/null @MOUNTPOINT@'\" --rounds 2 --yes",
        "the test's own ext4 mount is the one to remount, and stdin is not a terminal to \
         confirm on",
    ),
    (
        "sudo tacho experiment --change-cmd 'ethtool -K eth0 gro off' --revert-cmd 'ethtool -K eth0 gro on' --measure 'bench cpu'",
        "sudo tacho experiment --change-cmd 'touch changed' --revert-cmd 'rm -f changed' --measure 'bench cpu --runtime 100ms --repeat 1' --rounds 2 --yes",
        "the machine's network card is not the test's to change (and has no eth0 here); a \
         file stands for the setting; stdin is not a terminal to confirm on",
    ),
    (
        "tacho load http://127.0.0.1:8080/ --rate 500 --duration 30s",
        "tacho load http://@HTTP@/ --rate 100 --duration 1s",
        "no service listens on 8080 here: the test's own server on another port, 1 s",
    ),
    (
        "tacho load http://127.0.0.1:8080/api --ramp 100..5000 --step 10s --p99-limit 200ms",
        "tacho load http://@HTTP@/api --ramp 50..100 --steps 2 --step 500ms --p99-limit 200ms",
        "no service listens on 8080 here; ten steps of 10 s",
    ),
    (
        "tacho load http://10.0.0.5/search -X POST -H 'Content-Type: application/json' --body '{\"q\":\"x\"}'",
        "tacho load http://@HTTP@/search -X POST -H 'Content-Type: application/json' --body '{\"q\":\"x\"}' --rate 50 --duration 1s",
        "test traffic goes to loopback only; 10 s by default",
    ),
    (
        "cargo run --release -- bench",
        "tacho bench disk --size 16M --runtime 200ms --ramp 0s --repeat 1",
        "`bench` alone takes no options: the same quick suite on `.`, 16 MiB and 200 ms a test",
    ),
    (
        "tacho bench disk /var/lib/postgresql",
        "tacho bench disk /var/lib/postgresql --size 16M --runtime 200ms --ramp 0s --repeat 1",
        "the quick suite writes 1 GiB and runs a minute",
    ),
    (
        "tacho bench disk /data --rw randread --bs 4k --iodepth 32 --runtime 30s",
        "tacho bench disk /data --rw randread --bs 4k --iodepth 32 --runtime 200ms --size 16M",
        "30 s over 1 GiB",
    ),
    (
        "tacho bench disk /var/lib/etcd --rw write --bs 2300 --engine sync --fdatasync 1 --buffered --size 22M",
        "tacho bench disk /var/lib/etcd --rw write --bs 2300 --engine sync --fdatasync 1 --buffered --size 22M --runtime 200ms",
        "10 s by default",
    ),
    (
        "tacho bench disk /dev/nvme1n1 --rw randread --iodepth 64 --json > result.json",
        "tacho bench disk /dev/nvme1n1 --rw randread --iodepth 64 --runtime 200ms --json > result.json",
        "10 s by default",
    ),
    (
        "tacho bench disk /var/lib/etcd --suite etcd",
        "tacho bench disk /var/lib/etcd --suite etcd --size 16M --runtime 500ms",
        "the etcd suite runs 5 minutes",
    ),
    (
        "tacho bench disk /data --suite dd",
        "tacho bench disk /data --suite dd --size 16M --runtime 200ms",
        "256 MiB five times",
    ),
    (
        "tacho ping /var/lib/postgresql -c 10",
        "tacho ping /var/lib/postgresql -c 3 -i 100ms",
        "10 s",
    ),
    (
        "sudo tacho files",
        "sudo tacho files --duration 1s",
        "until Ctrl-C",
    ),
    (
        "sudo tacho files --ops W --duration 30s -t -o /tmp/writes.log",
        "sudo tacho files --ops W --duration 1s -t -o /tmp/writes.log",
        "30 s",
    ),
    (
        "sudo tacho files --pid 1234 --children --summary",
        "sudo tacho files --pid @PID@ --children --summary --duration 1s",
        "a process that exists, and until Ctrl-C",
    ),
    (
        "sudo tacho files --path /var/lib/postgresql --json | jq -c 'select(.ops)'",
        "sudo tacho files --path /var/lib/postgresql --json --duration 1s | jq -c 'select(.ops)'",
        "until Ctrl-C",
    ),
    (
        "sudo tacho files --sector /dev/sda 536514808",
        "sudo tacho files --sector /dev/sda 2048",
        "a sector of the 16 MiB filesystem the test mounts",
    ),
    (
        "sudo tacho files --bytes --duration 30s",
        "sudo tacho files --bytes --duration 1s",
        "30 s",
    ),
    (
        "tacho bench disk /data --label \"before THP off\"",
        "tacho bench disk /data --label \"before THP off\" --size 16M --runtime 200ms --ramp 0s --repeat 1",
        "the quick suite, shortened",
    ),
    (
        "tacho bench disk /data --label \"after THP off\"",
        "tacho bench disk /data --label \"after THP off\" --size 16M --runtime 200ms --ramp 0s --repeat 1",
        "the quick suite, shortened",
    ),
    (
        "tacho bench disk /data --prom-textfile /var/lib/node_exporter/tacho.prom",
        "tacho bench disk /data --prom-textfile /var/lib/node_exporter/tacho.prom --size 16M --runtime 200ms --ramp 0s --repeat 1",
        "the quick suite, shortened",
    ),
    (
        "tacho record --db 'postgres://db-17@store/tacho' --label role=db",
        "tacho record --db '@PG@' --label role=db --count 2 --interval 1s",
        "two samples, sent to the test's server",
    ),
    (
        "tacho top --from 02:50 --to 03:10 --db 'postgres://ops@store/tacho' --label role=db",
        "tacho top --from '1h ago' --db '@PG@' --label role=db",
        "the test's server, a window it has rows in",
    ),
    (
        "tacho top --from 02:50 --to 03:10 --db 'postgres://ops@store/tacho' --label role=db --html fleet.html",
        "tacho top --from '1h ago' --db '@PG@' --label role=db --html fleet.html",
        "the test's server, a window it has rows in",
    ),
    (
        "tacho top --from 02:50 --to 03:10 --db 'postgres://ops@store/tacho' --host db-17",
        "tacho top --from '1h ago' --db '@PG@' --host $(hostname)",
        "the test's server and this host",
    ),
    (
        "tacho store init --db 'postgres://admin@db.example/results' > grants.sql",
        "tacho store init --db '@PG@' > grants.sql",
        "the fleet's server: the test's own (already initialised: init again changes nothing)",
    ),
    (
        "tacho runs push --db 'postgres://tacho@db.example/results?sslmode=require'",
        "tacho runs push --db '@PG@'",
        "the fleet's server: the test's own",
    ),
    (
        "tacho runs push --db 'postgres:///results?host=/var/run/postgresql'",
        "tacho runs push --db '@PG@'",
        "the database host's socket and peer login are tests/store_postgres.rs's; here the test's server",
    ),
    (
        "tacho bench disk /data && tacho runs list",
        "tacho bench disk /data --size 16M --runtime 200ms --ramp 0s --repeat 1 && tacho runs list",
        "the quick suite, shortened",
    ),
    (
        "sudo tacho profile",
        "sudo tacho profile --duration 1s",
        "10 s",
    ),
    (
        "sudo tacho profile --pid 812 --duration 30s",
        "sudo tacho profile --pid @PID@ --duration 1s",
        "a process that exists, and 30 s",
    ),
    (
        "sudo tacho profile --folded > stacks.txt",
        "sudo tacho profile --folded --duration 1s > stacks.txt",
        "10 s",
    ),
    (
        "sudo tacho profile --svg flame.svg",
        "sudo tacho profile --svg flame.svg --duration 1s",
        "10 s",
    ),
    (
        "sudo tacho profile --json",
        "sudo tacho profile --json --duration 1s",
        "10 s",
    ),
    (
        "sudo tacho profile --off-cpu --pid 812 --duration 30s",
        "sudo tacho profile --off-cpu --pid @PID@ --duration 1s",
        "a process that exists, and 30 s",
    ),
    (
        "sudo tacho profile --wall --unit php-fpm.service --svg wall.svg",
        "sudo tacho profile --wall --pid @PID@ --svg wall.svg --duration 1s",
        "no php-fpm here: this test's process instead, for 1 s not 10",
    ),
    (
        "sudo tacho top --batch --profile",
        "sudo tacho top --batch --profile --count 2 --interval 500ms",
        "until Ctrl-C",
    ),
    (
        "tacho top",
        "script -qec 'tacho top --count 2 --interval 200ms' /dev/null",
        "the screen needs a terminal (script gives it one), and runs until q",
    ),
    (
        "tacho top --batch --interval 1s --count 5",
        "tacho top --batch --interval 200ms --count 5",
        "5 s",
    ),
    (
        "tacho top --batch --accumulate",
        "tacho top --batch --accumulate --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --batch --show-idle",
        "tacho top --batch --show-idle --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --batch --waits",
        "tacho top --batch --waits --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --batch --dns",
        "tacho top --batch --dns --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --batch --net",
        "tacho top --batch --net --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --batch --latency",
        "tacho top --batch --latency --count 2 --interval 200ms",
        "until Ctrl-C",
    ),
    (
        "tacho top --json --count 60 > top.jsonl",
        "tacho top --json --count 2 --interval 200ms > top.jsonl",
        "a minute",
    ),
    (
        "tacho top --listen :9101",
        "tacho top --listen :0 --count 2 --interval 200ms",
        "until Ctrl-C, on a port that may be taken (0: any free one)",
    ),
    (
        "tacho record",
        "tacho record --count 3 --interval 200ms",
        "until SIGTERM",
    ),
    (
        "tacho top --replay --at 03:00",
        "tacho top --replay --batch",
        "the history just recorded holds no 3 a.m.; the screen needs a terminal",
    ),
    (
        "tacho top --from 'yesterday 02:00' --to 'yesterday 04:00'",
        "tacho top --from '1h ago'",
        "the history just recorded holds no yesterday",
    ),
    (
        "tacho time 'gzip -k -f big.log' 'zstd -f big.log'",
        "tacho time --runs 3 'gzip -k -f big.log' 'zstd -f big.log'",
        "at least 10 runs and 3 s of each",
    ),
    (
        "tacho time -N --runs 20 --export-json out.json 'curl -s https://status.example/'",
        "tacho time -N --runs 3 --export-json out.json 'curl -s file:///etc/hostname'",
        "no network: curl reads a local file",
    ),
    (
        "tacho time --runs 3 --prom-textfile /var/lib/node_exporter/status.prom 'curl -sf https://status.example/'",
        "tacho time --runs 3 --prom-textfile /var/lib/node_exporter/status.prom 'curl -sf file:///etc/hostname'",
        "no network: curl reads a local file",
    ),
    (
        "tacho bench cpu",
        "tacho bench cpu --runtime 100ms --repeat 1",
        "3 × 500 ms per kernel and pass",
    ),
    (
        "tacho bench mem",
        "tacho bench mem --runtime 20ms --repeat 1 --dram-size 64M",
        "a DRAM set of 8 × L3 (at least 256 MiB), 3 times",
    ),
    (
        "tacho stress --cpu 2 --vm 2 --vm-bytes 1G --timeout 60s",
        "tacho stress --cpu 2 --vm 2 --vm-bytes 64M --timeout 2s",
        "a minute and 2 GiB",
    ),
];

/// Paths of the README's servers, and where they are in the block's directory (any path
/// under one moves with it). `@LOOP@` is a 16 MiB loop device; `@MOUNTED@` one holding a
/// mounted ext4 filesystem.
const PLACES: &[(&str, &str)] = &[
    ("/var/lib/postgresql", "data"),
    ("/var/lib/etcd", "data"),
    ("/data", "data"),
    ("/var/lib/node_exporter", "textfiles"),
    ("/tmp/writes.log", "writes.log"),
    ("/etc/bash_completion.d/tacho", "tacho.bash"),
    ("/usr/local/share/man/man1", "man1"),
    ("/dev/nvme1n1", "@LOOP@"),
    ("/dev/sda", "@MOUNTED@"),
];

/// Lines whose exit status 1 is an answer, not a failure: (the line as written, what 1 says).
const ANSWERS: &[(&str, &str)] = &[
    (
        "tacho bench disk /var/lib/etcd --suite etcd",
        "the etcd verdict failed",
    ),
    (
        "tacho compare 1 2 --fail-on-regression 5",
        "the second run is significantly worse",
    ),
    ("sudo tacho top --batch --profile", "a sample had a warning"),
    (
        "tacho top --batch --interval 1s --count 5",
        "a sample had a warning",
    ),
    ("tacho top --batch --accumulate", "a sample had a warning"),
    ("tacho top --batch --show-idle", "a sample had a warning"),
    ("tacho top --batch --waits", "a sample had a warning"),
    ("tacho top --batch --dns", "a sample had a warning"),
    ("tacho top --batch --net", "a sample had a warning"),
    ("tacho top --batch --latency", "a sample had a warning"),
    (
        "tacho top --json --count 60 > top.jsonl",
        "a sample had a warning",
    ),
    ("tacho top --replay --at 03:00", "the sample had a warning"),
    ("tacho top --listen :9101", "a sample had a warning"),
    (
        "tacho check --strict --json > check.json",
        "a setting is worth a warning",
    ),
    (
        "tacho diff web1.json live",
        "the snapshot and the machine differ",
    ),
];

/// A job file such as the README's `ssd-test.fio` (fio's example), small and short.
const SSD_TEST: &str = "[global]\nioengine=libaio\ndirect=1\nbs=4k\niodepth=4\nsize=16m\n\
runtime=200ms\ntime_based\n\n[seq-read]\nrw=read\nstonewall\n\n[rand-read]\nrw=randread\n\
stonewall\n";

/// One README line: the command as written (comment cut) and the block it is in.
struct Line {
    block: usize,
    written: String,
}

fn readme_lines() -> Vec<Line> {
    let mut lines = Vec::new();
    let mut block = None;
    let mut blocks = 0;
    for text in README.lines() {
        if text.starts_with("```") {
            block = (text == "```sh").then(|| {
                blocks += 1;
                blocks
            });
            continue;
        }
        let Some(block) = block else { continue };
        let written = text.split(" # ").next().unwrap().trim();
        if !written.is_empty() && !written.starts_with('#') {
            lines.push(Line {
                block,
                written: written.to_string(),
            });
        }
    }
    lines
}

fn runs_tacho(command: &str) -> bool {
    let command = command.strip_prefix("sudo ").unwrap_or(command);
    command.starts_with("tacho ") || command == "tacho" || command.starts_with("cargo run ")
}

/// Every entry of a table names a README line.
fn assert_current(table: &str, keys: impl Iterator<Item = &'static str>, lines: &[Line]) {
    for key in keys {
        assert!(
            lines.iter().any(|l| l.written == key),
            "{table} names a line the README no longer has: {key}"
        );
    }
}

/// Moves the README's paths into the block's directory, word by word.
fn placed(command: &str) -> String {
    command
        .split(' ')
        .map(|word| {
            for (from, to) in PLACES {
                if let Some(rest) = word.strip_prefix(from)
                    && (rest.is_empty() || rest.starts_with('/'))
                {
                    return format!("{to}{rest}");
                }
            }
            word.to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a block's lines share: its directory (with the files a reader would have), its
/// results store and history, and a PATH where `tacho` is the binary under test.
struct Place {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["data", "textfiles", "man1", "bin"] {
            std::fs::create_dir(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("big.log"), "a line of a log\n".repeat(64 * 1024)).unwrap();
        std::fs::write(root.join("ssd-test.fio"), SSD_TEST).unwrap();
        let fio = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio/three-jobs.json");
        std::fs::copy(fio, root.join("fio-result.json")).unwrap();
        let bin = root.join("bin");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tacho"), bin.join("tacho")).unwrap();
        // The test runs as root, where sudo is a no-op (and may not be installed).
        std::fs::write(bin.join("sudo"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
        std::fs::set_permissions(bin.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
        Place { dir, bin }
    }

    /// Runs `command` through bash; Err with what it printed unless it exits with one of `ok`.
    fn run(&self, command: &str, ok: &[i32]) -> Result<(), String> {
        let root = self.dir.path();
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new("bash")
            .args(["-o", "pipefail", "-c", command])
            .current_dir(root)
            .env("PATH", path)
            .env("TACHO_DB", root.join("tacho.db"))
            .env("TACHO_HISTORY", root.join("history.db"))
            .env("TACHO_EXPERIMENT_DIR", root.join("experiments"))
            .stdin(Stdio::null())
            .spawn_piped();
        // Named before it runs: a line that overruns LINE_LIMIT panics in wait_output, and the
        // captured output then says which line it was.
        println!("running: {command}");
        let o = wait_output(child, LINE_LIMIT);
        match o.status.code() {
            Some(code) if ok.contains(&code) => Ok(()),
            code => Err(format!(
                "{command}\n  exit {code:?}\n  stderr: {}\n  stdout: {:.2000}",
                stderr(&o).trim(),
                stdout(&o).trim()
            )),
        }
    }
}

/// A loopback HTTP/1.1 server answering every request `200 ok` on keep-alive connections (a
/// thread each), for `tacho load`; its address. It lives as long as the test process.
fn ok_server() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    let answered = reader.read_exact(&mut body).is_ok()
                        && conn
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_ok();
                    if !answered {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn every_readme_example_runs() {
    if !is_root() {
        skip("readme: the examples run as root (files, profile, top --dns, loop devices)");
        return;
    }
    let lines = readme_lines();
    assert_current("NOT_TACHO", NOT_TACHO.iter().map(|e| e.0), &lines);
    assert_current("INSTEAD", INSTEAD.iter().map(|e| e.0), &lines);
    assert_current("ANSWERS", ANSWERS.iter().map(|e| e.0), &lines);
    for line in &lines {
        assert!(
            runs_tacho(&line.written) || NOT_TACHO.iter().any(|e| e.0 == line.written),
            "README line runs no tacho and is not in NOT_TACHO: {}",
            line.written
        );
    }

    let Some(device) = LoopDev::new("readme", 16 << 20) else {
        return;
    };
    let mounted = LoopDev::new("readme-fs", 16 << 20).expect("a second loop device");
    assert!(mounted.mkfs_ext4(), "mkfs.ext4 on {}", mounted.path());
    let mount_dir = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&[mounted.path()], mount_dir.path()).unwrap();
    std::fs::write(mount_dir.path().join("owned"), vec![7u8; 4 << 20]).unwrap();
    let pg = crate::common::pg::TestDb::new("readme");
    let http = ok_server();

    let blocks = lines.last().map_or(0, |l| l.block);
    let failures = std::sync::Mutex::new(Vec::new());
    // Blocks at once, each line of a block after the one before it.
    std::thread::scope(|scope| {
        for block in 1..=blocks {
            let (lines, failures, pg, http) = (&lines, &failures, &pg, &http);
            let (device, mounted) = (device.path(), mounted.path());
            let mount_point = mount_dir.path().to_str().unwrap();
            scope.spawn(move || {
                let place = Place::new();
                for line in lines.iter().filter(|l| l.block == block) {
                    if !runs_tacho(&line.written) {
                        continue;
                    }
                    let instead = INSTEAD.iter().find(|e| e.0 == line.written);
                    let command = instead.map_or(line.written.as_str(), |e| e.1);
                    if command.contains("@PG@") && pg.is_none() {
                        // Said by TestDb::new (a failure in CI).
                        eprintln!("SKIP (no TACHO_TEST_PG): {}", line.written);
                        continue;
                    }
                    let command = placed(command)
                        .replace("@LOOPNAME@", device.trim_start_matches("/dev/"))
                        .replace("@LOOP@", device)
                        .replace("@MOUNTED@", mounted)
                        .replace("@MOUNTPOINT@", mount_point)
                        .replace("@PID@", &std::process::id().to_string())
                        .replace("@HTTP@", http)
                        .replace("@PG@", pg.as_ref().map_or("", |p| p.url.as_str()));
                    let ok: &[i32] = if ANSWERS.iter().any(|e| e.0 == line.written) {
                        &[0, 1]
                    } else {
                        &[0]
                    };
                    if let Err(e) = place.run(&command, ok) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("README: {}\n  ran: {e}", line.written));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} README lines failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
