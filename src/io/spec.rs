//! What one I/O test does, in fio's terms. Built by the command layer after validation, so the
//! engine can assume every field is consistent (iodepth ≥ 1, bs ≥ 1, region ≥ bs).

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

/// One test, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
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
    /// Bytes of the file or device the test touches, starting at offset 0; a multiple of `bs`.
    pub region_bytes: u64,
    pub runtime: Duration,
    pub ramp: Duration,
    /// Each worker stops once it has issued this many bytes, even before `runtime` ends.
    pub io_limit: Option<u64>,
    pub rwmixread: u8,
    pub sync: Option<SyncEvery>,
    /// Opened with O_DSYNC or O_SYNC.
    pub open_sync: Option<OpenSync>,
    pub direct: bool,
    pub engine: EngineKind,
    /// Seed of the random offsets and mix choices (`--randseed`): the same seed repeats them.
    pub seed: u64,
}

impl JobSpec {
    /// Distance between possible offsets.
    pub fn align(&self) -> u64 {
        if self.bssplit.is_empty() {
            self.bs
        } else {
            MIX_ALIGN
        }
    }

    /// How many offsets an I/O may start at such that even the largest I/O stays in the region;
    /// never zero for a validated spec (region ≥ bs).
    pub fn blocks(&self) -> u64 {
        (self.region_bytes - self.bs) / self.align() + 1
    }
}
