//! `tacho man`: the manual as roff, one page per command, so every `tacho-…(1)` a page names
//! is a page that exists.

use crate::cli::{Cli, ManArgs};
use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &ManArgs) -> Result<ExitCode> {
    let Some(dir) = &args.dir else {
        clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
        return Ok(ExitCode::SUCCESS);
    };
    if !dir.is_dir() {
        bail!(
            "{} is not a directory; create it first (mkdir -p), or omit --dir to print the top \
             page",
            dir.display()
        );
    }
    // The help subcommand has no page; built, every command knows its full name
    // (tacho-bench-disk), which is what the pages are named after and refer to.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, dir, &mut written)?;
    for name in &written {
        println!("{}", dir.join(name).display());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let name = man.get_filename();
    let mut page = Vec::new();
    man.render(&mut page)?;
    // A new file renamed over the old one: an existing name (or a symlink planted in a shared
    // directory) is replaced, never written through.
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    file.write_all(&page)?;
    // Pages are for everyone to read (tempfile creates its files 0600).
    file.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    file.persist(dir.join(&name))
        .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
    written.push(name);
    Ok(())
}
