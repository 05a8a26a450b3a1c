//! `--emit-script=apply|revert`: shell scripts that apply the recommended fixes (now and
//! persistently), or revert them, one script per run so each goes to its own file. tacho
//! prints them for the admin to read and run; it never runs them.

use crate::check::{Finding, Severity};
use crate::choice::Choice;
use crate::text::Escaped;
use std::collections::HashSet;
use std::io::Write;

/// Which script to print. Each is a whole script, for its own file: one file that applied
/// and then reverted would undo its own fixes when run, so there is no "both".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// The script that applies the fixes.
    Apply,
    /// The script that undoes them.
    Revert,
}

impl Choice for ScriptKind {
    const ALL: &'static [Self] = &[ScriptKind::Apply, ScriptKind::Revert];

    fn word(self) -> &'static str {
        match self {
            ScriptKind::Apply => "apply",
            ScriptKind::Revert => "revert",
        }
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            ScriptKind::Apply => "The fixes, now and persistently (save as apply.sh)",
            ScriptKind::Revert => "What undoes them (save as revert.sh)",
        })
    }
}

/// Findings the scripts act on: warnings and criticals that carry commands.
fn actionable(findings: &[Finding]) -> Vec<&Finding> {
    findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn)
        .filter(|f| f.remedy.fix.is_some() || f.remedy.persist.is_some())
        .collect()
}

/// Writes the script `kind` names for the actionable findings (see [`ScriptKind`]).
pub fn write_script(
    out: &mut impl Write,
    findings: &[Finding],
    kind: ScriptKind,
    host: &str,
) -> std::io::Result<()> {
    let list = actionable(findings);
    match kind {
        ScriptKind::Apply => apply(out, &list, host),
        ScriptKind::Revert => revert(out, &list, host),
    }
}

fn header(out: &mut impl Write, what: &str, host: &str, n: usize) -> std::io::Result<()> {
    writeln!(out, "#!/bin/sh")?;
    writeln!(
        out,
        "# tacho check: {what} for {n} finding(s) on {}. Generated, never run by tacho.",
        Escaped(host)
    )?;
    writeln!(
        out,
        "# Read it first; run as root. Steps marked 'by hand' are comments: they need care."
    )?;
    writeln!(out, "set -e")
}

/// Writes `cmd` as script lines, commented out when `manual`. The commands quote every value
/// read from the system (see `cmds`); a line that still holds a control character other than
/// a tab (a carriage return would hide what precedes it from the admin reading the script),
/// or a bidirectional control (the line would read differently from what runs), is written
/// commented out and escaped, never run.
///
/// A command already written for an earlier finding (one timer or cron file serving several
/// mounts) is not run again: `done` holds the commands written so far.
fn lines(
    out: &mut impl Write,
    cmd: &str,
    manual: bool,
    done: &mut HashSet<String>,
) -> std::io::Result<()> {
    for line in cmd.split('\n') {
        if line
            .chars()
            .any(|c| crate::text::needs_escape(c) && c != '\t')
        {
            writeln!(
                out,
                "# not run, holds control characters: {}",
                Escaped(line)
            )?;
            continue;
        }
        if manual && !line.starts_with('#') {
            writeln!(out, "# {line}")?;
        } else if !line.starts_with('#') && !done.insert(line.to_string()) {
            writeln!(out, "# already done above: {line}")?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The comment line above a finding's commands: the subject (a mount point, a device) is
/// escaped, so a newline in it cannot end the comment and start a command.
fn title(f: &Finding) -> String {
    let subject = f
        .subject
        .as_deref()
        .map(|s| format!(" {}", Escaped(s)))
        .unwrap_or_default();
    format!(
        "# [{}] {}{subject}: {}",
        f.severity.label(),
        f.id,
        Escaped(&f.title)
    )
}

fn apply(out: &mut impl Write, list: &[&Finding], host: &str) -> std::io::Result<()> {
    header(out, "apply script", host, list.len())?;
    let mut done = HashSet::new();
    for f in list {
        writeln!(out, "\n{}", title(f))?;
        if f.remedy.manual {
            writeln!(out, "# by hand:")?;
        }
        for cmd in [&f.remedy.fix, &f.remedy.persist].into_iter().flatten() {
            lines(out, cmd, f.remedy.manual, &mut done)?;
        }
    }
    Ok(())
}

fn revert(out: &mut impl Write, list: &[&Finding], host: &str) -> std::io::Result<()> {
    header(out, "revert script", host, list.len())?;
    let mut done = HashSet::new();
    // Undo in reverse order, so settings that depend on each other unwind cleanly.
    for f in list.iter().rev() {
        writeln!(out, "\n{}", title(f))?;
        match &f.remedy.revert {
            Some(cmd) => lines(out, cmd, f.remedy.manual, &mut done)?,
            None => writeln!(out, "# nothing to revert")?,
        }
    }
    Ok(())
}
