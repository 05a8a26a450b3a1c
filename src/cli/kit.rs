//! Options of `tacho time`, `tacho bench cpu`, `tacho bench mem` and `tacho stress`.

use super::choice::choice;
use super::{RecordArgs, SaveArgs};
use crate::cpubench::KernelName;
use crate::membench::LevelName;
use crate::units::{parse_duration, parse_size};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct TimeArgs {
    /// Commands to time; several are compared, running in turns (A B A B…)
    #[arg(required = true, value_name = "CMD")]
    pub commands: Vec<String>,

    /// Exact number of timed runs per command
    #[arg(short = 'r', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["min_runs", "max_runs"])]
    pub runs: Option<u64>,

    /// Untimed runs of each command before timing starts (fills caches)
    #[arg(short = 'w', long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,

    /// At least this many timed runs per command
    #[arg(short = 'm', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), default_value_t = 10)]
    pub min_runs: u64,

    /// At most this many timed runs per command [default: no limit]
    #[arg(short = 'M', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_runs: Option<u64>,

    /// Keep running each command for at least this long (unless --runs or --max-runs say less)
    #[arg(long, value_name = "DUR", default_value = "3s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub min_benchmarking_time: Duration,

    /// Command run before every run (timed and warm-up); give it once, or once per command
    #[arg(short = 'p', long, value_name = "CMD")]
    pub prepare: Vec<String>,

    /// Command run once before the runs (before each command's block with --no-interleave)
    #[arg(short = 's', long, value_name = "CMD")]
    pub setup: Option<String>,

    /// Command run once after the runs (after each command's block with --no-interleave)
    #[arg(short = 'c', long, value_name = "CMD")]
    pub cleanup: Option<String>,

    /// Shell that runs each command ('none' runs it directly, split into words); its own
    /// start-up time is measured and subtracted
    #[arg(short = 'S', long, value_name = "SHELL", default_value = "sh")]
    pub shell: String,

    /// Run commands without a shell (same as --shell=none)
    #[arg(short = 'N')]
    pub no_shell: bool,

    /// Keep timing when a command exits non-zero (or hits --max-time)
    #[arg(short = 'i', long)]
    pub ignore_failure: bool,

    /// Show the commands' output instead of discarding it
    #[arg(long)]
    pub show_output: bool,

    /// Name of a command in the reports; once per command, in order
    #[arg(short = 'n', long, value_name = "NAME")]
    pub command_name: Vec<String>,

    /// Kill a run that takes longer than this (an error unless --ignore-failure)
    #[arg(long, value_name = "DUR", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub max_time: Option<Duration>,

    /// Leave running what a run starts in the background. By default whatever a run started
    /// that is still running when its command exits gets SIGTERM, then SIGKILL a second later:
    /// its process group, and what left the group (setsid, a daemon's double fork), which
    /// tacho finds as it adopts the run's orphans
    #[arg(long)]
    pub keep_children: bool,

    /// Run each command's runs in one block, as hyperfine does, instead of in turns
    #[arg(long)]
    pub no_interleave: bool,

    /// Write hyperfine's JSON export (`{"results": [...]}`) to FILE
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Write hyperfine's CSV export to FILE
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,

    /// Write a Markdown table to FILE
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,

    /// Print one JSON document (schema tacho.time.v1) on stdout
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub record: RecordArgs,
}

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Threads for the all-threads pass [default: the CPUs tacho may run on]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,

    /// Measuring time of each kernel in each repeat
    #[arg(long, value_name = "DUR", default_value = "500ms", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub runtime: Duration,

    /// Repeats of every measurement; the median is reported with the spread
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Run only these kernels (repeat the option) [default: all]
    #[arg(long, value_parser = choice::<KernelName>(), value_name = "NAME")]
    pub kernel: Vec<KernelName>,

    /// Print one JSON document (schema tacho.cpu.v1) on stdout
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub save: SaveArgs,
}

#[derive(Debug, Args)]
pub struct MemArgs {
    /// Threads for the all-threads pass [default: the CPUs tacho may run on]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,

    /// Measuring time of each test at each level in each repeat
    #[arg(long, value_name = "DUR", default_value = "150ms", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub runtime: Duration,

    /// Repeats of every measurement; the median is reported with the spread
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Working set of the DRAM level [default: 8 × the last-level cache, at least 256M]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub dram_size: Option<u64>,

    /// Measure only these levels (repeat the option) [default: all the machine has]
    #[arg(long, value_parser = choice::<LevelName>(), value_name = "LEVEL")]
    pub level: Vec<LevelName>,

    /// Print one JSON document (schema tacho.mem.v1) on stdout
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub save: SaveArgs,
}

/// `--vm-bytes`: bytes per worker, or a share of MemAvailable split between the workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VmBytes {
    Bytes(u64),
    PercentAvailable(f64),
}

#[derive(Debug, Args)]
pub struct StressArgs {
    /// CPU workers (integer arithmetic in a loop)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub cpu: u32,

    /// Busy share of each CPU worker, in percent (busy, then sleep, in 100 ms periods)
    #[arg(long, value_name = "PCT", default_value_t = 100, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub cpu_load: u8,

    /// Memory workers: allocate --vm-bytes, touch every page, free, repeat
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub vm: u32,

    /// Memory per vm worker (e.g. 256M), or a share of MemAvailable split between them (50%)
    #[arg(long, value_name = "SIZE|PCT%", default_value = "256M", value_parser = parse_vm_bytes, allow_hyphen_values = true)]
    pub vm_bytes: VmBytes,

    /// Allocate once and keep re-touching the pages instead of freeing and allocating again
    #[arg(long)]
    pub vm_keep: bool,

    /// Each memory worker stops after this many passes over --vm-bytes, a fixed amount of
    /// work (the run ends when all have, or at --timeout)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub vm_passes: Option<u64>,

    /// I/O workers calling sync() in a loop
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub io: u32,

    /// Disk workers: write --hdd-bytes to a file, delete it, repeat
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub hdd: u32,

    /// File size per hdd worker
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_hdd_bytes, allow_hyphen_values = true)]
    pub hdd_bytes: u64,

    /// Directory for the hdd workers' files (tacho makes and removes a subdirectory)
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub hdd_dir: PathBuf,

    /// Stop after this long
    #[arg(short = 't', long, value_name = "DUR", default_value = "60s", value_parser = parse_positive_duration, allow_hyphen_values = true)]
    pub timeout: Duration,

    /// Allow --vm-bytes beyond MemAvailable (the OOM killer may end tacho or other processes)
    #[arg(long)]
    pub force: bool,

    /// Print one JSON summary (schema tacho.stress.v1) on stdout instead of per-second lines
    #[arg(long)]
    pub json: bool,
}

pub(super) fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err(format!("'{text}' is zero; give a positive time, e.g. 5s")),
        d => Ok(d),
    }
}

fn parse_vm_bytes(text: &str) -> Result<VmBytes, String> {
    if let Some(pct) = text.trim().strip_suffix('%') {
        return match pct.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => Ok(VmBytes::PercentAvailable(p)),
            _ => Err(format!(
                "'{text}' is not a percentage between 0 and 100, e.g. 50%"
            )),
        };
    }
    match parse_size(text).map_err(|e| e.to_string())? {
        0 => Err("the memory per worker must be at least one page, e.g. 256M".into()),
        n => Ok(VmBytes::Bytes(n)),
    }
}

fn parse_hdd_bytes(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.to_string())? {
        0 => Err("the file size per hdd worker must be at least 1 byte, e.g. 1G".into()),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_bytes_takes_sizes_and_percentages() {
        assert_eq!(parse_vm_bytes("256M"), Ok(VmBytes::Bytes(256 << 20)));
        assert_eq!(parse_vm_bytes("50%"), Ok(VmBytes::PercentAvailable(50.0)));
        assert!(parse_vm_bytes("0").is_err());
        assert!(parse_vm_bytes("150%").unwrap_err().contains("percentage"));
        assert!(parse_vm_bytes("x%").is_err());
        assert!(parse_positive_duration("0s").unwrap_err().contains("zero"));
    }
}
