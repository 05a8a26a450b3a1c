//! `tacho diff` output: verdict first, then the performance-relevant differences with their
//! explanation, then the others; or one JSON document (`tacho.diff.v1`).

use std::io::Write;

use serde::Serialize;

use crate::snapshot::diff::{Difference, Side};
use crate::text::Escaped;
use crate::units::plural;

/// Unexplained differences listed without `--all` (kernel configs differ in thousands).
const OTHERS_SHOWN: usize = 50;

/// One line saying how many settings differ, how many matter for performance, and the first one.
pub fn verdict(diffs: &[Difference]) -> String {
    let relevant = diffs.iter().filter(|d| d.relevant).count();
    match diffs.first() {
        None => "no differences (per-boot values ignored)".to_string(),
        Some(first) if first.relevant => format!(
            "{}, {relevant} performance-relevant; first: {} {} vs {}",
            plural(diffs.len() as u64, "difference"),
            Escaped(&first.key),
            value(&first.key, &first.a),
            value(&first.key, &first.b)
        ),
        Some(_) => format!(
            "{}, none known to matter for performance",
            plural(diffs.len() as u64, "difference")
        ),
    }
}

fn value(key: &str, v: &Option<String>) -> String {
    match v {
        None if key.starts_with("config.") => "not set".to_string(),
        None => "(absent)".to_string(),
        Some(s) if s.is_empty() => "(empty)".to_string(),
        // Values come from snapshot files, possibly another machine's: escaped for terminals.
        Some(s) => Escaped(s).to_string(),
    }
}

fn describe(side: &Side) -> String {
    format!(
        "{} (host {}, kernel {})",
        Escaped(&side.label),
        Escaped(side.hostname.as_deref().unwrap_or("?")),
        Escaped(side.kernel.as_deref().unwrap_or("?"))
    )
}

/// Writes the comparison for a terminal: relevant differences first with why they matter, then (up
/// to 50 unless `all`) the rest.
pub fn write_text(
    out: &mut impl Write,
    a: &Side,
    b: &Side,
    diffs: &[Difference],
    all: bool,
) -> std::io::Result<()> {
    writeln!(out, "{}", verdict(diffs))?;
    writeln!(out, "A: {}", describe(a))?;
    writeln!(out, "B: {}", describe(b))?;
    let (relevant, others): (Vec<&Difference>, Vec<&Difference>) =
        diffs.iter().partition(|d| d.relevant);
    if !relevant.is_empty() {
        writeln!(out, "\nPerformance-relevant")?;
        for d in &relevant {
            writeln!(
                out,
                "  {}: {} -> {}",
                Escaped(&d.key),
                value(&d.key, &d.a),
                value(&d.key, &d.b)
            )?;
            if let Some(why) = &d.explanation {
                writeln!(out, "      {}", Escaped(why))?;
            }
        }
    }
    if !others.is_empty() {
        let shown = if all {
            others.len()
        } else {
            others.len().min(OTHERS_SHOWN)
        };
        if shown < others.len() {
            writeln!(
                out,
                "\nOther differences (first {shown} of {}; --all lists every one)",
                others.len()
            )?;
        } else {
            writeln!(out, "\nOther differences")?;
        }
        for d in others.iter().take(shown) {
            writeln!(
                out,
                "  {}: {} -> {}",
                Escaped(&d.key),
                value(&d.key, &d.a),
                value(&d.key, &d.b)
            )?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct SideDoc<'a> {
    source: &'a str,
    hostname: Option<&'a str>,
    kernel: Option<&'a str>,
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    tool_version: &'static str,
    a: SideDoc<'a>,
    b: SideDoc<'a>,
    verdict: String,
    differences_total: usize,
    differences_relevant: usize,
    differences: &'a [Difference],
}

fn side_doc(s: &Side) -> SideDoc<'_> {
    SideDoc {
        source: &s.label,
        hostname: s.hostname.as_deref(),
        kernel: s.kernel.as_deref(),
    }
}

/// Writes the comparison as one `tacho.diff.v1` JSON document.
pub fn write_json(
    out: &mut impl Write,
    a: &Side,
    b: &Side,
    diffs: &[Difference],
) -> std::io::Result<()> {
    let doc = Document {
        schema: "tacho.diff.v1",
        tool_version: env!("CARGO_PKG_VERSION"),
        a: side_doc(a),
        b: side_doc(b),
        verdict: verdict(diffs),
        differences_total: diffs.len(),
        differences_relevant: diffs.iter().filter(|d| d.relevant).count(),
        differences: diffs,
    };
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}
