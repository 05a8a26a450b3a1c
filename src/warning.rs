//! A reason to doubt a figure: the one vocabulary every measurement shares (the disk
//! benchmark's plans and honesty checks, the CPU and memory benchmarks, `tacho time`), so it
//! sits below all of them.

use serde::Serialize;

use crate::words::words;

/// A reason to doubt a figure, with a stable code for scripts and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    /// Stable identifier for scripts (`vm-detected`, `cow-fs`, `interrupted`).
    pub code: Code,
    /// What to doubt and what to do about it, in one or two sentences.
    pub message: String,
}

words! {
    /// The stable identifier of a [`Warning`]: the word documents store (old stored runs hold
    /// these words, so a word never changes) and reports print in brackets.
    pub enum Code {
        // `bench disk`: what makes a figure wrong.
        /// The target is on a filesystem in RAM (tmpfs, ramfs).
        MemoryBacked = "memory-backed",
        /// The host-cache probe saw the hypervisor's cache answer.
        HostCache = "host-cache",
        /// The loop device under the target goes through the page cache.
        LoopBuffered = "loop-buffered",
        /// The tested region of an existing file has holes.
        SparseFile = "sparse-file",
        /// The device completed less than tacho issued, or faster than it physically can.
        CacheSuspected = "cache-suspected",
        /// More bandwidth than the disk's link can carry.
        FasterThanDevice = "faster-than-device",
        /// Buffered I/O on a region the page cache can hold.
        FitsInRam = "fits-in-ram",
        /// The target refused O_DIRECT and the tests ran buffered.
        DirectUnsupported = "direct-unsupported",
        /// A signal cut the measurement short (every benchmark and `tacho time`).
        Interrupted = "interrupted",
        /// The disk test's repeats differ by more than the limit.
        SpreadHigh = "spread-high",
        /// The start of a repeat differs from its rest.
        NotSteadyState = "not-steady-state",
        // `bench disk`: where it ran and what was substituted.
        /// The host-cache probe could not run or could not conclude.
        HostCacheUnprobed = "host-cache-unprobed",
        /// A copy-on-write filesystem (btrfs, ZFS, bcachefs).
        CowFs = "cow-fs",
        /// A filesystem mounted with compression.
        CompressingFs = "compressing-fs",
        /// io_uring is blocked here; psync ran instead.
        IoUringUnavailable = "io-uring-unavailable",
        /// No single block device under the target: no device counters.
        NoDevice = "no-device",
        /// A test file left by an earlier, killed run was removed.
        RemovedStaleFile = "removed-stale-file",
        /// The target is on a virtual disk the host may cache.
        VmDetected = "vm-detected",
        /// A fio job's file does not exist; tacho used its own test file beside it.
        FioFileReplaced = "fio-file-replaced",
        /// A fio job asked for libaio; tacho ran io_uring.
        FioLibaioAsIoUring = "fio-libaio-as-io-uring",
        // `bench cpu` and `bench mem`.
        /// The CPU or memory benchmark's repeats disagree.
        Spread = "spread",
        /// More threads did not bring proportionally more work.
        PoorScaling = "poor-scaling",
        /// The hypervisor took CPU time during the run.
        Steal = "steal",
        /// The machine does not describe its caches.
        NoCacheInfo = "no-cache-info",
        /// Two cache levels measured alike.
        LevelsNotDistinct = "levels-not-distinct",
        /// The DRAM test's buffer was made smaller than asked.
        DramSizeReduced = "dram-size-reduced",
        // `tacho time`.
        /// A timed command exited with a failure status.
        NonzeroExit = "nonzero-exit",
        /// A timed command was killed at --max-time.
        TimedOut = "timed-out",
        /// Runs shorter than the shell-spawn correction measures precisely.
        FasterThanShell = "faster-than-shell",
        /// The first run was much slower than the others (a cold cache).
        FirstRunSlower = "first-run-slower",
        /// Some runs are far from the rest.
        Outliers = "outliers",
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    /// The words stored runs hold, written out: a renamed variant must not rename its word.
    const STORED: [(Code, &str); 31] = [
        (Code::MemoryBacked, "memory-backed"),
        (Code::HostCache, "host-cache"),
        (Code::LoopBuffered, "loop-buffered"),
        (Code::SparseFile, "sparse-file"),
        (Code::CacheSuspected, "cache-suspected"),
        (Code::FasterThanDevice, "faster-than-device"),
        (Code::FitsInRam, "fits-in-ram"),
        (Code::DirectUnsupported, "direct-unsupported"),
        (Code::Interrupted, "interrupted"),
        (Code::SpreadHigh, "spread-high"),
        (Code::NotSteadyState, "not-steady-state"),
        (Code::HostCacheUnprobed, "host-cache-unprobed"),
        (Code::CowFs, "cow-fs"),
        (Code::CompressingFs, "compressing-fs"),
        (Code::IoUringUnavailable, "io-uring-unavailable"),
        (Code::NoDevice, "no-device"),
        (Code::RemovedStaleFile, "removed-stale-file"),
        (Code::VmDetected, "vm-detected"),
        (Code::FioFileReplaced, "fio-file-replaced"),
        (Code::FioLibaioAsIoUring, "fio-libaio-as-io-uring"),
        (Code::Spread, "spread"),
        (Code::PoorScaling, "poor-scaling"),
        (Code::Steal, "steal"),
        (Code::NoCacheInfo, "no-cache-info"),
        (Code::LevelsNotDistinct, "levels-not-distinct"),
        (Code::DramSizeReduced, "dram-size-reduced"),
        (Code::NonzeroExit, "nonzero-exit"),
        (Code::TimedOut, "timed-out"),
        (Code::FasterThanShell, "faster-than-shell"),
        (Code::FirstRunSlower, "first-run-slower"),
        (Code::Outliers, "outliers"),
    ];

    #[test]
    fn every_code_round_trips_through_its_stored_word() {
        assert_eq!(
            Code::ALL.len(),
            STORED.len(),
            "a code is missing from STORED"
        );
        for (code, word) in STORED {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), code);
            assert_eq!(code.as_str(), word);
            assert_eq!(code.to_string(), word);
        }
    }
}
