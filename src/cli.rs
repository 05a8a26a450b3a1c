//! The command line, as plain data (clap derive). Validation that needs more than one option,
//! or the target, happens in `cmd`, before any side effect.

use crate::files::ops::Ops;
use crate::io::{BsShare, EngineKind, OpenSync, Rw};
use crate::units::{parse_duration, parse_size};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

mod results;
pub(crate) use results::{
    CompareArgs, DbArg, FormatArgs, RecordArgs, RunFilter, RunsCommand, SaveArgs, SaveDocArgs,
    StoreCommand,
};
pub mod errors;
mod help;
mod hint;
mod kit;
pub(crate) use kit::{CpuArgs, MemArgs, StressArgs, TimeArgs, VmBytes};
mod choice;
mod experiment;
pub(crate) use experiment::ExperimentArgs;
mod load;
mod ping;
use choice::choice;
pub(crate) use load::LoadArgs;
pub use ping::PingArgs;
mod report;
pub use report::{ReportArgs, ReportDiskArgs, ReportWhat};
#[cfg(test)]
mod plan_tests;

/// The version, the commit it was built from (build.rs) and the features this build has, for
/// `--version`.
static LONG_VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{}\n{}\n{}",
        env!("CARGO_PKG_VERSION"),
        env!("TACHO_COMMIT"),
        crate::features::summary()
    )
});

/// The parsed command line, which `main` hands to `cmd::run`.
#[derive(Debug, Parser)]
#[command(
    name = "tacho",
    version,
    // `--version` adds the commit and the features built in (`-V` stays the version alone).
    long_version = LONG_VERSION.as_str(),
    about = "How fast this Linux server really is, and what is slowing it down",
    propagate_version = true,
    // `tacho` alone lists the commands, on stderr with exit 2 as hyperfine and rg do without
    // arguments: no command is a usage error a script should notice, not a success.
    arg_required_else_help = true
)]
pub struct Cli {
    /// The config file [default: $TACHO_CONFIG, else /etc/tacho/tacho.toml where it exists]
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Benchmark storage, CPU or memory (`tacho bench` alone runs the quick disk suite in the
    /// current directory)
    Bench(BenchArgs),
    /// Which process reads and writes which file, live (fanotify); or which file owns a sector
    Files(Box<FilesArgs>),
    /// Where the CPU time goes, by function: samples every CPU (as perf top) and says which
    /// function, process and kernel subsystem take it
    Profile(ProfileArgs),
    /// Stored benchmark runs: list, show, rm, export, import (also fio JSON)
    #[command(subcommand)]
    Runs(RunsCommand),
    /// The shared PostgreSQL store: `store init` (schema and a host role's grants), `store
    /// prune` (history retention)
    #[command(subcommand)]
    Store(StoreCommand),
    /// Compare stored runs side by side, with significance and configuration differences
    Compare(CompareArgs),
    /// Live diagnosis: CPU, memory, PSI, disks (every iostat -x column), processes' I/O,
    /// cgroups, network, and a verdict first
    Top(TopArgs),
    /// Record what `tacho top` sees every --interval into a history file, for
    /// `tacho top --replay` and `tacho top --from/--to` later (run it as a service)
    Record(Box<HistoryRecordArgs>),
    /// Audit settings that silently cost performance (read-only): each finding with evidence,
    /// why it matters, and the commands to fix, persist and revert it
    Check(CheckArgs),
    /// Capture this machine's performance-relevant configuration as JSON
    Snapshot(SnapshotArgs),
    /// Compare two snapshots (files, or `live` for this machine), performance-relevant
    /// differences first
    Diff(DiffArgs),
    /// Settings that differ across hosts, from each host's latest `snapshot --save` and
    /// `check --save`, performance-relevant ones first
    Drift(DriftArgs),
    /// Time commands repeatedly (hyperfine's options and JSON export; runs interleaved)
    Time(Box<TimeArgs>),
    /// Latency of single small I/Os at an interval, as ioping: a line per request, then
    /// min/avg/max/mdev, IOPS and throughput
    Ping(PingArgs),
    /// Load an HTTP service at a fixed rate (open loop, latency from each request's due time),
    /// or ramp the rate to find its knee and what bent on the server
    Load(Box<LoadArgs>),
    /// Generate load: CPU, memory (allocate, touch, free), sync() and disk-write workers
    Stress(StressArgs),
    /// Change one setting, measure in turns with and without it, put it back: the effect with
    /// its confidence interval and significance (a revert journal survives a crash)
    Experiment(Box<ExperimentArgs>),
    /// Reports over what the machine has accumulated: `report disk` (bytes per disk, drive
    /// health, endurance projection)
    Report(ReportArgs),
    /// The config file (/etc/tacho/tacho.toml): `config show` prints each setting's value and
    /// where it came from
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script to stdout
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout, or write every command's page to a directory
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write tacho.1 and one page per subcommand (tacho-bench.1, tacho-bench-disk.1, …) into
    /// DIR, an existing directory, instead of printing the top page
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchWhat {
    /// Storage benchmark on a directory (a temporary test file), a file, or a block device
    Disk(Box<DiskArgs>),
    /// CPU throughput, single-thread and all threads, on kernels that cannot be optimised away
    Cpu(CpuArgs),
    /// Memory bandwidth (read, write, copy) and latency at L1, L2, L3 and DRAM working sets
    /// (half of L1 and of L2, an eighth of L3 but at least twice L2, 8 × the last cache)
    Mem(MemArgs),
}

#[derive(Debug, Args, Default)]
pub(crate) struct DiskArgs {
    /// Directory (tacho creates and removes its own test file), existing file, or block device
    #[arg(default_value = ".", value_hint = clap::ValueHint::AnyPath)]
    pub target: PathBuf,

    /// Run a fixed suite of tests instead of one custom test [default: quick]
    #[arg(long, value_name = "NAME", conflicts_with = "rw", value_parser = hint::suite_name())]
    pub suite: Option<String>,

    /// List the suites with their versions and tests, then exit
    #[arg(long)]
    pub list_suites: bool,

    /// Print the equivalent fio command line of every test instead of running
    #[arg(long)]
    pub print_fio: bool,

    /// Run the jobs of a fio job file (one after another, each after a stonewall); the target
    /// is the file's filename/directory, else TARGET; an option tacho does not carry out is
    /// refused by name
    #[arg(long, value_name = "FILE", conflicts_with_all = ["suite", "rw", "bs", "bssplit", "iodepth", "numjobs", "rwmixread", "fsync", "fdatasync", "sync", "engine", "size", "runtime", "ramp", "flat_for", "precondition", "randseed", "buffered"])]
    pub fio_job: Option<PathBuf>,

    /// Watch process PID's file I/O for --duration (eBPF, root), derive its jobs as files
    /// --derive-job does, and run them on TARGET: does this target hold that pattern (its
    /// rates and flushes per second against what the process needed, and the flushes'
    /// latency against the process's own)
    #[arg(long, value_name = "PID", value_parser = parse_pid, conflicts_with_all = ["fio_job", "suite", "rw", "bs", "bssplit", "iodepth", "numjobs", "rwmixread", "fsync", "fdatasync", "sync", "engine", "size", "runtime", "ramp", "flat_for", "precondition", "randseed", "buffered"])]
    pub like_pid: Option<i32>,

    /// With --like-pid: how long to watch the process, e.g. 60s [default: 10s]
    #[arg(long, value_name = "DUR", requires = "like_pid", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,

    #[arg(long, value_name = "N", help = help::repeat(), value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: Option<u32>,

    /// etcd suite: the fdatasync p99 that passes, e.g. 10ms [default: 10ms]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub threshold: Option<Duration>,

    /// Access pattern of a custom test
    #[arg(long, value_parser = choice::<Rw>(), help_heading = "Custom test (fio's option names)")]
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

    /// Block-size mix of a random test, e.g. 4k/60:64k/40 (sizes/percent, adding up to 100)
    #[arg(long, value_name = "MIX", value_parser = parse_bssplit, conflicts_with = "bs", help_heading = "Custom test (fio's option names)")]
    pub bssplit: Option<BsSplit>,

    /// fsync after every N writes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "fdatasync", help_heading = "Custom test (fio's option names)")]
    pub fsync: Option<u32>,

    /// fdatasync after every N writes
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Custom test (fio's option names)")]
    pub fdatasync: Option<u32>,

    /// Open the target with O_DSYNC or O_SYNC, as dd's oflag=dsync and oflag=sync: every
    /// write waits until it is stable
    #[arg(long, value_name = "KIND", value_parser = choice::<OpenSync>(), help_heading = "Custom test (fio's option names)")]
    pub sync: Option<OpenSync>,

    /// I/O engine [default: io_uring, falling back to psync where io_uring is blocked]
    #[arg(long, value_parser = choice::<EngineKind>(), help_heading = "Custom test (fio's option names)")]
    pub engine: Option<EngineKind>,

    /// Bypass the page cache with O_DIRECT (the default)
    #[arg(long, overrides_with = "buffered")]
    pub direct: bool,

    /// Go through the page cache (needed on filesystems without O_DIRECT, such as tmpfs on
    /// older kernels; measures RAM as much as the disk)
    #[arg(long, overrides_with = "direct")]
    pub buffered: bool,

    /// Where the target refuses O_DIRECT, run buffered instead of stopping (with a warning)
    #[arg(long)]
    pub allow_buffered: bool,

    /// Region or test file size, e.g. 1G [default: 1G for a test file, the whole file or device
    /// otherwise]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: Option<u64>,

    #[arg(long, value_name = "DUR", help = help::runtime(), value_parser = parse_duration, allow_hyphen_values = true)]
    pub runtime: Option<Duration>,

    #[arg(long, value_name = "DUR", help = help::ramp(), value_parser = parse_duration, allow_hyphen_values = true)]
    pub ramp: Option<Duration>,

    /// Precondition the region first (SNIA-style): write it twice sequentially, then random
    /// 4k writes in rounds until steady (five rounds within 20% of their mean, slope within
    /// 10%; at most 25 rounds); recorded with the run, and compare keeps such runs apart
    #[arg(long)]
    pub precondition: bool,

    /// Length of each random round of --precondition, e.g. 10s [default: 60s]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "precondition", allow_hyphen_values = true)]
    pub precondition_round: Option<Duration>,

    /// sustained suite: how long the write rate must stay flat before a test stops, e.g. 10s
    /// [default: 30s]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub flat_for: Option<Duration>,

    /// Seed of the random offsets, for repeatable runs
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    pub randseed: Option<u64>,

    /// Allow writing over an existing file or a block device that holds data
    #[arg(long)]
    pub destroy_data: bool,

    /// Probe for a cache below the target (a VM host's): reads of just-written data against
    /// cold reads, flushes against the medium [default: on for a virtual disk]
    #[arg(long, overrides_with = "no_probe_cache")]
    pub probe_cache: bool,

    /// Do not run the host-cache probe, even on a virtual disk
    #[arg(long, overrides_with = "probe_cache")]
    pub no_probe_cache: bool,

    /// Run as one host of a group: wait in the shared store (--db postgres://…) until --hosts
    /// runs of group NAME wait there, start together, and keep latency histograms so tacho
    /// runs show --group NAME merges the group's figures
    #[arg(
        long,
        value_name = "NAME",
        requires = "hosts",
        help_heading = "Many hosts at once"
    )]
    pub group: Option<String>,

    /// Whom the --group waits for: a number of hosts, or their host names (a comma list,
    /// e.g. db1,db2,db3: a barrier that times out then names those that did not come, and a
    /// host not named is refused)
    #[arg(long, value_name = "N|NAMES", requires = "group", value_parser = crate::bench::session::Hosts::parse, help_heading = "Many hosts at once")]
    pub hosts: Option<crate::bench::session::Hosts>,

    /// How long a --group host waits for the others, e.g. 30s [default: 10m]
    #[arg(long, value_name = "DUR", requires = "group", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Many hosts at once")]
    pub group_timeout: Option<Duration>,

    /// Print one JSON document (schema tacho.bench.v1) on stdout
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub record: RecordArgs,
}

#[derive(Debug, Args, Default)]
#[command(
    after_help = "Letters: R read, C close, W write (CW: closed after writing), O open, \
+ create, D delete, < moved from, > moved to.\n\
Examples:\n  tacho files --ops W --duration 30s --timestamps\n  \
tacho files --pid 1234 --children --summary\n  tacho files --sector /dev/sda1 536514808"
)]
pub(crate) struct FilesArgs {
    /// Watch only the filesystem holding PATH (repeatable) [default: every device-backed
    /// filesystem, or those holding the --path prefixes]
    #[arg(long, value_name = "PATH", help_heading = "What to watch")]
    pub mount: Vec<PathBuf>,

    /// Show only this process (and its threads); repeatable
    #[arg(long, value_name = "PID", value_parser = parse_pid, help_heading = "Filters")]
    pub pid: Vec<i32>,

    /// With --pid: also the processes it starts, and theirs
    #[arg(long, requires = "pid", help_heading = "Filters")]
    pub children: bool,

    /// Show only processes with this command name (as in ps -o comm); repeatable
    #[arg(long, value_name = "NAME", help_heading = "Filters")]
    pub comm: Vec<String>,

    /// Show only files under this directory or path prefix; repeatable
    #[arg(long, value_name = "PREFIX", help_heading = "Filters")]
    pub path: Vec<PathBuf>,

    /// Show only these operation letters, e.g. W or RW+D
    #[arg(long, value_name = "LETTERS", value_parser = parse_ops, allow_hyphen_values = true, help_heading = "Filters")]
    pub ops: Option<Ops>,

    /// Hide this process; repeatable
    #[arg(long, value_name = "PID", value_parser = parse_pid, help_heading = "Filters")]
    pub exclude_pid: Vec<i32>,

    /// Hide processes with this command name; repeatable
    #[arg(long, value_name = "NAME", help_heading = "Filters")]
    pub exclude_comm: Vec<String>,

    /// Stop after this long, e.g. 30s, 5m [default: until Ctrl-C]
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,

    /// Write events to FILE instead of stdout (it must not exist yet)
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Start each line with the local time (HH:MM:SS.micros)
    #[arg(long, short = 't')]
    pub timestamps: bool,

    /// One JSON object per line (schema tacho.files.v1): a header, one per event (ts, pid,
    /// comm, ops, path), a trailer with totals
    #[arg(long)]
    pub json: bool,

    /// At the end (or on Ctrl-C) rank files and processes by events per letter, with the
    /// bytes each read and wrote where eBPF allows (root); events are then not listed, unless
    /// --output is given
    #[arg(long)]
    pub summary: bool,

    /// Count bytes read and written per process and file, and each file's fsync/fdatasync
    /// calls with their latency, with eBPF (root); report at the end (or on Ctrl-C)
    #[arg(long, conflicts_with_all = ["summary", "output", "timestamps", "sector"])]
    pub bytes: bool,

    /// Write a fio job file of what the --pid processes did (write sizes, read/write mix,
    /// flushes per write, sequential share, file sizes), with what was seen as comments, to
    /// -o FILE (else stdout); counts with eBPF (root). Run it elsewhere with bench disk
    /// --fio-job or fio
    #[arg(long, requires = "pid", conflicts_with_all = ["summary", "timestamps", "sector", "bytes", "json"])]
    pub derive_job: bool,

    /// With --bytes: list the N busiest process and file pairs (0: all); --json lists all
    #[arg(long, value_name = "N", default_value_t = 20, requires = "bytes")]
    pub top: usize,

    /// Let the kernel queue events without limit instead of dropping them past 16384 (uses
    /// kernel memory while tacho falls behind)
    #[arg(long)]
    pub unbounded_queue: bool,

    /// Which file owns each SECTOR of DEV, a disk or one of its partitions, via FIEMAP (ext4,
    /// XFS and btrfs, mounted). Sectors are 512-byte units from the start of the whole disk,
    /// as blktrace and blkparse print them
    #[arg(long, num_args = 2.., value_names = ["DEV", "SECTOR"],
          conflicts_with_all = ["mount", "pid", "comm", "path", "ops", "exclude_pid", "exclude_comm",
          "duration", "output", "timestamps", "summary", "unbounded_queue"])]
    pub sector: Vec<String>,

    /// With --sector: the numbers count from the start of the partition DEV instead
    #[arg(long, requires = "sector")]
    pub relative: bool,
}

fn parse_pid(text: &str) -> Result<i32, String> {
    match text.parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(format!(
            "{text:?} is not a process id; give a positive number, e.g. 1234"
        )),
    }
}

fn parse_ops(text: &str) -> Result<Ops, String> {
    Ops::parse(text).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// Plain text every --interval (like `iostat -x 1`) instead of the interactive screen
    #[arg(long)]
    pub batch: bool,

    /// One JSON object per sample per line (schema tacho.top.v3) instead of the screen; with
    /// --batch too, since JSON lines are batch output
    #[arg(long)]
    pub json: bool,

    /// Time between samples, e.g. 1s, 500ms, 5s [default: 1s]
    #[arg(long, value_name = "DUR", value_parser = parse_interval, allow_hyphen_values = true)]
    pub interval: Option<Duration>,

    /// Stop after this many samples [default: run until Ctrl-C or q]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Processes and cgroups listed per sample (and TCP connections, at least 20)
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub top: u16,

    /// What the process list is sorted by
    #[arg(long, value_parser = choice::<crate::diagnose::model::SortKey>(), default_value = "io")]
    pub sort: crate::diagnose::model::SortKey,

    /// Serve the figures as Prometheus text on http://ADDR/metrics: 127.0.0.1:9101, or
    /// node_exporter's :9101 and localhost:9101, serve this machine only (unlike
    /// node_exporter, a bare :PORT stays local: the figures name processes and paths);
    /// 0.0.0.0:9101 or [::]:9101 serve every address. Without --batch or --json, tacho only
    /// serves. `--listen` alone serves where the config file's [top] listen says
    #[arg(long, value_name = "ADDR", value_parser = parse_listen, num_args = 0..=1)]
    pub listen: Option<Option<std::net::SocketAddr>>,

    /// TLS and basic authentication for --listen, in the exporter toolkit's YAML (as
    /// node_exporter's --web.config.file): tls_server_config (cert_file, key_file) and
    /// basic_auth_users (bcrypt hashes) [default: the config file's [top] web_config]
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub web_config: Option<PathBuf>,

    /// Add totals since start (bytes read and written, CPU time) per process and per
    /// service to every sample, as iotop -a
    #[arg(long)]
    pub accumulate: bool,

    /// When the CPUs are saturated or system time is high, profile every CPU for 2 s (at
    /// most once a minute) and print where the time goes under the verdict (root)
    #[arg(long, requires = "batch")]
    pub profile: bool,

    /// Count DNS on every interface, as dnstop: queries per second by client, server and type,
    /// answers by code, response times, the failing and slowest names (UDP; needs root for a
    /// packet socket)
    #[arg(long, conflicts_with_all = ["replay", "from"])]
    pub dns: bool,

    /// With --batch or --json: per-device block latency split into queue time (submit →
    /// dispatch), service time (dispatch → completion) and their total, log2 histograms and
    /// p50/p90/p99 (from buckets 1/16 of an octave wide), and the bytes each process submitted
    /// to each device, traced with eBPF (root); without eBPF, the usual figures with a note
    #[arg(long, conflicts_with_all = ["replay", "from", "net", "dns", "listen"])]
    pub latency: bool,

    /// Who waits on what: trace every process's time off the CPU with eBPF (root) and say
    /// when one (or one command's processes in a unit) spends a large share of its time
    /// waiting on one peer's network replies or on a disk that is not saturated (finding
    /// `waiting`, a `waits` section in --json, wait seconds in /metrics). Off by default: it
    /// costs about 0.3 µs per context switch (docs/benchmarks.md); without root, a note
    #[arg(long, conflicts_with_all = ["replay", "from", "no_ebpf"])]
    pub waits: bool,

    /// Do not trace block I/O with eBPF: name disk culprits from cgroup counters and /proc
    /// only (as without root). As root the tracer is kept loaded between runs where a bpffs is
    /// mounted at /sys/fs/bpf, detached while no tacho runs (TACHO_BPF_PIN=0: never)
    #[arg(long)]
    pub no_ebpf: bool,

    /// With --batch: only the network, in detail (interfaces and links, TCP by process,
    /// service and peer with the busiest connections, DNS with --dns), after the verdicts
    #[arg(long)]
    pub net: bool,

    /// With --batch: list idle devices and TCP connections that moved no data too (left out
    /// by default, as `iostat -z` leaves out idle devices)
    #[arg(long)]
    pub show_idle: bool,

    /// Show a recorded moment from the history instead of live figures (keys: left/right or
    /// p/n step one sample, q quits); with --batch or --json, print that one interval
    #[arg(long, help_heading = "History (tacho record)")]
    pub replay: bool,

    /// The moment to replay: 03:00, "yesterday 03:00", "3h ago", RFC 3339 [default: the
    /// latest sample]
    #[arg(
        long,
        value_name = "TIME",
        requires = "replay",
        help_heading = "History (tacho record)"
    )]
    pub at: Option<String>,

    /// Summarise the history from TIME (findings and when they fired, top processes and
    /// services, peaks) instead of showing live figures
    #[arg(long, value_name = "TIME", conflicts_with_all = ["replay", "listen", "count", "interval"], help_heading = "History (tacho record)")]
    pub from: Option<String>,

    /// With --from: write the window as one self-contained HTML page (the findings in the
    /// order they fired with their culprits, charts of CPU, memory, pressure, each disk and
    /// interface with the findings marked, the top processes, the host) to FILE; with --db,
    /// the page of the one host --host names, from what the shared store keeps
    #[arg(
        long,
        value_name = "FILE",
        requires = "from",
        conflicts_with = "json",
        help_heading = "History (tacho record)"
    )]
    pub html: Option<PathBuf>,

    /// End of the --from window [default: now]
    #[arg(
        long,
        value_name = "TIME",
        requires = "from",
        help_heading = "History (tacho record)"
    )]
    pub to: Option<String>,

    /// The history file [default: $TACHO_HISTORY, else /var/lib/tacho/history/history.db as
    /// root, else $XDG_DATA_HOME/tacho/history.db]
    #[arg(long, value_name = "FILE", help_heading = "History (tacho record)")]
    pub history: Option<PathBuf>,

    /// With --from: the fleet's window from the shared store that `tacho record --db` sends
    /// to (which hosts had which findings, for how long, naming whom; worst first):
    /// postgres://USER@HOST/DATABASE
    #[arg(
        long,
        value_name = "URL",
        requires = "from",
        conflicts_with = "history",
        help_heading = "Fleet history (tacho record --db)"
    )]
    pub db: Option<String>,

    /// With --db: hosts whose name or machine id matches (`*` any text, e.g. 'db-*'); a name
    /// without `*` or `?` names one host and shows its replay summary
    #[arg(
        long,
        value_name = "PATTERN",
        requires = "db",
        help_heading = "Fleet history (tacho record --db)"
    )]
    pub host: Option<String>,

    /// With --db: hosts with this label (repeatable, all must match): --label role=db
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "db", value_parser = parse_label_pair, help_heading = "Fleet history (tacho record --db)")]
    pub labels: Vec<String>,
}

/// `tacho record`: the history recorder's options.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  tacho record\n  tacho record --interval 30s --keep 30d \
--max-size 4GiB\n  tacho record --print-unit > /etc/systemd/system/tacho-record.service"
)]
pub struct HistoryRecordArgs {
    /// Time between samples [default: the config file's [record] interval, else 10s]
    #[arg(long, value_name = "DUR", value_parser = parse_interval)]
    pub interval: Option<Duration>,

    /// The history file, in a directory only you and root can write (a bare name is in the
    /// current one; a missing directory is created 0700 when its parent exists) [default:
    /// $TACHO_HISTORY, else /var/lib/tacho/history/history.db as root, else
    /// $XDG_DATA_HOME/tacho/history.db]
    // `--history`, as `top` and `report disk` name the same file; `--file` was its first name.
    #[arg(
        long = "history",
        alias = "file",
        value_name = "PATH",
        conflicts_with = "dir"
    )]
    pub file: Option<PathBuf>,

    /// Keep the history as history.db in this directory (created 0700; its parent must exist)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Drop samples older than this: 7d, 12h, 2w [default: the config file's [record] keep,
    /// else 7d]
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub keep: Option<Duration>,

    /// Drop the oldest samples while the history is larger than this: 1GiB, 500M
    #[arg(long, value_name = "SIZE", value_parser = parse_max_size, default_value = "1GiB")]
    pub max_size: u64,

    /// Stop after this many samples [default: until SIGTERM or Ctrl-C]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Record who waits on what too (as `top --waits`: eBPF, root; about 0.3 µs per context
    /// switch), so a replay names the processes waiting on a peer or a disk
    #[arg(long)]
    pub waits: bool,
    /// Print the systemd unit that runs the recorder, and exit
    #[arg(long)]
    pub print_unit: bool,

    /// The shared store and this host's labels (`--db`, `--label`, `--backlog`).
    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// Sending what the recorder sees to the shared store (`tacho record --db`).
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Shared store (fleet history)")]
pub struct FleetArgs {
    /// Also send each interval's findings and figures to the shared PostgreSQL store
    /// (`tacho store init` made it): postgres://USER@HOST/DATABASE [default: $TACHO_DB when
    /// it is a postgres:// URL]
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,

    /// A label of this host, stored with every interval (repeatable): --label role=db
    /// --label dc=fra1 [default: $TACHO_LABELS, comma-separated]
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label_pair)]
    pub labels: Vec<String>,

    /// Intervals kept while the shared store cannot be reached; beyond it the oldest are
    /// dropped (and said)
    #[arg(long, value_name = "N", default_value = "8640", value_parser = clap::value_parser!(u64).range(1..))]
    pub backlog: u64,
}

/// A `KEY=VALUE` label, checked as `labels::parse` does.
pub(crate) fn parse_label_pair(text: &str) -> Result<String, String> {
    crate::labels::parse(text).map(|_| text.to_owned())
}

/// `tacho config`.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print each setting (database, labels, listen address and web config, the recorder's
    /// interval and retention), its value and where it came from: a flag, the environment, a
    /// line of the config file, or the default. The options are those of `record` and `top`,
    /// to see what a command given them would use
    Show(ConfigShowArgs),
}

/// `tacho config show`: the options a setting can come from.
#[derive(Debug, Args)]
pub(crate) struct ConfigShowArgs {
    /// The results store, as `--db` of the commands that save or read runs
    #[arg(long, value_name = "URL|PATH")]
    pub db: Option<String>,
    /// As `top --listen ADDR`
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Option<std::net::SocketAddr>,
    /// As `top --web-config FILE`
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
    /// As `record --interval DUR`
    #[arg(long, value_name = "DUR", value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// As `record --keep AGE`
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub keep: Option<Duration>,
}

/// A retention age (`7d`, `2w`, `12h`), at least a minute.
pub(crate) fn parse_age(text: &str) -> Result<Duration, String> {
    crate::config::age(text)
}

/// A history size limit: at least 1 MiB, so one sample of a busy host fits.
fn parse_max_size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.to_string())? {
        n if n < 1 << 20 => Err(format!("the size limit must be at least 1MiB (got {text})")),
        n => Ok(n),
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  tacho check\n  tacho check --profile postgres --only warn\n  \
tacho check --strict --json > check.json\n  tacho check --emit-script=apply > apply.sh"
)]
pub(crate) struct CheckArgs {
    /// The workload this machine serves; changes what THP, read-ahead and swappiness should be
    #[arg(long, value_parser = choice::<crate::check::Profile>(), default_value = "default")]
    pub profile: crate::check::Profile,

    /// List only findings of this severity or worse (the verdict still counts all)
    #[arg(long, value_parser = choice::<crate::check::Severity>(), value_name = "SEVERITY")]
    pub only: Option<crate::check::Severity>,

    /// Exit 1 when any finding is warn or crit
    #[arg(long)]
    pub strict: bool,

    /// One JSON document (schema tacho.check.v1) on stdout
    #[arg(long, conflicts_with = "emit_script")]
    pub json: bool,

    /// Print (never run) the shell script that applies the fixes of warn/crit findings
    /// (apply), or the one that undoes them (revert); each is a script of its own:
    /// --emit-script=apply > apply.sh, --emit-script=revert > revert.sh
    #[arg(long, value_parser = choice::<crate::report::fix_script::ScriptKind>(), value_name = "WHICH")]
    pub emit_script: Option<crate::report::fix_script::ScriptKind>,

    #[command(flatten)]
    pub save: SaveDocArgs,
}

#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    /// Write the snapshot to FILE (it must not exist yet) instead of stdout
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub save: SaveDocArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  tacho snapshot --save --db postgres://tacho@db/results   (on each host)\n  \
tacho drift --db postgres://tacho@db/results\n  tacho drift --host 'db-*' --strict",
    // The formats are those of `runs show` and `compare`; what they hold here is settings.
    mut_arg("csv", |a| a.help("Print CSV: one row per setting, value and host (key, relevant, host, value)")),
    mut_arg("html", |a| a.help("Write a self-contained HTML page to FILE: a row per setting, the values that differ from most hosts highlighted")),
    mut_arg("markdown", |a| a.help("Print the listing as a Markdown list, a line per setting"))
)]
pub(crate) struct DriftArgs {
    /// Hosts matching this pattern only (`*` matches any text, e.g. 'db-*')
    #[arg(long, value_name = "PATTERN")]
    pub host: Option<String>,
    /// Hosts with this label only (repeatable, all must match): --label role=db
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label_pair)]
    pub labels: Vec<String>,
    /// Snapshots and checks saved since then (2026-11-01, yesterday, 7d ago, RFC 3339)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// List every difference, not only the first 50 of the ones not known to matter
    #[arg(long)]
    pub all: bool,
    /// Exit 1 when a setting known to matter for performance differs
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub format: FormatArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  tacho snapshot -o web1.json\n  tacho diff web1.json live\n  \
tacho diff a.json b.json --json"
)]
pub(crate) struct DiffArgs {
    /// First snapshot: a file written by `tacho snapshot`, or `live`
    #[arg(value_name = "A")]
    pub a: String,

    /// Second snapshot: a file, or `live`
    #[arg(value_name = "B")]
    pub b: String,

    /// List every difference, not only the first 50 of the ones without an explanation
    #[arg(long)]
    pub all: bool,

    /// One JSON document (schema tacho.diff.v1) on stdout
    #[arg(long)]
    pub json: bool,
}

/// `--listen`: an IP address and port, or node_exporter's `:PORT` and `localhost:PORT`, both
/// read as loopback (the safe reading: the network is asked for by address, 0.0.0.0:PORT).
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    crate::config::listen(text)
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    crate::config::interval(text)
}

/// A random round of `--precondition` when `--precondition-round` is not given.
const PRECONDITION_ROUND: Duration = Duration::from_secs(60);

impl DiskArgs {
    /// The options the plan reads, in the library's terms.
    pub fn options(&self) -> crate::bench::plan::DiskOptions {
        crate::bench::plan::DiskOptions {
            suite: self.suite.clone(),
            repeat: self.repeat,
            threshold: self.threshold,
            rw: self.rw,
            bs: self.bs,
            iodepth: self.iodepth,
            numjobs: self.numjobs,
            rwmixread: self.rwmixread,
            bssplit: self.bssplit.clone().map(|b| b.0).unwrap_or_default(),
            fsync: self.fsync,
            fdatasync: self.fdatasync,
            engine: self.engine,
            buffered: self.buffered,
            size: self.size,
            runtime: self.runtime,
            ramp: self.ramp,
            flat_for: self.flat_for,
            precondition: self
                .precondition
                .then(|| self.precondition_round.unwrap_or(PRECONDITION_ROUND)),
            randseed: self.randseed,
            open_sync: self.sync,
            io_limit: None,
            probe_cache: match (self.probe_cache, self.no_probe_cache) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
        }
    }
}

/// A parsed `--bssplit` (a newtype, so clap takes it as one value, not a list of values).
#[derive(Clone, Debug, PartialEq)]
pub struct BsSplit(pub Vec<BsShare>);

fn parse_bssplit(text: &str) -> Result<BsSplit, String> {
    let mut shares = Vec::new();
    for part in text.split(':') {
        let (size, pct) = part.split_once('/').ok_or_else(|| {
            format!("'{part}' is not SIZE/PERCENT; write the mix as e.g. 4k/60:64k/40")
        })?;
        let pct: u8 = pct
            .parse()
            .ok()
            .filter(|p| (1..=100).contains(p))
            .ok_or_else(|| format!("'{pct}' is not a percentage from 1 to 100"))?;
        shares.push(BsShare {
            size: parse_block_size(size)?,
            pct,
        });
    }
    let total: u32 = shares.iter().map(|s| u32::from(s.pct)).sum();
    if total != 100 {
        return Err(format!(
            "the percentages add up to {total}, not 100; e.g. 4k/60:64k/40"
        ));
    }
    Ok(BsSplit(shares))
}

fn parse_block_size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.to_string())? {
        0 => Err("the block size must be at least 1 byte, e.g. 4k".into()),
        n if n > 256 << 20 => Err("the block size must be at most 256M".into()),
        n => Ok(n),
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sudo tacho profile\n  sudo tacho profile --pid 812 --duration 30s\n  \
sudo tacho profile --folded > stacks.txt\n  sudo tacho profile --svg flame.svg\n  \
sudo tacho profile --off-cpu --unit php-fpm.service\n  sudo tacho profile --wall --pid 812 --svg wall.svg",
    group(clap::ArgGroup::new("waits").args(["off_cpu", "wall"]))
)]
pub(crate) struct ProfileArgs {
    /// Only this process's samples (every CPU is still sampled)
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Time off the CPU instead of on it: how long each thread waited and why (lock, disk,
    /// network with the peer, sleep, page faults, pipe), with its stacks; traced in the kernel
    /// at every context switch (eBPF, root)
    #[arg(long)]
    pub off_cpu: bool,
    /// Time on and off the CPU together, in milliseconds: CPU samples beside the off-CPU
    /// time, so a request's whole life shows (eBPF, root)
    #[arg(long)]
    pub wall: bool,
    /// Only the processes of this systemd unit or cgroup (its cgroup v2 subtree, e.g.
    /// nginx.service), with --off-cpu or --wall
    #[arg(long, value_name = "UNIT", requires = "waits", conflicts_with = "pid")]
    pub unit: Option<String>,
    /// How long to sample
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_profile_duration)]
    pub duration: Duration,
    /// Samples per second on each CPU
    #[arg(long, value_name = "HZ", default_value_t = 99, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub frequency: u64,
    /// Print the table once at the end instead of refreshing it every second on a terminal
    #[arg(long)]
    pub batch: bool,
    /// One JSON document (schema tacho.profile.v1; with --off-cpu or --wall
    /// tacho.profile.offcpu.v1)
    #[arg(long, conflicts_with = "folded")]
    pub json: bool,
    /// Folded stacks (`process;root;…;leaf count`), as flame-graph tools read (with
    /// --off-cpu or --wall the count is microseconds, and a wait's leaf its reason)
    #[arg(long)]
    pub folded: bool,
    /// Also write a flame graph to FILE (SVG)
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

fn parse_profile_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(24 * 3600) {
        return Err(format!(
            "the duration must be from 100ms to 24h, e.g. 10s or 2m (got {text})"
        ));
    }
    Ok(d)
}
