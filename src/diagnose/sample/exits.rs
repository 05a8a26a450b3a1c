//! Which exit records a sample keeps. The sample scans /proc first and drains the records
//! after: a process missing from the scan exited before it, and the kernel sent its record
//! (in `do_exit`) before it could be reaped, so the drain has it — the interval counts the
//! record less what the previous scan had seen. A process whose record came but which was
//! still in the scan (it exited during the scan or after, or is an unreaped zombie) is
//! counted from the scan in this interval and its record is held for the next sample, where
//! the scan has become its baseline. Draining before the scan instead lost, under load, a
//! process that exited between the drain and the scan: the next interval had no baseline
//! for it and counted its whole life again (issue 29).

use crate::kernel::taskstats::ExitedTask;
use std::collections::HashSet;

/// Records held at most (a process whose leader thread exited long before the rest): past
/// this the oldest are used at once, as before holding existed.
const MAX_HELD: usize = 65_536;

/// Splits `tasks` into the records this sample uses and those held for the next: a process's
/// records are held when the process is in the scan (`live`) and its leader has exited.
/// Threads of a live process whose leader lives are used now (its /proc counters already
/// hold them; the model skips them).
pub fn split(tasks: Vec<ExitedTask>, live: &HashSet<u32>) -> (Vec<ExitedTask>, Vec<ExitedTask>) {
    let ended: HashSet<u32> = tasks
        .iter()
        .filter(|t| t.tid == t.tgid && live.contains(&t.tgid))
        .map(|t| t.tgid)
        .collect();
    let (mut now, mut held): (Vec<_>, Vec<_>) =
        tasks.into_iter().partition(|t| !ended.contains(&t.tgid));
    if held.len() > MAX_HELD {
        let over = held.len() - MAX_HELD;
        now.extend(held.drain(..over));
    }
    (now, held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tgid: u32, tid: u32) -> ExitedTask {
        ExitedTask {
            tgid,
            tid,
            comm: "dd".into(),
            write_bytes: 1,
            ..ExitedTask::default()
        }
    }

    #[test]
    fn a_process_still_scanned_is_held_and_one_gone_is_used() {
        let live: HashSet<u32> = [10, 20].into_iter().collect();
        // 10 ended after the scan (leader and a thread), 20 lost a thread and lives, 30 is
        // gone from the scan.
        let tasks = vec![task(10, 11), task(10, 10), task(20, 21), task(30, 30)];
        let (now, held) = split(tasks, &live);
        let ids = |v: &[ExitedTask]| v.iter().map(|t| (t.tgid, t.tid)).collect::<Vec<_>>();
        assert_eq!(ids(&now), vec![(20, 21), (30, 30)]);
        assert_eq!(ids(&held), vec![(10, 11), (10, 10)]);
        // Next sample: 10 is gone from the scan, and its held records are used.
        let (now, held) = split(held, &[20].into_iter().collect());
        assert_eq!(ids(&now), vec![(10, 11), (10, 10)]);
        assert!(held.is_empty());
    }
}
