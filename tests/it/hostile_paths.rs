//! `bench disk` among hostile local users: the test file's name, a target's symlink and a
//! stale-looking file are all in reach of another user, who must never steer tacho's writes
//! or removals (issue 12, section 1), and a filesystem that fills up during a run is named as
//! such (section 5). Attackers run as nobody through setpriv, in a directory anyone may write
//! (mode 0777, no sticky bit).

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// A private temporary directory (searchable by others) with a `shared` directory in it that
/// every user may write, as a service's scratch directory might be.
struct Arena {
    root: tempfile::TempDir,
    shared: PathBuf,
}

impl Arena {
    fn new() -> Arena {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        Arena { root, shared }
    }

    fn shared(&self) -> &str {
        self.shared.to_str().unwrap()
    }
}

/// What the tests need beyond root, or why they cannot run.
fn missing(test: &str) -> bool {
    let why = if !is_root() {
        "needs root (the attacker runs as nobody, tacho as root)"
    } else if !have_tool("setpriv") {
        "setpriv (util-linux) is not installed"
    } else if !Path::new(PYTHON).exists() {
        "python3 is not installed"
    } else {
        return false;
    };
    skip(&format!("{test}: {why}"));
    true
}

/// A Python loop run as nobody in its own process group; killed with that group on drop.
struct Attacker(Child);

impl Attacker {
    fn start(script: &str, args: &[&str]) -> Attacker {
        let child = Command::new("setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "--inh-caps=-all",
                PYTHON,
                "-c",
                script,
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("cannot start the attacker");
        Attacker(child)
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        // SAFETY: signals the process group this guard started.
        unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Renames every tacho test file in DIR aside (to aside.N) and plants a symlink to VICTIM at
/// its name, for as long as it runs.
const SWAP_TEST_FILES: &str = r#"
import os, sys
d, victim = sys.argv[1], sys.argv[2]
n = 0
while True:
    for name in os.listdir(d):
        p = os.path.join(d, name)
        if not name.startswith(".tacho-bench.") or os.path.islink(p):
            continue
        try:
            os.rename(p, os.path.join(d, "aside.%d" % n))
            n += 1
            os.symlink(victim, p)
        except OSError:
            pass
"#;

fn asides(dir: &Path) -> usize {
    entries(dir)
        .iter()
        .filter(|n| n.starts_with("aside."))
        .count()
}

/// Runs write tests in the shared directory while the attacker swaps the test file for a
/// symlink to `victim`, until several runs were attacked, checking `intact` after each run;
/// returns how many were attacked.
fn run_under_swap_attack(arena: &Arena, victim: &str, intact: &dyn Fn() -> bool) -> usize {
    let _attacker = Attacker::start(SWAP_TEST_FILES, &[arena.shared(), victim]);
    let start = Instant::now();
    let mut attacked = 0;
    // Each run reopens the target for the direct-I/O probe, the lay-out, every job of every
    // repeat and the final flush: many chances for a name-based open to be redirected.
    while attacked < 5 && start.elapsed() < Duration::from_secs(25) {
        let before = asides(&arena.shared);
        let o = run(&[
            "bench",
            "disk",
            arena.shared(),
            "--json",
            "--rw",
            "randwrite",
            "--numjobs",
            "2",
            "--repeat",
            "4",
            "--size",
            "8M",
            "--runtime",
            "100ms",
        ]);
        assert!(intact(), "{victim} was written; tacho said: {}", stderr(&o));
        if asides(&arena.shared) > before {
            attacked += 1;
            assert!(
                stderr(&o).contains("renamed or replaced"),
                "tacho did not say its test file was swapped: {}",
                stderr(&o)
            );
        }
        assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    }
    attacked
}

#[test]
fn a_test_file_swapped_for_a_symlink_to_a_root_file_never_writes_it() {
    let test = "a_test_file_swapped_for_a_symlink_to_a_root_file";
    if missing(test) {
        return;
    }
    let arena = Arena::new();
    let victim = arena.root.path().join("victim.dat");
    let content: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&victim, &content).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let intact = || std::fs::read(&victim).unwrap() == content;
    let attacked = run_under_swap_attack(&arena, victim.to_str().unwrap(), &intact);
    assert!(attacked > 0, "the attacker never swapped a test file");
}

#[test]
fn a_test_file_swapped_for_a_symlink_to_an_ext4_device_never_writes_it() {
    let test = "a_test_file_swapped_for_a_symlink_to_an_ext4_device";
    if missing(test) {
        return;
    }
    let Some(dev) = LoopDev::new(test, 32 << 20) else {
        return;
    };
    assert!(dev.mkfs_ext4(), "mkfs.ext4 failed");
    let arena = Arena::new();
    let before = dev.content();
    let attacked = run_under_swap_attack(&arena, dev.path(), &|| dev.content() == before);
    assert!(attacked > 0, "the attacker never swapped a test file");
}

/// Points LINK at A and B in turn, every half millisecond, atomically (rename over it).
const FLIP_LINK: &str = r#"
import os, sys, time
link, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = link + ".new"
while True:
    for target in (a, b):
        try:
            os.symlink(target, tmp)
            os.rename(tmp, link)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        time.sleep(0.0005)
"#;

#[test]
fn a_symlink_flipping_between_a_blank_and_an_ext4_device_never_gets_ext4_written() {
    let test = "a_symlink_flipping_between_devices";
    if missing(test) {
        return;
    }
    let Some(blank) = LoopDev::new(test, 16 << 20) else {
        return;
    };
    let Some(ext4) = LoopDev::new(test, 16 << 20) else {
        return;
    };
    assert!(ext4.mkfs_ext4(), "mkfs.ext4 failed");
    let before = ext4.content();
    let arena = Arena::new();
    let link = arena.shared.join("disk");
    std::os::unix::fs::symlink(blank.path(), &link).unwrap();
    let _attacker = Attacker::start(
        FLIP_LINK,
        &[link.to_str().unwrap(), blank.path(), ext4.path()],
    );
    let (mut written, mut refused) = (0, 0);
    let start = Instant::now();
    for _ in 0..25 {
        if start.elapsed() > Duration::from_secs(40) {
            break;
        }
        // No --destroy-data: a device with a filesystem must be refused, whichever the link
        // named when tacho looked.
        let o = run(&[
            "bench",
            "disk",
            link.to_str().unwrap(),
            "--json",
            "--rw",
            "write",
            "--size",
            "1M",
            "--runtime",
            "100ms",
        ]);
        match o.status.code() {
            // Through root's own first link, before the attacker replaced it.
            Some(0) => written += 1,
            // The attacker's links are nobody's: refused before anything is opened.
            Some(2) if stderr(&o).contains("owned by uid 65534") => refused += 1,
            // "ext4" by libblkid, "ext2/3/4" by tacho's own table where libblkid is missing.
            Some(2) if stderr(&o).contains("ext4") || stderr(&o).contains("ext2/3/4") => {
                refused += 1
            }
            _ => panic!("unexpected outcome: {}", stderr(&o)),
        }
        assert!(ext4.content() == before, "the ext4 device was written");
    }
    assert!(
        refused > 0,
        "the link did not flip under tacho: {written} runs wrote, {refused} were refused"
    );
}

/// A job file names a file fio would create; before the admin runs it, another user plants a
/// link there to a device with no signature tacho knows (a raw database disk, say). Without
/// --destroy-data nothing may be written through it.
#[test]
fn a_job_files_target_planted_as_another_users_link_to_a_device_is_refused() {
    let test = "a_job_files_target_planted_as_a_link";
    if missing(test) {
        return;
    }
    let Some(dev) = LoopDev::new(test, 16 << 20) else {
        return;
    };
    let arena = Arena::new();
    let planted = arena.shared.join("fiofile");
    let o = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "ln",
            "-s",
            dev.path(),
            planted.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "cannot plant the link: {}", stderr(&o));
    let job = arena.root.path().join("job.fio");
    std::fs::write(
        &job,
        format!(
            "[w]\nrw=write\nbs=64k\nsize=1M\nruntime=100ms\nfilename={}\n",
            planted.display()
        ),
    )
    .unwrap();
    let before = dev.content();
    let o = run(&[
        "bench",
        "disk",
        ".",
        "--fio-job",
        job.to_str().unwrap(),
        "--json",
    ]);
    let err = assert_error(&o);
    assert!(
        err.contains("symbolic link") && err.contains("uid 65534"),
        "not refused for the link: {err}"
    );
    assert!(dev.content() == before, "the device was written");
}

fn test_files(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|n| n.starts_with(".tacho-bench."))
        .collect()
}

/// Polls until a `.tacho-bench.*` file exists in `dir` (10 s at most).
fn wait_for_test_file(dir: &Path, child: &mut Child) -> String {
    let start = Instant::now();
    loop {
        if let Some(name) = test_files(dir).pop() {
            return name;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no test file appeared in {} within 10 s", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A run that lasts until it is signalled.
fn long_run(program: &Path, dir: &Path) -> Child {
    Command::new(program)
        .env("TACHO_DB", scratch_db())
        .stdin(Stdio::null())
        .args([
            "bench",
            "disk",
            dir.to_str().unwrap(),
            "--json",
            "--buffered",
        ])
        .args(["--rw", "randread", "--size", "8M", "--runtime", "60s"])
        .spawn_piped()
}

fn stale_warnings(v: &serde_json::Value) -> usize {
    warning_codes(v)
        .iter()
        .filter(|c| *c == "removed-stale-file")
        .count()
}

#[test]
fn a_live_runs_file_is_kept_whatever_its_binary_is_called() {
    let dir = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let renamed = bin.path().join("notacho");
    std::fs::copy(env!("CARGO_BIN_EXE_tacho"), &renamed).unwrap();
    let mut first = long_run(&renamed, dir.path());
    let name = wait_for_test_file(dir.path(), &mut first);
    let v = json_ok(&run(&tiny_disk(
        dir.path().to_str().unwrap(),
        &["--json", "--buffered", "--rw", "randread"],
    )));
    let kept = dir.path().join(&name).exists();
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGINT) };
    let o = wait_output(first, Duration::from_secs(20));
    assert!(
        kept,
        "the second run removed the live run's test file {name}"
    );
    assert_eq!(stale_warnings(&v), 0, "{}", v["warnings"]);
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert_empty(dir.path());
}

#[test]
fn a_killed_runs_file_is_removed_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut killed = long_run(Path::new(env!("CARGO_BIN_EXE_tacho")), dir.path());
    let name = wait_for_test_file(dir.path(), &mut killed);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(dir.path().join(&name).exists(), "SIGKILL leaves the file");
    let v = json_ok(&run(&tiny_disk(
        dir.path().to_str().unwrap(),
        &["--json", "--buffered", "--rw", "randread"],
    )));
    assert_eq!(stale_warnings(&v), 1, "{}", v["warnings"]);
    assert_empty(dir.path());
}

#[test]
fn stale_looking_files_of_another_user_are_not_removed() {
    let test = "stale_looking_files_of_another_user";
    if !is_root() {
        skip(&format!("{test}: needs root to give a file to nobody"));
        return;
    }
    let arena = Arena::new();
    // Names of test files of runs that cannot be alive (pids above any pid_max).
    let foreign = arena.shared.join(".tacho-bench.2147483647.0000abcd.tmp");
    std::fs::write(&foreign, b"nobody's").unwrap();
    std::os::unix::fs::chown(&foreign, Some(NOBODY), Some(NOBODY)).unwrap();
    let victim = arena.root.path().join("victim.dat");
    std::fs::write(&victim, b"root's").unwrap();
    let link = arena.shared.join(".tacho-bench.2147483646.0000abcd.tmp");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let v = json_ok(&run(&tiny_disk(
        arena.shared(),
        &["--json", "--buffered", "--rw", "randread"],
    )));
    assert_eq!(stale_warnings(&v), 0, "{}", v["warnings"]);
    assert_eq!(std::fs::read(&foreign).unwrap(), b"nobody's");
    assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), NOBODY);
    assert!(link.symlink_metadata().is_ok(), "the symlink was removed");
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's");
}

/// Writes `path` until the filesystem holding it has no space left, then gives `leave` bytes
/// back.
fn fill_up(path: &Path, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("cannot fill {}: {e}", path.display()),
        }
    }
    let len = f.metadata().unwrap().len();
    f.set_len(len - leave).unwrap();
}

#[test]
fn a_filesystem_filling_up_during_the_run_is_named_and_the_file_removed() {
    let test = "a_filesystem_filling_up_during_the_run";
    if !is_root() {
        skip(&format!("{test}: needs root to mount tmpfs and FUSE"));
        return;
    }
    if !Command::new(PYTHON)
        .args(["-c", "import fusepy"])
        .status()
        .is_ok_and(|s| s.success())
    {
        skip(&format!("{test}: python3-fusepy is not installed"));
        return;
    }
    // A small real filesystem under a FUSE layer that has no fallocate: the test file is
    // sized but not reserved, as on ext2, FAT or NFS.
    let backing = tempfile::tempdir().unwrap();
    let _tmpfs = MountGuard::mount(&["-t", "tmpfs", "-o", "size=48M", "tmpfs"], backing.path())
        .unwrap_or_else(|e| panic!("cannot mount tmpfs: {e}"));
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("open");
    let fs = FuseMount::start(backing.path(), &["--gate", gate.to_str().unwrap()]);
    let target = fs.path().to_str().unwrap().to_owned();
    let mut child = tacho()
        .args(["bench", "disk", &target, "--buffered", "--rw", "write"])
        .args(["--size", "16M", "--runtime", "2s"])
        .spawn_piped();
    // The file exists and its first write waits: another program fills the filesystem now.
    wait_for_test_file(backing.path(), &mut child);
    // 2 MiB stay free: the lay-out's first 4 MiB write is cut short (2 of 4 MiB), as on a
    // real filesystem that fills in the middle of a write.
    fill_up(&backing.path().join("other-program.dat"), 2 << 20);
    std::fs::write(&gate, b"").unwrap();
    let o = wait_output(child, Duration::from_secs(30));
    let line = assert_error(&o);
    assert!(
        line.contains(&format!("the filesystem holding {target} filled up")),
        "{line}"
    );
    assert!(line.contains("--size"), "{line}");
    // A file removed while open lives on as .fuse_hidden* until FUSE's asynchronous release.
    let deadline = Instant::now() + Duration::from_secs(10);
    while entries(backing.path()) != ["other-program.dat"] {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            entries(backing.path())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sparse_file_target_filling_its_filesystem_is_named() {
    let test = "a_sparse_file_target_filling_its_filesystem";
    if !is_root() {
        skip(&format!("{test}: needs root to mount tmpfs"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _tmpfs = MountGuard::mount(&["-t", "tmpfs", "-o", "size=6M", "tmpfs"], dir.path())
        .unwrap_or_else(|e| panic!("cannot mount tmpfs: {e}"));
    let file = dir.path().join("sparse.img");
    for engine in ["psync", "io_uring"] {
        // 32 MiB that take no space yet: the second 4 MiB write finds only 2 MiB, and is cut
        // short there.
        std::fs::File::create(&file)
            .unwrap()
            .set_len(32 << 20)
            .unwrap();
        let path = file.to_str().unwrap();
        let o = run(&[
            "bench",
            "disk",
            path,
            "--destroy-data",
            "--buffered",
            "--rw",
            "write",
            "--bs",
            "4M",
            "--size",
            "16M",
            "--runtime",
            "2s",
            "--engine",
            engine,
        ]);
        let line = assert_error(&o);
        assert!(
            line.contains(&format!("the filesystem holding {path} filled up")),
            "{engine}: {line}"
        );
        std::fs::remove_file(&file).unwrap();
    }
}
