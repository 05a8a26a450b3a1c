//! The command line, as plain data (clap derive). Validation that needs more than one option,
//! or the target, happens in `cmd`, before any side effect.

use crate::io::{EngineKind, Rw};
use crate::units::{parse_duration, parse_size};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

mod kit;
pub use kit::{CpuArgs, KernelName, LevelName, MemArgs, StressArgs, TimeArgs, VmBytes};

#[derive(Debug, Parser)]
#[command(
    name = "tacho",
    version,
    about = "How fast this Linux server really is, and what is slowing it down",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark storage, CPU or memory (`tacho bench` alone runs the quick disk suite in the
    /// current directory)
    Bench(BenchArgs),
    /// Time commands repeatedly (hyperfine's options and JSON export; runs interleaved)
    Time(TimeArgs),
    /// Generate load: CPU, memory (allocate, touch, free), sync() and disk-write workers
    Stress(StressArgs),
    /// Print a shell completion script to stdout
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout
    Man,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
}

#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Storage benchmark on a directory (a temporary test file), a file, or a block device
    Disk(DiskArgs),
    /// CPU throughput, single-thread and all threads, on kernels that cannot be optimised away
    Cpu(CpuArgs),
    /// Memory bandwidth (read, write, copy) and latency at L1, L2, L3 and DRAM working sets
    Mem(MemArgs),
}

#[derive(Debug, Args, Default)]
pub struct DiskArgs {
    /// Directory (tacho creates and removes its own test file), existing file, or block device
    #[arg(default_value = ".")]
    pub target: PathBuf,

    /// Run a fixed suite of tests instead of one custom test [default: quick]
    #[arg(long, value_name = "NAME", conflicts_with = "rw")]
    pub suite: Option<String>,

    /// Access pattern of a custom test
    #[arg(long, value_enum, help_heading = "Custom test (fio's option names)")]
    pub rw: Option<Rw>,

    /// Block size, e.g. 4k, 1M, 2300 [default: 4k]
    #[arg(long, value_name = "SIZE", value_parser = parse_block_size, allow_hyphen_values = true, help_heading = "Custom test (fio's option names)")]
    pub bs: Option<u64>,

    /// I/Os in flight per job [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Custom test (fio's option names)")]
    pub iodepth: Option<u32>,

    /// Parallel jobs, each with its own queue [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Custom test (fio's option names)")]
    pub numjobs: Option<u32>,

    /// Share of reads in a mixed (rw, randrw) test, in percent [default: 50]
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u8).range(0..=100), help_heading = "Custom test (fio's option names)")]
    pub rwmixread: Option<u8>,

    /// fsync after every N writes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "fdatasync", help_heading = "Custom test (fio's option names)")]
    pub fsync: Option<u32>,

    /// fdatasync after every N writes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Custom test (fio's option names)")]
    pub fdatasync: Option<u32>,

    /// I/O engine [default: io_uring, falling back to psync where io_uring is blocked]
    #[arg(long, value_enum, help_heading = "Custom test (fio's option names)")]
    pub engine: Option<EngineKind>,

    /// Bypass the page cache with O_DIRECT (the default)
    #[arg(long, overrides_with = "buffered")]
    pub direct: bool,

    /// Go through the page cache (needed on filesystems without O_DIRECT, such as tmpfs on
    /// older kernels; measures RAM as much as the disk)
    #[arg(long, overrides_with = "direct")]
    pub buffered: bool,

    /// Region or test file size, e.g. 1G [default: 1G for a test file, the whole file or device
    /// otherwise]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: Option<u64>,

    /// Measured time per test, e.g. 5s, 500ms, 2m [default: 10s custom, 5s per suite test]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub runtime: Option<Duration>,

    /// Warm-up before measuring starts [default: 0 custom, 1s per suite test]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub ramp: Option<Duration>,

    /// Seed of the random offsets, for repeatable runs
    #[arg(long, value_name = "N")]
    pub randseed: Option<u64>,

    /// Allow writing over an existing file or a block device that holds data
    #[arg(long)]
    pub destroy_data: bool,

    /// Print one JSON document (schema tacho.bench.v1) on stdout
    #[arg(long)]
    pub json: bool,
}

fn parse_block_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("the block size must be at least 1 byte, e.g. 4k".into()),
        n if n > 256 << 20 => Err("the block size must be at most 256M".into()),
        n => Ok(n),
    }
}
