//! Who is behind %iowait: the threads in uninterruptible sleep at the end of the interval,
//! each with its process and what it waits on, classed from its kernel stack (or its wait
//! channel where the stack is unreadable).

use serde::Serialize;

use crate::diagnose::sample::Sample;
use crate::kernel::blocked::BlockedTask;
use crate::words::words;

words! {
    /// What a blocked thread waits on, from the kernel functions it sleeps in.
    pub enum WaitsOn {
        /// The block layer or a local filesystem's I/O: a disk.
        Disk = "disk",
        /// io_uring completions (which may be sockets as well as files).
        IoUring = "io_uring",
        /// An NFS or other SunRPC server.
        Nfs = "nfs",
        /// A FUSE filesystem's server.
        Fuse = "fuse",
        /// Anything else (a lock, a device driver, memory).
        Other = "other",
    }
}

/// One thread in state `D`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoWaiter {
    /// Its process.
    pub pid: u32,
    /// The process's name.
    pub comm: String,
    /// The process name's bytes in hex when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// The thread.
    pub tid: u32,
    /// The thread's name.
    pub thread: String,
    /// The thread name's bytes in hex when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_hex: Option<String>,
    /// What it waits on.
    pub waits_on: WaitsOn,
    /// The kernel function that says where (the innermost that is not the scheduler's).
    pub in_function: Option<String>,
    /// Its wait channel.
    pub wchan: Option<String>,
    /// Its kernel stack, innermost first (empty without root).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
}

/// Frames that only say "asleep": the function that says why is below them.
const SCHEDULER: [&str; 12] = [
    "__schedule",
    "schedule",
    "schedule_timeout",
    "schedule_preempt_disabled",
    "io_schedule",
    "io_schedule_timeout",
    "blk_io_schedule",
    "bit_wait_io",
    "__wait_on_bit",
    "out_of_line_wait_on_bit",
    "wait_for_completion_io",
    "wait_for_completion_io_timeout",
];

/// The blocked threads of `b`, each named after its process.
pub fn waiters(b: &Sample) -> Vec<IoWaiter> {
    b.blocked
        .iter()
        .map(|t| {
            let process = b.processes.processes.iter().find(|p| p.pid == t.pid);
            let frames = frames(t);
            IoWaiter {
                pid: t.pid,
                comm: process.map_or_else(|| t.comm.clone(), |p| p.comm.clone()),
                comm_hex: process.map_or_else(|| t.comm_hex.clone(), |p| p.comm_hex.clone()),
                tid: t.tid,
                thread: t.comm.clone(),
                thread_hex: t.comm_hex.clone(),
                waits_on: classify(&frames),
                in_function: frames
                    .iter()
                    .find(|f| !SCHEDULER.contains(f))
                    .map(|f| f.to_string()),
                wchan: t.wchan.clone(),
                stack: t.stack.clone(),
            }
        })
        .collect()
}

/// The stack, or the wait channel alone where the stack is unreadable.
fn frames(t: &BlockedTask) -> Vec<&str> {
    if t.stack.is_empty() {
        t.wchan.iter().map(String::as_str).collect()
    } else {
        t.stack.iter().map(String::as_str).collect()
    }
}

/// Network filesystems and io_uring first: their waits pass through page-cache and block
/// functions too, which alone would say "disk".
pub fn classify(frames: &[&str]) -> WaitsOn {
    let any = |f: fn(&str) -> bool| frames.iter().any(|x| f(x));
    if any(|f| f.contains("io_uring") || f.starts_with("io_cqring") || f.starts_with("io_wq")) {
        WaitsOn::IoUring
    } else if any(|f| f.starts_with("nfs") || f.starts_with("rpc_") || f.contains("sunrpc")) {
        WaitsOn::Nfs
    } else if any(|f| f.starts_with("fuse_") || f == "request_wait_answer") {
        WaitsOn::Fuse
    } else if any(|f| {
        [
            "blk_",
            "bio_",
            "submit_bio",
            "folio_wait",
            "wait_on_page",
            "__folio_lock",
            "__lock_page",
            "jbd2",
            "ext4_",
            "xfs_",
            "btrfs_",
            "iomap_dio",
            "blkdev_",
            "__blkdev_",
            "dio_",
            "io_schedule",
        ]
        .iter()
        .any(|p| f.starts_with(p))
    }) {
        WaitsOn::Disk
    } else {
        WaitsOn::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_from_the_stack() {
        let disk = ["io_schedule", "folio_wait_bit_common", "filemap_read"];
        assert_eq!(classify(&disk), WaitsOn::Disk);
        let fuse = ["request_wait_answer", "fuse_simple_request", "filemap_read"];
        assert_eq!(classify(&fuse), WaitsOn::Fuse);
        let nfs = [
            "rpc_wait_bit_killable",
            "__rpc_execute",
            "nfs4_proc_getattr",
        ];
        assert_eq!(classify(&nfs), WaitsOn::Nfs);
        let uring = ["io_schedule", "io_cqring_wait", "__do_sys_io_uring_enter"];
        assert_eq!(classify(&uring), WaitsOn::IoUring);
        assert_eq!(classify(&["msleep", "some_driver_reset"]), WaitsOn::Other);
        assert_eq!(classify(&[]), WaitsOn::Other);
        for w in WaitsOn::ALL {
            assert_eq!(serde_json::to_string(w).unwrap(), format!("\"{w}\""));
        }
    }
}
