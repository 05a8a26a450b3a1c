//! `tacho man`: the manual as roff, one page per command, so every `tacho-…(1)` a page names
//! is a page that exists.

use crate::cli::{Cli, ManArgs};
use crate::report::outfile::{self, Existing};
use crate::text::Escaped;
use anyhow::{Result, bail};
use clap::{Arg, ArgAction, Command, CommandFactory};
use roff::{Roff, bold, roman};
use std::io::Write;
use std::process::ExitCode;

pub fn run(args: &ManArgs) -> Result<ExitCode> {
    // The help subcommand has no page; built, every command knows its full name
    // (tacho-bench-disk), which is what the pages are named after and refer to.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = &args.dir else {
        std::io::stdout().write_all(&page(&cmd, &cmd)?)?;
        return Ok(ExitCode::SUCCESS);
    };
    if !dir.is_dir() {
        bail!(
            "{} is not a directory; create it first (mkdir -p), or omit --dir to print the top \
             page",
            Escaped(&dir.to_string_lossy())
        );
    }
    let mut pages = Vec::new();
    render_pages(&cmd, &cmd, &mut pages)?;
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
fn render_pages(top: &Command, cmd: &Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_pages(top, sub, pages)?;
    }
    let name = clap_mangen::Man::new(cmd.clone()).get_filename();
    pages.push((name, page(top, cmd)?));
    Ok(())
}

/// One command's page: clap_mangen's, with a synopsis that gives each option's value, the
/// README's examples of the command, then the notes of its `--help` and the version.
fn page(top: &Command, cmd: &Command) -> Result<Vec<u8>> {
    let after_help = cmd.get_after_help().map(ToString::to_string);
    let man = clap_mangen::Man::new(
        cmd.clone()
            .override_usage(synopsis(cmd))
            // Rendered below, in the order man-pages(7) gives.
            .after_help(None::<&str>)
            .after_long_help(None::<&str>)
            .version(None::<&str>)
            .long_version(None::<&str>),
    );
    let mut page = Vec::new();
    man.render(&mut page)?;
    let mut more = Roff::new();
    let examples = examples_of(top, cmd);
    if !examples.is_empty() {
        // Command lines are not hyphenated: a hyphen inserted in a path would be copied.
        more.control("SH", ["EXAMPLES"]).control("nh", []);
        for (line, what) in examples {
            more.control("TP", []).text([bold(line)]);
            if !what.is_empty() {
                more.text([roman(what)]);
            }
        }
        more.control("hy", []);
    }
    // `--help` ends with examples too; the README's replace them, its other notes stay.
    let notes = after_help
        .as_deref()
        .map(|h| h.split("Examples:").next().unwrap_or_default().trim())
        .filter(|n| !n.is_empty());
    if let Some(notes) = notes {
        more.control("SH", ["NOTES"]);
        for line in notes.lines() {
            more.text([roman(line)]);
        }
    }
    if let Some(version) = top.get_version() {
        more.control("SH", ["VERSION"])
            .text([roman(format!("v{version}"))]);
    }
    // The page above already defines what the preamble does (the apostrophe string).
    page.extend_from_slice(
        more.render()
            .split_once('\n')
            .map_or("", |(_, rest)| rest)
            .split_once('\n')
            .map_or("", |(_, rest)| rest)
            .as_bytes(),
    );
    Ok(page)
}

/// `tacho bench disk [--suite NAME] [--repeat N] … [TARGET]`: clap_mangen's own synopsis
/// lists the options without their values.
fn synopsis(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string()];
    let (positional, options): (Vec<&Arg>, Vec<&Arg>) = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .partition(|a| a.is_positional());
    for arg in options {
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(short), Some(long)) => format!("-{short}|--{long}"),
            (Some(short), None) => format!("-{short}"),
            (None, Some(long)) => format!("--{long}"),
            (None, None) => continue,
        };
        parts.push(bracket(arg, format!("{flag}{}", value_of(arg, true))));
    }
    for arg in positional {
        parts.push(bracket(arg, value_of(arg, false).trim().to_string()));
    }
    if cmd.has_subcommands() {
        parts.push(if cmd.is_subcommand_required_set() {
            "<COMMAND>".into()
        } else {
            "[COMMAND]".into()
        });
    }
    parts.join(" ")
}

/// `[TEXT]`, `<TEXT>` when required, with `...` when the argument repeats.
fn bracket(arg: &Arg, text: String) -> String {
    let repeats = matches!(arg.get_action(), ArgAction::Append);
    let dots = if repeats { "..." } else { "" };
    if arg.is_required_set() {
        format!("<{text}>{dots}")
    } else {
        format!("[{text}]{dots}")
    }
}

/// ` NAME`, `[=NAME]` for an optional value, `` for a flag.
fn value_of(arg: &Arg, option: bool) -> String {
    let range = arg.get_num_args().unwrap_or_default();
    if !range.takes_values() {
        return String::new();
    }
    let names = arg.get_value_names().map_or_else(
        || arg.get_id().as_str().to_uppercase(),
        |names| {
            names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        },
    );
    let more = if range.max_values() > arg.get_value_names().map_or(1, <[_]>::len) && option {
        "..."
    } else {
        ""
    };
    if option && range.min_values() == 0 {
        format!("[={names}]")
    } else {
        format!(" {names}{more}")
    }
}

/// The README's command lines of `cmd` (those whose subcommand words lead to it), with their
/// comments; the top page takes the first of each command. One source, so the pages cannot
/// drift from the README, whose commands a test runs.
fn examples_of(top: &Command, cmd: &Command) -> Vec<(String, String)> {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let mut seen = Vec::new();
    let mut found = Vec::new();
    for (line, what) in readme_examples() {
        let path = command_path(top, &line);
        if path == name {
            found.push((line, what));
        } else if name == top.get_name()
            && let Some(first) = path.split(' ').nth(1)
            && !seen.contains(&first.to_string())
        {
            seen.push(first.to_string());
            found.push((line, what));
        }
    }
    found
}

/// `tacho bench disk /data --suite etcd` → `tacho bench disk`.
fn command_path(top: &Command, line: &str) -> String {
    let mut cmd = top;
    let mut path = vec![top.get_name()];
    let words = line
        .strip_prefix("sudo ")
        .unwrap_or(line)
        .split_whitespace();
    for word in words.skip(1) {
        match cmd.find_subcommand(word) {
            Some(sub) => {
                path.push(sub.get_name());
                cmd = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

/// Every `tacho …` line of the README's ```sh blocks (`cargo run --release --` read as
/// `tacho`; `sudo` kept, as the command needs it), split from its `# comment`.
fn readme_examples() -> Vec<(String, String)> {
    let mut examples = Vec::new();
    let mut in_block = false;
    for line in README.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        let line = line.trim().replace("cargo run --release -- ", "tacho ");
        let bare = line.strip_prefix("sudo ").unwrap_or(&line);
        if !in_block || !bare.starts_with("tacho ") {
            continue;
        }
        let (command, what) = line.split_once(" # ").unwrap_or((&line, ""));
        examples.push((command.trim().to_string(), what.trim().to_string()));
    }
    examples
}

const README: &str = include_str!("../../README.md");
