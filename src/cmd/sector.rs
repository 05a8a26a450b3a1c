//! `tacho files --sector DEV SECTOR...`: parse, locate, report.

use crate::files::sector::{self, Located};
use crate::kernel::SysRoot;
use crate::text::Escaped;
use anyhow::{Result, bail};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn run(root: &SysRoot, words: &[String], json: bool) -> Result<ExitCode> {
    let Some((dev, sectors)) = words.split_first() else {
        bail!("--sector needs a device and at least one sector, e.g. --sector /dev/sda1 2048");
    };
    let sectors = sectors
        .iter()
        .map(|s| {
            s.parse::<u64>().map_err(|_| {
                anyhow::anyhow!(
                    "--sector: {s:?} is not a sector number; give 512-byte sectors from the \
                     start of {dev} as whole numbers, e.g. 2048"
                )
            })
        })
        .collect::<Result<Vec<u64>>>()?;
    let located = sector::locate(root, Path::new(dev), &sectors)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &located)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &located)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_text(out: &mut impl Write, located: &Located) -> std::io::Result<()> {
    let owned = located
        .sectors
        .iter()
        .filter(|s| !s.owners.is_empty())
        .count();
    writeln!(
        out,
        "{owned} of {} sector(s) on {} ({}, mounted on {}) belong to files; {} files examined",
        located.sectors.len(),
        Escaped(&located.device),
        located.fs_type,
        Escaped(&located.mount_points.join(", ")),
        located.files_examined
    )?;
    for s in &located.sectors {
        if s.owners.is_empty() {
            let note = s.note.as_deref().unwrap_or("no file");
            writeln!(out, "{}: {}", s.sector, Escaped(note))?;
        }
        for o in &s.owners {
            let mut flags = String::new();
            if o.shared {
                flags.push_str(", shared extent");
            }
            if o.encoded {
                flags.push_str(", compressed: offset approximate");
            }
            writeln!(
                out,
                "{}: {} (offset {}{flags})",
                s.sector,
                Escaped(&o.path),
                o.offset_bytes
            )?;
        }
    }
    Ok(())
}
