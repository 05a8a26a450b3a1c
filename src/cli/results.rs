//! Options of the results store: where runs are saved (on bench commands), and the `runs` and
//! `compare` commands that read them back.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Saving a run; flattened into every command whose results are stored.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Results")]
pub struct SaveArgs {
    #[command(flatten)]
    pub db: DbArg,

    /// Do not save this run in the results database
    #[arg(long)]
    pub no_save: bool,

    /// Name this run in the results, e.g. "before THP off"
    #[arg(long, value_name = "TEXT", value_parser = parse_label, conflicts_with = "no_save")]
    pub label: Option<String>,
}

/// Saving a `check` or `snapshot` result, which is not saved unless asked.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Results")]
pub struct SaveDocArgs {
    /// Also save the result in the results database (for `tacho drift` across hosts)
    #[arg(long)]
    pub save: bool,

    #[command(flatten)]
    pub db: DbArg,

    /// Name the saved result, e.g. "after tuning"
    #[arg(long, value_name = "TEXT", value_parser = parse_label, requires = "save")]
    pub label: Option<String>,
}

/// Saving a disk benchmark run, which can also feed Prometheus.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Results")]
pub struct RecordArgs {
    #[command(flatten)]
    pub save: SaveArgs,

    /// Also write the figures in Prometheus text format for node_exporter's textfile collector
    /// (replaced atomically)
    #[arg(long, value_name = "PATH")]
    pub prom_textfile: Option<PathBuf>,
}

#[derive(Debug, Args, Default, Clone)]
pub struct DbArg {
    /// Results database: an SQLite file in an existing directory, or a shared PostgreSQL
    /// store as postgres://USER@HOST/DATABASE (password from the URL, PGPASSWORD or
    /// ~/.pgpass) [default: $TACHO_DB, else $XDG_DATA_HOME/tacho/tacho.db, else
    /// ~/.local/share/tacho/tacho.db]
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

/// Which runs `runs list` shows.
#[derive(Debug, Args, Default, Clone)]
pub struct RunFilter {
    /// Runs of hosts matching this pattern only (`*` matches any text, e.g. 'db-*')
    #[arg(long, value_name = "PATTERN")]
    pub host: Option<String>,
    /// Runs of hosts with this label only (repeatable, all must match): --label role=db
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = crate::cli::parse_label_pair)]
    pub labels: Vec<String>,
    /// Runs made since then (2026-11-01, yesterday, 7d ago, RFC 3339)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Runs of this kind only
    #[arg(long, value_name = "KIND", value_parser = ["disk", "cpu", "mem", "time", "check", "snapshot"])]
    pub kind: Option<String>,
}

/// `tacho store`: the shared PostgreSQL store's administration.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Create or migrate the shared store's tables (the only command that changes them; run it
    /// once as the database's owner) and print the SQL grants of a host role, which may read
    /// and add its own rows and nothing more
    #[command(
        after_help = "Examples:\n  tacho store init --db postgres://admin@db/tacho \
--role tacho_host > grants.sql\n  psql -d tacho -f grants.sql"
    )]
    Init {
        /// The shared store, with an administrator's login:
        /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE [default: $TACHO_DB]
        #[arg(long, value_name = "URL")]
        db: Option<String>,
        /// The host role the printed grants are for
        #[arg(long, value_name = "NAME", default_value = "tacho_host")]
        role: String,
    },
    /// Drop the shared history's day partitions older than AGE (whole days, UTC; as the
    /// administrator)
    Prune {
        /// The shared store [default: $TACHO_DB]
        #[arg(long, value_name = "URL")]
        db: Option<String>,
        /// Drop the days that ended longer ago than this: 90d, 12w
        #[arg(long, value_name = "AGE", value_parser = crate::cli::parse_age)]
        older_than: std::time::Duration,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List the stored runs, oldest first
    List {
        #[command(flatten)]
        db: DbArg,
        /// Print one JSON document (schema tacho.runs.v1)
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        filter: RunFilter,
    },
    /// Show one run: its figures, warnings and machine fingerprint
    Show {
        #[arg(value_parser = parse_id, required_unless_present = "group")]
        id: Option<i64>,
        /// Show the latest start of a group of hosts (bench disk --group NAME) as one result:
        /// IOPS and bandwidth added up, percentiles of every request of every host, each
        /// host's share and the slowest
        #[arg(long, value_name = "NAME", conflicts_with_all = ["id", "csv", "markdown", "html"])]
        group: Option<String>,
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Remove runs from the store
    Rm {
        #[arg(required = true, value_name = "ID", value_parser = parse_id)]
        ids: Vec<i64>,
        #[command(flatten)]
        db: DbArg,
    },
    /// Write runs as tacho.bench.v1 JSON, one document per run, to move them to another machine
    Export {
        #[arg(required = true, value_name = "ID", value_parser = parse_id)]
        ids: Vec<i64>,
        /// Write to FILE instead of stdout
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        db: DbArg,
    },
    /// Store runs from files: tacho.bench.v1 JSON (runs export, bench --json), the --json
    /// output of bench cpu, bench mem and time, or fio's --output-format=json (each fio job
    /// becomes a test)
    Import {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Name the imported runs [default: the label in the file, or "fio FILE" for fio]
        #[arg(long, value_name = "TEXT", value_parser = parse_label)]
        label: Option<String>,
        #[command(flatten)]
        db: DbArg,
        /// Print the new run ids as one JSON document (schema tacho.runs.import.v1)
        #[arg(long)]
        json: bool,
    },
    /// Copy the local runs to a shared PostgreSQL store; runs already there are left as they
    /// are, so pushing again (or from a retry) uploads only what is new
    Push {
        /// The shared store: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable]
        /// [default: $TACHO_DB when it is a postgres:// URL]
        #[arg(long, value_name = "URL")]
        db: Option<String>,
        /// The local results database to copy from [default: as for --db of other commands]
        #[arg(long, value_name = "PATH")]
        from: Option<PathBuf>,
    },
}

/// Output formats of `runs show` and `compare` (terminal table when none is given).
#[derive(Debug, Args, Default, Clone)]
#[group(multiple = false)]
pub struct FormatArgs {
    /// Print one JSON document
    #[arg(long)]
    pub json: bool,
    /// Print CSV (every figure, one row per test, direction and metric)
    #[arg(long)]
    pub csv: bool,
    /// Print a Markdown table
    #[arg(long)]
    pub markdown: bool,
    /// Write a self-contained HTML report with charts to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Runs to compare (see tacho runs list); the first is the baseline unless --baseline
    #[arg(required_unless_present = "by", value_name = "ID", value_parser = parse_id)]
    pub ids: Vec<i64>,
    /// Run the others are measured against [default: the first ID]
    #[arg(long, value_name = "ID", value_parser = parse_id)]
    pub baseline: Option<i64>,
    /// Exit 1 when a figure got significantly worse than the baseline by more than PCT percent
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub fail_on_regression: Option<f64>,
    /// Compare runs whose method differs even so (preconditioned against fresh)
    #[arg(long, conflicts_with = "by")]
    pub force: bool,
    /// Compare hosts instead of runs: the latest finished run of each host, with the peer
    /// median and the host that stands out (median and MAD), and why (its fingerprint)
    #[arg(long, value_name = "host", value_parser = ["host"], conflicts_with_all = ["ids", "baseline", "fail_on_regression"])]
    pub by: Option<String>,
    /// With --by host: runs of this suite only (e.g. quick)
    #[arg(long, value_name = "NAME", requires = "by", value_parser = super::hint::suite_name())]
    pub suite: Option<String>,
    /// With --by host: runs of this kind [default: disk]
    #[arg(long, value_name = "KIND", value_parser = ["disk", "cpu", "mem", "time"], requires = "by")]
    pub kind: Option<String>,
    /// With --by host: hosts matching this pattern only (`*` matches any text, e.g. 'db-*')
    #[arg(long, value_name = "PATTERN", requires = "by")]
    pub host: Option<String>,
    /// With --by host: hosts with this label only (repeatable, all must match): --label role=db
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "by", value_parser = crate::cli::parse_label_pair)]
    pub labels: Vec<String>,
    /// With --by host: compare each host with the hosts of its group only: the same value of
    /// a label (label:KEY, e.g. label:role) or the same CPU and device models (hardware)
    #[arg(long, value_name = "label:KEY|hardware", requires = "by", value_parser = parse_peers)]
    pub peers_by: Option<String>,
    /// With --by host: runs made since then (2026-11-01, yesterday, 7d ago, RFC 3339)
    #[arg(long, value_name = "TIME", requires = "by")]
    pub since: Option<String>,
    /// With --by host: exit 1 when a host stands out
    #[arg(long, requires = "by")]
    pub strict: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub format: FormatArgs,
}

fn parse_peers(text: &str) -> Result<String, String> {
    crate::compare::fleet::Peers::parse(text).map(|_| text.to_owned())
}

fn parse_id(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a run id; ids are positive numbers (tacho runs list shows them)"
        )),
    }
}

fn parse_pct(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix('%').unwrap_or(text);
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!(
            "'{text}' is not a percentage; give a number such as 5 or 2.5"
        )),
    }
}

fn parse_label(text: &str) -> Result<String, String> {
    if text.chars().any(char::is_control) {
        return Err("a label must be one line of text without control characters".into());
    }
    if text.chars().count() > 200 {
        return Err("a label must be at most 200 characters".into());
    }
    Ok(text.to_string())
}
