//! The host-cache probe: does a cache below the target (a hypervisor's host page cache, a
//! buffered loop device) hold what was just written, or acknowledge flushes it never made?
//!
//! Inside a VM, O_DIRECT stops at the guest's kernel: with the disk in `writeback` or `unsafe`
//! mode the host serves recent data from its RAM, and nothing in the guest says so. The probe
//! finds out with only what a guest can do, all with O_DIRECT on the target's own descriptor:
//!
//! - **Reads**: blocks written moments ago are read back, against blocks spread over the whole
//!   region (written long before, by the layout or by whoever filled the device) read in a
//!   random order so that no read-ahead can have fetched them. A cache of recent writes makes
//!   the first kind much faster; an honest device reads both alike.
//! - **Flushes**: each probe write (and its read-back) is followed by fdatasync. A flush that
//!   returns far faster than the medium can even read a block was not carried out
//!   (`cache=unsafe`) or went to a power-safe cache; either way sync-write figures are not the
//!   medium's.
//!
//! Both judgements need a ratio *and* an absolute gap, so RAM-fast targets (tmpfs loops, zram),
//! whose figures jitter by a few microseconds, never fire. A host cache larger than the region
//! holds every block, cold ones included: then nothing can be seen, and the probe says so.

use crate::io::buffer::AlignedBuf;
use crate::io::worker::retry;
use crate::io::{Control, EngineError};
use crate::units::{format_latency_ns, format_size};
use serde::Serialize;
use std::fs::File;
use std::time::Instant;

/// Write, flush and read-back rounds: at least the first, at most the second, stopping after
/// the minimum once `BUDGET` has passed (a slow disk takes milliseconds per flush).
const ROUNDS: (usize, usize) = (32, 256);
/// How long the probe may take once it has its minimum of rounds.
const BUDGET: std::time::Duration = std::time::Duration::from_secs(3);
/// Cold reads per round, interleaved with the rounds so a drifting machine affects both alike.
const COLD_PER_ROUND: usize = 4;
/// Every probe I/O has a slot of the region to itself and stays in its first half, so no two
/// are closer than half a slot: a host's read-ahead (128 KiB by default, rarely above 512 KiB)
/// around one cold read cannot fetch another.
const SLOT: u64 = 1 << 20;
/// Reads of recent writes must be this many times faster than cold reads to be called cached
/// (medians)…
const READ_RATIO: f64 = 2.0;
/// …faster by at least this much (ns), as RAM-speed jitter is not a cache…
const READ_GAP_NS: f64 = 25_000.0;
// …and three quarters of them faster than three quarters of the cold ones: two populations,
// not one noisy one.
/// Flushes must be this many times faster than a cold read to be called not carried out…
const FLUSH_RATIO: f64 = 4.0;
/// …and faster by at least this much (ns).
const FLUSH_GAP_NS: f64 = 200_000.0;

/// What the probe measured (medians, in ns) and what it concluded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostCacheProbe {
    /// Size of every probe I/O.
    pub block_bytes: u64,
    /// Bytes of the target the cold reads are spread over.
    pub region_bytes: u64,
    /// Reads of blocks written long ago or far away, in random order.
    pub cold_reads: usize,
    /// Write, flush, read-back rounds.
    pub rounds: usize,
    /// Median latency of a cold read.
    pub cold_read_ns: u64,
    /// A quarter of the cold reads were faster than this.
    pub cold_read_p25_ns: u64,
    /// Median latency of reading back a block just written.
    pub hot_read_ns: u64,
    /// Three quarters of the reads of just-written blocks were faster than this.
    pub hot_read_p75_ns: u64,
    /// Median latency of a probe write (O_DIRECT).
    pub write_ns: u64,
    /// Median latency of the fdatasync after each probe write.
    pub flush_ns: u64,
    /// A cache below the target serves recent writes.
    pub recent_writes_cached: bool,
    /// Flushes return far faster than the medium reads: not carried out, or power-safe cache.
    pub flushes_not_carried_out: bool,
    /// False when nothing was seen but nothing could have been: the "cold" blocks were laid
    /// out by this same run moments before, so a cache below would hold them too.
    pub conclusive: bool,
    /// The finding in words, with the figures.
    pub summary: String,
}

impl HostCacheProbe {
    /// Whether anything was seen.
    pub fn seen(&self) -> bool {
        self.recent_writes_cached || self.flushes_not_carried_out
    }
}

/// Why a probe that saw nothing over a just-written region could not have seen anything.
const JUST_WRITTEN: &str = "the host-cache probe could not tell: the blocks it read as cold \
    were written by this run's layout moments before, so a cache below the target would hold \
    them as well as the probe's own writes; to probe, run on an existing file or device with \
    --destroy-data (whose data is older), or with a --size larger than the host's cache";

/// What became of the probe: figures, or why it did not run (in words).
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeOutcome {
    /// It ran to the end.
    Ran(HostCacheProbe),
    /// It could not run here, and why.
    Skipped(String),
}

/// Medians of the four kinds of I/O (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Medians {
    pub cold_read: f64,
    pub cold_read_p25: f64,
    pub hot_read: f64,
    pub hot_read_p75: f64,
    pub write: f64,
    pub flush: f64,
}

/// How many slots the probe needs, at least: one per I/O of its minimum of rounds.
fn slots_needed() -> u64 {
    (ROUNDS.0 * (1 + COLD_PER_ROUND)) as u64
}

/// The smallest region the probe can spread its I/Os over.
pub fn min_region() -> u64 {
    slots_needed() * SLOT
}

/// Runs the probe on `file`, a writable O_DIRECT descriptor of the target, over its first
/// `region` bytes in I/Os of `block` bytes; overwrites one block in each of up to 256 slots.
/// `just_written`: this run laid the region out, so its cold blocks are recent too.
/// `None` when the region is smaller than [`min_region`], `ctl` stopped it, or no round ran.
pub fn probe(
    file: &File,
    region: u64,
    block: u64,
    just_written: bool,
    ctl: &Control,
) -> Result<Option<HostCacheProbe>, EngineError> {
    let slots = region / SLOT;
    if slots < slots_needed() || block > SLOT / 2 {
        return Ok(None);
    }
    let rounds = ROUNDS.1.min(slots as usize / (1 + COLD_PER_ROUND));
    let mut rng = fastrand::Rng::new();
    // Slots in a random order (no read-ahead follows it), a random block in each one's first half.
    let mut order: Vec<u64> = (0..slots).collect();
    rng.shuffle(&mut order);
    let mut at = order
        .into_iter()
        .map(|slot| slot * SLOT + rng.u64(..SLOT / 2 / block) * block);
    let hot: Vec<u64> = at.by_ref().take(rounds).collect();
    let cold: Vec<u64> = at.take(rounds * COLD_PER_ROUND).collect();
    let mut buf = AlignedBuf::random(block as usize, &mut rng);
    let (mut cold_ns, mut hot_ns, mut write_ns, mut flush_ns) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    for (round, &at) in hot.iter().enumerate() {
        if ctl.stopped() {
            return Ok(None);
        }
        if round >= ROUNDS.0 && start.elapsed() > BUDGET {
            break;
        }
        for &c in &cold[round * COLD_PER_ROUND..(round + 1) * COLD_PER_ROUND] {
            cold_ns.push(timed(|| read_at(file, &mut buf, c))?);
        }
        buf.scramble(at);
        write_ns.push(timed(|| write_at(file, &buf, at))?);
        // Read back before the flush, whose work (a host's fsync) would slow the read down.
        hot_ns.push(timed(|| read_at(file, &mut buf, at))?);
        flush_ns.push(timed(|| {
            file.sync_data()
                .map_err(|e| EngineError::io("flush", at, e))
        })?);
    }
    use crate::stats::{median, quantile};
    // Every round times each step, so these are empty only if no round ran: then nothing
    // was measured, which is no figure (not a zero).
    let (Some(cold_read), Some(cold_read_p25), Some(hot_read), Some(hot_read_p75)) = (
        median(&cold_ns),
        quantile(&mut cold_ns, 0.25),
        median(&hot_ns),
        quantile(&mut hot_ns, 0.75),
    ) else {
        return Ok(None);
    };
    let (Some(write), Some(flush)) = (median(&write_ns), median(&flush_ns)) else {
        return Ok(None);
    };
    let medians = Medians {
        cold_read,
        cold_read_p25,
        hot_read,
        hot_read_p75,
        write,
        flush,
    };
    let (cached, unflushed, summary) = judge(&medians);
    // What was seen stands (hot reads beat even recent cold ones); nothing seen says nothing.
    let conclusive = cached || unflushed || !just_written;
    let summary = if conclusive {
        format!("{summary} (over {})", format_size(region))
    } else {
        format!("{JUST_WRITTEN} ({summary})")
    };
    Ok(Some(HostCacheProbe {
        block_bytes: block,
        region_bytes: region,
        cold_reads: cold_ns.len(),
        rounds: hot_ns.len(),
        cold_read_ns: medians.cold_read as u64,
        cold_read_p25_ns: medians.cold_read_p25 as u64,
        hot_read_ns: medians.hot_read as u64,
        hot_read_p75_ns: medians.hot_read_p75 as u64,
        write_ns: medians.write as u64,
        flush_ns: medians.flush as u64,
        recent_writes_cached: cached,
        flushes_not_carried_out: unflushed,
        conclusive,
        summary,
    }))
}

/// Judges the medians: (recent writes cached, flushes not carried out, the finding in words).
pub(crate) fn judge(m: &Medians) -> (bool, bool, String) {
    let lat = format_latency_ns;
    let cached = m.cold_read >= READ_RATIO * m.hot_read
        && m.cold_read - m.hot_read >= READ_GAP_NS
        && m.hot_read_p75 < m.cold_read_p25;
    let unflushed = m.cold_read >= FLUSH_RATIO * m.flush && m.cold_read - m.flush >= FLUSH_GAP_NS;
    let mut found = Vec::new();
    if cached {
        found.push(format!(
            "reads of just-written data are {:.0}× faster than cold reads ({} vs {}): a cache \
             below the target holds recent writes (the host's, with the VM disk in writeback \
             or unsafe mode), so the figures reflect that cache as well as the disk",
            m.cold_read / m.hot_read,
            lat(m.hot_read),
            lat(m.cold_read)
        ));
    }
    if unflushed {
        found.push(format!(
            "flushes return in {}, {:.0}× faster than a cold read ({}): they are not carried \
             out (host cache=unsafe) or land in a power-safe cache, so sync-write figures are \
             not the disk's",
            lat(m.flush),
            m.cold_read / m.flush,
            lat(m.cold_read)
        ));
    }
    let summary = if found.is_empty() {
        format!(
            "nothing seen: just-written data reads in {}, cold data in {}; a flush takes {} \
             after a {} write",
            lat(m.hot_read),
            lat(m.cold_read),
            lat(m.flush),
            lat(m.write)
        )
    } else {
        found.join("; ")
    };
    (cached, unflushed, summary)
}

fn timed(op: impl FnOnce() -> Result<(), EngineError>) -> Result<f64, EngineError> {
    let start = Instant::now();
    op()?;
    Ok(start.elapsed().as_nanos() as f64)
}

fn read_at(file: &File, buf: &mut AlignedBuf, at: u64) -> Result<(), EngineError> {
    let want = buf.len();
    let got = retry(|| rustix::io::pread(file, buf.as_mut_slice(), at))
        .map_err(|e| EngineError::io("read", at, e.into()))?;
    whole("read", at, got, want)
}

fn write_at(file: &File, buf: &AlignedBuf, at: u64) -> Result<(), EngineError> {
    let want = buf.len();
    let got = retry(|| rustix::io::pwrite(file, buf.as_slice(), at))
        .map_err(|e| EngineError::io("write", at, e.into()))?;
    whole("write", at, got, want)
}

fn whole(op: &'static str, offset: u64, got: usize, want: usize) -> Result<(), EngineError> {
    if got == want {
        Ok(())
    } else {
        Err(EngineError::Short {
            op,
            offset,
            got: got as u64,
            want: want as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(cold: f64, hot: f64, write: f64, flush: f64) -> Medians {
        Medians {
            cold_read: cold,
            cold_read_p25: cold * 0.8,
            hot_read: hot,
            hot_read_p75: hot * 1.2,
            write,
            flush,
        }
    }

    #[test]
    fn a_host_page_cache_is_seen_in_reads() {
        let (cached, unflushed, words) = judge(&m(380_000.0, 42_000.0, 60_000.0, 2_000_000.0));
        assert!(cached && !unflushed, "{words}");
        assert!(words.contains("9× faster"), "{words}");
        assert!(words.contains("42.0µs vs 380µs"), "{words}");
    }

    #[test]
    fn an_unsafe_host_is_seen_in_flushes() {
        let (cached, unflushed, words) = judge(&m(5_000_000.0, 4_900_000.0, 40_000.0, 30_000.0));
        assert!(!cached && unflushed, "{words}");
        assert!(words.contains("flushes return in 30.0µs"), "{words}");
    }

    #[test]
    fn ram_fast_and_honest_targets_stay_silent() {
        // A tmpfs loop: everything a few µs, ratios large but gaps tiny.
        let (a, b, words) = judge(&m(12_000.0, 2_000.0, 8_000.0, 1_000.0));
        assert!(!a && !b, "{words}");
        assert!(words.starts_with("nothing seen"), "{words}");
        // An SSD without power-safe cache: reads alike, flushes slower than reads.
        let (a, b, _) = judge(&m(90_000.0, 85_000.0, 30_000.0, 600_000.0));
        assert!(!a && !b);
        // An SSD with power-safe cache: fast flushes, but not beyond the absolute gap.
        let (a, b, _) = judge(&m(90_000.0, 85_000.0, 20_000.0, 15_000.0));
        assert!(!a && !b);
    }
}
