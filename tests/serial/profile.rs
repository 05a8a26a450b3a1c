//! `tacho profile` (root): a C program built here spending its time in one function is named
//! with ≥ 80% of its samples; the same program stripped is shown by address with "no symbols";
//! a JIT function named only in a perf map is named; memory stress with THP `always` puts the
//! kernel's memory code at the top with the verdict in words; the SVG renders in Chromium with
//! the function; `--folded` is read by a flame-graph library; without permission, exit 2 with
//! the sysctl and capability. Each test profiles the whole machine, so one test's load must not
//! be in another's samples: they are serial tests, one at a time under `common::kernel_wide`.

use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BURN: &str = r#"
#include <stdio.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void burn_cycles(void) { for (;;) sink++; }
int main(void) { printf("%d\n", getpid()); fflush(stdout); burn_cycles(); return 0; }
"#;

/// Spins in two bytes of anonymous executable memory (`jmp .`), named only in its perf map.
const JIT: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    p[0] = 0xEB; p[1] = 0xFE;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "%lx 2 jit_spin_loop\n", (unsigned long)p);
    fclose(f);
    printf("%d\n", getpid()); fflush(stdout);
    ((void (*)(void))p)();
    return 0;
}
"#;

/// Spins in anonymous executable memory like [`JIT`] but writes no perf map of its own:
/// with `fifo` as its argument it makes its perf map a FIFO (as any user may, for a process
/// of theirs). Prints its pid and the JIT code's address.
const JIT_QUIET: &str = r#"
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    p[0] = 0xEB; p[1] = 0xFE;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    if (argc > 1 && strcmp(argv[1], "fifo") == 0 && mkfifo(path, 0644) != 0) return 2;
    printf("%d %lx\n", getpid(), (unsigned long)p); fflush(stdout);
    ((void (*)(void))p)();
    return 0;
}
"#;

/// Builds `source` as `dir/name` with frame pointers.
fn build(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let o = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is installed: .ci/run installs gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    bin
}

/// A spinning program, killed on drop (its perf map removed).
struct Spinner {
    child: Child,
    pid: u32,
}

impl Spinner {
    fn start(bin: &Path) -> Spinner {
        Spinner::spawn(Command::new(bin)).0
    }

    /// Starts `cmd`, which prints its pid first on its line; returns the rest of that line.
    fn spawn(mut cmd: Command) -> (Spinner, String) {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (pid, rest) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let spinner = Spinner {
            pid: pid.parse().unwrap_or_else(|_| panic!("no pid in {line:?}")),
            child,
        };
        (spinner, rest.to_string())
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.pid));
    }
}

/// Profiles `bin` running alone (its own samples only) for 2 s.
fn profile_spinning(bin: &Path) -> Value {
    let spinner = Spinner::start(bin);
    let pid = spinner.pid.to_string();
    profile(&["--pid", &pid, "--duration", "2s"])
}

fn profile(args: &[&str]) -> Value {
    let mut all = vec!["profile", "--json"];
    all.extend(args);
    json_ok(&run(&all))
}

fn root_or_skip(test: &str) -> bool {
    if !is_root() {
        skip(&format!("{test}: needs root"));
        return false;
    }
    true
}

#[test]
fn a_hot_function_is_named_with_most_of_its_samples() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("a_hot_function_is_named_with_most_of_its_samples") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "burner", BURN);
    let p = profile_spinning(&bin);
    let top = &p["functions"][0];
    assert_eq!(top["name"], "burn_cycles", "{p}");
    assert_eq!(top["module"], "burner");
    assert!(top["self_pct"].as_f64().unwrap() >= 80.0, "{top}");
    assert!(
        p["verdict"]
            .as_str()
            .unwrap()
            .contains("in one user function: burn_cycles in burner"),
        "{}",
        p["verdict"]
    );
    // The same binary stripped: shown by address, and said to have no symbols.
    let stripped = dir.path().join("stripped");
    std::fs::copy(&bin, &stripped).unwrap();
    let o = Command::new("strip").arg(&stripped).output().unwrap();
    assert!(o.status.success());
    let p = profile_spinning(&stripped);
    let top = &p["functions"][0];
    assert!(
        top["name"].as_str().unwrap().starts_with("stripped+0x"),
        "{top}"
    );
    assert_eq!(top["known"], false);
    let notes = p["notes"].to_string();
    assert!(notes.contains("stripped: no symbols"), "{notes}");
}

#[test]
fn a_jit_function_in_a_perf_map_is_named() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("a_jit_function_in_a_perf_map_is_named") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "jitter", JIT);
    let p = profile_spinning(&bin);
    let top = &p["functions"][0];
    assert_eq!(top["name"], "jit_spin_loop", "{p}");
    assert!(top["self_pct"].as_f64().unwrap() >= 80.0, "{top}");
}

/// A directory of the test's that `nobody` may enter (for its programs).
fn open_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn a_fifo_planted_as_a_perf_map_does_not_hang_the_profiler() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_fifo_planted_as_a_perf_map_does_not_hang_the_profiler";
    if !root_or_skip(test) {
        return;
    }
    if !have_tool("setpriv") {
        return skip(&format!("{test}: setpriv is not installed"));
    }
    let dir = open_tempdir();
    let bin = build(dir.path(), "fifojit", JIT_QUIET);
    // nobody's process, whose perf map is a FIFO no one writes: opening it blocks.
    let mut cmd = as_nobody(&bin);
    cmd.arg("fifo");
    let (spinner, _) = Spinner::spawn(cmd);
    let pid = spinner.pid.to_string();
    let child = tacho()
        .args(["profile", "--json", "--pid", &pid, "--duration", "2s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Generous: only a hang (blocked in open) takes this long.
    let o = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = parse_json(&o);
    let top = &p["functions"][0];
    assert_eq!(top["known"], false, "{p}");
}

#[test]
fn a_perf_map_planted_by_another_user_names_nothing() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_perf_map_planted_by_another_user_names_nothing";
    if !root_or_skip(test) {
        return;
    }
    if !have_tool("setpriv") {
        return skip(&format!("{test}: setpriv is not installed"));
    }
    let dir = open_tempdir();
    let bin = build(dir.path(), "quietjit", JIT_QUIET);
    // root's JIT process writes no perf map; nobody writes one for it, naming its code.
    let (spinner, addr) = Spinner::spawn(Command::new(&bin));
    let map = format!("/tmp/perf-{}.map", spinner.pid);
    let o = as_nobody(Path::new("sh"))
        .arg("-c")
        .arg(format!("echo '{addr} 2 planted_by_nobody' > {map}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pid = spinner.pid.to_string();
    let p = profile(&["--pid", &pid, "--duration", "2s"]);
    assert!(!p.to_string().contains("planted_by_nobody"), "{p}");
    assert_eq!(p["functions"][0]["known"], false, "{p}");
}

/// Removes the file that stalls the FUSE server's stat, on drop (before the mount goes).
struct Unstall(PathBuf);

impl Drop for Unstall {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A burner running from a FUSE filesystem whose stat never answers (as a user's FUSE server
/// can do to the files of its processes), with `tacho profile` for 1 s started on it. Dropped
/// in field order: the stall ends first.
struct Stalled {
    _unstall: Unstall,
    spinner: Spinner,
    _fuse: FuseMount,
    _dirs: [tempfile::TempDir; 2],
}

/// None (after a SKIP line) without root or python3-fusepy.
fn stalled_profile(test: &str) -> Option<(Stalled, Child)> {
    if !root_or_skip(test) {
        return None;
    }
    let fusepy = Command::new(PYTHON).args(["-c", "import fusepy"]).status();
    if !fusepy.is_ok_and(|s| s.success()) {
        skip(&format!("{test}: python3-fusepy is not installed"));
        return None;
    }
    let backing = open_tempdir();
    build(backing.path(), "burner", BURN);
    let flags = tempfile::tempdir().unwrap();
    let stall = flags.path().join("stall");
    let fuse = FuseMount::start(
        backing.path(),
        &["--stall-getattr", stall.to_str().unwrap()],
    );
    let spinner = Spinner::start(&fuse.path().join("burner"));
    let unstall = Unstall(stall.clone());
    std::fs::write(&stall, "").unwrap();
    // The kernel's cached attributes of the file last a second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = spinner.pid.to_string();
    let child = tacho()
        .args(["profile", "--json", "--pid", &pid, "--duration", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stalled = Stalled {
        _unstall: unstall,
        spinner,
        _fuse: fuse,
        _dirs: [backing, flags],
    };
    Some((stalled, child))
}

#[test]
fn a_stalled_binary_does_not_keep_sigterm_from_stopping_the_profiler() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_stalled_binary_does_not_keep_sigterm_from_stopping_the_profiler";
    let Some((stalled, mut child)) = stalled_profile(test) else {
        return;
    };
    let (lines, said) = std::sync::mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // Sampling is over; naming the burner's functions waits on the stalled server.
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: signals the child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    // Generous: only a tacho that ignores SIGTERM takes this long. (A thread inside a FUSE
    // request the server has taken cannot be killed, even by SIGKILL, so the process itself
    // is gone only once the server answers: tacho's part is to stop waiting for it.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut stopped = false;
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match said.recv_timeout(left) {
            Ok(line) if line.contains("stopped while naming functions") => {
                stopped = true;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    drop(stalled);
    let status = wait_limited(&mut child, std::time::Duration::from_secs(30));
    assert!(stopped, "tacho went on waiting for names after SIGTERM");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[test]
fn a_stalled_binary_costs_its_names_not_the_profile() {
    let kernel_wide = crate::common::kernel_wide();
    let test = "a_stalled_binary_costs_its_names_not_the_profile";
    let Some((stalled, mut child)) = stalled_profile(test) else {
        return;
    };
    // Sampling (1 s) is over well before naming is given up (30 s): the burner is stopped and
    // the other serial tests go on meanwhile, their samples free of it.
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: signals the burner this test started; it is reaped when `stalled` drops.
    unsafe { libc::kill(stalled.spinner.pid as libc::pid_t, libc::SIGSTOP) };
    drop(kernel_wide);
    // The document is out once naming is given up (30 s); the process itself ends only once
    // the server answers, which the kernel waits for.
    let (lines, said) = std::sync::mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let done = line == "}";
            let _ = lines.send(line);
            if done {
                return;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut doc = String::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match said.recv_timeout(left) {
            Ok(line) => {
                doc.push_str(&line);
                if line == "}" {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    drop(stalled);
    let status = wait_limited(&mut child, std::time::Duration::from_secs(30));
    let p: Value = serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{e}: {doc:?}"));
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        p["notes"].to_string().contains("gave up after 30 s"),
        "{}",
        p["notes"]
    );
    assert!(p["busy_samples"].as_u64().unwrap() > 0, "{p}");
}

/// Sets THP `enabled` to `always` and restores it on drop.
struct ThpAlways(String);

impl ThpAlways {
    fn set() -> ThpAlways {
        let path = "/sys/kernel/mm/transparent_hugepage/enabled";
        let text = std::fs::read_to_string(path).unwrap();
        let was = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
            .unwrap()
            .to_owned();
        std::fs::write(path, "always").unwrap();
        ThpAlways(was)
    }
}

impl Drop for ThpAlways {
    fn drop(&mut self) {
        let _ = std::fs::write("/sys/kernel/mm/transparent_hugepage/enabled", &self.0);
    }
}

#[test]
fn memory_stress_with_thp_always_puts_kernel_memory_work_first() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("memory_stress_with_thp_always_puts_kernel_memory_work_first") {
        return;
    }
    let _thp = ThpAlways::set();
    let mut stress = tacho()
        .args([
            "stress",
            "--vm",
            "2",
            "--vm-bytes",
            "512M",
            "--timeout",
            "20s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let p = profile(&["--duration", "3s"]);
    let _ = stress.kill();
    let _ = stress.wait();
    let verdict = p["verdict"].as_str().unwrap();
    assert!(verdict.contains("% of CPU in the kernel:"), "{verdict}");
    assert_eq!(p["subsystems"][0]["subsystem"], "thp", "{p}");
    assert!(
        verdict.contains("in page clearing and compaction for transparent huge pages"),
        "{verdict}"
    );
}

/// Builds `source` as `burner`, runs it (as `nobody` when asked), profiles it for 2 s with
/// `mode` (`--folded`, `--json`) and `--svg`; the directory (kept alive), the SVG's path and
/// the finished run.
fn spin_with_svg(source: &str, mode: &str, nobody: bool) -> (tempfile::TempDir, PathBuf, Output) {
    let dir = open_tempdir();
    let bin = build(dir.path(), "burner", source);
    let spinner = if nobody {
        Spinner::spawn(as_nobody(&bin)).0
    } else {
        Spinner::start(&bin)
    };
    let pid = spinner.pid.to_string();
    let svg = dir.path().join("flame.svg");
    let svg_arg = svg.to_str().unwrap();
    let o = run(&[
        "profile",
        "--pid",
        &pid,
        "--duration",
        "2s",
        mode,
        "--svg",
        svg_arg,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (dir, svg, o)
}

#[test]
fn folded_stacks_feed_a_flame_graph_and_the_svg_renders_the_function() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("folded_stacks_feed_a_flame_graph_and_the_svg_renders_the_function") {
        return;
    }
    let (dir, svg, o) = spin_with_svg(BURN, "--folded", false);
    let folded = stdout(&o);
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("burner;") && l.contains(";burn_cycles ")),
        "{folded}"
    );
    // inferno, the flame-graph library, reads every line.
    let mut opts = inferno::flamegraph::Options::default();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out).unwrap();
    assert!(String::from_utf8_lossy(&out).contains("burn_cycles"));
    // Chromium renders tacho's SVG, with the function among its frames.
    let Some(chromium) = chromium() else {
        return;
    };
    let profile_dir = tempfile::tempdir().unwrap();
    let o = chromium_command(chromium, profile_dir.path())
        .arg("--dump-dom")
        .arg(format!("file://{}", svg.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(dom.contains("burn_cycles"), "{dom}");
    let shot = dir.path().join("flame.png");
    let o = chromium_command(chromium, profile_dir.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,600")
        .arg(format!("file://{}", svg.display()))
        .output()
        .unwrap();
    assert!(shot.exists(), "no screenshot: {}", stderr(&o));
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 5_000,
        "a blank page"
    );
}

/// [`BURN`] under a name chosen to break a terminal and an XML document.
const BURN_NAMED: &str = r#"
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void burn_cycles(void) { for (;;) sink++; }
int main(void) {
    prctl(PR_SET_NAME, "\x1b]0;pwn\x07<&x", 0, 0, 0);
    printf("%d\n", getpid()); fflush(stdout); burn_cycles(); return 0;
}
"#;

#[test]
fn a_hostile_process_name_reaches_the_svg_title_escaped_and_the_svg_is_xml() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_hostile_process_name_reaches_the_svg_title_escaped_and_the_svg_is_xml";
    if !root_or_skip(test) {
        return;
    }
    if !have_tool("setpriv") {
        return skip(&format!("{test}: setpriv is not installed"));
    }
    // nobody's process names itself.
    let (_dir, svg, _) = spin_with_svg(BURN_NAMED, "--json", true);
    let bytes = std::fs::read(&svg).unwrap();
    assert!(
        !bytes.iter().any(|&b| b == 0x1b || b == 0x07),
        "a raw control character in the SVG"
    );
    // An XML parser reads it, and the title names the process escaped.
    let o = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E\n\
             t = E.parse(sys.argv[1]).getroot()\n\
             print(''.join(e.text or '' for e in t.iter('{http://www.w3.org/2000/svg}text') \
             if e.get('id') == 'title'))",
        ])
        .arg(&svg)
        .output()
        .expect("python3 is installed");
    assert!(
        o.status.success(),
        "not XML: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let title = String::from_utf8_lossy(&o.stdout);
    assert!(title.contains(r"burn_cycles in \e]0;pwn\a<&x"), "{title}");
}

/// Sets kernel.perf_event_paranoid and restores it on drop.
struct Paranoid(String);

impl Drop for Paranoid {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/perf_event_paranoid", &self.0);
    }
}

#[test]
fn without_permission_it_names_the_sysctl_and_capability() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("without_permission_it_names_the_sysctl_and_capability") {
        return;
    }
    let path = "/proc/sys/kernel/perf_event_paranoid";
    let _restore = Paranoid(std::fs::read_to_string(path).unwrap());
    std::fs::write(path, "3").unwrap();
    let o = as_nobody(env!("CARGO_BIN_EXE_tacho"))
        .args(["profile", "--duration", "1s"])
        .output()
        .unwrap();
    let line = assert_error(&o);
    assert!(line.contains("kernel.perf_event_paranoid"), "{line}");
    assert!(line.contains("CAP_PERFMON"), "{line}");
}

#[test]
fn on_a_terminal_the_table_refreshes_every_second() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("on_a_terminal_the_table_refreshes_every_second") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "burner", BURN);
    let spinner = Spinner::start(&bin);
    // `script` gives tacho a terminal and records what it drew. The first table waits for the
    // burner's functions to be named, which a debug build on a loaded machine took 3.2 s to
    // do (seen in CI); later ones reuse the names, so 6 s leaves room for three draws.
    let cmd = format!(
        "{} profile --pid {} --duration 6s",
        env!("CARGO_BIN_EXE_tacho"),
        spinner.pid
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script (util-linux) is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let screen = String::from_utf8_lossy(&o.stdout);
    let draws = screen.matches("\x1b[H\x1b[2J").count();
    // Redraws while sampling, about once a second once names are known, and the final table.
    assert!(draws >= 3, "{draws} draws: {screen}");
    let last = screen.rsplit("\x1b[H\x1b[2J").next().unwrap();
    assert!(last.contains("burn_cycles"), "{last}");
}

#[test]
fn top_adds_a_profile_under_a_cpu_verdict() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("top_adds_a_profile_under_a_cpu_verdict") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "burner", BURN);
    // One burner per CPU: the CPUs are saturated.
    let spinners: Vec<Spinner> = (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
        .map(|_| Spinner::start(&bin))
        .collect();
    let o = run(&[
        "top",
        "--batch",
        "--profile",
        "--count",
        "2",
        "--interval",
        "1",
        "--no-ebpf",
    ]);
    drop(spinners);
    // Exit 1: a warning verdict (the saturated CPUs) was shown.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("profile of every CPU for 2 s (cpu_saturated): "),
        "{text}"
    );
    let after = text.split("profile of every CPU").nth(1).unwrap();
    assert!(after.contains("burn_cycles  (burner, burner)"), "{after}");
    let line = assert_error(&run(&["top", "--profile", "--json", "--count", "1"]));
    assert!(line.contains("--batch"), "{line}");
}

/// A process that sleeps gives almost no busy samples: no verdict is made from them (not
/// "100% of CPU in the kernel" from one sample), how busy the CPUs were is said, and `--svg`
/// still writes a well-formed page saying so (inferno refuses an empty graph) (issue 29).
#[test]
fn an_idle_target_gets_no_verdict_and_an_svg_that_says_so() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("an_idle_target_gets_no_verdict_and_an_svg_that_says_so") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("idle.svg");
    let pid = sleeper.id().to_string();
    let v = profile(&[
        "--pid",
        &pid,
        "--duration",
        "1s",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let verdict = v["verdict"].as_str().unwrap();
    assert!(verdict.contains("idle"), "{verdict}");
    assert!(!verdict.contains("% of CPU in the kernel"), "{verdict}");
    assert!(svg_text(&svg).contains("idle"));
}

/// Waits for a line on stdin, then burns 0.12 s of its own CPU time (about 12 samples at
/// 99 Hz, fewer than the 20 a verdict needs) and says "done"; then sleeps until killed.
const BURST: &str = r#"
#include <stdio.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
static double cpu_s(void) {
    struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
__attribute__((noinline)) void burst(void) { double end = cpu_s() + 0.12; while (cpu_s() < end) sink++; }
int main(void) {
    printf("%d\n", getpid()); fflush(stdout);
    char line[8];
    if (!fgets(line, sizeof line, stdin)) return 1;
    burst();
    printf("done\n"); fflush(stdout);
    for (;;) pause();
}
"#;

/// A process that runs a short CPU burst while it is profiled gives some busy samples, but
/// fewer than a verdict needs: the verdict says so and how much CPU the pid had against the
/// window (not "100% of samples": with --pid every sample counted is the target's), makes no
/// "in the kernel" headline, and `--svg` writes a page that says so (issue 29). Unlike the
/// sleeping target above, this crosses the threshold's lower side: busy samples, not none.
#[test]
fn a_short_burst_is_too_few_samples_for_a_verdict_and_the_svg_says_so() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("a_short_burst_is_too_few_samples_for_a_verdict_and_the_svg_says_so") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "burst", BURST);
    let mut child = Command::new(&bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut burst_out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    burst_out.read_line(&mut line).unwrap();
    let mut burst = Spinner {
        pid: line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no pid in {line:?}")),
        child,
    };
    let svg = dir.path().join("burst.svg");
    let mut profiler = tacho()
        .args(["profile", "--json", "--duration", "2s", "--svg"])
        .arg(&svg)
        .args(["--pid", &burst.pid.to_string()])
        .spawn_piped();
    // The burst starts once the sampler is on: tacho says so on stderr before sampling.
    let mut err = BufReader::new(profiler.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("sampling every CPU") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said.push_str(&line);
    }
    assert!(said.contains("sampling every CPU"), "{said}");
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
        text
    });
    std::io::Write::write_all(burst.child.stdin.as_mut().unwrap(), b"go\n").unwrap();
    let mut done = String::new();
    burst_out.read_line(&mut done).unwrap();
    assert_eq!(done.trim(), "done");
    let o = wait_output(profiler, Duration::from_secs(60));
    let said = rest.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{said}");
    let v = parse_json(&o);
    // The case this test is for: some busy samples, fewer than a verdict needs.
    let busy = v["busy_samples"].as_u64().unwrap();
    assert!(
        busy > 0 && busy < MIN_VERDICT_SAMPLES,
        "the burst gave {busy} samples; this test needs 1 to 19: {v}"
    );
    let verdict = v["verdict"].as_str().unwrap();
    assert!(verdict.contains("too few for a verdict"), "{verdict}");
    assert!(!verdict.contains("in the kernel"), "{verdict}");
    assert!(!verdict.contains("% of CPU"), "{verdict}");
    assert!(!verdict.contains("100%"), "{verdict}");
    assert!(
        verdict.starts_with(&format!(
            "pid {} was on a CPU in {busy} samples (about ",
            burst.pid
        )),
        "{verdict}"
    );
    let text = svg_text(&svg);
    assert!(text.contains("too few for a verdict"), "{text}");
    assert!(!text.contains("in the kernel"), "{text}");
}

/// The binary's `profile::MIN_VERDICT_SAMPLES` (a test binary cannot import it).
const MIN_VERDICT_SAMPLES: u64 = 20;

/// Burns in a stack 80 calls deep, so a whole-system flame graph is taller than a window.
const BURN_DEEP: &str = r#"
#include <stdio.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void burn_cycles(void) { for (;;) sink++; }
__attribute__((noinline)) void down(int n) { if (n > 0) down(n - 1); else burn_cycles(); sink++; }
int main(void) { printf("%d\n", getpid()); fflush(stdout); down(80); return 0; }
"#;

/// The whole-system flame graph opens on the graph: the frame every stack rests on ("all") is
/// at the top of the picture, within the first screen, not below a window of empty space
/// above the tall, thin tips of the deepest stacks.
#[test]
fn the_whole_system_flame_graph_opens_on_its_widest_frames() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("the_whole_system_flame_graph_opens_on_its_widest_frames") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "deep", BURN_DEEP);
    let _spinner = Spinner::start(&bin);
    let svg = dir.path().join("all.svg");
    let o = run(&[
        "profile",
        "--duration",
        "2s",
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(&svg).unwrap();
    let height: u32 = page
        .split("height=\"")
        .nth(1)
        .and_then(|h| h.split('"').next())
        .and_then(|h| h.parse().ok())
        .unwrap();
    assert!(height > 1000, "the stacks are not deep: {height} px");
    let all = page
        .split("<title>all (")
        .nth(1)
        .unwrap_or_else(|| panic!("no root frame in {page}"));
    let y: f64 = all
        .split(" y=\"")
        .nth(1)
        .and_then(|y| y.split('"').next())
        .and_then(|y| y.parse().ok())
        .unwrap();
    assert!(y < 100.0, "the root frame is at y={y} of {height} px");
}

/// On a terminal 80 columns wide (COLUMNS over the terminal's 200), `profile --batch` fits:
/// the verdict and the sample line wrap at words, the table leaves out its module column;
/// piped, the module is there.
#[test]
fn on_a_narrow_terminal_profile_fits() {
    let _kernel_wide = crate::common::kernel_wide();
    if !root_or_skip("on_a_narrow_terminal_profile_fits") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "burner", BURN);
    let spinner = Spinner::start(&bin);
    let pid = spinner.pid.to_string();
    let args = ["profile", "--pid", &pid, "--duration", "1500ms", "--batch"];
    let mut cmd = tacho();
    cmd.args(args).env("COLUMNS", "80");
    let (shown, o) = on_terminal(cmd, 200, false);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(shown.contains("burn_cycles"), "{shown}");
    assert_eq!(wider_than(&shown, 80), Vec::<String>::new(), "{shown}");
    let header = shown.lines().find(|l| l.contains("FUNCTION")).unwrap();
    assert!(!header.contains("MODULE"), "{header}");
    let piped = stdout(&run(&args));
    let header = piped.lines().find(|l| l.contains("FUNCTION")).unwrap();
    assert!(header.contains("MODULE"), "{header}");
}

/// One more of `nobody`'s `bin` than there are CPUs (saturating them), each started with `args`,
/// with the address of its code.
fn nobody_spinners(bin: &Path, args: &[&str]) -> Vec<(Spinner, String)> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (0..=cpus)
        .map(|_| {
            let mut cmd = as_nobody(bin);
            cmd.args(args);
            Spinner::spawn(cmd)
        })
        .collect()
}

/// `top --batch --profile`, two 1 s samples, while the CPUs are saturated: what it printed,
/// checked to have ended well within the minute a profiler blocked on a perf map would take.
fn top_profile() -> Output {
    let started = std::time::Instant::now();
    let child = tacho()
        .args([
            "top",
            "--batch",
            "--profile",
            "--count",
            "2",
            "--interval",
            "1",
        ])
        .arg("--no-ebpf")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_output(child, std::time::Duration::from_secs(60));
    // Two samples and one 2 s profile.
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(30),
        "top took {took:?}"
    );
    // Exit 1: a warning verdict (the saturated CPUs) was shown.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    o
}

/// The functions `top --profile` printed under its verdict.
fn profiled(o: &Output) -> String {
    let text = stdout(o);
    let after = text
        .split("profile of every CPU for 2 s (cpu_saturated): ")
        .nth(1)
        .unwrap_or_else(|| panic!("no profile: {text}"));
    after.to_owned()
}

#[test]
fn a_fifo_planted_as_a_perf_map_does_not_hang_top_profile() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_fifo_planted_as_a_perf_map_does_not_hang_top_profile";
    if !root_or_skip(test) {
        return;
    }
    if !have_tool("setpriv") {
        return skip(&format!("{test}: setpriv is not installed"));
    }
    let dir = open_tempdir();
    let bin = build(dir.path(), "fifojit", JIT_QUIET);
    // nobody's processes, each with a perf map that is a FIFO no one writes.
    let spinners = nobody_spinners(&bin, &["fifo"]);
    for (s, _) in &spinners {
        let map = std::fs::symlink_metadata(format!("/tmp/perf-{}.map", s.pid)).unwrap();
        assert!(
            std::os::unix::fs::FileTypeExt::is_fifo(&map.file_type()),
            "the perf map is a FIFO"
        );
    }
    let o = top_profile();
    drop(spinners);
    let after = profiled(&o);
    assert!(after.contains("(fifojit, "), "{after}");
}

/// Sets `fs.protected_symlinks` to 0 while held (root following another user's link in
/// /tmp is then not stopped by the kernel, only by tacho), and puts it back on drop.
struct UnprotectedSymlinks(String);

impl UnprotectedSymlinks {
    const KNOB: &str = "/proc/sys/fs/protected_symlinks";

    fn new() -> UnprotectedSymlinks {
        let was = std::fs::read_to_string(Self::KNOB).unwrap();
        std::fs::write(Self::KNOB, "0").unwrap();
        UnprotectedSymlinks(was)
    }
}

impl Drop for UnprotectedSymlinks {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::KNOB, self.0.trim());
    }
}

#[test]
fn a_perf_map_planted_as_a_link_names_nothing_in_top_profile() {
    let _kernel_wide = crate::common::kernel_wide();
    let test = "a_perf_map_planted_as_a_link_names_nothing_in_top_profile";
    if !root_or_skip(test) {
        return;
    }
    if !have_tool("setpriv") {
        return skip(&format!("{test}: setpriv is not installed"));
    }
    let _unprotected = UnprotectedSymlinks::new();
    let dir = open_tempdir();
    let bin = build(dir.path(), "linkjit", JIT_QUIET);
    // Where root reads and nobody cannot reach: maps that would pass every other check
    // (regular files of the process's user, small), naming each spinner's code.
    let private = tempfile::tempdir().unwrap();
    let planted = |pid: u32, addr: &str| {
        let target = private.path().join(format!("map-{pid}"));
        std::fs::write(&target, format!("{addr} 2 planted_through_a_link\n")).unwrap();
        std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
        let o = as_nobody(Path::new("ln"))
            .arg("-s")
            .arg(&target)
            .arg(format!("/tmp/perf-{pid}.map"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let spinners = nobody_spinners(&bin, &[]);
    for (s, addr) in &spinners {
        planted(s.pid, addr);
    }
    let o = top_profile();
    drop(spinners);
    let after = profiled(&o);
    assert!(after.contains("(linkjit, "), "{after}");
    assert!(!stdout(&o).contains("planted_through_a_link"), "{after}");
}

/// The text of an SVG, read by Python's XML parser (which fails the test when it is not XML).
fn svg_text(svg: &std::path::Path) -> String {
    let check = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); \
             print(''.join(r.itertext()))",
        ])
        .arg(svg)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "not XML: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    String::from_utf8_lossy(&check.stdout).into_owned()
}
