//! A sample's row: JSON compressed with zlib, bounded on the way out so a hostile history
//! cannot make a reader spend unbounded memory, and checked on the way in so its numbers
//! cannot make the model panic or run away.

use std::io::{Read, Write};

use anyhow::{Context, Result, bail};

use super::Record;

/// The largest value a history connection hands over (SQLite's `SQLITE_LIMIT_LENGTH`): a
/// compressed sample of 300 processes is ~8 KiB, one of 100,000 a few MiB; a view of
/// `zeroblob(900000000)` fails instead of filling memory.
pub(super) const MAX_BLOB: usize = 16 << 20;
/// The most one row may inflate to: the JSON of well over 100,000 processes (~250 bytes each).
const MAX_JSON: u64 = 32 << 20;
/// ... and at most this many times its compressed size, plus [`RATIO_FLOOR`]: tacho's rows
/// compress about 7 to 1, a zlib bomb about 1,000 to 1. A reader's memory then grows with
/// the bytes of the file, not with what a few of them expand to.
const MAX_RATIO: u64 = 100;
/// The inflated bytes any row may have whatever its compressed size.
const RATIO_FLOOR: u64 = 64 << 10;
/// The latest sample time a history may hold (year 2286): times convert to durations and
/// calendar days without overflow.
const MAX_UNIX_S: f64 = 1e10;
/// The longest recorder interval a row may claim (the recorder takes at most 1 h).
const MAX_INTERVAL_S: f64 = 86_400.0;

/// Samples are stored as JSON compressed with zlib: JSON keeps the row readable by any later
/// tacho whose `Sample` gained fields (serde defaults), and the repeated keys of ~300
/// processes compress to a small fraction (measured in docs/benchmarks.md). A sample that
/// readers would refuse is not written.
pub(super) fn encode(rec: &Record) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(rec).context("cannot encode a sample")?;
    if json.len() as u64 > MAX_JSON {
        bail!(
            "a sample of {} MiB is larger than a history row may be ({} MiB); it was not stored",
            json.len() >> 20,
            MAX_JSON >> 20
        );
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&json)?;
    Ok(z.finish()?)
}

/// The inverse of [`encode`] for the row stored at `unix_s`, refusing one that inflates past
/// its bound or whose figures no recorder writes.
pub(super) fn decode(blob: &[u8], unix_s: f64) -> Result<Record> {
    let limit = inflated_bound(blob.len());
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(blob)
        .take(limit + 1)
        .read_to_end(&mut json)?;
    if json.len() as u64 > limit {
        bail!(
            "{} bytes inflate past {limit}: a decompression bomb",
            blob.len()
        );
    }
    let rec: Record = serde_json::from_slice(&json)?;
    check(&rec, unix_s)?;
    Ok(rec)
}

/// The most a row of `compressed` bytes may inflate to.
pub(super) fn inflated_bound(compressed: usize) -> u64 {
    MAX_JSON.min(MAX_RATIO.saturating_mul(compressed as u64) + RATIO_FLOOR)
}

/// Whether `t` can be a sample's time.
pub(super) fn plausible_time(t: f64) -> bool {
    (0.0..=MAX_UNIX_S).contains(&t)
}

/// Refuses figures no recorder writes: times outside [`plausible_time`] or not the row's,
/// intervals, tick rates and page sizes that are not positive and finite (they divide rates
/// and convert to durations).
fn check(rec: &Record, unix_s: f64) -> Result<()> {
    let t = rec.sample.unix_time_s;
    // JSON keeps the time to within a rounding of its last digit.
    if !plausible_time(t) || (t - unix_s).abs() > 1e-3 {
        bail!("its time {t} is not a sample time (the row says {unix_s})");
    }
    if !(rec.interval_s > 0.0 && rec.interval_s <= MAX_INTERVAL_S) {
        bail!("its interval of {} s is not a recorder's", rec.interval_s);
    }
    if !(rec.ticks_per_s >= 1.0 && rec.ticks_per_s <= 1e6) {
        bail!(
            "its clock rate of {} ticks/s is not a kernel's",
            rec.ticks_per_s
        );
    }
    if !(512..=1 << 30).contains(&rec.page_size) {
        bail!("its page size of {} bytes is not a kernel's", rec.page_size);
    }
    Ok(())
}
