//! A sample's row: JSON compressed, bounded on the way out so a hostile history cannot make a
//! reader spend unbounded memory, and checked on the way in so its numbers cannot make the
//! model panic or run away.
//!
//! Three forms, told apart by the first byte:
//! - **zlib** (`0x78`): a whole sample, as history version 1 wrote every row; still read.
//! - **key** (zstd's magic, `0x28`): a whole sample, compressed alone.
//! - **delta** (`D`, then the key's row id, 8 bytes little-endian, then a zstd frame): a sample
//!   compressed with its key's JSON as the dictionary. Consecutive samples share nearly all
//!   their text (process names, command lines, keys), so a delta is about a fifth of a whole
//!   sample (measured in docs/benchmarks.md); any row is read with at most its key besides it,
//!   never a chain.

use std::io::Read;

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

/// zstd's level for every row: level 9 made deltas within 15% of level 19's size at a tenth of
/// its CPU time (docs/benchmarks.md).
const LEVEL: i32 = 9;
/// A new key after this many deltas (10 minutes at the default 10 s interval): the processes
/// drift away from the key's, and a fresh key costs about five deltas.
const DELTAS_PER_KEY: u32 = 60;
/// First byte of a delta row.
const DELTA: u8 = b'D';
/// First byte of a key row: the first of zstd's frame magic.
const KEY: u8 = 0x28;
/// First byte of a version-1 row: zlib's header with its 32 KiB window.
const ZLIB: u8 = 0x78;

/// Samples are stored as JSON: it keeps the row readable by any later tacho whose `Sample`
/// gained fields (serde defaults). A sample that readers would refuse is not written.
pub(super) fn to_json(rec: &Record) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(rec).context("cannot encode a sample")?;
    if json.len() as u64 > MAX_JSON {
        bail!(
            "a sample of {} MiB is larger than a history row may be ({} MiB); it was not stored",
            json.len() >> 20,
            MAX_JSON >> 20
        );
    }
    Ok(json)
}

/// A key row: the sample compressed alone.
pub(super) fn key(json: &[u8]) -> Result<Vec<u8>> {
    zstd::bulk::compress(json, LEVEL).context("cannot compress a sample")
}

/// The recorder's current key: what its deltas are compressed against.
pub(super) struct Encoder {
    /// The key's row.
    id: i64,
    /// A compressor holding the key's JSON as its dictionary.
    zstd: zstd::bulk::Compressor<'static>,
    /// The key row's size: a delta that is not well under it is not worth its dependency.
    key_bytes: usize,
    /// Deltas written against this key.
    deltas: u32,
}

impl Encoder {
    /// An encoder for deltas against `json`, stored as row `id` in `key_bytes`.
    pub(super) fn new(id: i64, json: &[u8], key_bytes: usize) -> Result<Encoder> {
        let zstd = zstd::bulk::Compressor::with_dictionary(LEVEL, json)
            .context("cannot prepare the sample compressor")?;
        Ok(Encoder {
            id,
            zstd,
            key_bytes,
            deltas: 0,
        })
    }

    /// The delta row of `json`, or `None` when a new key is due: after [`DELTAS_PER_KEY`]
    /// deltas, or when the processes changed so much that the delta is over half a key.
    pub(super) fn delta(&mut self, json: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.deltas >= DELTAS_PER_KEY {
            return Ok(None);
        }
        let frame = self
            .zstd
            .compress(json)
            .context("cannot compress a sample")?;
        if frame.len() > self.key_bytes / 2 {
            return Ok(None);
        }
        self.deltas += 1;
        let mut row = Vec::with_capacity(9 + frame.len());
        row.push(DELTA);
        row.extend_from_slice(&self.id.to_le_bytes());
        row.extend_from_slice(&frame);
        Ok(Some(row))
    }
}

/// The key row a delta row needs, `None` for a row read alone.
pub(super) fn key_of(blob: &[u8]) -> Option<i64> {
    match blob {
        [DELTA, id @ ..] if id.len() >= 8 => id[..8].try_into().ok().map(i64::from_le_bytes),
        _ => None,
    }
}

/// A key row's JSON, the dictionary of its deltas; refuses a row that is not a key.
pub(super) fn key_json(blob: &[u8]) -> Result<Vec<u8>> {
    if blob.first() != Some(&KEY) {
        bail!("a delta names a row that is not a whole sample as its key");
    }
    unzstd(blob, None, inflated_bound(blob.len()))
}

/// The inverse of the encoders for the row stored at `unix_s` (`key` being the JSON of its
/// key when it is a delta), refusing one that inflates past its bound or whose figures no
/// recorder writes.
pub(super) fn decode(blob: &[u8], unix_s: f64, key: Option<&[u8]>) -> Result<Record> {
    let json = match (blob.first(), key_of(blob), key) {
        (Some(&ZLIB), ..) => unzlib(blob)?,
        (Some(&KEY), ..) => unzstd(blob, None, inflated_bound(blob.len()))?,
        (Some(&DELTA), Some(_), Some(key)) => {
            let frame = &blob[9..];
            // A delta restates its key's text by reference: it may inflate to the key's size
            // besides its own bound.
            let limit = MAX_JSON.min(inflated_bound(frame.len()) + key.len() as u64);
            unzstd(frame, Some(key), limit)?
        }
        (Some(&DELTA), Some(_), None) => bail!("its key row is missing"),
        _ => bail!("its encoding is not one tacho writes"),
    };
    let rec: Record = serde_json::from_slice(&json)?;
    check(&rec, unix_s)?;
    Ok(rec)
}

/// A version-1 row.
fn unzlib(blob: &[u8]) -> Result<Vec<u8>> {
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
    Ok(json)
}

/// A zstd frame of at most `limit` bytes, which its header must state (the recorder writes
/// it): the buffer is sized from it, never from what the frame turns out to hold.
fn unzstd(frame: &[u8], dictionary: Option<&[u8]>, limit: u64) -> Result<Vec<u8>> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => size,
        Ok(None) => bail!("a compressed sample does not state its size"),
        Err(_) => bail!("a compressed sample is not a zstd frame"),
    };
    if size > limit {
        bail!(
            "{} bytes would inflate to {size}, past {limit}: a decompression bomb",
            frame.len()
        );
    }
    let mut zstd = match dictionary {
        Some(d) => zstd::bulk::Decompressor::with_dictionary(d)?,
        None => zstd::bulk::Decompressor::new()?,
    };
    let json = zstd.decompress(frame, size as usize)?;
    if json.len() as u64 != size {
        bail!("a compressed sample holds other than the size it states");
    }
    Ok(json)
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
    if let Some(s) = &rec.settings
        && s.len() > crate::history::settings::MAX_SETTINGS
    {
        bail!("it holds {} settings, more than a recorder reads", s.len());
    }
    if !(512..=1 << 30).contains(&rec.page_size) {
        bail!("its page size of {} bytes is not a kernel's", rec.page_size);
    }
    Ok(())
}
