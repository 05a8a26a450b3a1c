//! Running one closure on N threads that start together, for all-threads benchmarks.

use std::sync::Barrier;

/// Runs `work(i)` for i in 0..threads on scoped threads released together by a barrier, so
/// thread start-up does not spread the measured windows apart; returns the results in order.
pub fn run_together<T: Send>(threads: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    work(i)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// CPUs this process may run on (affinity and cgroup CPU quota respected), at least 1.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_thread_runs_once_in_order() {
        assert_eq!(super::run_together(4, |i| i * 10), [0, 10, 20, 30]);
        assert!(super::usable_cpus() >= 1);
    }
}
