//! `tacho files --sector DEV SECTOR...`: parse, locate, report.

use crate::files::sector::{self, Located, Numbering};
use crate::kernel::SysRoot;
use crate::text::Escaped;
use anyhow::{Result, bail};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn run(root: &SysRoot, words: &[String], relative: bool, json: bool) -> Result<ExitCode> {
    // As another user most files cannot be opened for their extent maps: the answer would be
    // "no file" after looking at a handful, which is wrong, not partial.
    if !rustix::process::geteuid().is_root() {
        bail!(
            "files --sector needs root: it reads the extent map of every file on the \
             filesystem, and most are not readable by this user; run it with sudo"
        );
    }
    let Some((dev, sectors)) = words.split_first() else {
        bail!("--sector needs a device and at least one sector, e.g. --sector /dev/sda1 2048");
    };
    let sectors = sectors
        .iter()
        .map(|s| {
            s.parse::<u64>().map_err(|_| {
                anyhow::anyhow!(
                    "--sector: {s:?} is not a sector number; give 512-byte sectors as whole \
                     numbers, e.g. 2048"
                )
            })
        })
        .collect::<Result<Vec<u64>>>()?;
    let numbering = if relative {
        Numbering::PartitionRelative
    } else {
        Numbering::WholeDisk
    };
    let located = sector::locate(root, Path::new(dev), &sectors, numbering)?;
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
        "{owned} of {} on {} belong to files; {} examined",
        crate::units::plural(located.sectors.len() as u64, "sector"),
        Escaped(&located.device),
        crate::units::plural(located.files_examined, "file")
    )?;
    match located.numbering {
        Numbering::WholeDisk => writeln!(
            out,
            "sectors count from the start of disk {}, as blkparse prints them \
             (--relative: from the start of the partition)",
            Escaped(&located.disk)
        )?,
        Numbering::PartitionRelative => writeln!(
            out,
            "sectors count from the start of {} (--relative)",
            Escaped(&located.device)
        )?,
    }
    for fs in &located.filesystems {
        writeln!(
            out,
            "{}: {}, mounted on {}, starts at sector {} of {}",
            Escaped(&fs.device),
            Escaped(&fs.fs_type),
            Escaped(&fs.mount_points.join(", ")),
            fs.start_sector,
            Escaped(&located.disk)
        )?;
    }
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
