//! An experiment's outcome for people: the rounds, then the verdict in words with the effect,
//! its 95% interval and both p-values, and what to do next (keep it and how to persist it, or
//! leave it). JSON is the [`Outcome`] itself.

use std::io::{self, Write};

use super::verdict::Verdict;
use super::{Outcome, short};
use crate::compare::format_p;
use crate::text::Escaped;

/// `+18.2%`, `−54.0%`.
fn pct(v: f64) -> String {
    if v < 0.0 {
        format!("\u{2212}{:.1}%", -v)
    } else {
        format!("+{v:.1}%")
    }
}

/// The verdict line.
pub fn verdict_line(o: &Outcome) -> String {
    let change = o
        .changes
        .iter()
        .map(|c| format!("{}={}", c.setting, c.to))
        .collect::<Vec<_>>()
        .join(" + ");
    let Some(e) = &o.effect else {
        return format!(
            "{change}: too few rounds finished to judge ({} baseline, {} changed; two each needed)",
            o.baseline.len(),
            o.changed.len()
        );
    };
    let interval = format!(
        "{} \u{2026} {}, Welch {}, rank {}",
        pct(e.ci95_low_pct),
        pct(e.ci95_high_pct),
        format_p(e.welch_p),
        format_p(e.rank_p)
    );
    let figure = Escaped(o.figure.as_deref().unwrap_or("-"));
    match e.verdict {
        Verdict::Win => format!(
            "{change}: {figure} {} ({interval}): a win, keep it",
            pct(e.change_pct)
        ),
        Verdict::Loss => format!(
            "{change}: {figure} {} ({interval}): a loss, leave it at {}",
            pct(e.change_pct),
            o.changes
                .iter()
                .map(|c| format!("{}={}", c.setting, c.from))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        Verdict::NoEffect => format!(
            "{change}: no effect distinguishable from noise on {figure} ({} measured, {interval})",
            pct(e.change_pct)
        ),
    }
}

/// The whole report.
pub fn text(o: &Outcome, w: &mut dyn Write) -> io::Result<()> {
    let list = |xs: &[f64]| xs.iter().map(|x| short(*x)).collect::<Vec<_>>().join(" ");
    writeln!(w, "{}", verdict_line(o))?;
    writeln!(
        w,
        "measure: {} ({})",
        Escaped(&o.measure),
        Escaped(o.figure.as_deref().unwrap_or("no round finished"))
    )?;
    for c in &o.changes {
        writeln!(
            w,
            "baseline {}={}: {}",
            c.setting,
            c.from,
            list(&o.baseline)
        )?;
        writeln!(w, "changed  {}={}: {}", c.setting, c.to, list(&o.changed))?;
    }
    if o.interrupted {
        writeln!(w, "interrupted: only the rounds above ran")?;
    }
    if o.reverted {
        writeln!(w, "reverted and read back; the journal is removed")?;
    }
    if o.effect.is_some_and(|e| e.verdict == Verdict::Win) {
        for c in &o.changes {
            if let Some(p) = &c.persist_command {
                writeln!(w, "to keep {}={} after a reboot: {p}", c.setting, c.to)?;
            }
        }
    }
    Ok(())
}
