//! `tacho snapshot`: capture the configuration and write it as JSON to stdout or a new file.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::SnapshotArgs;
use crate::kernel::SysRoot;
use crate::snapshot::Snapshot;

pub fn run(args: &SnapshotArgs) -> Result<ExitCode> {
    let snap = Snapshot::capture(&SysRoot::real());
    let mut text = serde_json::to_string_pretty(&snap)?;
    text.push('\n');
    match &args.output {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
        }
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(|| {
                    format!(
                        "cannot create {}; give a new file name in a writable directory",
                        path.display()
                    )
                })?;
            if let Err(e) = file
                .write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
            {
                // Leave nothing half-written behind.
                let _ = std::fs::remove_file(path);
                return Err(e).with_context(|| format!("cannot write {}", path.display()));
            }
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
