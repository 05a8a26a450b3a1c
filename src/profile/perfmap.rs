//! JIT perf maps (`/tmp/perf-PID.map`, one `START SIZE name` line per function, hexadecimal),
//! read by tacho rather than by blazesym, because any user can put anything at that name in
//! /tmp: a FIFO (whose open would block forever), a link, a huge file, or a file they keep
//! truncating (which a memory map would turn into SIGBUS). As perf does, only a regular file
//! owned by the process's own user is read; it is opened with `O_NONBLOCK | O_NOFOLLOW`,
//! checked on the descriptor, and read (never mapped) up to [`MAX_BYTES`].

use crate::kernel::SysRoot;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// The largest perf map read; a JVM's runs to a few MiB.
const MAX_BYTES: u64 = 64 << 20;

/// A process's JIT functions, by start address.
#[derive(Debug, Default)]
pub struct PerfMap {
    functions: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// The function covering `addr`, if any.
    pub fn find(&self, addr: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 <= addr);
        let (start, size, name) = self.functions.get(i.checked_sub(1)?)?;
        let end = start.saturating_add(*size);
        (addr < end || (*size == 0 && addr == *start)).then_some(name.as_str())
    }
}

/// The perf map of process `pid`, as the process sees `/tmp`; `None` when it has none, or
/// when what is there is not a regular file of the process's user of at most [`MAX_BYTES`].
pub fn load(root: &SysRoot, pid: u32) -> Option<PerfMap> {
    let proc = root.proc.join(pid.to_string());
    let status = std::fs::read_to_string(proc.join("status")).ok()?;
    let (ns_pid, uid) = ns_pid_and_uid(&status)?;
    let path = proc.join(format!("root/tmp/perf-{ns_pid}.map"));
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != uid || meta.len() > MAX_BYTES {
        return None;
    }
    read_bounded(file).map(|text| parse(&text))
}

/// The whole file if it holds at most [`MAX_BYTES`] (it may have grown since the check).
fn read_bounded(file: File) -> Option<Vec<u8>> {
    let mut text = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut text).ok()?;
    (text.len() as u64 <= MAX_BYTES).then_some(text)
}

/// The process's id in its own pid namespace (the number in its perf map's name) and its
/// effective user, from /proc/PID/status.
fn ns_pid_and_uid(status: &str) -> Option<(u32, u32)> {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::split_whitespace)
    };
    let ns_pid = field("NStgid:")?.next_back()?.parse().ok()?;
    let uid = field("Uid:")?.nth(1)?.parse().ok()?;
    Some((ns_pid, uid))
}

/// Parses perf map text; malformed lines are left out.
fn parse(text: &[u8]) -> PerfMap {
    let hex = |s: &[u8]| {
        let s = std::str::from_utf8(s).ok()?;
        u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
    };
    let mut functions: Vec<(u64, u64, String)> = text
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut f = line.splitn(3, |&b| b == b' ');
            let (start, size, name) = (hex(f.next()?)?, hex(f.next()?)?, f.next()?);
            Some((start, size, String::from_utf8_lossy(name).into_owned()))
        })
        .collect();
    functions.sort_by_key(|f| f.0);
    PerfMap { functions }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_address_ranges() {
        let map = parse(b"1000 10 jit_a\n0x2000 0x8 Lfoo::bar (int)\nnonsense\n3000 0 at\n");
        assert_eq!(map.find(0x1000), Some("jit_a"));
        assert_eq!(map.find(0x100f), Some("jit_a"));
        assert_eq!(map.find(0x1010), None);
        assert_eq!(map.find(0x2004), Some("Lfoo::bar (int)"));
        assert_eq!(map.find(0x3000), Some("at"));
        assert_eq!(map.find(0x3001), None);
        assert_eq!(map.find(0x10), None);
    }

    /// The map is found as the process sees /tmp, under the root's /proc, by the process's
    /// own id in its pid namespace, and only when its owner is the process's user.
    #[test]
    fn the_map_is_read_under_the_roots_proc() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        let uid = rustix::process::geteuid().as_raw();
        let status =
            |uid: u32| format!("Name:\tjava\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nNStgid:\t4242\t7\n");
        crate::kernel::fixture::write(dir.path(), "proc/4242/status", &status(uid));
        crate::kernel::fixture::write(
            dir.path(),
            "proc/4242/root/tmp/perf-7.map",
            "1000 10 jit_a\n",
        );
        let map = load(&root, 4242).expect("the fixture's map");
        assert_eq!(map.find(0x1008), Some("jit_a"));
        assert!(load(&root, 4243).is_none(), "no such process");
        crate::kernel::fixture::write(dir.path(), "proc/4242/status", &status(uid + 1));
        assert!(load(&root, 4242).is_none(), "another user's file");
    }

    #[test]
    fn status_gives_the_namespace_pid_and_effective_user() {
        let status = "Name:\tx\nUid:\t1000\t65534\t65534\t65534\nNStgid:\t4242\t7\n";
        assert_eq!(ns_pid_and_uid(status), Some((7, 65534)));
        assert_eq!(ns_pid_and_uid("Name:\tx\n"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_and_any_address_is_looked_up(
            text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            addr in proptest::prelude::any::<u64>(),
        ) {
            let _ = parse(&text).find(addr);
        }
    }
}
