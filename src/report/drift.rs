//! `tacho drift`: each setting that differs across hosts, grouped by value with host counts,
//! as text, Markdown, JSON (`tacho.drift.v1`), CSV or an HTML page.

use super::grid::markdown_escape;
use super::html::esc;
use super::sheet::spreadsheet_text;
use crate::compare::drift::Drift;
use crate::text::Escaped;
use crate::units::plural;
use serde_json::json;
use std::io::{self, Write};

/// Differences not known to matter listed without `--all` (kernel configs differ in
/// thousands between kernel builds).
const OTHERS_SHOWN: usize = 50;
/// Host names listed for one value; more are counted.
const NAMES_SHOWN: usize = 8;

/// What was compared.
pub struct Scope {
    /// Hosts compared.
    pub hosts: usize,
    /// Of which with a saved snapshot.
    pub snapshots: usize,
    /// Of which with a saved check.
    pub checks: usize,
}

fn value_text(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("not set")
}

/// `always on 3 hosts (db-2, db-7, web-11), madvise on 37`: every group but the largest
/// names its hosts.
pub fn line(d: &Drift) -> String {
    let last = d.groups.len().saturating_sub(1);
    let parts: Vec<String> = d
        .groups
        .iter()
        .enumerate()
        .map(|(i, (value, hosts))| {
            let n = hosts.len();
            let noun = if n == 1 { "host" } else { "hosts" };
            if i == last {
                return format!("{} on {n}", value_text(value));
            }
            let names: Vec<&str> = hosts.iter().take(NAMES_SHOWN).map(String::as_str).collect();
            let more = n.saturating_sub(NAMES_SHOWN);
            let more = if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            };
            format!(
                "{} on {n} {noun} ({}{more})",
                value_text(value),
                names.join(", ")
            )
        })
        .collect();
    format!("{}: {}", d.key, parts.join(", "))
}

fn summary(drift: &[Drift], scope: &Scope) -> String {
    let relevant = drift.iter().filter(|d| d.relevant()).count();
    format!(
        "{} {} across {} ({relevant} known to matter for performance); compared the \
         latest saved snapshot of {} and check of {}",
        plural(drift.len() as u64, "setting"),
        if drift.len() == 1 {
            "differs"
        } else {
            "differ"
        },
        plural(scope.hosts as u64, "host"),
        plural(scope.snapshots as u64, "host"),
        scope.checks
    )
}

/// The summary, the relevant differences with why they matter, then (up to 50 unless `all`)
/// the rest. `markdown`: as a Markdown list.
pub fn write_text(
    drift: &[Drift],
    scope: &Scope,
    all: bool,
    markdown: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let item = |text: &str| {
        if markdown {
            format!("- {}", markdown_escape(text))
        } else {
            Escaped(text).to_string()
        }
    };
    writeln!(out, "{}", item(&summary(drift, scope)))?;
    let (relevant, others): (Vec<&Drift>, Vec<&Drift>) = drift.iter().partition(|d| d.relevant());
    let mut said = None;
    for d in &relevant {
        writeln!(out, "{}", item(&line(d)))?;
        // Said once for a run of settings with the same reason (the check verdicts).
        if let Some(why) = d.explanation.filter(|w| said != Some(*w)) {
            writeln!(
                out,
                "  {}",
                if markdown {
                    markdown_escape(why)
                } else {
                    why.into()
                }
            )?;
            said = Some(why);
        }
    }
    if others.is_empty() {
        return Ok(());
    }
    let shown = if all {
        others.len()
    } else {
        others.len().min(OTHERS_SHOWN)
    };
    writeln!(out)?;
    if shown < others.len() {
        writeln!(
            out,
            "Other differences (first {shown} of {}; --all lists every one):",
            others.len()
        )?;
    } else {
        writeln!(out, "Other differences:")?;
    }
    for d in &others[..shown] {
        writeln!(out, "{}", item(&line(d)))?;
    }
    Ok(())
}

/// One `tacho.drift.v1` document with every difference.
pub fn write_json(drift: &[Drift], scope: &Scope, out: &mut impl Write) -> io::Result<()> {
    let doc = json!({
        "schema": "tacho.drift.v1",
        "hosts": scope.hosts,
        "snapshots": scope.snapshots,
        "checks": scope.checks,
        "settings": drift.iter().map(|d| json!({
            "key": d.key,
            "relevant": d.relevant(),
            "explanation": d.explanation,
            "values": d.groups.iter().map(|(v, hosts)| json!({
                "value": v, "hosts": hosts, "count": hosts.len(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// CSV, one line per setting and host: `key,relevant,host,value`; keys, hosts and values
/// (from the runs) written as spreadsheet text.
pub fn write_csv(drift: &[Drift], out: &mut impl Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let fail = |e: csv::Error| io::Error::other(e.to_string());
    w.write_record(["key", "relevant", "host", "value"])
        .map_err(fail)?;
    for d in drift {
        let relevant = if d.relevant() { "yes" } else { "no" };
        for (value, hosts) in &d.groups {
            for host in hosts {
                w.write_record([
                    spreadsheet_text(&d.key).as_str(),
                    relevant,
                    &spreadsheet_text(host),
                    &spreadsheet_text(value.as_deref().unwrap_or("")),
                ])
                .map_err(fail)?;
            }
        }
    }
    w.flush()
}

/// A self-contained page: a row per setting, the minority values highlighted.
pub fn write_html(
    drift: &[Drift],
    scope: &Scope,
    title: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}}\
         .minority{{background:#f8c4c4;font-weight:bold}}.why{{color:#555}}</style></head>\
         <body><h1>{}</h1><p>{}</p><table><tr><th>setting</th><th>values</th></tr>",
        esc(title),
        esc(title),
        esc(&summary(drift, scope))
    )?;
    for d in drift {
        write!(out, "<tr><td>{}", esc(&d.key))?;
        if let Some(why) = d.explanation {
            write!(out, "<div class=\"why\">{}</div>", esc(why))?;
        }
        write!(out, "</td><td>")?;
        let last = d.groups.len().saturating_sub(1);
        for (i, (value, hosts)) in d.groups.iter().enumerate() {
            let class = if i < last { " class=\"minority\"" } else { "" };
            write!(
                out,
                "<div{class}>{} on {}: {}</div>",
                esc(value_text(value)),
                hosts.len(),
                esc(&hosts.join(", "))
            )?;
        }
        writeln!(out, "</td></tr>")?;
    }
    writeln!(out, "</table></body></html>")
}
