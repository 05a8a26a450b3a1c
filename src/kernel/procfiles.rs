//! /proc/PID/stat and /proc/PID/io kept open between scans.
//!
//! Most of a process scan's cost is the kernel's, and half of that is looking the files up:
//! each open walks /proc/PID/… and revalidates the pid's directory. A descriptor kept open
//! re-generates its file on every `pread` at offset 0, so a scan of a known process costs two
//! reads instead of two opens, two reads and two closes. A kept descriptor stays bound to
//! its process: once that process is gone, reads fail with ESRCH, even if its pid was reused,
//! so a reused pid is noticed and opened afresh, never read as the old process.
//!
//! Descriptors are bounded: at most a quarter of the open-file limit (raised to its hard
//! limit, at most [`LIMIT_WANTED`], when the cache is made), so the `--listen` server and
//! everything else keep the rest; processes beyond the budget are read by opening their files
//! each time, as before.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Result};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The open-file limit asked for: room for a few thousand processes' files, far below
/// anything the kernel minds.
const LIMIT_WANTED: u64 = 65_536;

/// The two files of one process.
#[derive(Debug)]
struct Kept {
    stat: File,
    /// `None` until /proc/PID/io could be opened (another user's process, for a non-root
    /// reader, is tried again each scan: permissions can change with exec).
    io: Option<File>,
    /// Seen by the current scan.
    seen: bool,
}

/// Open descriptors of the processes seen by the latest scan.
#[derive(Debug)]
pub struct ProcFiles {
    kept: HashMap<u32, Kept>,
    /// How many processes may be kept (two descriptors each).
    cap: usize,
}

impl Default for ProcFiles {
    /// Keeps up to a quarter of the open-file limit, raising the limit first.
    fn default() -> ProcFiles {
        ProcFiles::with_cap(open_file_limit() / 4 / 2)
    }
}

impl ProcFiles {
    /// Keeps at most `cap` processes' files open (0: none, every read opens).
    pub fn with_cap(cap: usize) -> ProcFiles {
        ProcFiles {
            kept: HashMap::new(),
            cap,
        }
    }

    /// Reads `dir`/stat of process `pid` into `buf` (replacing its content).
    pub fn read_stat(&mut self, dir: &Path, pid: u32, buf: &mut Vec<u8>) -> Result<()> {
        if let Some(k) = self.kept.get_mut(&pid) {
            match read_at_start(&k.stat, buf) {
                Ok(()) if !buf.is_empty() => {
                    k.seen = true;
                    return Ok(());
                }
                // Gone (ESRCH or an empty read): the pid may be another process's by now.
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
            self.kept.remove(&pid);
        }
        let stat = File::open(dir.join("stat"))?;
        read_at_start(&stat, buf)?;
        if self.kept.len() < self.cap {
            self.kept.insert(
                pid,
                Kept {
                    stat,
                    io: None,
                    seen: true,
                },
            );
        }
        Ok(())
    }

    /// Reads `dir`/io of process `pid` into `buf`; call after [`ProcFiles::read_stat`] of the
    /// same process in the same scan.
    pub fn read_io(&mut self, dir: &Path, pid: u32, buf: &mut Vec<u8>) -> Result<()> {
        let kept = self.kept.get_mut(&pid);
        if let Some(io) = kept.as_ref().and_then(|k| k.io.as_ref()) {
            return read_at_start(io, buf);
        }
        let io = File::open(dir.join("io"))?;
        read_at_start(&io, buf)?;
        if let Some(k) = kept {
            k.io = Some(io);
        }
        Ok(())
    }

    /// Closes the files of processes the scan that just ended did not see (they exited).
    pub fn end_scan(&mut self) {
        self.kept.retain(|_, k| std::mem::take(&mut k.seen));
    }
}

/// Reads a whole /proc file from its start, straight into `buf`; its size is not known in
/// advance (always 0). The kernel generates a /proc/PID file whole and hands out as much as
/// the read has room for, so a read that leaves room is the end: one system call per file,
/// not two (the second would only return 0). The same holds for the regular files of a
/// fixture tree.
fn read_at_start(file: &File, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    loop {
        let len = buf.len();
        if buf.capacity() - len < 512 {
            buf.reserve(4096);
        }
        let room = buf.capacity() - len;
        buf.resize(len + room, 0);
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(n) => {
                buf.truncate(len + n);
                if n < room {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => buf.truncate(len),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

/// The open-file limit after raising the soft limit towards the hard one (an unprivileged
/// process may do that); 1024 when it cannot be read.
fn open_file_limit() -> usize {
    // rustix says "unlimited" with None where the kernel says RLIM_INFINITY.
    let lim = getrlimit(Resource::Nofile);
    let (max, mut current) = (
        lim.maximum.unwrap_or(u64::MAX),
        lim.current.unwrap_or(u64::MAX),
    );
    let wanted = max.min(LIMIT_WANTED);
    if current < wanted {
        let raised = Rlimit {
            current: Some(wanted),
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            current = wanted;
        }
    }
    usize::try_from(current).unwrap_or(usize::MAX)
}

/// Whether a read of /proc/PID/… failed because the process is gone.
pub fn gone(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::process::{Command, Stdio};

    fn dir(pid: u32) -> std::path::PathBuf {
        Path::new("/proc").join(pid.to_string())
    }

    #[test]
    fn a_kept_file_is_read_again_and_dropped_once_its_process_is_gone() {
        let mut child = Command::new("sleep")
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut files = ProcFiles::with_cap(8);
        let mut buf = Vec::new();
        files.read_stat(&dir(pid), pid, &mut buf).unwrap();
        let first = String::from_utf8(buf.clone()).unwrap();
        assert!(first.starts_with(&format!("{pid} (sleep)")), "{first}");
        files.read_io(&dir(pid), pid, &mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf).contains("write_bytes"));
        files.end_scan();
        assert_eq!(files.kept.len(), 1);

        // The same descriptor, read again: the file is generated anew.
        files.read_stat(&dir(pid), pid, &mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf).starts_with(&format!("{pid} (sleep)")));
        files.end_scan();

        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: the kept descriptor answers ESRCH, the path is gone too.
        let e = files.read_stat(&dir(pid), pid, &mut buf).unwrap_err();
        assert!(gone(&e), "{e}");
        files.end_scan();
        assert_eq!(files.kept.len(), 0);
    }

    #[test]
    fn a_kept_descriptor_shows_counters_as_they_are_now() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let me = std::process::id();
        let wchar = |buf: &[u8]| -> u64 {
            let text = String::from_utf8_lossy(buf);
            let line = text.lines().find(|l| l.starts_with("wchar:")).unwrap();
            line[6..].trim().parse().unwrap()
        };
        let mut files = ProcFiles::with_cap(8);
        let mut buf = Vec::new();
        files.read_stat(&dir(me), me, &mut buf).unwrap();
        files.read_io(&dir(me), me, &mut buf).unwrap();
        let before = wchar(&buf);
        let fd = files.kept[&me].io.as_ref().unwrap().as_raw_fd();
        files.end_scan();
        let mut null = File::options().write(true).open("/dev/null").unwrap();
        null.write_all(&[0u8; 65536]).unwrap();
        files.read_stat(&dir(me), me, &mut buf).unwrap();
        files.read_io(&dir(me), me, &mut buf).unwrap();
        // The same descriptor, and the kernel generated the file anew for this read.
        assert_eq!(files.kept[&me].io.as_ref().unwrap().as_raw_fd(), fd);
        assert!(
            wchar(&buf) >= before + 65536,
            "{before} then {}",
            wchar(&buf)
        );
    }

    #[test]
    fn a_reused_pid_is_opened_afresh_and_never_read_through_the_old_descriptor() {
        if !rustix::process::geteuid().is_root() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root: setting ns_last_pid needs it"
            );
            eprintln!("skipped: forcing a pid to be reused needs root (ns_last_pid)");
            return;
        }
        let mut files = ProcFiles::with_cap(8);
        let mut buf = Vec::new();
        let mut old = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = old.id();
        files.read_stat(&dir(pid), pid, &mut buf).unwrap();
        files.end_scan();
        old.kill().unwrap();
        old.wait().unwrap();
        // Make the kernel hand out `pid` again: the next pid follows the last one given out.
        // Other processes forking at the same moment can take it, so try several times.
        let mut new = None;
        for _ in 0..200 {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
            let mut c = Command::new("cat")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            if c.id() == pid {
                new = Some(c);
                break;
            }
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let mut new = new.expect("the pid was never handed out again");
        let through_old = read_at_start(&files.kept[&pid].stat, &mut buf);
        let fresh = files.read_stat(&dir(pid), pid, &mut buf);
        new.kill().unwrap();
        new.wait().unwrap();
        let e = through_old.expect_err("the old descriptor read the new process");
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
        fresh.unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with(&format!("{pid} (cat) ")), "{text}");
    }

    #[test]
    fn beyond_the_cap_files_are_opened_each_time() {
        let me = std::process::id();
        let mut files = ProcFiles::with_cap(0);
        let mut buf = Vec::new();
        files.read_stat(&dir(me), me, &mut buf).unwrap();
        files.read_io(&dir(me), me, &mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf).contains("rchar"));
        assert_eq!(files.kept.len(), 0);
    }

    #[test]
    fn processes_not_seen_by_a_scan_are_closed() {
        let me = std::process::id();
        let mut files = ProcFiles::with_cap(8);
        let mut buf = Vec::new();
        files.read_stat(&dir(me), me, &mut buf).unwrap();
        files.end_scan();
        assert_eq!(files.kept.len(), 1);
        // A scan that does not list this process (it left /proc between scans).
        files.end_scan();
        assert_eq!(files.kept.len(), 0);
    }

    #[test]
    fn the_limit_is_raised_and_a_quarter_of_it_is_the_budget() {
        let files = ProcFiles::default();
        assert!(files.cap >= 1024 / 8, "{}", files.cap);
        let mut buf = Vec::new();
        File::open("/proc/self/limits")
            .unwrap()
            .read_to_end(&mut buf)
            .unwrap();
        let limits = String::from_utf8(buf).unwrap();
        let soft: usize = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|s| s.parse().ok())
            .unwrap();
        assert_eq!(files.cap, soft / 8);
    }
}
