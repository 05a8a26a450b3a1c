//! `tacho man`: the manual as roff, one page per command, so every `tacho-…(1)` a page names
//! is a page that exists.

use crate::cli::{Cli, ManArgs};
use crate::report::outfile::{self, Existing};
use crate::text::Escaped;
use anyhow::{Result, bail};
use clap::CommandFactory;
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
            Escaped(&dir.to_string_lossy())
        );
    }
    // The help subcommand has no page; built, every command knows its full name
    // (tacho-bench-disk), which is what the pages are named after and refer to.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    render_pages(&cmd, &mut pages)?;
    // Every name is checked before the first page is written, so a refused name (a link
    // planted in a shared directory) leaves the directory as it was.
    for (name, _) in &pages {
        outfile::check(&dir.join(name), Existing::Replace)?;
    }
    for (name, page) in &pages {
        // As every file tacho writes by name: a new file renamed over the page, never
        // written through (or over) a link.
        outfile::write_atomically(&dir.join(name), page, Existing::Replace)?;
        println!("{}", Escaped(&dir.join(name).to_string_lossy()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Every command's page, as (file name, roff), subcommands first.
fn render_pages(cmd: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_pages(sub, pages)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    pages.push((man.get_filename(), page));
    Ok(())
}
