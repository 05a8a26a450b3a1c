//! `tacho compare --by host`: the outlier verdicts first, then the hosts' headline figures
//! with the peer median — a row per figure and a column per host, or a row per host when
//! there are many — as text, Markdown, JSON (`tacho.fleet.v1`), CSV or an HTML page.

use super::grid::{Grid, markdown_escape};
use super::html::esc;
use super::sheet::spreadsheet_text;
use crate::compare::Row;
use crate::compare::fleet::{Fleet, Outlier};
use crate::text::{Escaped, SHOWN_CHARS, cut};
use serde_json::json;
use std::io::{self, Write};

/// Up to this many hosts, hosts are columns; beyond, they are rows.
const HOSTS_AS_COLUMNS: usize = 6;
/// Figures shown as columns when hosts are rows (outliers' figures first); the rest are in
/// `--csv` and `--json`.
const FIGURES_AS_COLUMNS: usize = 4;

/// One line per outlier, and the fingerprint entries where it differs from its peers.
pub fn verdicts(f: &Fleet) -> Vec<String> {
    let c = &f.comparison;
    if f.outliers.is_empty() {
        let peers = match f.peers_by.shown() {
            Some(by) => format!("its peers' (by {by})"),
            None => "its peers'".into(),
        };
        return vec![format!(
            "no outlier among {} (each host's figure against {peers} median and MAD)",
            crate::units::plural(f.hosts.len() as u64, "host")
        )];
    }
    let mut out = Vec::new();
    for o in &f.outliers {
        let row = &f.rows[o.row];
        let more = match o.more_rows.len() {
            0 => String::new(),
            1 => "; 1 more figure stands out".into(),
            n => format!("; {n} more figures stand out"),
        };
        let group = match f.groups.get(o.host).cloned().flatten() {
            Some(g) => format!(" ({})", cut(&g, SHOWN_CHARS)),
            None => String::new(),
        };
        // Names from the runs cut as in tables; the JSON's fields keep them whole.
        out.push(format!(
            "{}: {} {} {} against a median of {} over {}{group} ({:.1}× worse){more}",
            cut(&f.hosts[o.host], SHOWN_CHARS),
            cut(&c.row_title(row), SHOWN_CHARS),
            row.metric_label(),
            row.metric.format(o.value),
            row.metric.format(o.peer_median),
            crate::units::plural(o.peers as u64, "peer"),
            o.times_worse,
        ));
        for d in &o.differences {
            out.push(format!(
                "  {}: {} vs {} on {} of {} peers",
                d.key,
                cut(&d.value, SHOWN_CHARS),
                cut(&d.peers_value, SHOWN_CHARS),
                d.peers_with,
                d.peers
            ));
        }
    }
    out
}

/// The verdicts, then the table, for a terminal (`markdown`: as Markdown).
pub fn write_text(f: &Fleet, markdown: bool, out: &mut impl Write) -> io::Result<()> {
    for line in verdicts(f) {
        // Host names come from the runs: in Markdown they could open HTML or links.
        if markdown {
            writeln!(out, "{}", markdown_escape(&line))?;
        } else {
            writeln!(out, "{}", Escaped(&line))?;
        }
    }
    writeln!(out)?;
    let grid = grid(f);
    if markdown {
        grid.write_markdown(out)
    } else {
        grid.write_text(out, None)
    }
}

fn headline(f: &Fleet) -> impl Iterator<Item = (usize, &Row)> {
    f.rows.iter().enumerate().filter(|(_, r)| r.headline)
}

fn cell(row: &Row, host: usize) -> String {
    row.cells
        .get(host)
        .and_then(Option::as_ref)
        .map_or_else(|| "-".into(), |c| row.metric.format(c.value))
}

fn grid(f: &Fleet) -> Grid {
    let c = &f.comparison;
    let flagged = |host: usize, r: usize| {
        f.outliers
            .iter()
            .any(|o| o.host == host && (o.row == r || o.more_rows.contains(&r)))
    };
    let mark = |host: usize, r: usize, text: String| {
        if flagged(host, r) {
            format!("{text} !")
        } else {
            text
        }
    };
    let median = |r: usize| f.medians[r].map_or_else(|| "-".into(), |m| f.rows[r].metric.format(m));
    if f.hosts.len() <= HOSTS_AS_COLUMNS {
        let mut header = vec!["test".to_string(), "figure".to_string()];
        header.extend(f.hosts.iter().cloned());
        header.push("median".into());
        let rows = headline(f)
            .map(|(r, row)| {
                let mut cells = vec![c.row_title(row), row.metric_label().to_string()];
                cells.extend((0..f.hosts.len()).map(|h| mark(h, r, cell(row, h))));
                cells.push(median(r));
                cells
            })
            .collect();
        let mut right = vec![false, false];
        right.extend(std::iter::repeat_n(true, f.hosts.len() + 1));
        return Grid {
            header,
            rows,
            right,
        };
    }
    // Many hosts: a row each, and the figures that matter most as columns.
    let mut shown: Vec<usize> = Vec::new();
    for o in &f.outliers {
        for r in std::iter::once(o.row).chain(o.more_rows.iter().copied()) {
            if !shown.contains(&r) {
                shown.push(r);
            }
        }
    }
    for (r, _) in headline(f) {
        if !shown.contains(&r) {
            shown.push(r);
        }
    }
    shown.truncate(FIGURES_AS_COLUMNS);
    let mut header = vec!["host".to_string()];
    header.extend(
        shown
            .iter()
            .map(|&r| format!("{} {}", c.row_title(&f.rows[r]), f.rows[r].metric_label())),
    );
    let mut rows: Vec<Vec<String>> = (0..f.hosts.len())
        .map(|h| {
            let mut cells = vec![f.hosts[h].clone()];
            cells.extend(shown.iter().map(|&r| mark(h, r, cell(&f.rows[r], h))));
            cells
        })
        .collect();
    let mut last = vec!["median".to_string()];
    last.extend(shown.iter().map(|&r| median(r)));
    rows.push(last);
    let mut right = vec![false];
    right.extend(std::iter::repeat_n(true, shown.len()));
    Grid {
        header,
        rows,
        right,
    }
}

fn outlier_json(f: &Fleet, o: &Outlier) -> serde_json::Value {
    let c = &f.comparison;
    let row = &f.rows[o.row];
    json!({
        "host": f.hosts[o.host],
        "run_id": c.runs[o.host].id,
        "test": c.tests[row.test].name,
        "direction": row.direction,
        "metric": row.metric.key(),
        "value": o.value,
        "peer_median": o.peer_median,
        "peers": o.peers,
        "peer_group": f.groups.get(o.host).cloned().flatten(),
        "times_worse": o.times_worse,
        "more_figures": o.more_rows.len(),
        "differences": o.differences.iter().map(|d| json!({
            "key": d.key, "value": d.value, "peers_value": d.peers_value,
            "peers_with": d.peers_with, "peers": d.peers,
        })).collect::<Vec<_>>(),
        "verdict": verdicts(&Fleet { outliers: vec![o.clone()], ..f.clone() })[0],
    })
}

/// One `tacho.fleet.v1` document: hosts, every figure with its median and each host's value,
/// and the outliers; the figures made into JSON one at a time as they are written.
pub fn write_json(f: &Fleet, out: &mut impl Write) -> io::Result<()> {
    let c = &f.comparison;
    let doc = json!({
        "schema": "tacho.fleet.v1",
        "peers_by": f.peers_by.shown(),
        "hosts": f.hosts.iter().zip(&c.runs).zip(&f.groups).map(|((h, r), g)| json!({
            "host": h, "run_id": r.id, "created_at": r.created_at, "peer_group": g,
        })).collect::<Vec<_>>(),
        "outliers": f.outliers.iter().map(|o| outlier_json(f, o)).collect::<Vec<_>>(),
        "figures": [],
        "warnings": c.warnings,
    });
    let figure = |(r, row): (usize, &Row)| {
        let values: serde_json::Map<String, serde_json::Value> = (0..f.hosts.len())
            .filter_map(|h| {
                let v = row.cells.get(h)?.as_ref()?.value;
                Some((f.hosts[h].clone(), json!(v)))
            })
            .collect();
        json!({
            "test": c.tests[row.test].name,
            "direction": row.direction,
            "metric": row.metric.key(),
            "headline": row.headline,
            "median": f.medians[r],
            "values": values,
        })
    };
    let doc = doc.as_object().expect("an object");
    super::json::write_streaming(doc, "figures", f.rows.iter().enumerate(), figure, out)
}

/// CSV, one line per figure and host: `test,direction,metric,host,value,median,outlier`; test
/// and host names (from the runs) written as spreadsheet text.
pub fn write_csv(f: &Fleet, out: &mut impl Write) -> io::Result<()> {
    let c = &f.comparison;
    let mut w = csv::Writer::from_writer(out);
    let fail = |e: csv::Error| io::Error::other(e.to_string());
    w.write_record([
        "test",
        "direction",
        "metric",
        "host",
        "value",
        "median",
        "outlier",
    ])
    .map_err(fail)?;
    for (r, row) in f.rows.iter().enumerate() {
        for (h, host) in f.hosts.iter().enumerate() {
            let Some(cell) = row.cells.get(h).and_then(Option::as_ref) else {
                continue;
            };
            let outlier = f
                .outliers
                .iter()
                .any(|o| o.host == h && (o.row == r || o.more_rows.contains(&r)));
            w.write_record([
                spreadsheet_text(&c.tests[row.test].name).as_str(),
                row.direction,
                row.metric.key(),
                &spreadsheet_text(host),
                &cell.value.to_string(),
                &f.medians[r].map_or_else(String::new, |m| m.to_string()),
                if outlier { "yes" } else { "no" },
            ])
            .map_err(fail)?;
        }
    }
    w.flush()
}

/// A self-contained page: the verdicts, then the table with outliers' cells highlighted.
pub fn write_html(f: &Fleet, title: &str, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}.outlier{{background:#f8c4c4;\
         font-weight:bold}}.verdict{{color:#a00}}</style></head><body><h1>{}</h1>",
        esc(title),
        esc(title)
    )?;
    writeln!(out, "<ul>")?;
    for line in verdicts(f) {
        let class = if f.outliers.is_empty() {
            ""
        } else {
            " class=\"verdict\""
        };
        writeln!(out, "<li{class}>{}</li>", esc(&line))?;
    }
    writeln!(out, "</ul>")?;
    let grid = grid(f);
    writeln!(out, "<table><tr>")?;
    for h in &grid.header {
        write!(out, "<th>{}</th>", esc(h))?;
    }
    writeln!(out, "</tr>")?;
    for row in &grid.rows {
        write!(out, "<tr>")?;
        for (j, cell) in row.iter().enumerate() {
            // Column 0 holds names from the runs, which could end in the mark themselves.
            match cell.strip_suffix(" !").filter(|_| j > 0) {
                Some(v) => write!(out, "<td class=\"outlier\">{}</td>", esc(v))?,
                None => write!(out, "<td>{}</td>", esc(cell))?,
            }
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</table></body></html>")
}
