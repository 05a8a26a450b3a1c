//! `tacho check` output: a grouped table (verdict first) or one JSON document
//! (`tacho.check.v1`).

use std::io::Write;

use serde::Serialize;

use crate::check::{Finding, Group, Profile, Severity, verdict};
use crate::fit::Fit;
use crate::text::Escaped;

#[derive(Serialize)]
struct Counts {
    ok: usize,
    info: usize,
    warn: usize,
    crit: usize,
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    tool_version: &'static str,
    profile: Profile,
    /// The least severity listed (`--only`); every finding counts in `verdict` and `counts`.
    only: Option<Severity>,
    verdict: String,
    counts: Counts,
    findings: Vec<&'a Finding>,
    /// Files that exist but could not be read: their rules were not judged.
    unreadable: &'a [String],
    /// The machine judged, so a saved or collected document says whose it is.
    host: Host<'a>,
}

#[derive(Serialize)]
struct Host<'a> {
    hostname: Option<&'a str>,
}

fn counts(findings: &[Finding]) -> Counts {
    let n = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    Counts {
        ok: n(Severity::Ok),
        info: n(Severity::Info),
        warn: n(Severity::Warn),
        crit: n(Severity::Crit),
    }
}

/// The findings as one `tacho.check.v1` JSON document, those below `only` left out of the list
/// but counted.
pub fn document(
    hostname: Option<&str>,
    findings: &[Finding],
    profile: Profile,
    only: Option<Severity>,
    unreadable: &[String],
) -> serde_json::Value {
    let doc = Document {
        host: Host { hostname },
        schema: "tacho.check.v1",
        tool_version: env!("CARGO_PKG_VERSION"),
        profile,
        only,
        verdict: verdict(findings),
        counts: counts(findings),
        findings: findings
            .iter()
            .filter(|f| only.is_none_or(|o| f.severity >= o))
            .collect(),
        unreadable,
    };
    serde_json::to_value(doc).unwrap_or_default()
}

/// The table: verdict, then each group's findings; ok ones take one line, the others show
/// their evidence, why, and the commands. Lines wider than `out`'s width wrap, except the
/// commands: broken over lines they could not be copied and run.
pub fn write_text(
    out: &mut Fit<impl Write>,
    findings: &[Finding],
    profile: Profile,
    only: Option<Severity>,
    unreadable: &[String],
) -> std::io::Result<()> {
    writeln!(out, "{}", Escaped(&verdict(findings)))?;
    let c = counts(findings);
    writeln!(
        out,
        "profile {}: {} ok, {} info, {} warn, {} crit",
        profile.name(),
        c.ok,
        c.info,
        c.warn,
        c.crit
    )?;
    let shown: Vec<&Finding> = findings
        .iter()
        .filter(|f| only.is_none_or(|o| f.severity >= o))
        .collect();
    let width = shown
        .iter()
        .map(|f| label(f).chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut group: Option<Group> = None;
    for f in &shown {
        if group != Some(f.group) {
            writeln!(out, "\n{}", f.group.title())?;
            group = Some(f.group);
        }
        writeln!(
            out,
            "  {:<4}  {:<width$}  {}",
            f.severity.label(),
            label(f),
            Escaped(&f.title)
        )?;
        if f.severity == Severity::Ok {
            continue;
        }
        let pad = " ".repeat(8);
        for e in &f.evidence {
            writeln!(
                out,
                "{pad}evidence: {} = {}",
                Escaped(&e.source),
                Escaped(&e.value)
            )?;
        }
        writeln!(
            out,
            "{pad}why: {} [{}]",
            Escaped(&f.why),
            Escaped(&f.reference)
        )?;
        for (name, cmd) in [
            ("fix", &f.remedy.fix),
            ("persist", &f.remedy.persist),
            ("revert", &f.remedy.revert),
        ] {
            if let Some(cmd) = cmd {
                let manual = if f.remedy.manual && name == "fix" {
                    " (by hand)"
                } else {
                    ""
                };
                // A command's own lines stay lines; what is inside each is escaped.
                let lines: Vec<String> = cmd.split('\n').map(|l| Escaped(l).to_string()).collect();
                out.set_wrapping(false);
                writeln!(
                    out,
                    "{pad}{name}{manual}: {}",
                    lines.join(&format!("\n{pad}  "))
                )?;
                out.set_wrapping(true);
            }
        }
    }
    if shown.is_empty() {
        writeln!(
            out,
            "\n(no findings at or above {})",
            only.map_or("ok", Severity::label)
        )?;
    }
    if !unreadable.is_empty() {
        writeln!(out, "\nnot judged, could not read:")?;
        for u in unreadable {
            writeln!(out, "  {}", Escaped(u))?;
        }
    }
    Ok(())
}

/// The finding's id and subject (a mount point, a device), escaped.
fn label(f: &Finding) -> String {
    match &f.subject {
        Some(s) => format!("{} {}", f.id, Escaped(s)),
        None => f.id.to_string(),
    }
}
