//! `tacho report disk`: disk totals, drive health and endurance projection.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};

use crate::cli::{ReportArgs, ReportDiskArgs, ReportWhat};
use crate::kernel::SysRoot;
use crate::totals::{self, DayTotals};

/// A smartctl JSON output is a few kilobytes; a bigger file is not one.
const MAX_CAPTURE_BYTES: u64 = 16 << 20;

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    match &args.what {
        ReportWhat::Disk(disk) => run_disk(disk),
    }
}

fn run_disk(args: &ReportDiskArgs) -> Result<ExitCode> {
    let smartctl_capture = match &args.smartctl_json {
        Some(path) => Some(read_capture(path)?),
        None => None,
    };
    let (history, writers) = history_days(args.history.as_deref(), args.days)?;
    let options = totals::Options {
        disks: args.disks.clone(),
        days: args.days,
        smartctl_capture,
        rated_bytes: args.rated_tbw.map(|tb| (tb * 1e12) as u64),
        history,
        writers,
        smartctl: crate::kernel::health::find_smartctl(),
    };
    let report = totals::collect(&SysRoot::real(), &options).map_err(|e| match e {
        totals::TotalsError::Capture(e) => {
            anyhow!("--smartctl-json: {e}; save the file with `smartctl -j -a /dev/DISK > FILE`")
        }
        e => anyhow!(e),
    })?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        crate::report::disk_totals::json(&report, &mut stdout)?;
    } else {
        crate::report::disk_totals::text(&report, &mut stdout)?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Per-day bytes read and written per disk over the last `days` days, from the history store
/// of `tacho record`; `None` when there is no history file. A history that cannot be read is
/// an error (exit 2), not a silent fallback.
fn history_days(
    file: Option<&Path>,
    days: u32,
) -> Result<(Option<Vec<DayTotals>>, Vec<totals::DayWriters>)> {
    let path = crate::history::store::resolve_path(file)?;
    if file.is_none() && !path.exists() {
        return Ok((None, Vec::new()));
    }
    let history = crate::history::History::open(&path)?;
    let totals = crate::history::days::day_totals(&history, days, chrono::Local::now())?;
    let writers = crate::history::days::day_writers(&history, days, 5, chrono::Local::now())?;
    Ok((Some(totals), writers))
}

/// Reads a saved smartctl output once, bounded in size.
fn read_capture(path: &std::path::Path) -> Result<String> {
    let name = crate::text::path(path);
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read --smartctl-json {name}"))?;
    let mut text = String::new();
    file.take(MAX_CAPTURE_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read --smartctl-json {name} as text"))?;
    if text.len() as u64 > MAX_CAPTURE_BYTES {
        return Err(anyhow!(
            "--smartctl-json {name} is over 16 MiB: not a smartctl output"
        ));
    }
    Ok(text)
}
