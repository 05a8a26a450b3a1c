//! Per-process counters: CPU time and I/O delay from /proc/PID/stat, bytes from /proc/PID/io.
//!
//! A scan reads two small files per process, so it is written to allocate little: one read
//! buffer is reused for every file. Processes that exit during the scan are skipped (that is
//! the normal race of reading /proc, not an error); /proc/PID/io of another user's process
//! needs root (ptrace access), and such processes are counted, not hidden.
//! Hand-parsed: procfs-core's `Stat` returns errors without the file, and needs more fields.

use std::io::ErrorKind;
use std::path::Path;

use super::procfiles::{ProcFiles, gone};
use super::{KernelError, Result, SysRoot, read_optional};

/// What one process has done since it started (cumulative counters, as read).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessCounters {
    /// Process id (the thread-group id: threads are not listed on their own).
    pub pid: u32,
    /// Command name (`comm`, at most 15 bytes, set by the process), invalid UTF-8 as U+FFFD.
    pub comm: String,
    /// The name's exact bytes in hex when they are not UTF-8 (see [`crate::text`]).
    pub comm_hex: Option<String>,
    /// State letter (`R` running, `S` sleeping, `D` uninterruptible, usually I/O, …).
    pub state: char,
    /// Its parent process (0 in samples recorded before it was read).
    #[serde(default)]
    pub ppid: u32,
    /// Start time in clock ticks after boot: with the pid, it identifies a process even when
    /// the pid is reused between two samples.
    pub start_ticks: u64,
    /// CPU time in user mode, clock ticks.
    pub utime: u64,
    /// CPU time in kernel mode, clock ticks.
    pub stime: u64,
    /// Time spent waiting for block I/O (delay accounting), clock ticks; stays 0 while
    /// `kernel.task_delayacct` is off.
    pub blkio_ticks: u64,
    /// Threads in the process (field 20 of /proc/PID/stat).
    pub threads: u64,
    /// /proc/PID/io, or `None` when it could not be read (see the module docs).
    pub io: Option<ProcessIo>,
    /// Major page faults (pages read from disk or swap), cumulative.
    pub major_faults: u64,
    /// Resident set size, pages.
    pub rss_pages: u64,
}

/// /proc/PID/io: bytes through system calls and bytes sent to or fetched from storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessIo {
    /// Bytes read by read()-like calls, from cache or not.
    pub rchar: u64,
    /// Bytes written by write()-like calls, to files, pipes or sockets.
    pub wchar: u64,
    /// Bytes this process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to storage (counted when page cache pages are
    /// dirtied, so a 5-byte write to a file counts a whole page).
    pub write_bytes: u64,
    /// Dirtied bytes that were never written because the file was truncated or deleted.
    pub cancelled_write_bytes: u64,
}

/// Every process of one scan.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcessScan {
    /// Every process whose stat could be read, in the order /proc lists them.
    pub processes: Vec<ProcessCounters>,
    /// Processes whose /proc/PID/io was refused (not root, or another user's process).
    pub io_denied: usize,
    /// Which processes those were, by pid, so a note can name them.
    pub io_denied_pids: Vec<u32>,
}

/// Reads /proc/PID/stat and /proc/PID/io of every process, through descriptors `files` keeps
/// from one scan to the next.
pub fn read_processes(root: &SysRoot, files: &mut ProcFiles) -> Result<ProcessScan> {
    let mut scan = ProcessScan::default();
    let mut buf = Vec::with_capacity(1024);
    for pid in list_pids(root)? {
        read_process(root, files, pid, &mut buf, &mut scan)?;
    }
    files.end_scan();
    scan.processes.sort_by_key(|p| p.pid);
    Ok(scan)
}

/// The processes /proc lists, in its order.
pub fn list_pids(root: &SysRoot) -> Result<Vec<u32>> {
    let entries = std::fs::read_dir(&root.proc).map_err(|source| KernelError::Read {
        path: root.proc.clone(),
        source,
    })?;
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .collect())
}

/// Reads process `pid`'s stat and io through `files` (`buf` is scratch) into `scan`; a process
/// gone meanwhile adds nothing. The caller ends the scan of `files`.
pub fn read_process(
    root: &SysRoot,
    files: &mut ProcFiles,
    pid: u32,
    buf: &mut Vec<u8>,
    scan: &mut ProcessScan,
) -> Result<()> {
    let dir = root.proc.join(pid.to_string());
    match files.read_stat(&dir, pid, buf) {
        Ok(()) => {}
        Err(e) if gone(&e) => return Ok(()),
        Err(source) => {
            let path = dir.join("stat");
            return Err(KernelError::Read { path, source });
        }
    }
    let mut process = parse_pid_stat(&String::from_utf8_lossy(buf), &dir.join("stat"))?;
    process.pid = pid;
    process.comm_hex = comm_bytes(buf).and_then(crate::text::hex_if_not_utf8);
    match files.read_io(&dir, pid, buf) {
        Ok(()) => {
            let text = String::from_utf8_lossy(buf);
            process.io = Some(parse_pid_io(&text, &dir.join("io"))?);
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            scan.io_denied += 1;
            scan.io_denied_pids.push(pid);
        }
        // Exited meanwhile, or a zombie (ESRCH): no I/O to report.
        Err(_) => {}
    }
    scan.processes.push(process);
    Ok(())
}

/// Process `pid`'s name as /proc/PID/stat gives it (a kernel worker's with what it works on),
/// and its bytes in hex when they are not UTF-8; `None` when the process is gone.
pub fn read_comm(root: &SysRoot, pid: u32) -> Option<(String, Option<String>)> {
    let stat = std::fs::read(root.proc.join(pid.to_string()).join("stat")).ok()?;
    let bytes = comm_bytes(&stat)?;
    Some((
        String::from_utf8_lossy(bytes).into_owned(),
        crate::text::hex_if_not_utf8(bytes),
    ))
}

/// How far this process's time namespace shifts the boot clock, ns (`boottime` in
/// /proc/self/timens_offsets; 0 without time namespaces): /proc/PID/stat's start times
/// include it.
pub fn boottime_offset_ns(root: &SysRoot) -> i64 {
    let Ok(text) = super::read_text(&root.proc.join("self/timens_offsets")) else {
        return 0;
    };
    text.lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "boottime").then_some(())?;
            let secs: i64 = words.next()?.parse().ok()?;
            let nanos: i64 = words.next()?.parse().ok()?;
            secs.checked_mul(1_000_000_000)?.checked_add(nanos)
        })
        .unwrap_or(0)
}

/// Whether this process sees the machine's first pid namespace (its pids are the kernel's
/// own): `NSpid` in /proc/self/status has one number.
pub fn in_first_pid_namespace(root: &SysRoot) -> bool {
    let Ok(status) = super::read_text(&root.proc.join("self/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .is_some_and(|ids| ids.split_whitespace().count() == 1)
}

/// Whether delay accounting is on (`kernel.task_delayacct`); `None` on kernels without the
/// switch (before 5.14 it was always on when compiled in).
pub fn read_task_delayacct(root: &SysRoot) -> Result<Option<bool>> {
    let path = root.proc.join("sys/kernel/task_delayacct");
    match read_optional(&path)?.as_deref().map(str::trim) {
        None => Ok(None),
        Some("0") => Ok(Some(false)),
        Some("1") => Ok(Some(true)),
        Some(other) => Err(KernelError::parse(
            &path,
            Some(1),
            format!("expected 0 or 1, found {other:?}"),
        )),
    }
}

/// The raw bytes of the command name in a /proc/PID/stat line (first '(' to last ')').
pub(super) fn comm_bytes(stat: &[u8]) -> Option<&[u8]> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(open + 1..close)
}

/// Parses /proc/PID/stat (the pid is taken from the directory, not from here). `comm` may
/// hold spaces and parentheses, so it runs from the first '(' to the last ')'.
pub fn parse_pid_stat(text: &str, path: &Path) -> Result<ProcessCounters> {
    let bad = |reason: &str| KernelError::parse(path, Some(1), reason.to_string());
    let open = text
        .find('(')
        .ok_or_else(|| bad("no '(' before the command name"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| bad("no ')' after the command name"))?;
    if close < open {
        return Err(bad("')' before '('"));
    }
    let comm = text[open + 1..close].to_string();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // Field numbers of proc(5) minus 3: the state is field 3.
    let number = |field: usize| -> Result<u64> {
        let word = fields.get(field - 3).ok_or_else(|| {
            bad(&format!(
                "only {} fields after the command name",
                fields.len()
            ))
        })?;
        word.parse()
            .map_err(|_| bad(&format!("field {field} {word:?} is not a number")))
    };
    let state = fields
        .first()
        .and_then(|s| s.chars().next())
        .ok_or_else(|| bad("no state after the command name"))?;
    Ok(ProcessCounters {
        pid: 0,
        comm,
        comm_hex: None,
        state,
        ppid: u32::try_from(number(4)?).unwrap_or(0),
        utime: number(14)?,
        stime: number(15)?,
        threads: number(20)?,
        start_ticks: number(22)?,
        // Kernels before 2.6.18 lack field 42; they are long gone, so absence is an error.
        blkio_ticks: number(42)?,
        io: None,
        major_faults: number(12)?,
        rss_pages: number(24)?,
    })
}

/// Who process `pid` is, as `boot-id pid start-ticks`: unlike the pid alone, never the same
/// for two processes, across reboots too. `None` when the process does not exist.
pub fn identity(root: &SysRoot, pid: u32) -> Option<String> {
    let boot = super::read_text(&root.proc.join("sys/kernel/random/boot_id")).ok()?;
    let path = root.proc.join(pid.to_string()).join("stat");
    let stat = parse_pid_stat(&super::read_text(&path).ok()?, &path).ok()?;
    Some(format!("{} {pid} {}", boot.trim(), stat.start_ticks))
}

/// Parses /proc/PID/io (`name: number` lines).
pub fn parse_pid_io(text: &str, path: &Path) -> Result<ProcessIo> {
    let mut io = ProcessIo::default();
    let mut seen = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = || {
            KernelError::parse(
                path,
                Some(i + 1),
                format!("expected 'name: number': {line:?}"),
            )
        };
        let (key, value) = line.split_once(':').ok_or_else(err)?;
        let value: u64 = value.trim().parse().map_err(|_| err())?;
        let slot = match key {
            "rchar" => &mut io.rchar,
            "wchar" => &mut io.wchar,
            "read_bytes" => &mut io.read_bytes,
            "write_bytes" => &mut io.write_bytes,
            "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => continue,
        };
        *slot = value;
        seen += 1;
    }
    if seen < 5 {
        return Err(KernelError::parse(
            path,
            None,
            "expected rchar, wchar, read_bytes, write_bytes and cancelled_write_bytes",
        ));
    }
    Ok(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture;
    use proptest::prelude::*;

    const FIX: &str = "tests/fixtures/top/firecracker/a/proc";

    fn fixture_pids() -> Vec<u32> {
        let mut pids: Vec<u32> = std::fs::read_dir(FIX)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
            .collect();
        pids.sort();
        pids
    }

    #[test]
    fn parses_real_stat_and_io() {
        let pids = fixture_pids();
        assert!(pids.len() >= 2);
        for pid in pids {
            let dir = Path::new(FIX).join(pid.to_string());
            let text = std::fs::read_to_string(dir.join("stat")).unwrap();
            let p = parse_pid_stat(&text, &dir.join("stat")).unwrap();
            assert!(!p.comm.is_empty() && p.threads >= 1, "{p:?}");
            if let Ok(io) = std::fs::read_to_string(dir.join("io"))
                && !io.is_empty()
            {
                let io = parse_pid_io(&io, &dir.join("io")).unwrap();
                assert!(io.rchar >= io.read_bytes || io.read_bytes == 0, "{io:?}");
            }
        }
    }

    #[test]
    fn comm_with_spaces_and_parentheses() {
        let mut fields = vec!["S"];
        fields.extend(std::iter::repeat_n("7", 49));
        let text = format!("42 (a) b (c)) {}\n", fields.join(" "));
        let p = parse_pid_stat(&text, Path::new("/proc/42/stat")).unwrap();
        assert_eq!(
            (p.comm.as_str(), p.state, p.blkio_ticks),
            ("a) b (c)", 'S', 7)
        );
    }

    #[test]
    fn malformed_files_name_file_and_line() {
        let path = Path::new("/proc/42/stat");
        for bad in [
            "",
            "42 (x S 1 2",
            "42 x) S",
            "42 (x) S 1 2 3",
            "42 (x) S a b c d e f g h i j k l m",
        ] {
            let err = parse_pid_stat(bad, path).unwrap_err().to_string();
            assert!(err.contains("/proc/42/stat line 1"), "{bad:?}: {err}");
        }
        let io = Path::new("/proc/42/io");
        let err = parse_pid_io("rchar: 1\nwchar x\n", io)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/proc/42/io line 2"), "{err}");
        assert!(parse_pid_io("rchar: 1\n", io).is_err());
    }

    #[test]
    fn scans_a_fixture_tree_and_skips_non_pids() {
        let dir = tempfile::tempdir().unwrap();
        for pid in fixture_pids() {
            for f in ["stat", "io"] {
                let src = Path::new(FIX).join(pid.to_string()).join(f);
                if let Ok(text) = std::fs::read_to_string(src) {
                    fixture::write(dir.path(), &format!("proc/{pid}/{f}"), &text);
                }
            }
        }
        fixture::write(dir.path(), "proc/meminfo", "MemTotal: 1 kB\n");
        fixture::write(dir.path(), "proc/sys/kernel/task_delayacct", "0\n");
        let root = SysRoot::under(dir.path());
        let scan = read_processes(&root, &mut ProcFiles::with_cap(4)).unwrap();
        assert_eq!(
            scan.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
            fixture_pids()
        );
        assert_eq!(read_task_delayacct(&root).unwrap(), Some(false));
        fixture::write(dir.path(), "proc/sys/kernel/task_delayacct", "2\n");
        assert!(read_task_delayacct(&root).is_err());
    }

    #[test]
    fn the_boot_clock_shift_of_a_time_namespace_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        assert_eq!(boottime_offset_ns(&root), 0);
        let offsets = "monotonic 5 0\nboottime -2 250000000\n";
        fixture::write(dir.path(), "proc/self/timens_offsets", offsets);
        assert_eq!(boottime_offset_ns(&root), -1_750_000_000);
    }

    #[test]
    fn identity_names_boot_pid_and_start() {
        let root = SysRoot::real();
        let me = identity(&root, std::process::id()).unwrap();
        let parts: Vec<&str> = me.split(' ').collect();
        assert_eq!(parts.len(), 3, "{me}");
        assert_eq!(parts[1], std::process::id().to_string());
        assert_eq!(identity(&root, std::process::id()), Some(me));
        // Above pid_max (at most 2^22): no such process.
        assert_eq!(identity(&root, 1 << 23), None);
    }

    #[test]
    fn reads_this_process() {
        let scan = read_processes(&SysRoot::real(), &mut ProcFiles::default()).unwrap();
        let me = std::process::id();
        let p = scan.processes.iter().find(|p| p.pid == me).unwrap();
        // Our own /proc/PID/io is always readable.
        assert!(p.io.unwrap().rchar > 0);
    }

    proptest! {
        #[test]
        fn never_panic(s in "\\PC{0,200}") {
            let _ = parse_pid_stat(&s, Path::new("/x"));
            let _ = parse_pid_io(&s, Path::new("/x"));
        }
    }
}
