//! `tacho drift`: the settings that differ across hosts, from each host's latest saved
//! snapshot and check.

use super::output::{self, Format};
use crate::cli::DriftArgs;
use crate::compare::drift::{self, settings};
use crate::report::drift::{self as show, Scope};
use crate::snapshot::explain::glob;
use crate::store::{RunKind, StoredRun};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::process::ExitCode;

pub fn run(args: &DriftArgs) -> Result<ExitCode> {
    let (store, place) = super::runs::open_existing(&args.db)?;
    let Some(mut store) = store else {
        bail!(
            "there is no results database at {} yet; run tacho snapshot --save --db … on each \
             host first",
            place.shown()
        );
    };
    let since = args
        .since
        .as_deref()
        .map(crate::history::when::since_utc)
        .transpose()?;
    let labels = crate::labels::collect(args.labels.iter().map(String::as_str))
        .map_err(anyhow::Error::msg)?;
    let wanted = |host: &String| args.host.as_deref().is_none_or(|p| glob(p, host));
    let mut hosts: BTreeMap<String, (Option<StoredRun>, Option<StoredRun>)> = BTreeMap::new();
    for (kind, slot) in [(RunKind::Snapshot, 0), (RunKind::Check, 1)] {
        for (host, id) in store.latest_per_host(kind, None, since.as_deref(), &labels)? {
            if !wanted(&host) {
                continue;
            }
            let run = store.load(id)?;
            let entry = hosts.entry(host).or_default();
            if slot == 0 {
                entry.0 = Some(run);
            } else {
                entry.1 = Some(run);
            }
        }
    }
    if hosts.len() < 2 {
        bail!(
            "drift needs saved snapshots or checks from at least two hosts; found {} (run tacho \
             snapshot --save --db … on each host, or tacho runs import their snapshot files)",
            hosts.len()
        );
    }
    let scope = Scope {
        hosts: hosts.len(),
        snapshots: hosts.values().filter(|h| h.0.is_some()).count(),
        checks: hosts.values().filter(|h| h.1.is_some()).count(),
    };
    let mut named: Vec<(String, BTreeMap<String, String>)> = hosts
        .into_iter()
        .map(|(host, (snap, check))| (host, settings(snap, check.as_ref())))
        .collect();
    named.sort_by_cached_key(|(h, _)| crate::text::natural_key(h));
    let found = drift::drift(&named);
    let mut out = std::io::stdout().lock();
    match Format::from(&args.format) {
        Format::Table => show::write_text(&found, &scope, args.all, false, &mut out)?,
        Format::Markdown => show::write_text(&found, &scope, args.all, true, &mut out)?,
        Format::Json => show::write_json(&found, &scope, &mut out)?,
        Format::Csv => show::write_csv(&found, &mut out)?,
        Format::Html(path) => {
            let mut page = Vec::new();
            let title = format!("tacho: configuration drift across {} hosts", scope.hosts);
            show::write_html(&found, &scope, &title, &mut page)?;
            output::write_page(&path, &page)?;
        }
    }
    Ok(if args.strict && found.iter().any(|d| d.relevant()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
