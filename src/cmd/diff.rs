//! `tacho diff A B`: compare two snapshots (files or `live`). Exit 1 when they differ, as
//! diff(1) does, so scripts can ask "are these two machines configured alike?".

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::cli::DiffArgs;
use crate::kernel::SysRoot;
use crate::report::diff::{write_json as write_diff_json, write_text as write_diff_text};
use crate::snapshot::diff::{Side, compare};

pub fn run(args: &DiffArgs) -> Result<ExitCode> {
    if args.a == "live" && args.b == "live" {
        bail!(
            "both sides are live; give at least one snapshot file, e.g. tacho diff old.json live"
        );
    }
    let root = SysRoot::real();
    let a = Side::load(&args.a, &root)?;
    let b = Side::load(&args.b, &root)?;
    let diffs = compare(&a.values, &b.values);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        write_diff_json(&mut stdout, &a, &b, &diffs)?;
    } else {
        write_diff_text(&mut stdout, &a, &b, &diffs, args.all)?;
    }
    stdout.flush()?;
    Ok(if diffs.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
