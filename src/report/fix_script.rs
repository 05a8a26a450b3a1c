//! `--emit-script`: shell scripts that apply the recommended fixes (now and persistently)
//! and revert them. tacho prints them for the admin to read and run; it never runs them.

use crate::check::{Finding, Severity};
use crate::choice::Choice;
use crate::text::Escaped;
use std::io::Write;

/// Which script to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// The apply script, then the revert script.
    Both,
    /// Only the script that applies the fixes.
    Apply,
    /// Only the script that undoes them.
    Revert,
}

impl Choice for ScriptKind {
    const ALL: &'static [Self] = &[ScriptKind::Both, ScriptKind::Apply, ScriptKind::Revert];

    fn word(self) -> &'static str {
        match self {
            ScriptKind::Both => "both",
            ScriptKind::Apply => "apply",
            ScriptKind::Revert => "revert",
        }
    }

    fn help(self) -> Option<&'static str> {
        (self == ScriptKind::Both).then_some("The apply script, then the revert script")
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

/// Writes the scripts `kind` names for the actionable findings (see [`ScriptKind`]).
pub fn write_script(
    out: &mut impl Write,
    findings: &[Finding],
    kind: ScriptKind,
    host: &str,
) -> std::io::Result<()> {
    let list = actionable(findings);
    if kind != ScriptKind::Revert {
        apply(out, &list, host)?;
    }
    if kind == ScriptKind::Both {
        writeln!(
            out,
            "\n# ===== revert script: save from the next line on =====\n"
        )?;
    }
    if kind != ScriptKind::Apply {
        revert(out, &list, host)?;
    }
    Ok(())
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
fn lines(out: &mut impl Write, cmd: &str, manual: bool) -> std::io::Result<()> {
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
    for f in list {
        writeln!(out, "\n{}", title(f))?;
        if f.remedy.manual {
            writeln!(out, "# by hand:")?;
        }
        for cmd in [&f.remedy.fix, &f.remedy.persist].into_iter().flatten() {
            lines(out, cmd, f.remedy.manual)?;
        }
    }
    Ok(())
}

fn revert(out: &mut impl Write, list: &[&Finding], host: &str) -> std::io::Result<()> {
    header(out, "revert script", host, list.len())?;
    // Undo in reverse order, so settings that depend on each other unwind cleanly.
    for f in list.iter().rev() {
        writeln!(out, "\n{}", title(f))?;
        match &f.remedy.revert {
            Some(cmd) => lines(out, cmd, f.remedy.manual)?,
            None => writeln!(out, "# nothing to revert")?,
        }
    }
    Ok(())
}
