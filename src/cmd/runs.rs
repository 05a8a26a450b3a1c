//! `tacho runs list|show|rm|export|import`: the stored runs.

use super::output::{self, Format};
use crate::cli::{DbArg, RunFilter, RunsCommand};
use crate::compare;
use crate::kernel::SysRoot;
use crate::report::{
    self,
    results::{self, Text},
};
use crate::store::{self, Place, Results, StoredRun};
use crate::text::Escaped;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(command: RunsCommand) -> Result<ExitCode> {
    match command {
        RunsCommand::List { db, json, filter } => list(&db, json, &filter),
        RunsCommand::Show {
            group: Some(name),
            db,
            format,
            ..
        } => show_group(&name, &db, format.json),
        RunsCommand::Show { id, db, format, .. } => {
            show(id.unwrap_or_default(), &db, &Format::from(&format))
        }
        RunsCommand::Rm { ids, db } => rm(&ids, &db),
        RunsCommand::Export { ids, output, db } => export(&ids, output.as_deref(), &db),
        RunsCommand::Import {
            files,
            label,
            db,
            json,
        } => import(&files, label.as_deref(), &db, json),
        #[cfg(feature = "pg")]
        RunsCommand::Push { db, from } => push(db.as_deref(), from.as_deref()),
        #[cfg(not(feature = "pg"))]
        RunsCommand::Push { .. } => {
            Err(crate::features::Missing(crate::features::Feature::Pg).into())
        }
    }?;
    Ok(ExitCode::SUCCESS)
}

/// `runs push`: uploads the local runs the shared store lacks and says how many.
#[cfg(feature = "pg")]
fn push(url: Option<&str>, from: Option<&Path>) -> Result<()> {
    let url = super::store::shared_url(url, "runs push")?;
    // TACHO_DB (or the config file) names the server here, so the local default cannot come
    // from it.
    let local = match from {
        Some(p) => p.to_path_buf(),
        None if store::server_url_from_env_or_config().is_some() => store::default_local_path()?,
        None => store::resolve_path(None)?,
    };
    let store = store::Store::open_existing(&local)?.ok_or_else(|| {
        anyhow!(
            "no results database at {} to push; pass --from PATH",
            local.display()
        )
    })?;
    let mut server = store::pg::PgStore::connect(&url, SysRoot::real())?;
    let counts = server.push(&store)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "pushed {} new run(s) to {}; {} already there",
        counts.new,
        Escaped(&store::redact(&url)),
        counts.present
    )?;
    if counts.running > 0 {
        writeln!(
            out,
            "{} run(s) still being saved were left for a later push",
            counts.running
        )?;
    }
    let Some((id, why)) = counts.failed.first() else {
        return Ok(());
    };
    let others = match counts.failed.len() {
        1 => String::new(),
        n => {
            let ids: Vec<String> = counts.failed[1..]
                .iter()
                .map(|(i, _)| i.to_string())
                .collect();
            format!(" ({} more not pushed: run {})", n - 1, ids.join(", "))
        }
    };
    bail!(
        "local run {id} was not pushed: {}{others}; every other run was",
        Escaped(why)
    )
}

/// The store, for commands that only read or remove: a missing file is not created.
pub fn open_existing(db: &DbArg) -> Result<(Option<Results>, Place)> {
    let place = Place::resolve(db.db.as_deref())?;
    let results = Results::open_existing(&place, &SysRoot::real())?;
    // The default place is empty until the first run is saved; a named one that is missing
    // is a typo, not "no runs yet".
    if results.is_none()
        && let (Some(_), Place::File(path)) = (&db.db, &place)
    {
        bail!(
            "there is no results database at {}; fix the --db path (or leave --db out for \
             the default)",
            path.display()
        );
    }
    Ok((results, place))
}

/// Loads runs by id; a missing database or id is an error naming it.
pub fn load(db: &DbArg, ids: &[i64]) -> Result<Vec<StoredRun>> {
    load_with(db, ids, Results::load)
}

/// The runs by id (without their tests) and their comparison, the baseline first: each test
/// read and added to the comparison in turn, no more of each run than a comparison of this
/// many runs looks at ([`compare::tests_per_run`]; one more, so the comparison can say that
/// some were left out). `check` refuses runs that do not compare, before they are compared.
pub fn compared(
    db: &DbArg,
    ids: &[i64],
    check: impl FnOnce(&[StoredRun]) -> Result<()>,
) -> Result<compare::Comparison> {
    let most = compare::tests_per_run(ids.len()).saturating_add(1);
    let mut builder = compare::Builder::new(ids.len());
    let mut run = 0;
    let runs = load_with(db, ids, |store, id| {
        let loaded = store.each_test(id, most, &mut |name, json, figures| {
            builder.add_text(run, name, json, &figures);
            Ok(())
        });
        run += 1;
        loaded
    })?;
    check(&runs)?;
    Ok(builder.finish(&runs))
}

fn load_with(
    db: &DbArg,
    ids: &[i64],
    mut each: impl FnMut(&mut Results, i64) -> Result<StoredRun>,
) -> Result<Vec<StoredRun>> {
    let (store, place) = open_existing(db)?;
    let mut store = store.ok_or_else(|| {
        anyhow!(
            "no run {}: there is no results database at {} yet (pass --db PATH or set TACHO_DB \
             if it is elsewhere)",
            ids[0],
            place.shown()
        )
    })?;
    ids.iter().map(|&id| each(&mut store, id)).collect()
}

/// `runs list`: rows are read one at a time; JSON writes each as it comes, and the table keeps
/// each row's text cut as read, so neither holds more than a row of what was stored.
fn list(db: &DbArg, json: bool, filter: &RunFilter) -> Result<()> {
    let labels = crate::labels::collect(filter.labels.iter().map(String::as_str))
        .map_err(anyhow::Error::msg)?;
    let since = filter
        .since
        .as_deref()
        .map(crate::history::when::since_utc)
        .transpose()?;
    let wanted = |r: &store::RunSummary| {
        filter.kind.as_deref().is_none_or(|k| r.kind.as_str() == k)
            && since.as_deref().is_none_or(|s| &*r.created_at >= s)
            && filter.host.as_deref().is_none_or(|p| {
                let glob = |h: &str| crate::snapshot::explain::glob(p, h);
                r.hostname.as_deref().is_some_and(glob) || r.machine_id.as_deref().is_some_and(glob)
            })
            && crate::labels::matches(&r.labels, &labels)
    };
    let (store, _) = open_existing(db)?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut doc = results::ListJson::begin(&mut out)?;
        if let Some(mut s) = store {
            s.list_each(store::ListText::Whole, |r| {
                if wanted(r) {
                    doc.run(r)?;
                }
                Ok(())
            })?;
        }
        doc.end()?;
    } else {
        let shown = crate::text::SHOWN_CHARS;
        let mut runs = Vec::new();
        if let Some(mut s) = store {
            s.list_each(store::ListText::Cut(shown), |r| {
                if wanted(r) {
                    runs.push(r.shown(shown));
                }
                Ok(())
            })?;
        }
        results::list_text(&runs, &mut out)?;
    }
    Ok(())
}

/// `runs show --group NAME`: the group's latest start, merged.
fn show_group(name: &str, db: &DbArg, json: bool) -> Result<()> {
    let (store, place) = open_existing(db)?;
    let Some(mut store) = store else {
        bail!(
            "there is no results database at {} yet; a group's runs are in the shared store \
             they met in (--db postgres://…)",
            place.shown()
        );
    };
    let ids = store.group_runs(name)?;
    if ids.is_empty() {
        bail!(
            "no finished start of group {} in {} (bench disk … --group {} --hosts N saves one)",
            Escaped(name),
            store.shown(),
            Escaped(name)
        );
    }
    let runs = ids
        .iter()
        .map(|&id| store.load(id))
        .collect::<Result<Vec<_>>>()?;
    let merged = compare::group::merge(name, &runs);
    let mut out = std::io::stdout().lock();
    if json {
        report::group::write_json(&merged, &mut out)?;
    } else {
        report::group::write_text(&merged, &mut out)?;
    }
    Ok(())
}

fn show(id: i64, db: &DbArg, format: &Format) -> Result<()> {
    let run = load(db, &[id])?.remove(0);
    if matches!(run.kind, store::RunKind::Check | store::RunKind::Snapshot)
        && !matches!(format, Format::Json)
    {
        writeln!(
            std::io::stdout().lock(),
            "run {id}: {} of {} at {} (tacho runs show {id} --json prints it whole; tacho drift \
             compares hosts)",
            run.kind,
            Escaped(&compare::fleet::host_of(&run)),
            run.created_at
        )?;
        return Ok(());
    }
    let c = compare::compare(std::slice::from_ref(&run));
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => {
            let width = crate::fit::stdout_width();
            let mut fitted = crate::fit::Fit::new(&mut out, width);
            results::show_text(&run, &c, Text::Terminal(width), &mut fitted)?;
        }
        Format::Markdown => results::show_text(&run, &c, Text::Markdown, &mut out)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &run.to_document())?;
            writeln!(out)?;
        }
        Format::Csv => results::csv(&c, &mut out)?,
        Format::Html(path) => {
            let title = format!("tacho run {}: {}", run.id, run.title());
            output::html(path, &c, &title, &results::run_warnings(&run))?;
        }
    }
    Ok(())
}

fn rm(ids: &[i64], db: &DbArg) -> Result<()> {
    let (store, place) = open_existing(db)?;
    let mut store = store.ok_or_else(|| {
        anyhow!(
            "no run {}: there is no results database at {} (nothing removed)",
            ids[0],
            place.shown()
        )
    })?;
    store.writable()?;
    store.remove(ids)?;
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    eprintln!(
        "removed run {} from {}",
        list.join(", "),
        Escaped(&place.shown())
    );
    Ok(())
}

fn export(ids: &[i64], output: Option<&Path>, db: &DbArg) -> Result<()> {
    let runs = load(db, ids)?;
    let mut text = String::new();
    for run in &runs {
        text.push_str(&serde_json::to_string_pretty(&run.to_document())?);
        text.push('\n');
    }
    match output {
        Some(path) => {
            crate::report::write_file_atomically(path, &text).with_context(|| {
                format!("cannot write {}; pass a writable -o FILE", path.display())
            })?;
            eprintln!(
                "exported {} to {}",
                crate::units::plural(runs.len() as u64, "run"),
                path.display()
            );
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

fn import(files: &[PathBuf], label: Option<&str>, db: &DbArg, json: bool) -> Result<()> {
    // One transaction for every file: bad input stores nothing (the tests of a file are stored
    // as they are read, and rolled back when a later one is bad).
    let place = Place::resolve(db.db.as_deref())?;
    let runs = store::import_files(&place, &SysRoot::real(), files, |file, run| {
        if let Some(l) = label {
            run.label = Some(l.to_string());
        } else if run.label.is_none() && run.source == store::RunSource::Fio {
            let name = file.file_name().unwrap_or(file.as_os_str());
            run.label = Some(format!("fio {}", name.to_string_lossy()));
        }
    })?;
    let imported: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "id": r.id, "file": files[r.file].display().to_string(), "source": r.source,
                "label": r.label, "tests": r.tests, "already_there": !r.new,
            })
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(
            &mut out,
            &json!({"schema": "tacho.runs.import.v1", "runs": imported}),
        )?;
        writeln!(out)?;
    } else {
        for r in &imported {
            if r["already_there"] == true {
                writeln!(
                    out,
                    "run {} already holds the run in {} (same run id); not imported again",
                    r["id"],
                    Escaped(r["file"].as_str().unwrap_or(""))
                )?;
                continue;
            }
            writeln!(
                out,
                "imported run {} from {} ({}, {})",
                r["id"],
                Escaped(r["file"].as_str().unwrap_or("")),
                crate::units::plural(r["tests"].as_u64().unwrap_or(0), "test"),
                r["source"].as_str().unwrap_or("")
            )?;
        }
    }
    Ok(())
}
