//! `tacho compare ID ID… [--baseline ID]`: stored runs side by side.

use super::output::{self, Format};
use super::runs::compared;
use crate::cli::CompareArgs;
use crate::compare::{self, fleet};
use crate::history::when;
use crate::report::{
    self,
    results::{self, Text},
};
use crate::snapshot::explain::glob;
use crate::store::RunKind;
use crate::text::Escaped;
use anyhow::{Result, bail};
use std::io::Write as _;
use std::process::ExitCode;

pub fn run(args: &CompareArgs) -> Result<ExitCode> {
    if args.by.is_some() {
        return by_host(args);
    }
    let ids = ordered_ids(&args.ids, args.baseline);
    if ids.len() < 2 {
        bail!(
            "compare needs at least two different runs (got {}); use tacho runs show ID for one",
            ids.len()
        );
    }
    let c = compared(&args.db, &ids, |runs| comparable(runs, args.force))?;
    // One write a buffer, not one a line (stdout alone flushes at each newline): a comparison
    // of many tests prints hundreds of thousands of lines.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match Format::from(&args.format) {
        Format::Table => {
            let width = crate::fit::stdout_width();
            let mut fitted = crate::fit::Fit::new(&mut out, width);
            results::compare_text(&c, Text::Terminal(width), &mut fitted)?;
        }
        Format::Markdown => results::compare_text(&c, Text::Markdown, &mut out)?,
        Format::Json => results::compare_json(&c, args.fail_on_regression, &mut out)?,
        Format::Csv => results::csv(&c, &mut out)?,
        Format::Html(path) => {
            let titles: Vec<String> = c.runs.iter().map(|r| r.name()).collect();
            output::html(&path, &c, &format!("tacho: {}", titles.join(" vs ")), &[])?;
        }
    }
    // Before anything goes to stderr, so a terminal shows the two in order.
    out.flush()?;
    drop(out);
    let Some(pct) = args.fail_on_regression else {
        return Ok(ExitCode::SUCCESS);
    };
    if c.common == 0 {
        // Nothing was measured against the baseline: passing the check would be a claim.
        eprintln!(
            "tacho: no tests in common with baseline {}, so nothing was checked for \
             regressions; compare runs of the same tests",
            c.runs[0].name()
        );
        return Ok(ExitCode::from(2));
    }
    let judged = c.judgement_regressions();
    for (i, j) in &judged {
        eprintln!(
            "regression: judgement {} in run {} at the same limit as the baseline ({})",
            j.status.to_uppercase(),
            c.runs[*i].id,
            j.describe()
        );
    }
    let regressions = c.regressions(pct);
    for r in &regressions {
        eprintln!(
            "regression: {} {} {:+.1}% in run {} ({})",
            Escaped(&r.title),
            r.label,
            r.change_pct.unwrap_or(0.0),
            c.runs[r.run].id,
            r.significance.describe()
        );
    }
    let untested = c.untestable_regressions(pct);
    if untested > 0 {
        eprintln!(
            "note: {untested} figures are more than {pct}% worse but have no repeats, so their \
             significance is unknown and they do not fail the check (repeat the tests)"
        );
    }
    Ok(if regressions.is_empty() && judged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Refuses runs that do not compare: saved checks and snapshots, runs of different kinds, and
/// preconditioned beside fresh ones (unless `force`).
fn comparable(runs: &[crate::store::StoredRun], force: bool) -> Result<()> {
    if let Some(saved) = runs
        .iter()
        .find(|r| matches!(r.kind, RunKind::Check | RunKind::Snapshot))
    {
        bail!(
            "run {} is a saved {}, which has no figures to compare; compare settings across \
             hosts with tacho drift (or two snapshot files with tacho diff)",
            saved.id,
            saved.kind
        );
    }
    if let Some(other) = runs.iter().find(|r| r.kind != runs[0].kind) {
        bail!(
            "no tests in common: run {} is a {} run and run {} a {} run; compare runs of one \
             kind (tacho runs list shows each run's kind)",
            runs[0].id,
            runs[0].kind,
            other.id,
            other.kind
        );
    }
    if let Some(why) = compare::precondition_mix(runs).filter(|_| !force) {
        bail!(why);
    }
    Ok(())
}

/// `compare --by host`: the latest finished run of each host, against its peers.
fn by_host(args: &CompareArgs) -> Result<ExitCode> {
    let kind = args
        .kind
        .as_deref()
        .and_then(RunKind::parse)
        .unwrap_or(RunKind::Disk);
    let (store, place) = super::runs::open_existing(&args.db)?;
    let Some(mut store) = store else {
        bail!(
            "there is no results database at {} yet; save runs from each host there (--db) or \
             import them (tacho runs import)",
            place.shown()
        );
    };
    let labels = crate::labels::collect(args.labels.iter().map(String::as_str))
        .map_err(anyhow::Error::msg)?;
    let since = args.since.as_deref().map(when::since_utc).transpose()?;
    let picked = store.latest_per_host(kind, args.suite.as_deref(), since.as_deref(), &labels)?;
    let picked: Vec<(String, i64)> = picked
        .into_iter()
        .filter(|(host, _)| args.host.as_deref().is_none_or(|p| glob(p, host)))
        .collect();
    if picked.len() < 2 {
        bail!(
            "compare --by host needs finished {kind} runs from at least two hosts{}; found {} \
             (tacho runs list shows each run's host)",
            args.suite
                .as_deref()
                .map(|s| format!(" of suite {s}"))
                .unwrap_or_default(),
            picked.len()
        );
    }
    // No more of each run than the comparison looks at (one more, so it can say so).
    let most = compare::tests_per_run_of(compare::fleet_cells(), picked.len()).saturating_add(1);
    let runs = picked
        .into_iter()
        .map(|(host, id)| Ok((host, store.load_summary(id, most)?)))
        .collect::<Result<Vec<_>>>()?;
    let peers = args
        .peers_by
        .as_deref()
        .map(fleet::Peers::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?
        .unwrap_or_default();
    let f = fleet::by_host(runs, &peers);
    let mut out = std::io::stdout().lock();
    match Format::from(&args.format) {
        Format::Table => report::fleet::write_text(
            &f,
            false,
            &mut crate::fit::Fit::new(&mut out, crate::fit::stdout_width()),
        )?,
        Format::Markdown => report::fleet::write_text(&f, true, &mut out)?,
        Format::Json => report::fleet::write_json(&f, &mut out)?,
        Format::Csv => report::fleet::write_csv(&f, &mut out)?,
        Format::Html(path) => {
            let mut page = Vec::new();
            let title = format!("tacho: {} hosts, latest {kind} run of each", f.hosts.len());
            report::fleet::write_html(&f, &title, &mut page)?;
            output::write_page(&path, &page)?;
        }
    }
    Ok(if args.strict && !f.outliers.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The baseline first, then the other ids in the order given, each once.
fn ordered_ids(ids: &[i64], baseline: Option<i64>) -> Vec<i64> {
    let mut out: Vec<i64> = baseline.into_iter().collect();
    for &id in ids {
        if !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn baseline_goes_first_once() {
        assert_eq!(super::ordered_ids(&[1, 2, 3, 2], Some(3)), [3, 1, 2]);
        assert_eq!(super::ordered_ids(&[4, 4], None), [4]);
    }
}
