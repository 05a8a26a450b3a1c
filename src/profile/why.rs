//! Why a thread was off the CPU, from the kernel functions it slept in (leaf first), the state
//! it left in and the system call it was in: a futex is a lock, `io_schedule` under fsync is
//! the disk, `sk_wait_data` is the network. The kernel stack decides when it says something;
//! the system call (and what kind of descriptor it waited on) when it does not, as when the
//! kernel stack could not be kept.

/// The reasons, in the order a report lists them when equal.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Why {
    /// Running (`--wall` only): on-CPU samples.
    Cpu,
    /// A futex (a user-space mutex, condition variable or join) or a kernel lock.
    Lock,
    /// Waiting on block I/O: fsync, the journal, page writeback, a direct read.
    Disk,
    /// A socket: receive, send, connect, accept, or poll/epoll on sockets.
    Network,
    /// A pipe.
    Pipe,
    /// A sleep or timer the thread asked for (nanosleep, a poll timeout with nothing to
    /// wait on).
    Sleep,
    /// A page fault or memory reclaim (direct reclaim, a cgroup over memory.high).
    Memory,
    /// Runnable but not running: preempted, or yielded, waiting for a CPU.
    Preempted,
    /// poll, epoll or select on descriptors that are not known to be sockets.
    Poll,
    /// Anything else (waiting for a child, a signal, a tty).
    Other,
}

impl Why {
    /// In words, for the table and the verdict.
    pub fn words(self) -> &'static str {
        match self {
            Why::Cpu => "on CPU",
            Why::Lock => "lock",
            Why::Disk => "disk",
            Why::Network => "network",
            Why::Pipe => "pipe",
            Why::Sleep => "sleep",
            Why::Memory => "page fault/reclaim",
            Why::Preempted => "waiting for a CPU",
            Why::Poll => "poll/epoll",
            Why::Other => "other",
        }
    }
}

/// What the descriptor a thread waited on is, when userspace could tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdKind {
    /// A socket.
    Socket,
    /// A pipe or FIFO.
    Pipe,
    /// A file or device.
    File,
    /// Not known (no descriptor, or it was closed before it was looked at).
    Unknown,
}

/// Kernel functions that say a wait's reason, matched as prefixes of the names (suffixes
/// such as `.constprop.0` do not matter), checked in this order: a fault that waits on the
/// disk is a fault, a socket read through poll is the network.
const BY_KERNEL: &[(Why, &[&str])] = &[
    (
        Why::Memory,
        &[
            "asm_exc_page_fault",
            "exc_page_fault",
            "do_user_addr_fault",
            "handle_mm_fault",
            "try_to_free_pages",
            "shrink_node",
            "__alloc_pages_slowpath",
            "__alloc_pages_direct_reclaim",
            "mem_cgroup_handle_over_high",
            "try_charge_memcg",
            "throttle_direct_reclaim",
            "__lock_page_or_retry",
            "swap_readpage",
        ],
    ),
    (
        Why::Lock,
        &[
            "futex_wait",
            "__futex_wait",
            "futex_q_lock",
            "futex_lock_pi",
            "rwsem_down_",
            "__mutex_lock",
            "mutex_lock",
            "__rt_mutex",
            "rt_mutex_slowlock",
            "percpu_rwsem_wait",
            "flock_lock",
            "posix_lock_inode",
            "locks_lock_inode_wait",
        ],
    ),
    (
        Why::Disk,
        &[
            "io_schedule",
            "jbd2_log_wait_commit",
            "jbd2_journal_",
            "file_write_and_wait_range",
            "filemap_fdatawait",
            "filemap_write_and_wait",
            "folio_wait_writeback",
            "wait_on_page_writeback",
            "__filemap_fdatawait_range",
            "submit_bio_wait",
            "blk_mq_get_tag",
            "__wait_on_buffer",
            "bit_wait_io",
            "xfs_log_force",
            "btrfs_sync_file",
            "ext4_sync_file",
            "blkdev_issue_flush",
            "balance_dirty_pages",
            "iomap_dio_rw",
            "__blockdev_direct_IO",
            "io_wq_",
            "nfs_",
            "rpc_wait_bit_killable",
        ],
    ),
    (
        Why::Network,
        &[
            "sk_wait_data",
            "sk_stream_wait_",
            "tcp_recvmsg",
            "tcp_sendmsg",
            "udp_recvmsg",
            "inet_recvmsg",
            "inet_sendmsg",
            "inet_csk_accept",
            "inet_wait_for_connect",
            "__inet_stream_connect",
            "__skb_wait_for_more_packets",
            "__skb_recv_datagram",
            "unix_stream_read_generic",
            "unix_stream_sendmsg",
            "unix_wait_for_peer",
            "unix_dgram_recvmsg",
            "sock_recvmsg",
            "sock_sendmsg",
            "__sys_recvfrom",
            "__sys_sendto",
            "__sys_connect",
            "__sys_accept",
        ],
    ),
    (
        Why::Pipe,
        &[
            "pipe_read",
            "pipe_write",
            "anon_pipe_read",
            "anon_pipe_write",
            "pipe_wait",
            "wait_for_partner",
        ],
    ),
    (
        Why::Sleep,
        &[
            "do_nanosleep",
            "hrtimer_nanosleep",
            "common_nsleep",
            "__x64_sys_nanosleep",
            "__x64_sys_clock_nanosleep",
            "__x64_sys_pause",
            "msleep",
        ],
    ),
    (
        Why::Poll,
        &[
            "do_sys_poll",
            "do_poll",
            "do_epoll_wait",
            "ep_poll",
            "do_select",
            "core_sys_select",
        ],
    ),
];

/// x86-64 system call numbers that say a reason when the kernel stack does not.
fn by_syscall(nr: u32, fd: FdKind) -> Option<Why> {
    match nr {
        202 => Some(Why::Lock),                       // futex
        35 | 230 | 34 => Some(Why::Sleep),            // nanosleep, clock_nanosleep, pause
        74 | 75 | 277 | 162 | 306 => Some(Why::Disk), // fsync, fdatasync, sync_file_range, sync, syncfs
        42 | 43 | 44 | 45 | 46 | 47 | 288 | 299 | 307 => Some(Why::Network),
        // read, write, their vector and positional forms: by what the descriptor is.
        0 | 1 | 17 | 18 | 19 | 20 | 295 | 296 => match fd {
            FdKind::Socket => Some(Why::Network),
            FdKind::Pipe => Some(Why::Pipe),
            FdKind::File => Some(Why::Disk),
            FdKind::Unknown => None,
        },
        7 | 271 | 232 | 281 | 441 | 23 | 270 => Some(Why::Poll),
        _ => None,
    }
}

/// `name` without a compiler suffix (`.constprop.0`, `.isra.0`, `.cold`).
fn base(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// The reason a kernel stack (leaf first) says, and the function that says it.
pub fn deciding<'a>(kernel: &[&'a str]) -> Option<(Why, &'a str)> {
    BY_KERNEL.iter().find_map(|(why, prefixes)| {
        kernel
            .iter()
            .find(|f| prefixes.iter().any(|p| base(f).starts_with(p)))
            .map(|f| (*why, *f))
    })
}

/// The reason of one wait: `kernel` holds the kernel functions leaf first, `state` the task
/// state it left in (0: still runnable), `syscall` the system call it was in, `fd` what its
/// descriptor is.
pub fn classify(kernel: &[&str], state: u32, syscall: Option<u32>, fd: FdKind) -> Why {
    if state == 0 {
        return Why::Preempted;
    }
    let mut why = deciding(kernel).map(|(why, _)| why);
    if why.is_none() {
        why = syscall.and_then(|nr| by_syscall(nr, fd));
    }
    match why {
        // poll and epoll on a socket wait on the network; on a pipe, on the pipe.
        Some(Why::Poll) | None if fd == FdKind::Socket => Why::Network,
        Some(Why::Poll) if fd == FdKind::Pipe => Why::Pipe,
        Some(why) => why,
        None => Why::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel stacks as this kernel (6.18) gives them, leaf first.
    const FUTEX: &[&str] = &[
        "__schedule",
        "schedule",
        "futex_wait_queue",
        "__futex_wait",
        "futex_wait",
        "do_futex",
        "__x64_sys_futex",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ];
    const FSYNC: &[&str] = &[
        "__schedule",
        "schedule",
        "io_schedule",
        "bit_wait_io",
        "__wait_on_bit",
        "out_of_line_wait_on_bit",
        "jbd2_log_wait_commit",
        "ext4_sync_file",
        "__x64_sys_fsync",
        "do_syscall_64",
    ];
    const RECV: &[&str] = &[
        "__schedule",
        "schedule",
        "schedule_timeout",
        "wait_woken",
        "sk_wait_data",
        "tcp_recvmsg_locked",
        "tcp_recvmsg",
        "inet_recvmsg",
        "sock_recvmsg",
        "__sys_recvfrom",
        "__x64_sys_recvfrom",
        "do_syscall_64",
    ];
    const NANOSLEEP: &[&str] = &[
        "__schedule",
        "schedule",
        "do_nanosleep",
        "hrtimer_nanosleep",
        "common_nsleep",
        "__x64_sys_clock_nanosleep",
        "do_syscall_64",
    ];
    const FAULT_READ: &[&str] = &[
        "__schedule",
        "schedule",
        "io_schedule",
        "folio_wait_bit_common",
        "filemap_fault",
        "__do_fault",
        "handle_mm_fault",
        "do_user_addr_fault",
        "exc_page_fault",
        "asm_exc_page_fault",
    ];
    const PIPE: &[&str] = &[
        "__schedule",
        "schedule",
        "pipe_read",
        "vfs_read",
        "ksys_read",
        "do_syscall_64",
    ];
    const EPOLL: &[&str] = &[
        "__schedule",
        "schedule",
        "schedule_hrtimeout_range",
        "ep_poll",
        "do_epoll_wait",
        "__x64_sys_epoll_wait",
        "do_syscall_64",
    ];

    #[test]
    fn kernel_stacks_name_the_reason() {
        let s = 1; // interruptible
        assert_eq!(classify(FUTEX, s, Some(202), FdKind::Unknown), Why::Lock);
        assert_eq!(classify(FSYNC, 2, Some(74), FdKind::File), Why::Disk);
        assert_eq!(classify(RECV, s, Some(45), FdKind::Socket), Why::Network);
        assert_eq!(
            classify(NANOSLEEP, s, Some(230), FdKind::Unknown),
            Why::Sleep
        );
        assert_eq!(classify(PIPE, s, Some(0), FdKind::Pipe), Why::Pipe);
        assert_eq!(deciding(RECV), Some((Why::Network, "sk_wait_data")));
        assert_eq!(deciding(FSYNC), Some((Why::Disk, "io_schedule")));
        // A fault that waits for the page to be read is a fault, not a disk wait.
        assert_eq!(classify(FAULT_READ, 2, None, FdKind::Unknown), Why::Memory);
    }

    #[test]
    fn poll_is_the_network_only_on_a_socket() {
        assert_eq!(classify(EPOLL, 1, Some(232), FdKind::Socket), Why::Network);
        assert_eq!(classify(EPOLL, 1, Some(232), FdKind::Pipe), Why::Pipe);
        assert_eq!(classify(EPOLL, 1, Some(232), FdKind::Unknown), Why::Poll);
    }

    #[test]
    fn a_runnable_task_was_preempted_whatever_its_stack() {
        assert_eq!(
            classify(FUTEX, 0, Some(202), FdKind::Unknown),
            Why::Preempted
        );
    }

    #[test]
    fn without_a_kernel_stack_the_system_call_and_descriptor_decide() {
        assert_eq!(classify(&[], 1, Some(202), FdKind::Unknown), Why::Lock);
        assert_eq!(classify(&[], 2, Some(75), FdKind::File), Why::Disk);
        assert_eq!(classify(&[], 1, Some(0), FdKind::Socket), Why::Network);
        assert_eq!(classify(&[], 1, Some(0), FdKind::Pipe), Why::Pipe);
        assert_eq!(classify(&[], 1, Some(0), FdKind::Unknown), Why::Other);
        assert_eq!(classify(&[], 1, Some(61), FdKind::Unknown), Why::Other); // wait4
        assert_eq!(classify(&[], 1, None, FdKind::Socket), Why::Network);
    }

    #[test]
    fn compiler_suffixes_do_not_hide_a_function() {
        let stack = ["__schedule", "schedule", "futex_wait_queue.constprop.0"];
        assert_eq!(classify(&stack, 1, None, FdKind::Unknown), Why::Lock);
    }
}
