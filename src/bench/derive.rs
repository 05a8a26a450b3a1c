//! A fio job derived from what a process did to its files (`tacho files --pid P --derive-job`):
//! per file its read and write calls and bytes, the sizes of its writes, its flushes, and how
//! much the file grew while it was written (appends, or writes in place). The model only; the
//! job file's text is `report::derived_job`.

/// Files a derived job holds at most: the busiest ones, one job each.
pub const MAX_FILES: usize = 4;

/// A share of writes that grew the file at least this large reads as sequential (appends); at
/// most `1 - SEQUENTIAL` as random (in place).
pub const SEQUENTIAL: f64 = 0.9;

/// What one process did to one file while it was watched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The file's path while the process held it, when tacho saw it open.
    pub path: Option<std::path::PathBuf>,
    /// Bytes and calls of read-family calls.
    pub read_bytes: u64,
    pub reads: u64,
    /// Bytes and calls of write-family calls.
    pub write_bytes: u64,
    pub writes: u64,
    /// Smallest and largest single write.
    pub write_range: Option<(u64, u64)>,
    /// fsync, fdatasync and sync_file_range calls.
    pub syncs: u64,
    /// Of `syncs`: fsync calls and fdatasync calls (the rest are sync_file_range).
    pub fsyncs: u64,
    pub fdatasyncs: u64,
    /// Time the process's read, write and sync calls on the file took, summed, ns, over the
    /// `seconds` given to [`derive`].
    pub busy_ns: u64,
    /// The process's threads that made read, write or sync calls on files; `None` when not
    /// seen.
    pub io_threads: Option<u64>,
    /// The file's size when tacho last saw it open.
    pub size: Option<u64>,
    /// Bytes the file grew by, against bytes written, between the first and the last time
    /// tacho saw it open; `None` when it was seen open at most once.
    pub growth: Option<Growth>,
}

/// How much a file grew while bytes were written to it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Growth {
    /// Bytes the file's size rose by (0 when it shrank).
    pub grew: u64,
    /// Bytes written to it over the same time.
    pub written: u64,
}

/// The access pattern of a derived job, in fio's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
}

impl Pattern {
    /// fio's `rw=` value.
    pub fn word(self) -> &'static str {
        match self {
            Pattern::Read => "read",
            Pattern::Write => "write",
            Pattern::RandRead => "randread",
            Pattern::RandWrite => "randwrite",
            Pattern::ReadWrite => "rw",
            Pattern::RandRw => "randrw",
        }
    }
}

/// The flush a job repeats, in fio's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    Fsync,
    Fdatasync,
}

impl Flush {
    /// fio's option name.
    pub fn word(self) -> &'static str {
        match self {
            Flush::Fsync => "fsync",
            Flush::Fdatasync => "fdatasync",
        }
    }
}

/// One job of the derived file: one observed file's work.
#[derive(Debug, Clone, PartialEq)]
pub struct DerivedJob {
    /// What it was derived from.
    pub observed: Observed,
    pub rw: Pattern,
    /// Block size: the writes' (or, without writes, the reads') mean size; exact when every
    /// write was the same size.
    pub bs: u64,
    /// Share of reads among calls, in percent, for a mixed pattern.
    pub rwmixread: Option<u8>,
    /// A flush after every N writes.
    pub fdatasync: Option<u32>,
    /// Which flush: fsync when the process made more fsync calls than fdatasync and
    /// sync_file_range together, else fdatasync.
    pub flush: Flush,
    /// The mean number of the process's calls on the file in flight (their summed time over
    /// the watched time, Little's law); `None` when the watched time is not known.
    pub mean_in_flight: Option<f64>,
    /// Parallel jobs: the mean in flight rounded (at least 1, at most the threads that made
    /// the calls).
    pub numjobs: u32,
    /// Share of written bytes that grew the file, in percent; `None` when not seen.
    pub sequential_pct: Option<f64>,
    /// The job's region: the file's size, at least one block.
    pub size: u64,
}

/// Parallel jobs a derived job runs at most.
pub const MAX_NUMJOBS: u32 = 64;

/// The jobs for the busiest [`MAX_FILES`] of `files` (by bytes), in that order, watched for
/// `seconds`; empty when no read or write was seen.
pub fn derive(files: &[Observed], seconds: f64) -> Vec<DerivedJob> {
    let mut busy: Vec<&Observed> = files
        .iter()
        .filter(|f| f.reads.saturating_add(f.writes) > 0)
        .collect();
    busy.sort_by_key(|f| std::cmp::Reverse(f.read_bytes.saturating_add(f.write_bytes)));
    busy.into_iter()
        .take(MAX_FILES)
        .map(|o| job(o, seconds))
        .collect()
}

fn mean(bytes: u64, calls: u64) -> u64 {
    bytes.checked_div(calls).unwrap_or(0)
}

fn job(o: &Observed, seconds: f64) -> DerivedJob {
    let bs = match o.write_range {
        Some((min, max)) if min == max && min > 0 => min,
        _ if o.writes > 0 => mean(o.write_bytes, o.writes),
        _ => mean(o.read_bytes, o.reads),
    }
    .max(1);
    let sequential_pct = o
        .growth
        .filter(|g| g.written > 0)
        .map(|g| (100.0 * g.grew as f64 / g.written as f64).min(100.0));
    // Reads are not seen to grow anything: without growth seen, a read-only file counts as
    // sequential, as fio's default is.
    let sequential = sequential_pct.is_none_or(|p| p >= SEQUENTIAL * 100.0);
    let rw = match (o.reads > 0, o.writes > 0, sequential) {
        (true, true, true) => Pattern::ReadWrite,
        (true, true, false) => Pattern::RandRw,
        (false, true, true) => Pattern::Write,
        (false, true, false) => Pattern::RandWrite,
        (_, false, true) => Pattern::Read,
        (_, false, false) => Pattern::RandRead,
    };
    let calls = o.reads.saturating_add(o.writes);
    let rwmixread = (o.reads > 0 && o.writes > 0)
        .then(|| (100 * u128::from(o.reads) / u128::from(calls).max(1)) as u8);
    let fdatasync = (o.syncs > 0 && o.writes > 0).then(|| {
        let every = (o.writes as f64 / o.syncs as f64).round();
        every.clamp(1.0, f64::from(u32::MAX)) as u32
    });
    let flush = if o.fsyncs > o.syncs.saturating_sub(o.fsyncs) {
        Flush::Fsync
    } else {
        Flush::Fdatasync
    };
    let mean_in_flight =
        (seconds.is_finite() && seconds > 0.0).then(|| o.busy_ns as f64 / 1e9 / seconds);
    let threads = o
        .io_threads
        .map_or(MAX_NUMJOBS, |p| u32::try_from(p).unwrap_or(u32::MAX))
        .clamp(1, MAX_NUMJOBS);
    let numjobs = mean_in_flight.map_or(1, |m| (m.round().clamp(1.0, f64::from(threads))) as u32);
    let size = o
        .size
        .unwrap_or(0)
        .max(o.write_bytes)
        .div_ceil(bs)
        .saturating_mul(bs)
        .max(bs);
    DerivedJob {
        observed: o.clone(),
        rw,
        bs,
        rwmixread,
        fdatasync,
        flush,
        mean_in_flight,
        numjobs,
        sequential_pct,
        size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wal() -> Observed {
        Observed {
            write_bytes: 2300 * 400,
            writes: 400,
            write_range: Some((2300, 2300)),
            syncs: 400,
            size: Some(2300 * 400),
            growth: Some(Growth {
                grew: 2300 * 390,
                written: 2300 * 390,
            }),
            ..Observed::default()
        }
    }

    #[test]
    fn an_etcd_like_wal_is_2300_byte_appends_each_flushed() {
        let jobs = derive(&[wal()], 1.0);
        let j = &jobs[0];
        assert_eq!(
            (j.rw, j.bs, j.fdatasync, j.rwmixread),
            (Pattern::Write, 2300, Some(1), None)
        );
        assert_eq!(j.sequential_pct, Some(100.0));
        assert_eq!(j.size, 2300 * 400);
    }

    #[test]
    fn writes_in_place_are_random_and_mixed_calls_give_the_read_share() {
        let db = Observed {
            read_bytes: 8192 * 300,
            reads: 300,
            write_bytes: 8192 * 100,
            writes: 100,
            write_range: Some((8192, 8192)),
            syncs: 10,
            size: Some(1 << 30),
            growth: Some(Growth {
                grew: 0,
                written: 8192 * 100,
            }),
            ..Observed::default()
        };
        let j = &derive(&[db], 1.0)[0];
        assert_eq!(j.rw, Pattern::RandRw);
        assert_eq!((j.rwmixread, j.fdatasync), (Some(75), Some(10)));
        assert_eq!(j.size, 1 << 30);
    }

    #[test]
    fn fsync_and_threads_at_once_carry_into_the_job() {
        let o = Observed {
            write_bytes: 4096 * 1000,
            writes: 1000,
            write_range: Some((4096, 4096)),
            syncs: 100,
            fsyncs: 90,
            fdatasyncs: 10,
            // 3.6 s of calls in 1 s watched: 3.6 in flight on average, by 3 threads.
            busy_ns: 3_600_000_000,
            io_threads: Some(3),
            ..Observed::default()
        };
        let j = &derive(std::slice::from_ref(&o), 1.0)[0];
        assert_eq!((j.flush, j.numjobs), (Flush::Fsync, 3));
        assert_eq!(j.mean_in_flight, Some(3.6));
        let few = Observed {
            fsyncs: 40,
            fdatasyncs: 60,
            busy_ns: 400_000_000,
            ..o
        };
        let j = &derive(&[few], 1.0)[0];
        assert_eq!((j.flush, j.numjobs), (Flush::Fdatasync, 1));
    }

    #[test]
    fn idle_files_give_no_job_and_the_busiest_come_first() {
        assert!(derive(&[Observed::default()], 1.0).is_empty());
        let small = Observed {
            reads: 1,
            read_bytes: 10,
            ..Observed::default()
        };
        let jobs = derive(
            &[small.clone(), wal(), small.clone(), small.clone(), small],
            1.0,
        );
        assert_eq!(jobs.len(), MAX_FILES);
        assert_eq!(jobs[0].bs, 2300);
        assert_eq!((jobs[1].rw, jobs[1].bs), (Pattern::Read, 10));
    }

    proptest! {
        #[test]
        fn any_counts_give_a_job_that_fio_could_take(
            read_bytes in any::<u64>(), reads in any::<u64>(), write_bytes in any::<u64>(),
            writes in any::<u64>(), min in any::<u64>(), max in any::<u64>(),
            syncs in any::<u64>(), size in any::<Option<u64>>(), grew in any::<u64>(),
            written in any::<u64>(), fsyncs in any::<u64>(), busy_ns in any::<u64>(),
            peak in any::<Option<u64>>(), seconds in any::<f64>()) {
            let o = Observed {
                path: None, read_bytes, reads, write_bytes, writes,
                write_range: Some((min, max)), syncs, fsyncs, fdatasyncs: 0, busy_ns,
                io_threads: peak, size,
                growth: Some(Growth { grew, written }),
            };
            for j in derive(&[o], seconds) {
                prop_assert!(j.bs >= 1 && j.size >= j.bs);
                prop_assert!(j.rwmixread.is_none_or(|p| p <= 100));
                prop_assert!(j.fdatasync.is_none_or(|n| n >= 1));
                prop_assert!((1..=MAX_NUMJOBS).contains(&j.numjobs));
                prop_assert!(peak.is_none_or(|p| u64::from(j.numjobs) <= p.max(1)));
            }
        }
    }
}
