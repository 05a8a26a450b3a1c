//! `tacho snapshot`: capture the configuration and write it as JSON to stdout or a new file.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::SnapshotArgs;
use crate::kernel::SysRoot;
use crate::snapshot::Snapshot;

pub fn run(args: &SnapshotArgs) -> Result<ExitCode> {
    let snap = Snapshot::capture(&SysRoot::real());
    if args.save.save {
        super::record::save_document(&args.save, &serde_json::to_value(&snap)?)?;
        if args.output.is_none() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut text = serde_json::to_string_pretty(&snap)?;
    text.push('\n');
    match &args.output {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
        Some(path) => {
            // A new file only, written whole or not at all, never through a planted link.
            crate::report::outfile::write_atomically(
                path,
                text.as_bytes(),
                crate::report::outfile::Existing::Refuse,
            )
            .context("cannot write the snapshot")?;
            eprintln!(
                "wrote {} ({} sysctls, {} kernel config options)",
                path.display(),
                snap.sysctl.len(),
                snap.kernel.config.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
