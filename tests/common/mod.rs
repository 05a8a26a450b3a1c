//! Helpers shared by the integration tests: running the built binary with a time limit,
//! parsing its JSON, skipping with a visible reason, and guards for loop devices and mounts
//! that always clean up (each test makes its own, so tests can run in parallel).

#![allow(dead_code)]

pub mod browser;
pub mod cgroup;
pub mod netns;
#[cfg(feature = "pg")]
pub mod pg;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Flags that keep every benchmark tiny.
pub const TINY: &[&str] = &["--size", "8M", "--runtime", "300ms"];

/// Checks a Prometheus textfile with `promtool check metrics`; skips, saying so, where
/// promtool is not installed (CI installs it). promtool does not look for a series written
/// twice, which Prometheus refuses at scrape time: that is checked here.
pub fn assert_promtool_accepts(path: &Path) {
    assert_series_unique(&std::fs::read_to_string(path).unwrap());
    if !have_tool("promtool") {
        skip("promtool is not installed: the textfile's format is not checked");
        return;
    }
    let o = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(path).unwrap())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Fails when a series (name and labels) of Prometheus text has two samples: Prometheus
/// refuses such a scrape, and promtool does not look for it.
pub fn assert_series_unique(text: &str) {
    let mut seen = std::collections::HashSet::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, _value) = line.rsplit_once(' ').expect("a series and its value");
        assert!(
            seen.insert(series),
            "series written twice: {series}\n{text}"
        );
    }
}

/// `bench disk TARGET OPTIONS… TINY`: a small, short disk run.
pub fn tiny_disk<'a>(target: &'a str, options: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["bench", "disk", target];
    args.extend_from_slice(options);
    args.extend_from_slice(TINY);
    args
}

/// No test run may take longer than this; a hang fails the test instead of the whole suite.
const RUN_LIMIT: Duration = Duration::from_secs(60);

pub fn tacho() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tacho"));
    cmd.stdin(Stdio::null());
    // Benchmarks save their runs; never into the real ~/.local/share. Tests of the store pass
    // their own --db, which wins over this.
    cmd.env("TACHO_DB", scratch_db());
    // Nor the machine's /etc/tacho/tacho.toml: an empty config file of this test process.
    // Tests of the config file pass their own --config or TACHO_CONFIG, which win.
    cmd.env("TACHO_CONFIG", scratch_db().with_file_name("tacho.toml"));
    cmd
}

/// A results database private to this test process, removed when it exits.
pub fn scratch_db() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    extern "C" fn remove_scratch() {
        if let Some(dir) = DIR.get() {
            let _ = std::fs::remove_dir_all(dir.path());
        }
    }
    DIR.get_or_init(|| {
        // SAFETY: registers a plain function without arguments; it only removes files.
        unsafe { libc::atexit(remove_scratch) };
        let dir = tempfile::Builder::new()
            .prefix("tacho-itest-db-")
            .tempdir()
            .expect("cannot create a scratch directory");
        std::fs::write(dir.path().join("tacho.toml"), "# no settings\n")
            .expect("cannot write the scratch config file");
        dir
    })
    .path()
    .join("tacho.db")
}

/// Starting a child whose stdout and stderr the test reads (with [`wait_output`]).
pub trait SpawnPiped {
    fn spawn_piped(&mut self) -> Child;
}

impl SpawnPiped for Command {
    fn spawn_piped(&mut self) -> Child {
        self.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start the command")
    }
}

/// Python starts tacho from its own small image and reports the peak of its children
/// (RUSAGE_CHILDREN), tacho's own. A child started straight from this test binary would carry,
/// in its ru_maxrss, the test binary's peak at the moment of the exec (the kernel keeps the old
/// image's high-water mark), over a gigabyte in a binary running hundreds of tests.
const MEASURE: &str = "import resource, subprocess, sys
try:
    r = subprocess.run(sys.argv[3:], timeout=float(sys.argv[2])).returncode
except subprocess.TimeoutExpired:
    sys.exit(f'tacho ran past {sys.argv[2]} s')
open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r if r >= 0 else 128 - r)
";

/// Runs tacho with `args` (at most a minute) and returns its output and peak resident memory.
pub fn run_measured(args: &[&str]) -> (Output, u64) {
    run_measured_within(args, RUN_LIMIT)
}

/// As [`run_measured`], failing (exit 1, saying so) when tacho runs past `limit`; a tacho
/// killed by a signal exits 128 + the signal's number.
pub fn run_measured_within(args: &[&str], limit: Duration) -> (Output, u64) {
    let dir = tempfile::tempdir().unwrap();
    let peak = dir.path().join("maxrss");
    let template = tacho();
    let mut command = Command::new(PYTHON);
    for (key, value) in template.get_envs() {
        match value {
            Some(v) => command.env(key, v),
            None => command.env_remove(key),
        };
    }
    let output = command
        .args(["-c", MEASURE])
        .arg(&peak)
        .arg(limit.as_secs_f64().to_string())
        .arg(template.get_program())
        .args(args)
        .output()
        .unwrap();
    let kib: u64 = std::fs::read_to_string(&peak)
        .unwrap_or_else(|e| panic!("no peak for {args:?} ({e}): {}", stderr(&output)))
        .parse()
        .unwrap();
    (output, kib * 1024)
}

/// Runs tacho with `args`, collecting its output; panics if it runs past [`RUN_LIMIT`].
pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut cmd = tacho();
    cmd.args(args);
    run_cmd(cmd)
}

pub fn run_cmd(mut cmd: Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start tacho");
    wait_output(child, RUN_LIMIT)
}

/// Waits for `child` (stdout piped; stderr piped, or on a [`ProgressScreen`], where it reads
/// as empty here) at most `limit`, reading the pipes meanwhile.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let mut out = child.stdout.take().expect("stdout piped");
    let err = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut err) = err {
            let _ = err.read_to_end(&mut buf);
        }
        buf
    });
    let status = wait_limited(&mut child, limit);
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Waits for `child` at most `limit`; kills it and panics when it takes longer.
pub fn wait_limited(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("cannot wait for tacho") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tacho did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit code 0 and parses stdout as JSON.
pub fn json_ok(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "expected success; stderr: {}",
        stderr(o)
    );
    parse_json(o)
}

pub fn parse_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Asserts the usage/runtime error contract: exit 2, exactly one line on stderr starting
/// `tacho: `, nothing on stdout. Returns that line.
pub fn assert_error(o: &Output) -> String {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected exit 2; stdout: {}; stderr: {err}",
        stdout(o)
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {err:?}");
    assert!(
        lines[0].starts_with("tacho: "),
        "stderr line must start with 'tacho: ': {err:?}"
    );
    assert!(o.stdout.is_empty(), "nothing on stdout: {}", stdout(o));
    lines[0].to_owned()
}

/// Names of the entries in `dir`.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn assert_empty(dir: &Path) {
    let left = entries(dir);
    assert!(
        left.is_empty(),
        "left behind in {}: {left:?}",
        dir.display()
    );
}

/// Skips a test whose real check cannot run here: locally it writes a SKIP line that libtest
/// does not capture, so the reason is visible; in CI (`CI` set) it fails instead, because CI
/// installs everything the tests need and a quiet skip there would hide a broken environment.
/// The only skips CI tolerates are the ones its kernel forces: [`skip_kernel_lacks`].
pub fn skip(reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("this test would skip in CI, where it must run: {reason}");
    }
    let _ = writeln!(std::io::stderr(), "SKIP: {reason}");
    count_skip();
}

static SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a skip; the first one arranges for the count to be printed when the test binary
/// exits, after libtest's summary, which counts a skipped test as passed.
fn count_skip() {
    if SKIPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
        // SAFETY: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(report_skips) };
    }
}

extern "C" fn report_skips() {
    let n = SKIPPED.load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(
        std::io::stderr(),
        "{n} of the tests above skipped their real check (see the SKIP lines): they passed \
         without testing anything"
    );
}

/// Held by each test of tests/serial, which change kernel-wide settings: one at a time.
pub fn kernel_wide() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the CI kernel (Firecracker, Debian 12, 6.18) lacks: the one list of skips CI accepts.
#[derive(Debug, Clone, Copy)]
pub enum KernelLacks {
    /// CONFIG_BLK_DEV_DM is not built and there are no modules: no dm-delay, dm-linear.
    DeviceMapper,
}

impl KernelLacks {
    fn reason(self) -> &'static str {
        match self {
            KernelLacks::DeviceMapper => "the kernel has no device-mapper (CONFIG_BLK_DEV_DM)",
        }
    }
}

/// Skips, in CI too, a test that needs what the kernel lacks; the detail says what was probed.
pub fn skip_kernel_lacks(lacks: KernelLacks, detail: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP ({}): {detail}", lacks.reason());
    count_skip();
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `tool` can be started (found on PATH or in the sbin directories).
pub fn have_tool(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Runs an auxiliary tool and panics with its stderr if it fails.
pub fn sh(tool: &str, args: &[&str]) -> String {
    let o = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    assert!(
        o.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A self-signed certificate for 127.0.0.1 made by openssl: `tacho.crt` and `tacho.key` in
/// `dir`.
pub fn self_signed_certificate(dir: &Path) {
    let o = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            "tacho.key",
            "-out",
            "tacho.crt",
        ])
        .current_dir(dir)
        .output()
        .expect("openssl is installed (.ci/run installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A loopback port free a moment ago (for a server the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The whole answer (head and body) to `GET path` on a loopback port, HTTP/1.0.
pub fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// A loop device over a private image in /dev/shm; detached and the image removed on drop.
pub struct LoopDev {
    pub dev: PathBuf,
    image: tempfile::NamedTempFile,
}

impl LoopDev {
    /// Returns None (after printing why) when loop devices cannot be used here.
    pub fn new(test: &str, size: u64) -> Option<LoopDev> {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        Self::new_in(test, size, &dir)
    }

    /// Like [`LoopDev::new`], with the image in `dir`, whose filesystem gives the device
    /// its speed.
    pub fn new_in(test: &str, size: u64, dir: &Path) -> Option<LoopDev> {
        if !is_root() {
            skip(&format!("{test}: needs root for a loop device"));
            return None;
        }
        if !have_tool("losetup") {
            skip(&format!("{test}: losetup is not installed"));
            return None;
        }
        let image = tempfile::Builder::new()
            .prefix("tacho-itest-")
            .suffix(".img")
            .tempfile_in(dir)
            .expect("cannot create a loop image");
        image.as_file().set_len(size).unwrap();
        Self::attach(test, image, &[])
    }

    /// A 64 MiB loop device over a file on the real disk, with direct I/O: each synchronous
    /// write waits for the disk, so the device is busy (a verdict naming its writer) even on a
    /// loaded machine.
    pub fn direct_on_disk(test: &str) -> Option<LoopDev> {
        let image = tempfile::Builder::new()
            .suffix(".img")
            .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        image.as_file().set_len(64 << 20).unwrap();
        LoopDev::attach(test, image, &["--direct-io=on"])
    }

    /// A loop device over `image` (which the guard then owns), with extra `losetup` options
    /// such as `--direct-io=on`.
    pub fn attach(
        test: &str,
        image: tempfile::NamedTempFile,
        losetup_options: &[&str],
    ) -> Option<LoopDev> {
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .args(losetup_options)
            .arg(image.path())
            .output()
            .expect("cannot run losetup");
        if !o.status.success() {
            skip(&format!(
                "{test}: losetup failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return None;
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        Some(LoopDev { dev, image })
    }

    /// The backing file.
    pub fn image(&self) -> &Path {
        self.image.path()
    }

    pub fn path(&self) -> &str {
        self.dev.to_str().unwrap()
    }

    /// Kernel name, e.g. "loop3".
    pub fn name(&self) -> String {
        self.dev.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// The whole device's content, for before/after comparisons.
    pub fn content(&self) -> Vec<u8> {
        // Through the device, as a later reader of the device would see it.
        std::fs::read(&self.dev).expect("cannot read the loop device")
    }

    pub fn mkfs_ext4(&self) -> bool {
        Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&self.dev)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        // Detach only the device this guard attached; the image file is removed afterwards,
        // when `self.image` drops.
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// A filesystem mounted by a test; unmounted on drop (before the loop device is detached,
/// as long as the guard is declared after the LoopDev).
pub struct MountGuard {
    pub dir: PathBuf,
}

impl MountGuard {
    pub fn mount(args: &[&str], dir: &Path) -> Result<MountGuard, String> {
        let o = Command::new("mount")
            .args(args)
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?;
        if o.status.success() {
            Ok(MountGuard {
                dir: dir.to_path_buf(),
            })
        } else {
            Err(String::from_utf8_lossy(&o.stderr).trim().to_owned())
        }
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        // A filesystem can stay busy for a moment after the last process using it exits
        // (asynchronous teardown of its files); retry for up to 5 s rather than leak a mount.
        for _ in 0..100 {
            let unmounted = Command::new("umount")
                .arg(&self.dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if unmounted {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Still busy: detach it lazily, so that it goes once its last user does.
        let lazy = Command::new("umount")
            .args(["-l"])
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        let _ = writeln!(
            std::io::stderr(),
            "WARNING: {} was busy for 5 s{}",
            self.dir.display(),
            if lazy {
                "; unmounted lazily"
            } else {
                " and could not be unmounted"
            }
        );
    }
}

/// The tests array of a report, checked to be non-empty.
pub fn tests_of(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    let tests = v["tests"].as_array().expect("tests is an array");
    assert!(!tests.is_empty(), "no tests in {v}");
    tests
}

/// Codes of the top-level warnings.
/// Codes of the run's warnings and of every test's, in that order.
pub fn warning_codes(v: &serde_json::Value) -> Vec<String> {
    let tests = v["tests"].as_array().map(Vec::as_slice).unwrap_or_default();
    std::iter::once(&v["warnings"])
        .chain(tests.iter().map(|t| &t["warnings"]))
        .flat_map(|w| w.as_array().expect("warnings is an array"))
        .map(|w| w["code"].as_str().unwrap().to_owned())
        .collect()
}

/// tacho's stderr on a pseudo-terminal, so it draws its progress bar, with a reader that keeps
/// everything drawn: a test waits for a phase by its label ("(2/3)", a test's name) instead of
/// sleeping and hoping the phase has begun.
pub struct ProgressScreen {
    slave: Option<std::os::fd::OwnedFd>,
    drawn: std::sync::Arc<std::sync::Mutex<String>>,
}

impl ProgressScreen {
    pub fn new() -> ProgressScreen {
        let (master, slave) = open_pty(160);
        let drawn = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let keep = drawn.clone();
        std::thread::spawn(move || {
            read_until_hangup(master, |chunk| {
                keep.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(chunk))
            })
        });
        ProgressScreen {
            slave: Some(slave),
            drawn,
        }
    }

    /// The terminal side, for the child's stderr (once).
    pub fn stderr(&mut self) -> Stdio {
        Stdio::from(self.slave.take().expect("the terminal is given once"))
    }

    /// Waits until `text` has been drawn; kills `child` and fails the test after 60 s.
    pub fn wait_for(&self, text: &str, child: &mut Child) {
        let start = Instant::now();
        while !self.drawn.lock().unwrap().contains(text) {
            if start.elapsed() > Duration::from_secs(60) || matches!(child.try_wait(), Ok(Some(_)))
            {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "tacho never drew {text:?}; it drew: {}",
                    self.drawn.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Debian's python3, which has python3-fusepy (a python3 elsewhere on PATH may not).
pub const PYTHON: &str = "/usr/bin/python3";

/// A pass-through FUSE filesystem (tests/helpers/passfs.py, options as it documents) over
/// `backing`, mounted on a fresh directory; unmounted and its server stopped on drop.
pub struct FuseMount {
    mount_point: tempfile::TempDir,
    server: Child,
}

impl FuseMount {
    pub fn start(backing: &Path, options: &[&str]) -> FuseMount {
        let mount_point = tempfile::tempdir().unwrap();
        let mut server = Command::new(PYTHON)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/helpers/passfs.py"
            ))
            .arg(backing)
            .arg(mount_point.path())
            .args(options)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mounted = || {
            std::fs::read_to_string("/proc/self/mounts")
                .unwrap()
                .lines()
                .any(|l| l.split(' ').nth(1) == mount_point.path().to_str())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !mounted() {
            if let Ok(Some(status)) = server.try_wait() {
                let mut err = String::new();
                server
                    .stderr
                    .as_mut()
                    .unwrap()
                    .read_to_string(&mut err)
                    .ok();
                panic!("passfs.py exited ({status}) before mounting: {err}");
            }
            assert!(Instant::now() < deadline, "passfs.py did not mount in 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        FuseMount {
            mount_point,
            server,
        }
    }

    pub fn path(&self) -> &Path {
        self.mount_point.path()
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        // Unmounting ends the server's loop. A loop device over a file in here keeps the
        // mount busy until the kernel has released it, a moment after `losetup -d`: retry,
        // then detach it lazily, so that no dead mount is left in /tmp once the server goes.
        let umount = |lazy: bool| {
            Command::new("umount")
                .args(lazy.then_some("-l"))
                .arg(self.mount_point.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let mut unmounted = false;
        for _ in 0..100 {
            unmounted = umount(false);
            if unmounted {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !unmounted {
            umount(true);
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.server.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// How many pixels of a PNG screenshot have each of `colours` (RGB), to tell a drawn chart
/// from an empty one.
pub fn count_pixels(png_file: &Path, colours: &[[u8; 3]]) -> Vec<usize> {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_file).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    colours
        .iter()
        .map(|rgb| {
            buf[..info.buffer_size()]
                .chunks(channels)
                .filter(|p| p[..3] == rgb[..])
                .count()
        })
        .collect()
}

/// Starts `tacho files ARGS` with piped output and returns once its marks are set (it printed
/// "tacho: watching"), with what it printed on stderr so far; the rest of stderr stays on the
/// child, behind the returned reader's buffer.
// The child is handed to the caller, who waits for it; clippy sees only this function.
#[allow(clippy::zombie_processes)]
pub fn start_files_watch(
    args: &[&std::ffi::OsStr],
) -> (Child, std::io::BufReader<std::process::ChildStderr>, String) {
    use std::io::BufRead;
    let mut child = tacho()
        .arg("files")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start tacho");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.wait();
            panic!("tacho files exited before watching: {head}");
        }
        head.push_str(&line);
        if line.starts_with("tacho: watching") {
            return (child, err, head);
        }
    }
}

/// The headless Chromium the HTML tests render with; `None` (after `skip`) where it is not
/// installed (CI installs it).
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| have_tool(c));
    if found.is_none() {
        skip("chromium is not installed: the HTML report was not rendered");
    }
    found
}

/// Headless Chromium with a private profile and nothing that reaches the network.
pub fn chromium_command(chromium: &str, profile: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// A child process killed (and reaped) on drop, so a failing assertion leaves none behind.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Python program writing 64 KiB blocks with O_DIRECT over the whole of the device named by
/// its first argument, round and round.
pub const DIRECT_WRITER: &str = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 65536)
off = 0
while True:
    os.pwrite(fd, buf, off)
    off = (off + 65536) % size
"#;

/// Writes 64 KiB blocks with O_DIRECT over the whole of `dev`, round and round, until dropped.
pub fn direct_writer(dev: &str) -> Killed {
    Killed(
        Command::new("python3")
            .args(["-c", DIRECT_WRITER, dev])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cannot start python3"),
    )
}

/// Opens `csv` with Python's csv module (as a spreadsheet import would split it) and fails on
/// any cell a spreadsheet would run as a formula (starting with `=`, `+`, `-` or `@`) or that
/// holds a control character or a bidirectional control.
pub fn assert_spreadsheet_safe(what: &str, csv: &str) {
    const CHECK: &str = r#"
import csv, io, sys
BIDI = {0x200e, 0x200f, *range(0x202a, 0x202f), *range(0x2066, 0x206a)}
bad = []
rows = 0
for row in csv.reader(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", newline="")):
    rows += 1
    for cell in row:
        if cell[:1] in ("=", "+", "-", "@") or any(
            ord(c) < 32 or 127 <= ord(c) < 160 or ord(c) in BIDI for c in cell
        ):
            bad.append(cell)
print(rows)
if bad:
    sys.exit("unsafe cells: " + repr(bad[:5]))
"#;
    let mut child = Command::new("python3")
        .args(["-c", CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(csv.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{what}: {}\n{csv}", stderr(&o));
    let rows: usize = stdout(&o).trim().parse().unwrap();
    assert!(rows > 1, "{what}: a header and rows: {csv}");
}

/// Every cell of a CSV document, row after row.
pub fn csv_cells(csv: &str) -> Vec<String> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv.as_bytes())
        .records()
        .flat_map(|r| {
            r.expect("CSV")
                .iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What tacho printed on a pseudo-terminal `cols` columns wide: stdout always, stderr too when
/// `stderr_too` (else piped, in the returned output), with the terminal's CR LF turned back
/// into LF. `cmd` is [`tacho()`] with its arguments and environment (`COLUMNS` if any).
pub fn on_terminal(mut cmd: Command, cols: u16, stderr_too: bool) -> (String, Output) {
    let (master, slave) = open_pty(cols);
    let reader = std::thread::spawn(move || {
        let mut drawn = Vec::new();
        read_until_hangup(master, |chunk| drawn.extend_from_slice(chunk));
        String::from_utf8_lossy(&drawn).replace("\r\n", "\n")
    });
    cmd.stdout(Stdio::from(slave.try_clone().unwrap()));
    cmd.stderr(if stderr_too {
        Stdio::from(slave.try_clone().unwrap())
    } else {
        Stdio::piped()
    });
    let mut child = cmd.spawn().expect("cannot start tacho");
    drop(slave);
    drop(cmd);
    let err = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut err) = err {
            let _ = err.read_to_end(&mut buf);
        }
        buf
    });
    let status = wait_limited(&mut child, RUN_LIMIT);
    let output = Output {
        status,
        stdout: Vec::new(),
        stderr: err_reader.join().unwrap(),
    };
    (reader.join().unwrap(), output)
}

/// The lines of `text` wider than `cols` columns (control sequences not counted).
pub fn wider_than(text: &str, cols: usize) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().filter(|c| !c.is_control()).count() > cols)
        .map(str::to_string)
        .collect()
}

/// A pseudo-terminal `cols` columns wide: its master side and its terminal side. Both are
/// close-on-exec: the tests start processes from many threads at once, and a terminal side
/// inherited by another test's long-lived child would keep this one open after tacho exits.
fn open_pty(cols: u16) -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the given integers; no name is asked.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    for fd in [master, slave] {
        // SAFETY: fcntl on a descriptor just opened here; no memory is passed.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        assert_eq!(rc, 0, "fcntl(FD_CLOEXEC) failed");
    }
    // SAFETY: both descriptors were just opened and are owned here alone.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}

/// Hands `take` everything written to the terminal of `master` until every holder of its other
/// side has closed it (the read then fails with EIO). A read interrupted by a signal is retried;
/// any other failure fails the test rather than cutting what was drawn short.
fn read_until_hangup(mut master: std::fs::File, mut take: impl FnMut(&[u8])) {
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => take(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EIO) => return,
            Err(e) => panic!("reading the terminal tacho drew on: {e}"),
        }
    }
}

/// A command that runs `program` as `nobody` (group `nogroup`, no supplementary groups)
/// through setpriv: the unprivileged user of the tests that check what root's tacho refuses
/// or keeps from strangers. The caller checks `is_root()` and `have_tool("setpriv")`.
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(program);
    c
}

/// Restores a sysfs file's active choice when dropped (also during a panic's unwinding).
pub struct Restore {
    path: PathBuf,
    value: String,
}

impl Restore {
    /// Saves the active choice of `path` (`always [madvise] never` saves `madvise`).
    pub fn save(path: &Path) -> Option<Restore> {
        let text = std::fs::read_to_string(path).ok()?;
        let value = active(&text)?;
        Some(Restore {
            path: path.to_path_buf(),
            value,
        })
    }

    pub fn set(&self, value: &str) {
        std::fs::write(&self.path, value)
            .unwrap_or_else(|e| panic!("cannot write {value} to {}: {e}", self.path.display()));
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.value) {
            eprintln!(
                "WARNING: could not restore {} to {}: {e}",
                self.path.display(),
                self.value
            );
        }
    }
}

/// The bracketed (active) word of a kernel choice file.
pub fn active(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .map(str::to_string)
}

/// Why a FUSE filesystem served by tests/helpers/passfs.py cannot be mounted here, if it
/// cannot (root for allow_other, the kernel's fuse, Debian's python3-fusepy).
pub fn fuse_missing() -> Option<String> {
    if !is_root() {
        return Some("needs root to mount a FUSE filesystem".into());
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems.split_whitespace().any(|w| w == "fuse") {
        return Some("this kernel has no fuse filesystem".into());
    }
    let fusepy = Command::new(PYTHON)
        .args(["-c", "import fusepy"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!fusepy).then(|| format!("{PYTHON} cannot import fusepy (apt-get install python3-fusepy)"))
}

/// One report of per-process attribution and device latency, over 2 s.
pub const TOP_LATENCY: [&str; 7] = [
    "top",
    "--json",
    "--latency",
    "--interval",
    "2s",
    "--count",
    "1",
];

/// Bytes that `pid` wrote on the device `name` in one `top --json --latency` report, and
/// bytes that every process wrote there.
pub fn writes_on(doc: &serde_json::Value, name: &str, pid: u32) -> (u64, u64) {
    let written = |by: Option<u32>| -> u64 {
        doc["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .filter(|p| p["op"] == "write" && p["device"] == name)
            .filter(|p| by.is_none_or(|pid| p["pid"] == pid))
            .map(|p| p["bytes"].as_u64().unwrap())
            .sum()
    };
    (written(Some(pid)), written(None))
}

/// Checks that `out`, one report of `top --json --latency` (`what` in messages), gives the
/// writer `pid` all the writes on `dev` (at least 4 MiB) and the device its service times;
/// returns the report.
pub fn assert_attributed(
    out: &std::process::Output,
    dev: &LoopDev,
    pid: u32,
    what: &str,
) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: tacho failed: {}",
        stderr(out)
    );
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON line");
    assert_eq!(doc["schema"], "tacho.top.latency.v1", "{line}");
    let name = dev.name();
    let (by_writer, total) = writes_on(&doc, &name, pid);
    assert!(
        by_writer >= 4 << 20,
        "{what}: the writer {pid} wrote only {by_writer} bytes on {name}: {line}"
    );
    assert!(
        by_writer as f64 >= 0.99 * total as f64,
        "{what}: the writer {pid} has {by_writer} of {total} bytes on {name}: {line}"
    );
    let device = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == name.as_str())
        .unwrap_or_else(|| panic!("{what}: no latency for {name}: {line}"));
    assert!(
        device["service"]["requests"].as_u64().unwrap() > 0,
        "{what}: {line}"
    );
    assert!(
        device["service"]["p99_us"].as_f64().unwrap()
            >= device["service"]["p50_us"].as_f64().unwrap(),
        "{what}: {line}"
    );
    doc
}
