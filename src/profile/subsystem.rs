//! Which part of the kernel a function belongs to, in words an admin acts on: the
//! transparent-huge-page work (page clearing and compaction), page faults, the page cache, locks,
//! network softirqs, block I/O, the scheduler, system-call entry, idle.

/// A kernel subsystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Subsystem {
    /// Huge page clearing, compaction and khugepaged.
    Thp,
    /// Page faults and page allocation.
    Memory,
    /// Reading and writing through the page cache.
    PageCache,
    /// Spinning on or sleeping for locks.
    Locking,
    /// Receiving and sending packets.
    Network,
    /// Block layer and disk drivers.
    BlockIo,
    /// Choosing and switching tasks.
    Scheduler,
    /// Entering and leaving system calls.
    Syscalls,
    /// The idle loop: nothing to run.
    Idle,
    /// Anything else.
    Other,
}

/// Prefixes (a trailing `*`) or exact names, first match wins: specific before general.
const TABLE: &[(&str, Subsystem)] = &[
    ("clear_huge_page", Subsystem::Thp),
    ("folio_zero_user", Subsystem::Thp),
    ("clear_gigantic_page", Subsystem::Thp),
    ("do_huge_pmd*", Subsystem::Thp),
    ("__do_huge_pmd*", Subsystem::Thp),
    ("khugepaged*", Subsystem::Thp),
    ("collapse_huge_page*", Subsystem::Thp),
    ("compact*", Subsystem::Thp),
    ("__compact*", Subsystem::Thp),
    ("isolate_migratepages*", Subsystem::Thp),
    ("migrate_pages*", Subsystem::Thp),
    ("vma_alloc_folio*", Subsystem::Memory),
    ("clear_page*", Subsystem::Memory),
    ("handle_mm_fault", Subsystem::Memory),
    ("__handle_mm_fault", Subsystem::Memory),
    ("do_anonymous_page", Subsystem::Memory),
    ("do_page_fault", Subsystem::Memory),
    ("exc_page_fault", Subsystem::Memory),
    ("__alloc_pages*", Subsystem::Memory),
    ("get_page_from_freelist", Subsystem::Memory),
    ("free_unref*", Subsystem::Memory),
    ("release_pages", Subsystem::Memory),
    ("zap_*", Subsystem::Memory),
    ("filemap_*", Subsystem::PageCache),
    ("__filemap_*", Subsystem::PageCache),
    ("generic_perform_write", Subsystem::PageCache),
    ("copy_page_to_iter", Subsystem::PageCache),
    ("copy_page_from_iter*", Subsystem::PageCache),
    ("native_queued_spin_lock_slowpath", Subsystem::Locking),
    ("queued_spin_lock_slowpath", Subsystem::Locking),
    ("_raw_spin_lock*", Subsystem::Locking),
    ("osq_lock", Subsystem::Locking),
    ("mutex_*", Subsystem::Locking),
    ("__mutex_*", Subsystem::Locking),
    ("rwsem_*", Subsystem::Locking),
    ("net_rx_action", Subsystem::Network),
    ("__napi_poll", Subsystem::Network),
    ("__netif_receive_skb*", Subsystem::Network),
    ("tcp_*", Subsystem::Network),
    ("ip_*", Subsystem::Network),
    ("udp_*", Subsystem::Network),
    ("dev_queue_xmit", Subsystem::Network),
    ("blk_*", Subsystem::BlockIo),
    ("submit_bio*", Subsystem::BlockIo),
    ("nvme_*", Subsystem::BlockIo),
    ("scsi_*", Subsystem::BlockIo),
    ("virtblk_*", Subsystem::BlockIo),
    ("virtio_queue_rq", Subsystem::BlockIo),
    ("loop_*", Subsystem::BlockIo),
    ("schedule", Subsystem::Scheduler),
    ("__schedule", Subsystem::Scheduler),
    ("pick_next_*", Subsystem::Scheduler),
    ("finish_task_switch*", Subsystem::Scheduler),
    ("update_curr", Subsystem::Scheduler),
    ("enqueue_task*", Subsystem::Scheduler),
    ("dequeue_task*", Subsystem::Scheduler),
    ("try_to_wake_up", Subsystem::Scheduler),
    ("entry_SYSCALL*", Subsystem::Syscalls),
    ("do_syscall_64", Subsystem::Syscalls),
    ("syscall_*", Subsystem::Syscalls),
    ("__x64_sys_*", Subsystem::Syscalls),
    ("default_idle*", Subsystem::Idle),
    ("cpuidle_*", Subsystem::Idle),
    ("intel_idle*", Subsystem::Idle),
    ("acpi_idle*", Subsystem::Idle),
    ("poll_idle", Subsystem::Idle),
    ("pv_native_safe_halt", Subsystem::Idle),
    ("native_safe_halt", Subsystem::Idle),
    ("do_idle", Subsystem::Idle),
    ("cpu_idle_poll*", Subsystem::Idle),
];

/// The subsystem of kernel function `name` (`.isra.0`-style suffixes ignored).
pub fn of(name: &str) -> Subsystem {
    let name = name.split('.').next().unwrap_or(name);
    TABLE
        .iter()
        .find(|(pattern, _)| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pattern,
        })
        .map_or(Subsystem::Other, |(_, s)| *s)
}

impl Subsystem {
    /// Words for a verdict, with what to look at.
    pub fn words(self) -> &'static str {
        match self {
            Subsystem::Thp => {
                "page clearing and compaction for transparent huge pages — see `tacho check` \
                 thp_enabled"
            }
            Subsystem::Memory => "page faults and page allocation",
            Subsystem::PageCache => "copying through the page cache (buffered file I/O)",
            Subsystem::Locking => "waiting on kernel locks (contention)",
            Subsystem::Network => "the network stack (packet processing)",
            Subsystem::BlockIo => "the block layer and disk drivers",
            Subsystem::Scheduler => "the scheduler (switching tasks)",
            Subsystem::Syscalls => "entering and leaving system calls (many small calls)",
            Subsystem::Idle => "the idle loop",
            Subsystem::Other => "other kernel code",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thp_work_is_told_from_ordinary_faults() {
        assert_eq!(of("clear_huge_page"), Subsystem::Thp);
        assert_eq!(of("compaction_alloc"), Subsystem::Thp);
        assert_eq!(of("isolate_migratepages_block"), Subsystem::Thp);
        assert_eq!(of("clear_page_erms"), Subsystem::Memory);
        assert_eq!(of("do_anonymous_page"), Subsystem::Memory);
        assert_eq!(of("native_queued_spin_lock_slowpath"), Subsystem::Locking);
        assert_eq!(of("tcp_sendmsg_locked"), Subsystem::Network);
        assert_eq!(of("blk_mq_submit_bio"), Subsystem::BlockIo);
        assert_eq!(of("__schedule"), Subsystem::Scheduler);
        assert_eq!(of("entry_SYSCALL_64_after_hwframe"), Subsystem::Syscalls);
        assert_eq!(of("pv_native_safe_halt"), Subsystem::Idle);
        assert_eq!(of("filemap_read.isra.0"), Subsystem::PageCache);
        assert_eq!(of("ext4_da_write_begin"), Subsystem::Other);
    }
}
