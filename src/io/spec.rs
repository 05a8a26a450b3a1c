//! What one I/O test does, in fio's terms. The plan validates options with messages about
//! them; [`JobSpec::new`] checks again what the engines rely on (iodepth ≥ 1, bs ≥ 1, every
//! I/O within its buffer, region ≥ bs), and a spec's fields cannot change after.

use crate::choice::Choice;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Access pattern, spelled as fio's `--rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
// The names are fio's `--rw` values (`readwrite`, `randrw`), which serde writes as they are.
#[allow(clippy::enum_variant_names)]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Sequential mixed reads and writes (`--rwmixread` sets the share of reads).
    ReadWrite,
    /// Random mixed reads and writes.
    RandRw,
}

impl Choice for Rw {
    const ALL: &'static [Self] = &[
        Rw::Read,
        Rw::Write,
        Rw::RandRead,
        Rw::RandWrite,
        Rw::ReadWrite,
        Rw::RandRw,
    ];

    fn word(self) -> &'static str {
        self.fio_name()
    }

    fn aliases(self) -> &'static [&'static str] {
        match self {
            Rw::ReadWrite => &["readwrite"],
            _ => &[],
        }
    }

    fn help(self) -> Option<&'static str> {
        match self {
            Rw::ReadWrite => {
                Some("Sequential mixed reads and writes (--rwmixread sets the share of reads)")
            }
            Rw::RandRw => Some("Random mixed reads and writes"),
            _ => None,
        }
    }
}

impl Rw {
    /// Whether offsets are random rather than sequential.
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }

    /// Whether the pattern issues reads (pure reads or a mix).
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::RandWrite)
    }

    /// Whether the pattern issues writes (pure writes or a mix).
    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::RandRead)
    }

    /// Whether reads and writes are mixed in one test.
    pub fn is_mixed(self) -> bool {
        matches!(self, Rw::ReadWrite | Rw::RandRw)
    }

    /// Percentage of I/Os that are reads.
    pub fn read_pct(self, rwmixread: u8) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite => 0,
            Rw::ReadWrite | Rw::RandRw => rwmixread,
        }
    }

    /// The pattern's `--rw` value in fio (`rw` and `randrw` for the mixes), for `--print-fio` and
    /// fio job files.
    pub fn fio_name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandRw => "randrw",
        }
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.fio_name())
    }
}

/// How I/O is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Asynchronous, `iodepth` I/Os in flight per job through one ring.
    IoUring,
    /// pread/pwrite; a queue depth of N is N threads per job, each with one I/O in flight.
    Psync,
    /// read/write at the file position plus fsync/fdatasync: one I/O at a time, like etcd's WAL.
    Sync,
}

impl Choice for EngineKind {
    const ALL: &'static [Self] = &[EngineKind::IoUring, EngineKind::Psync, EngineKind::Sync];

    fn word(self) -> &'static str {
        match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Psync => "psync",
            EngineKind::Sync => "sync",
        }
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            EngineKind::IoUring => {
                "Asynchronous, `iodepth` I/Os in flight per job through one ring"
            }
            EngineKind::Psync => {
                "pread/pwrite; a queue depth of N is N threads per job, each with one I/O in flight"
            }
            EngineKind::Sync => {
                "read/write at the file position plus fsync/fdatasync: one I/O at a time, like etcd's WAL"
            }
        })
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// Which flush follows every N writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncKind {
    /// fsync(2): data and all metadata.
    Fsync,
    /// fdatasync(2): data and only the metadata needed to read it back.
    Fdatasync,
}

impl fmt::Display for SyncKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncKind::Fsync => "fsync",
            SyncKind::Fdatasync => "fdatasync",
        })
    }
}

/// Synchronous writes by open flag, as dd's `oflag=dsync` and `oflag=sync` (fio's `sync=`):
/// every write returns only once its data (dsync) or data and metadata (sync) are stable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenSync {
    /// O_DSYNC: the data, and the metadata needed to read it back.
    Dsync,
    /// O_SYNC: the data and all of the file's metadata.
    Sync,
}

impl OpenSync {
    /// The open(2) flag.
    pub fn flag(self) -> i32 {
        match self {
            OpenSync::Dsync => libc::O_DSYNC,
            OpenSync::Sync => libc::O_SYNC,
        }
    }
}

impl Choice for OpenSync {
    const ALL: &'static [Self] = &[OpenSync::Dsync, OpenSync::Sync];

    fn word(self) -> &'static str {
        match self {
            OpenSync::Dsync => "dsync",
            OpenSync::Sync => "sync",
        }
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            OpenSync::Dsync => {
                "O_DSYNC: each write waits for its data to be stable (dd oflag=dsync)"
            }
            OpenSync::Sync => "O_SYNC: each write waits for its data and metadata (dd oflag=sync)",
        })
    }
}

impl fmt::Display for OpenSync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// A flush after every `every` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SyncEvery {
    /// Which flush.
    pub kind: SyncKind,
    /// Writes between flushes (at least 1).
    pub every: u32,
}

/// One entry of a block-size mix (`--bssplit 4k/60:64k/40`): `pct` percent of I/Os are `size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BsShare {
    /// Block size of these I/Os, in bytes.
    pub size: u64,
    /// Share of I/Os of this size, in percent (the shares of a mix add up to 100).
    pub pct: u8,
}

/// Offsets of block-size mixes are multiples of 4 KiB, whatever the smallest size: IOmeter's
/// advice, since 512-byte alignment splits 4K-sector and SSD pages and measures that penalty.
pub const MIX_ALIGN: u64 = 4096;

/// What one test is to do, before [`JobSpec::new`] checks that it holds together.
#[derive(Clone, Debug, PartialEq)]
pub struct JobParams {
    /// Access pattern.
    pub rw: Rw,
    /// The block size, or the largest size of a mix (buffers are this big).
    pub bs: u64,
    /// A block-size mix for random patterns; empty when every I/O is `bs`.
    pub bssplit: Vec<BsShare>,
    /// I/Os in flight per worker.
    pub iodepth: u32,
    /// Workers, each with its own queue and file descriptor.
    pub numjobs: u32,
    /// Bytes of the file or device the test touches, starting at offset 0.
    pub region_bytes: u64,
    /// Measured time per repeat, after the ramp.
    pub runtime: Duration,
    /// Warm-up before the measured time.
    pub ramp: Duration,
    /// Each worker stops once it has issued this many bytes, even before `runtime` ends.
    pub io_limit: Option<u64>,
    /// Share of reads of a mixed pattern, in percent.
    pub rwmixread: u8,
    /// A flush after every N writes.
    pub sync: Option<SyncEvery>,
    /// Opened with O_DSYNC or O_SYNC.
    pub open_sync: Option<OpenSync>,
    /// O_DIRECT, or through the page cache.
    pub direct: bool,
    /// The engine that submits the I/O.
    pub engine: EngineKind,
    /// Seed of the random offsets and mix choices (`--randseed`): the same seed repeats them.
    pub seed: u64,
}

/// A test whose parameters contradict what the engines rely on. The plan refuses such tests
/// first with a message about the option; this is the last check, next to the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    /// A block size of zero bytes.
    #[error("a block size of 0 bytes")]
    ZeroBlockSize,
    /// A size of the mix that is zero or larger than the buffers (`bs`).
    #[error("a block-size mix with {size} bytes, outside 1 to the block size {bs}")]
    MixSize {
        /// The size in the mix.
        size: u64,
        /// The block size (the buffers' size).
        bs: u64,
    },
    /// Shares of the mix that do not add up to 100%.
    #[error("a block-size mix whose shares add up to {0}%, not 100%")]
    MixShares(u32),
    /// A region smaller than one block: no offset could hold an I/O.
    #[error("a region of {region} bytes, smaller than one {bs}-byte block")]
    RegionTooSmall {
        /// The region's bytes.
        region: u64,
        /// The block size.
        bs: u64,
    },
    /// No I/O in flight, or no worker.
    #[error("an iodepth or numjobs of 0")]
    NoWork,
    /// A read share above 100%.
    #[error("a read share of {0}%, above 100%")]
    ReadShare(u8),
    /// A flush after every 0 writes.
    #[error("a flush after every 0 writes")]
    ZeroSyncEvery,
}

/// One test, ready to run: its parameters checked by [`JobSpec::new`] and private after, so
/// what the engines rely on (bs ≥ 1, every I/O within its `bs`-byte buffer, region ≥ bs,
/// iodepth and numjobs ≥ 1) holds wherever a spec exists.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec(JobParams);

impl JobSpec {
    /// Checks that `p` holds together.
    pub fn new(p: JobParams) -> Result<JobSpec, InvalidSpec> {
        if p.bs == 0 {
            return Err(InvalidSpec::ZeroBlockSize);
        }
        if let Some(s) = p.bssplit.iter().find(|s| s.size == 0 || s.size > p.bs) {
            return Err(InvalidSpec::MixSize {
                size: s.size,
                bs: p.bs,
            });
        }
        let shares: u32 = p.bssplit.iter().map(|s| u32::from(s.pct)).sum();
        if !p.bssplit.is_empty() && shares != 100 {
            return Err(InvalidSpec::MixShares(shares));
        }
        if p.region_bytes < p.bs {
            return Err(InvalidSpec::RegionTooSmall {
                region: p.region_bytes,
                bs: p.bs,
            });
        }
        if p.iodepth == 0 || p.numjobs == 0 {
            return Err(InvalidSpec::NoWork);
        }
        if p.rwmixread > 100 {
            return Err(InvalidSpec::ReadShare(p.rwmixread));
        }
        if p.sync.is_some_and(|s| s.every == 0) {
            return Err(InvalidSpec::ZeroSyncEvery);
        }
        Ok(JobSpec(p))
    }

    /// The same test through the page cache (for a target that refuses O_DIRECT).
    pub fn set_buffered(&mut self) {
        self.0.direct = false;
    }

    /// Access pattern.
    pub fn rw(&self) -> Rw {
        self.0.rw
    }

    /// The block size, or the largest size of a mix: every I/O is at most this long, and the
    /// buffers are this big.
    pub fn bs(&self) -> u64 {
        self.0.bs
    }

    /// The block-size mix; empty when every I/O is [`JobSpec::bs`].
    pub fn bssplit(&self) -> &[BsShare] {
        &self.0.bssplit
    }

    /// I/Os in flight per worker (at least 1).
    pub fn iodepth(&self) -> u32 {
        self.0.iodepth
    }

    /// Workers (at least 1).
    pub fn numjobs(&self) -> u32 {
        self.0.numjobs
    }

    /// Bytes of the region the test touches, from offset 0 (at least [`JobSpec::bs`]).
    pub fn region_bytes(&self) -> u64 {
        self.0.region_bytes
    }

    /// Measured time per repeat.
    pub fn runtime(&self) -> Duration {
        self.0.runtime
    }

    /// Warm-up before the measured time.
    pub fn ramp(&self) -> Duration {
        self.0.ramp
    }

    /// Bytes after which each worker stops, if any.
    pub fn io_limit(&self) -> Option<u64> {
        self.0.io_limit
    }

    /// Share of reads of a mixed pattern, in percent.
    pub fn rwmixread(&self) -> u8 {
        self.0.rwmixread
    }

    /// The flush after every N writes (N ≥ 1), if any.
    pub fn sync(&self) -> Option<SyncEvery> {
        self.0.sync
    }

    /// O_DSYNC or O_SYNC, if asked.
    pub fn open_sync(&self) -> Option<OpenSync> {
        self.0.open_sync
    }

    /// O_DIRECT, or through the page cache.
    pub fn direct(&self) -> bool {
        self.0.direct
    }

    /// The engine that submits the I/O.
    pub fn engine(&self) -> EngineKind {
        self.0.engine
    }

    /// Seed of the random offsets and mix choices.
    pub fn seed(&self) -> u64 {
        self.0.seed
    }

    /// Distance between possible offsets.
    pub fn align(&self) -> u64 {
        if self.0.bssplit.is_empty() {
            self.0.bs
        } else {
            MIX_ALIGN
        }
    }

    /// How many offsets an I/O may start at such that even the largest I/O stays in the region;
    /// never zero (region ≥ bs, checked by [`JobSpec::new`]).
    pub fn blocks(&self) -> u64 {
        (self.0.region_bytes - self.0.bs) / self.align() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> JobParams {
        JobParams {
            rw: Rw::RandRead,
            bs: 64 << 10,
            bssplit: vec![
                BsShare {
                    size: 4096,
                    pct: 60,
                },
                BsShare {
                    size: 64 << 10,
                    pct: 40,
                },
            ],
            iodepth: 4,
            numjobs: 1,
            region_bytes: 1 << 20,
            runtime: Duration::from_secs(1),
            ramp: Duration::ZERO,
            io_limit: None,
            rwmixread: 50,
            sync: None,
            open_sync: None,
            direct: true,
            engine: EngineKind::IoUring,
            seed: 1,
        }
    }

    #[test]
    fn a_spec_exists_only_where_the_engines_can_run_it() {
        let spec = JobSpec::new(params()).unwrap();
        assert_eq!(spec.blocks(), ((1 << 20) - (64 << 10)) / MIX_ALIGN + 1);
        let refused = |p: JobParams| JobSpec::new(p).unwrap_err();
        assert_eq!(
            refused(JobParams { bs: 0, ..params() }),
            InvalidSpec::ZeroBlockSize
        );
        // An I/O of the mix larger than the buffers would hand the kernel memory past them.
        assert_eq!(
            refused(JobParams {
                bs: 4096,
                ..params()
            }),
            InvalidSpec::MixSize {
                size: 64 << 10,
                bs: 4096
            }
        );
        let mut short_mix = params();
        short_mix.bssplit[0].pct = 50;
        assert_eq!(refused(short_mix), InvalidSpec::MixShares(90));
        assert_eq!(
            refused(JobParams {
                region_bytes: 4096,
                ..params()
            }),
            InvalidSpec::RegionTooSmall {
                region: 4096,
                bs: 64 << 10
            }
        );
        assert_eq!(
            refused(JobParams {
                iodepth: 0,
                ..params()
            }),
            InvalidSpec::NoWork
        );
        assert_eq!(
            refused(JobParams {
                numjobs: 0,
                ..params()
            }),
            InvalidSpec::NoWork
        );
        assert_eq!(
            refused(JobParams {
                rwmixread: 101,
                ..params()
            }),
            InvalidSpec::ReadShare(101)
        );
        let never = SyncEvery {
            kind: SyncKind::Fsync,
            every: 0,
        };
        assert_eq!(
            refused(JobParams {
                sync: Some(never),
                ..params()
            }),
            InvalidSpec::ZeroSyncEvery
        );
    }
}
