//! The threads in uninterruptible sleep (state `D`) and where they wait: `/proc/PID/wchan`
//! and, where readable (root), the kernel stack in `/proc/PID/task/TID/stack`. Read only when
//! /proc/stat says tasks are blocked on I/O, to explain %iowait.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::SysRoot;
use super::process::{comm_bytes, parse_pid_stat};
use crate::text::hex_if_not_utf8;

/// Blocked threads kept per sample: enough to say who waits, not a census.
const MAX_BLOCKED: usize = 16;
/// Threads looked at per sample (a stat read each, some microseconds): past it, the blocked
/// ones found so far are the answer.
const MAX_THREADS: usize = 16_384;
/// Kernel stack frames kept per thread (the innermost ones say where it waits).
const MAX_FRAMES: usize = 12;

/// One thread in state `D`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedTask {
    /// Its process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The thread's name, invalid UTF-8 shown as U+FFFD.
    pub comm: String,
    /// The name's exact bytes in hex when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// The kernel function it sleeps in (`/proc/PID/task/TID/wchan`); `None` when unreadable
    /// or `0`.
    pub wchan: Option<String>,
    /// Its kernel stack, innermost first, function names only; empty when unreadable (it
    /// needs root).
    pub stack: Vec<String>,
}

/// The threads in state `D` under `root`'s /proc (at most [`MAX_BLOCKED`]), by pid and tid.
pub fn read_blocked(root: &SysRoot) -> Vec<BlockedTask> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&root.proc) else {
        return out;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let mut looked = 0;
    for pid in pids {
        let task_dir = root.proc.join(pid.to_string()).join("task");
        for tid in tids_in(&task_dir) {
            looked += 1;
            if looked > MAX_THREADS || out.len() >= MAX_BLOCKED {
                return out;
            }
            if let Some(t) = blocked(&task_dir.join(tid.to_string()), pid, tid) {
                out.push(t);
            }
        }
    }
    out
}

/// Those of `tasks` ((pid, tid), in order) in state `D` now (at most [`MAX_BLOCKED`]): where
/// a scan of every task already said which threads may be blocked, only those are read.
pub fn read_blocked_among(root: &SysRoot, tasks: &[(u32, u32)]) -> Vec<BlockedTask> {
    tasks
        .iter()
        .filter_map(|&(pid, tid)| {
            let dir = root
                .proc
                .join(pid.to_string())
                .join("task")
                .join(tid.to_string());
            blocked(&dir, pid, tid)
        })
        .take(MAX_BLOCKED)
        .collect()
}

/// The threads of the processes `pids` (their /proc/PID/task listed), as (pid, tid) in order.
pub fn threads_of(root: &SysRoot, pids: &[u32]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for &pid in pids {
        let tids = tids_in(&root.proc.join(pid.to_string()).join("task"));
        out.extend(tids.into_iter().map(|tid| (pid, tid)));
    }
    out
}

/// The thread ids a /proc/PID/task directory lists, in order; none when it is gone.
fn tids_in(task_dir: &Path) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(task_dir) else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// The thread in `dir` if it is in state `D`.
fn blocked(dir: &Path, pid: u32, tid: u32) -> Option<BlockedTask> {
    let bytes = std::fs::read(dir.join("stat")).ok()?;
    let stat = parse_pid_stat(&String::from_utf8_lossy(&bytes), &dir.join("stat")).ok()?;
    if stat.state != 'D' {
        return None;
    }
    let wchan = std::fs::read_to_string(dir.join("wchan"))
        .ok()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "0");
    let stack = std::fs::read_to_string(dir.join("stack"))
        .map(|s| parse_stack(&s))
        .unwrap_or_default();
    Some(BlockedTask {
        pid,
        tid,
        comm: stat.comm,
        comm_hex: comm_bytes(&bytes).and_then(hex_if_not_utf8),
        wchan,
        stack,
    })
}

/// `/proc/PID/stack` (`[<0>] io_schedule+0x12/0x40` a line): the function names, innermost
/// first, at most [`MAX_FRAMES`].
pub fn parse_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let frame = l.split_once("] ").map_or(l, |(_, f)| f).trim();
            let name = frame.split(['+', ' ']).next()?;
            (!name.is_empty()).then(|| name.to_string())
        })
        .take(MAX_FRAMES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::write;
    use proptest::prelude::*;

    const STACK: &str = "[<0>] io_schedule+0x42/0x70\n[<0>] folio_wait_bit_common+0x13d/0x350\n\
                         [<0>] filemap_read+0x5c7/0x630\n[<0>] vfs_read+0x1e8/0x2c0\n";

    #[test]
    fn finds_the_threads_in_d_state_with_where_they_wait() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let stat = |comm: &str, state: char| {
            format!(
                "1 ({comm}) {state} 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 100 1000 50 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 7 0 0\n"
            )
        };
        write(t, "proc/77/task/77/stat", &stat("app", 'S'));
        write(t, "proc/77/task/78/stat", &stat("io worker", 'D'));
        write(t, "proc/77/task/78/wchan", "folio_wait_bit_common");
        write(t, "proc/77/task/78/stack", STACK);
        write(t, "proc/90/task/90/stat", &stat("nfsd", 'D'));
        write(t, "proc/90/task/90/wchan", "0");
        write(t, "proc/self/stat", "not a pid");
        let got = read_blocked(&SysRoot::under(t));
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].pid, got[0].tid, got[0].comm.as_str()),
            (77, 78, "io worker")
        );
        assert_eq!(got[0].wchan.as_deref(), Some("folio_wait_bit_common"));
        assert_eq!(got[0].stack[..2], ["io_schedule", "folio_wait_bit_common"]);
        assert_eq!((got[1].wchan.as_ref(), got[1].stack.len()), (None, 0));
    }

    proptest! {
        #[test]
        fn parse_stack_never_panics(s in "\\PC{0,300}") {
            let frames = parse_stack(&s);
            prop_assert!(frames.len() <= MAX_FRAMES);
        }
    }
}
