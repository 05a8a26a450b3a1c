//! An experiment's outcome for people: the rounds, then the verdict in words with the effect,
//! its 95% interval and both p-values, and what to do next (keep it and how to persist it, or
//! leave it). JSON is the [`Outcome`] itself.

use std::io::{self, Write};

use super::series::SeriesOutcome;
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
        .map(|c| c.side(true))
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
            "{change}: {figure} {} ({interval}): keep it; {}",
            pct(e.change_pct),
            persist(o)
        ),
        Verdict::Loss => format!(
            "{change}: {figure} {} ({interval}): a loss, leave it at {}",
            pct(e.change_pct),
            o.changes
                .iter()
                .map(|c| c.side(false))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        Verdict::NoEffect => format!(
            "{change}: no effect distinguishable from noise (\u{b1}{:.1}%) on {figure} ({} \
             measured, {interval})",
            (e.ci95_high_pct - e.ci95_low_pct) / 2.0,
            pct(e.change_pct)
        ),
    }
}

/// How to keep a win after a reboot: `to persist: CMD` (as `check --emit-script` gives it,
/// joined with `&&` for changes made together), or what has no such command.
fn persist(o: &Outcome) -> String {
    let (known, unknown): (Vec<_>, Vec<_>) =
        o.changes.iter().partition(|c| c.persist_command.is_some());
    let mut out = Vec::new();
    if !known.is_empty() {
        out.push(format!(
            "to persist: {}",
            known
                .iter()
                .filter_map(|c| c.persist_command.as_deref())
                .map(|p| Escaped(p).to_string())
                .collect::<Vec<_>>()
                .join(" && ")
        ));
    }
    if !unknown.is_empty() {
        out.push(format!(
            "persist {} by hand (tacho knows no command for it)",
            unknown
                .iter()
                .map(|c| c.side(true))
                .collect::<Vec<_>>()
                .join(" + ")
        ));
    }
    out.join("; ")
}

/// Why the rounds stopped where they did, when their number was not fixed: the interval
/// narrowed to the precision, or the most rounds ran with the noise still wider.
fn rounds_line(o: &Outcome) -> Option<String> {
    let (r, e) = (&o.rounds, o.effect.as_ref()?);
    let want = r.precision_pct?;
    let (n, half) = (o.baseline.len(), (e.ci95_high_pct - e.ci95_low_pct) / 2.0);
    Some(if half <= want {
        format!("rounds: {n} a side, until the interval was \u{b1}{half:.1}% (--precision {want}%)")
    } else {
        format!(
            "rounds: {n} a side, the most (--max-rounds); the interval is still \u{b1}{half:.1}%, \
             wider than --precision {want}%: the measure is noisier than that here"
        )
    })
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
        writeln!(w, "baseline {}: {}", c.side(false), list(&o.baseline))?;
        writeln!(w, "changed  {}: {}", c.side(true), list(&o.changed))?;
    }
    if let Some(line) = rounds_line(o) {
        writeln!(w, "{line}")?;
    }
    if o.interrupted {
        writeln!(w, "interrupted: only the rounds above ran")?;
    }
    if o.reverted {
        writeln!(w, "reverted and read back; the journal is removed")?;
    }
    Ok(())
}

/// A series: each step's verdict (kept or left out), what the kept steps gained together,
/// and whether the last steps stopped paying off.
pub fn series_text(o: &SeriesOutcome, w: &mut dyn Write) -> io::Result<()> {
    for (i, s) in o.steps.iter().enumerate() {
        let mark = if s.kept { "kept" } else { "left out" };
        writeln!(w, "step {}: {} [{mark}]", i + 1, verdict_line(&s.outcome))?;
    }
    let figure = o
        .steps
        .iter()
        .find_map(|s| s.outcome.figure.as_deref())
        .unwrap_or("-");
    let kept = o.steps.iter().filter(|s| s.kept).count();
    match o.cumulative_pct {
        Some(c) => writeln!(
            w,
            "together: {kept} kept step{} {} {} on {} (each step's effect compounded; each \
             measured against the steps kept before it)",
            if kept == 1 { "" } else { "s" },
            if kept == 1 { "gives" } else { "give" },
            pct(c),
            Escaped(figure)
        )?,
        None => writeln!(w, "together: no step was a win; nothing to keep")?,
    }
    if o.unpaid_steps > 0 && kept > 0 {
        writeln!(
            w,
            "the last {} step{} paid nothing beyond noise: the returns have diminished, stop \
             at step {}",
            o.unpaid_steps,
            if o.unpaid_steps == 1 { "" } else { "s" },
            o.steps.len() - o.unpaid_steps
        )?;
    }
    if o.interrupted {
        writeln!(w, "interrupted: only the steps above ran")?;
    }
    if o.reverted {
        writeln!(
            w,
            "every setting of the series reverted and read back; the journals are removed"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::verdict::Effect;
    use crate::experiment::{COMMAND, Changed, SCHEMA};

    fn outcome(verdict: Verdict, changes: Vec<Changed>) -> Outcome {
        Outcome {
            schema: SCHEMA,
            changes,
            measure: "top".into(),
            figure: Some("workload system CPU (s)".into()),
            higher_is_better: Some(false),
            stored: None,
            rounds: crate::experiment::Rounds::fixed(2),
            baseline: vec![1.0, 1.1],
            changed: vec![0.5, 0.6],
            effect: Some(Effect {
                change_pct: -2.0,
                ci95_low_pct: -5.0,
                ci95_high_pct: 1.0,
                welch_p: 0.3,
                rank_p: 0.4,
                verdict,
            }),
            reverted: true,
            interrupted: false,
        }
    }

    fn thp() -> Changed {
        Changed {
            setting: "thp.enabled".into(),
            from: "always".into(),
            to: "never".into(),
            revert_command: Some("echo always > /sys/kernel/mm/transparent_hugepage/enabled".into()),
            persist_command: Some("echo 'w /sys/kernel/mm/transparent_hugepage/enabled - - - - never' > /etc/tmpfiles.d/tacho-thp-enabled.conf".into()),
        }
    }

    #[test]
    fn a_win_says_keep_it_and_how_to_persist_it() {
        let line = verdict_line(&outcome(Verdict::Win, vec![thp()]));
        assert!(
            line.starts_with("thp.enabled=never: workload system CPU (s) \u{2212}2.0% (")
                && line.ends_with(&format!(
                    "keep it; to persist: {}",
                    thp().persist_command.unwrap()
                )),
            "{line}"
        );
        let cmd = Changed {
            setting: COMMAND.into(),
            from: "undo".into(),
            to: "do".into(),
            revert_command: Some("undo".into()),
            persist_command: None,
        };
        let line = verdict_line(&outcome(Verdict::Win, vec![thp(), cmd]));
        assert!(
            line.contains("keep it; to persist: echo ")
                && line
                    .ends_with("; persist change-cmd 'do' by hand (tacho knows no command for it)"),
            "{line}"
        );
    }

    #[test]
    fn no_effect_names_the_noise() {
        let line = verdict_line(&outcome(Verdict::NoEffect, vec![thp()]));
        assert!(
            line.starts_with("thp.enabled=never: no effect distinguishable from noise (\u{b1}3.0%) on workload system CPU (s) (\u{2212}2.0% measured"),
            "{line}"
        );
        assert!(!line.contains("keep it"), "{line}");
        let line = verdict_line(&outcome(Verdict::Loss, vec![thp()]));
        assert!(
            line.ends_with("a loss, leave it at thp.enabled=always"),
            "{line}"
        );
    }

    #[test]
    fn adaptive_rounds_say_why_they_stopped() {
        let mut o = outcome(Verdict::NoEffect, vec![thp()]);
        assert_eq!(rounds_line(&o), None, "fixed rounds need no word");
        o.rounds = crate::experiment::Rounds {
            min: 5,
            max: 20,
            precision_pct: Some(5.0),
        };
        assert_eq!(
            rounds_line(&o).unwrap(),
            "rounds: 2 a side, until the interval was \u{b1}3.0% (--precision 5%)"
        );
        o.rounds.precision_pct = Some(2.0);
        assert!(
            rounds_line(&o)
                .unwrap()
                .contains("the most (--max-rounds); the interval is still \u{b1}3.0%"),
            "{o:?}"
        );
    }
}
