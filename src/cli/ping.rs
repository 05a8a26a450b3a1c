//! Options of `tacho ping`, spelled as ioping's.

use crate::units::{parse_duration, parse_size};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// `tacho ping`'s options.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  tacho ping -c 10 /var/lib/postgresql\n  \
tacho ping -c 20 -i 200ms -s 64k /dev/nvme0n1\n  tacho ping --write -c 10 .")]
pub struct PingArgs {
    /// Directory (a temporary 1 MiB test file), existing file, or block device
    #[arg(default_value = ".", value_hint = clap::ValueHint::AnyPath)]
    pub target: PathBuf,

    /// Stop after N requests, the first (a warm-up, not counted) included [default: until
    /// Ctrl-C]
    #[arg(short = 'c', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Time from one request to the next, e.g. 1s, 200ms, 0
    #[arg(short = 'i', long, value_name = "DUR", default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub interval: Duration,

    /// Request size, e.g. 4k, 64k, 1M
    #[arg(short = 's', long, value_name = "SIZE", default_value = "4k", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: u64,

    /// Working set the offsets are drawn from [default: 1M in a directory, the whole file or
    /// device otherwise]
    #[arg(short = 'S', long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub work_size: Option<u64>,

    /// Write instead of read (a directory's test file always may be written; a file or device
    /// needs --destroy-data)
    #[arg(short = 'W', long)]
    pub write: bool,

    /// Go through the page cache: each read's range is dropped from it first (ioping's
    /// default), writes stay in it
    #[arg(long)]
    pub buffered: bool,

    /// Allow writing over an existing file or a block device that holds data
    #[arg(long)]
    pub destroy_data: bool,

    /// Print one JSON document (schema tacho.ping.v1) on stdout instead of lines
    #[arg(long)]
    pub json: bool,
}
