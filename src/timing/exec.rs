//! Running one command once and measuring it: wall time around spawn and wait, the child's own
//! user and system time and peak resident memory from `wait4`'s rusage, and its exit.
//!
//! `wait4` on the child's pid gives that child's figures alone. hyperfine reads
//! `getrusage(RUSAGE_CHILDREN)`, whose `ru_maxrss` is the largest child so far, so one big run
//! makes every later run look as big; per-child rusage does not have that flaw.

use anyhow::{Context, Result, bail};
use rustix::io::Errno;
use rustix::process::{
    Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, WaitOptions, pidfd_open,
    test_kill_process_group, waitid,
};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exited by itself with this status.
    Code(i32),
    /// Ended by this signal number.
    Signal(i32),
    /// Killed by tacho after `--max-time`.
    TimedOut,
}

impl Exit {
    /// True for exit status 0 only: a signal or a time-out is a failure.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    /// The exit code as hyperfine exports it: `null` when there is none (signal, time-out).
    pub fn code(self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(c),
            _ => None,
        }
    }

    /// "exited with code 3", "was killed by signal 9", "ran longer than --max-time".
    pub fn describe(self) -> String {
        match self {
            Exit::Code(c) => format!("exited with code {c}"),
            Exit::Signal(s) => format!("was killed by signal {s}"),
            Exit::TimedOut => "ran longer than --max-time".into(),
        }
    }
}

/// One run's figures (seconds and bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Wall-clock time from spawn to reaped exit, in seconds.
    pub wall_s: f64,
    /// The child's CPU time in user mode, in seconds (`wait4` rusage).
    pub user_s: f64,
    /// The child's CPU time in kernel mode, in seconds.
    pub system_s: f64,
    /// The child's peak resident set, in bytes (`ru_maxrss`, which Linux gives in KiB).
    pub max_rss_bytes: u64,
    /// How the run ended.
    pub exit: Exit,
}

/// What runs a command line once: the real spawner, or a mock in tests.
pub trait Executor {
    /// Runs `cmd` once and measures it.
    fn measure(&mut self, cmd: &Invocation) -> Result<Measurement>;
}

/// A command ready to spawn: its argument vector and what it is called in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// What the user typed (the name in reports).
    pub line: String,
    /// What is spawned: `[shell, "-c", line]`, or the line's words; the program resolved on PATH
    /// when found there.
    pub argv: Vec<String>,
}

impl Invocation {
    /// Through a shell (`sh -c LINE`), or split into words and run directly when `shell` is
    /// `None` (hyperfine's `-N`).
    pub fn new(line: &str, shell: Option<&str>) -> Result<Invocation> {
        let mut argv = match shell {
            Some(sh) => vec![sh.to_string(), "-c".into(), line.to_string()],
            None => {
                let words = shell_words::split(line).with_context(|| {
                    format!(
                        "cannot split the command '{line}' into words for --shell=none; check \
                         its quotes"
                    )
                })?;
                if words.is_empty() {
                    bail!("an empty command cannot run without a shell; drop -N or give a command");
                }
                words
            }
        };
        if let Some(path) = search_path(&argv[0]) {
            argv[0] = path;
        }
        Ok(Invocation {
            line: line.to_string(),
            argv,
        })
    }
}

/// The full path of a bare program name, found in PATH once, up front: left to the spawn,
/// the search tries `execve` on every PATH directory before the right one on every run (seven
/// failed calls per run for `true` here), which is overhead inside the measured time. `None`
/// for names with a slash or not found (the spawn then reports the error).
fn search_path(program: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|p| p.into_os_string().into_string().ok())
}

/// Spawns real processes, each run in its own process group, which is ended with the run, as
/// is anything it left outside its group (see [`adopt_orphans`]).
pub struct Spawner {
    /// Lets the command's stdout and stderr through (`--show-output`) instead of discarding them.
    pub show_output: bool,
    /// A run still going after this long is killed (`--max-time`); `None`: no limit.
    pub max_time: Option<Duration>,
    /// The number of a terminating signal tacho received (0: none), set by its handler; the
    /// run in progress gets the same signal, and what is left of it is killed.
    pub signal: Option<Arc<AtomicUsize>>,
    /// Leave a run's background processes running once its command has exited.
    pub keep_children: bool,
    /// tacho called [`adopt_orphans`] and starts nothing but these runs, so any child of its
    /// own after a run is that run's leftover.
    pub adopted_orphans: bool,
}

/// How long the processes left by a run have to exit after SIGTERM (or a forwarded signal)
/// before SIGKILL.
const GRACE: Duration = Duration::from_secs(1);

impl Executor for Spawner {
    fn measure(&mut self, inv: &Invocation) -> Result<Measurement> {
        let pending = || {
            self.signal
                .as_deref()
                .map_or(0, |s| s.load(Ordering::Relaxed))
        };
        if pending() != 0 {
            return Err(Interrupted::from(pending()).into());
        }
        let mut cmd = Command::new(&inv.argv[0]);
        cmd.args(&inv.argv[1..]).stdin(Stdio::null());
        if !self.show_output {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        // Its own process group: whatever the run starts in the background is found and
        // ended with it, and the terminal's Ctrl-C reaches tacho alone, which forwards it.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let start = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start '{}'", inv.argv[0]))?;
        let pid = child.id() as libc::pid_t;
        // `child` is reaped by wait4 below; dropping a std Child never waits or kills.
        drop(child);
        let deadline = self.max_time.map(|limit| start + limit);
        let ended = wait_for(pid, deadline, self.signal.as_deref());
        let wall_s = start.elapsed().as_secs_f64();
        // The leader is not reaped yet, so the group's id cannot have been reused.
        match ended {
            Ended::Exited if self.keep_children => {}
            Ended::Exited => signal_group(pid, libc::SIGTERM),
            Ended::TimedOut => signal_group(pid, libc::SIGKILL),
            Ended::Signal(sig) => signal_group(pid, sig),
        }
        if matches!(
            wait_for(pid, Some(Instant::now() + GRACE), None),
            Ended::TimedOut
        ) {
            signal_group(pid, libc::SIGKILL);
        }
        let (status, usage) = wait4(pid)?;
        if !(ended == Ended::Exited && self.keep_children) {
            end_group(pid);
            if self.adopted_orphans {
                end_orphans();
            }
        }
        let exit = match ended {
            Ended::Signal(sig) => return Err(Interrupted::from(sig as usize).into()),
            Ended::TimedOut => Exit::TimedOut,
            Ended::Exited if libc::WIFEXITED(status) => Exit::Code(libc::WEXITSTATUS(status)),
            Ended::Exited => Exit::Signal(libc::WTERMSIG(status)),
        };
        Ok(Measurement {
            wall_s,
            user_s: timeval_s(usage.ru_utime),
            system_s: timeval_s(usage.ru_stime),
            // Linux reports ru_maxrss in KiB.
            max_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
            exit,
        })
    }
}

fn timeval_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6
}

/// Signals the process group a run leads. ESRCH (nobody left) is the usual, harmless outcome;
/// the signals sent are all named ones (TERM, KILL, and the INT, TERM or HUP tacho received).
fn signal_group(pgid: libc::pid_t, sig: i32) {
    if let (Some(pgid), Some(sig)) = (Pid::from_raw(pgid), Signal::from_named_raw(sig)) {
        let _ = rustix::process::kill_process_group(pgid, sig);
    }
}

/// After the leader is reaped: waits up to [`GRACE`] for the rest of the group to go (it was
/// signalled already), then kills what is left. A group's id stays reserved while any member
/// lives, so these signals reach nobody else.
fn end_group(pgid: libc::pid_t) {
    // Signal 0 only asks whether any process of the group exists.
    let gone = || Pid::from_raw(pgid).is_none_or(|g| test_kill_process_group(g).is_err());
    let until = Instant::now() + GRACE;
    while !gone() {
        if Instant::now() >= until {
            signal_group(pgid, libc::SIGKILL);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Makes tacho the "subreaper" of what it starts: a process orphaned inside a run, even one
/// that left the run's process group with `setsid` (as daemons do), becomes tacho's child
/// instead of init's, so [`end_orphans`] finds it. A process group alone misses those, and a
/// cgroup would need root and, joined between fork and exec, turns every spawn into a full
/// fork, inside the measured time (see docs/benchmarks.md, "Ending a run's leftovers").
pub fn adopt_orphans() -> std::io::Result<()> {
    // The kernel reads the argument as a flag; rustix passes the pid given as that argument,
    // so pid 1 sets it to 1, as prctl(PR_SET_CHILD_SUBREAPER, 1) does, with no getpid first.
    Ok(rustix::process::set_child_subreaper(Some(Pid::INIT))?)
}

/// After a run is reaped, tacho's children are only what the run left behind and tacho
/// adopted: they get SIGTERM, then SIGKILL after [`GRACE`], and are reaped, as are their own
/// orphans, adopted in turn. One `waitpid` when nothing was left (the usual case).
fn end_orphans() {
    let until = Instant::now() + GRACE;
    let mut signal = Signal::TERM;
    let mut signalled = Vec::new();
    // Past this, what SIGKILL has not ended yet (stuck in the kernel) is left to init.
    while Instant::now() < until + GRACE {
        if !reap_exited() {
            return;
        }
        if signal == Signal::TERM && Instant::now() >= until {
            signal = Signal::KILL;
            signalled.clear();
        }
        for pid in children_of(std::process::id()) {
            if !signalled.contains(&pid) {
                // pid is tacho's own unreaped child, so it names no other process.
                let _ = rustix::process::kill_process(pid, signal);
                signalled.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reaps every exited child; whether any child is still running.
fn reap_exited() -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(None) => return true,
            Ok(Some(_)) | Err(Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// The pids whose parent is `parent`, from /proc/PID/stat (the field after the name, which
/// ends at the last ')').
fn children_of(parent: u32) -> Vec<Pid> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| Pid::from_raw(e.file_name().to_str()?.parse().ok()?))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// Blocks until `pid` exits; returns its wait status and rusage.
fn wait4(pid: libc::pid_t) -> Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value that wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("wait4 failed");
        }
    }
}

/// How the wait for a run's leader ended; the leader is left unreaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Exited,
    TimedOut,
    /// tacho received this signal.
    Signal(i32),
}

/// Waits for `pid` to exit, until `deadline` or until `signal` holds a signal number.
fn wait_for(pid: libc::pid_t, deadline: Option<Instant>, signal: Option<&AtomicUsize>) -> Ended {
    // A pidfd turns "exited, deadline or signal" into a poll that a signal interrupts; kernels
    // before 5.3 lack it, and there the exit is polled every millisecond instead.
    let pidfd = Pid::from_raw(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    loop {
        let sig = signal.map_or(0, |s| s.load(Ordering::Relaxed));
        if sig != 0 {
            break Ended::Signal(i32::try_from(sig).unwrap_or(libc::SIGTERM));
        }
        let remaining = deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        });
        if remaining.is_zero() {
            break Ended::TimedOut;
        }
        // Slices of at most 100 ms, so a signal is noticed promptly even if poll restarts.
        let slice = remaining.min(Duration::from_millis(100));
        if let Some(fd) = &pidfd {
            let mut pfd = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(slice.as_millis() + 1).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd. EINTR just goes round the loop again. (libc's poll,
            // not rustix's, which is ppoll: the same system calls as before.)
            if unsafe { libc::poll(&mut pfd, 1, ms) } > 0 {
                break Ended::Exited;
            }
        } else if exited_without_reaping(pid) {
            break Ended::Exited;
        } else {
            std::thread::sleep(Duration::from_millis(1).min(slice));
        }
    }
}

/// Whether `pid` has exited, leaving it to be reaped by `wait4` (which gives the rusage).
fn exited_without_reaping(pid: libc::pid_t) -> bool {
    // WNOWAIT leaves the child waitable; `None` when nothing changed.
    let flags = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    Pid::from_raw(pid).is_some_and(|p| matches!(waitid(WaitId::Pid(p), flags), Ok(Some(_))))
}

/// Ctrl-C, SIGTERM or SIGHUP arrived while a run was being timed; the run was given the same
/// signal and what was left of it killed.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by signal {signal}")]
pub struct Interrupted {
    /// The signal's number (2 for SIGINT), which the exit status repeats as 128 + it.
    pub signal: i32,
}

impl From<usize> for Interrupted {
    fn from(signal: usize) -> Interrupted {
        Interrupted {
            signal: i32::try_from(signal).unwrap_or(libc::SIGTERM),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::process::{kill_process, test_kill_process};

    #[test]
    fn invocations_split_without_a_shell() {
        let inv = Invocation::new("./echo 'a b' c", None).unwrap();
        assert_eq!(inv.argv, ["./echo", "a b", "c"]);
        let inv = Invocation::new("echo 'a b' c", Some("/bin/sh")).unwrap();
        assert_eq!(inv.argv, ["/bin/sh", "-c", "echo 'a b' c"]);
        // Bare names are looked up in PATH once.
        let inv = Invocation::new("true", None).unwrap();
        assert!(inv.argv[0].ends_with("/true"), "{:?}", inv.argv);
        assert_eq!(search_path("no-such-program-tacho"), None);
        assert!(Invocation::new("echo 'unclosed", None).is_err());
        assert!(Invocation::new("  ", None).is_err());
    }

    #[test]
    fn spawner_measures_exit_and_memory() {
        let mut sp = Spawner {
            show_output: false,
            max_time: None,
            signal: None,
            keep_children: false,
            adopted_orphans: false,
        };
        let m = sp.measure(&Invocation::new("true", None).unwrap()).unwrap();
        assert_eq!(m.exit, Exit::Code(0));
        assert!(m.wall_s > 0.0);
        assert!(m.max_rss_bytes > 0);
        let m = sp
            .measure(&Invocation::new("false", None).unwrap())
            .unwrap();
        assert_eq!(m.exit, Exit::Code(1));
        assert!(
            sp.measure(&Invocation::new("/nonexistent/x", None).unwrap())
                .is_err()
        );
    }

    #[test]
    fn max_time_kills_the_run() {
        let mut sp = Spawner {
            show_output: false,
            max_time: Some(Duration::from_millis(50)),
            signal: None,
            keep_children: false,
            adopted_orphans: false,
        };
        let m = sp
            .measure(&Invocation::new("sleep 5", Some("sh")).unwrap())
            .unwrap();
        assert_eq!(m.exit, Exit::TimedOut);
        let sigterm = Arc::new(AtomicUsize::new(libc::SIGTERM as usize));
        sp.max_time = None;
        sp.signal = Some(sigterm);
        let err = sp
            .measure(&Invocation::new("sleep 5", Some("sh")).unwrap())
            .unwrap_err();
        let i = err.downcast_ref::<Interrupted>().expect("interrupted");
        assert_eq!(i.signal, libc::SIGTERM);
    }

    /// The group of a run is gone once it returns, unless asked to keep it.
    #[test]
    fn background_children_end_with_the_run_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let line = format!("sleep 30 & echo $! > {}", pidfile.display());
        // Signal 0 only checks the process exists; zombies are reaped by init.
        let alive = |pid: i32| Pid::from_raw(pid).is_some_and(|p| test_kill_process(p).is_ok());
        for keep in [false, true] {
            let mut sp = Spawner {
                show_output: false,
                max_time: None,
                signal: None,
                keep_children: keep,
                adopted_orphans: false,
            };
            let m = sp
                .measure(&Invocation::new(&line, Some("sh")).unwrap())
                .unwrap();
            assert_eq!(m.exit, Exit::Code(0));
            let pid: i32 = std::fs::read_to_string(&pidfile)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            if keep {
                assert!(alive(pid), "kept");
                // Our own test child, ended here.
                let _ = kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
            } else {
                // Reaped by init, which may take a moment after SIGTERM.
                let until = Instant::now() + Duration::from_secs(10);
                while alive(pid) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                assert!(!alive(pid), "the background sleep outlived its run");
            }
        }
    }

    #[test]
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4, which the lint cannot see"
    )]
    fn exit_is_seen_without_reaping() {
        let child = Command::new("true").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        while !exited_without_reaping(pid) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Still waitable: wait4 gets its status and rusage.
        let (status, _) = wait4(pid).unwrap();
        assert!(libc::WIFEXITED(status));
    }
}
