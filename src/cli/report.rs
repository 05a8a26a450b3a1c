//! `tacho report`: reports over what the machine has accumulated (today: disk totals).

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `tacho report`: which report.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The report asked for.
    #[command(subcommand)]
    pub what: ReportWhat,
}

/// The reports `tacho report` makes.
#[derive(Debug, Subcommand)]
pub enum ReportWhat {
    /// Bytes each disk wrote and read, its lifetime figures from SMART/NVMe health (bytes
    /// written, wear, power-on hours, bad sectors) and how long its rated endurance lasts
    #[command(
        after_help = "Examples:\n  tacho report disk\n  tacho report disk nvme0n1 --rated-tbw 600\n  \
tacho report disk sda --smartctl-json sda.json --json"
    )]
    Disk(ReportDiskArgs),
}

/// `tacho report disk`'s options.
#[derive(Debug, Args)]
pub struct ReportDiskArgs {
    /// Whole disks to report (`sda`, `/dev/nvme0n1`) [default: every disk with a device]
    #[arg(value_name = "DISK")]
    pub disks: Vec<String>,

    /// Days of recorded history the per-day table covers
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,

    /// The drive's rated endurance in terabytes written (the warranty's TBW), for the
    /// projection; needs exactly one DISK
    #[arg(long, value_name = "TB", value_parser = parse_tbw, allow_hyphen_values = true)]
    pub rated_tbw: Option<f64>,

    /// Read the drive's health from a saved `smartctl -j -a DEV` output instead of asking the
    /// drive (another machine's, or smartctl run by hand); needs exactly one DISK, whose
    /// kernel counters give the daily rate
    #[arg(long, value_name = "FILE")]
    pub smartctl_json: Option<PathBuf>,

    /// The history of `tacho record` that the per-day table reads [default: $TACHO_HISTORY,
    /// else /var/lib/tacho/history/history.db as root, else beside the results database]
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,

    /// One JSON document (schema tacho.report-disk.v1) on stdout
    #[arg(long)]
    pub json: bool,
}

fn parse_tbw(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(tb) if tb.is_finite() && tb > 0.0 && tb <= 1e6 => Ok(tb),
        _ => Err(format!(
            "the rated endurance is terabytes written, e.g. 150 or 0.6 (got {text})"
        )),
    }
}
