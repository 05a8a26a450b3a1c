//! A self-contained HTML report of one run or a comparison: inline CSS and inline SVG charts,
//! no scripts, fonts, images or links, so it opens anywhere (mail attachment, air-gapped
//! machine) and cannot phone home. Every piece of text from a run is escaped.

use crate::compare::{Comparison, Metric, Row, Significance};
use crate::units::format_latency_ns;
use std::fmt::Write as _;
use std::io::{self, Write};

/// One color per run column (colour-blind-safe Okabe–Ito palette).
const COLORS: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// Narrow screens: tables may not be wider than the page (long values wrap anywhere, and a
/// table with many runs scrolls inside its own box); charts scale to the width (viewBox).
const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1000px;
color:#222;padding:0 1em;overflow-wrap:break-word}
.wide{overflow-x:auto;max-width:100%}
svg.chart{display:block;width:100%;height:auto}
.legend{display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:.85em;margin:.2em 0 1em}
table.fp{width:100%;table-layout:fixed}table.fp td{overflow-wrap:anywhere}table.fp col.key{width:9em}
@media (max-width:600px){table.fp col.key{width:6.5em}
table.runs,table.runs tbody,table.runs tr,table.runs td{display:block}table.runs tr.head{display:none}
table.runs tr{margin-bottom:.6em}table.runs td{border-width:0 1px 1px}table.runs td:first-child{border-top-width:1px}
table.runs td::before{content:attr(data-label);display:inline-block;min-width:6em;color:#777}}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin-bottom:.3em}
.verdict{font-size:1.1em;font-weight:600;padding:.6em;background:#f3f6fa;border-left:4px solid #0072B2}
.warning{color:#8a4b00}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top;
overflow-wrap:break-word}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.differs td{background:#fff4d6}
.worse{color:#b00020;font-weight:600}.better{color:#00703c;font-weight:600}.muted{color:#777}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:middle}
svg text{font-family:system-ui,sans-serif;font-size:12px;fill:#222}
";

/// At most this many tests are drawn: the page is built in memory (and written whole, through
/// a temporary file), about 4.6 KB a test of two runs, so 10,000 tests make a page of ~50 MB
/// (more than a browser shows usefully), and 200,000 would make ~1 GB.
const DRAWN_TESTS: usize = 10_000;

/// The whole page.
pub fn write(
    c: &Comparison,
    title: &str,
    run_warnings: &[String],
    out: &mut impl Write,
) -> io::Result<()> {
    write_at_most(c, title, run_warnings, DRAWN_TESTS, out)
}

/// The page, drawing at most `most` tests (a warning says when there were more).
pub(crate) fn write_at_most(
    c: &Comparison,
    title: &str,
    run_warnings: &[String],
    most: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(title)
    );
    let _ = writeln!(h, "<h1>{}</h1>", esc(title));
    let _ = writeln!(h, "<p class=\"verdict\">{}</p>", esc(&c.verdict()));
    // A comparison names the run each warning belongs to; one run's are its own.
    let per_run: Vec<String> = if c.runs.len() > 1 {
        c.run_warnings()
    } else {
        Vec::new()
    };
    let drawn = c.tests.len().min(most);
    let undrawn = (drawn < c.tests.len()).then(|| {
        format!(
            "this page draws the first {drawn} of {} tests; --csv and --json have every figure",
            c.tests.len()
        )
    });
    let warnings: Vec<&String> = c
        .warnings
        .iter()
        .chain(run_warnings)
        .chain(&per_run)
        .chain(&undrawn)
        .collect();
    if !warnings.is_empty() {
        h.push_str("<ul>\n");
        for w in warnings {
            let _ = writeln!(h, "<li class=\"warning\">{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }
    runs_table(&mut h, c);
    h.push_str("<h2>Tests</h2>\n");
    // A group (a test's rows of one direction) at a time: the rows are made as they are
    // drawn, and only the page is held (see [`DRAWN_TESTS`]).
    let mut group: Option<(String, Vec<Row>)> = None;
    for row in (0..drawn).flat_map(|t| c.test_rows(t)) {
        let title = c.row_title(&row);
        match &mut group {
            Some((t, rows)) if *t == title => rows.push(row),
            _ => {
                if let Some((t, rows)) = group.replace((title, vec![row])) {
                    test_section(&mut h, c, &t, &rows.iter().collect::<Vec<_>>());
                }
            }
        }
    }
    if let Some((t, rows)) = group {
        test_section(&mut h, c, &t, &rows.iter().collect::<Vec<_>>());
    }
    fingerprint_table(&mut h, c);
    h.push_str(
        "<p class=\"muted\">Significance: Welch's t-test over each test's repeats, p &lt; 0.05. \
         Generated by tacho.</p>\n</body></html>\n",
    );
    out.write_all(h.as_bytes())
}

fn runs_table(h: &mut String, c: &Comparison) {
    let judged = c.runs.iter().any(|r| r.judgement.is_some());
    h.push_str("<h2>Runs</h2>\n<div class=\"wide\"><table class=\"runs\"><tr class=\"head\">");
    let mut columns = vec![
        "run", "label", "date", "source", "suite", "target", "status",
    ];
    if judged {
        columns.push("judgement");
    }
    for name in &columns {
        let _ = write!(h, "<th>{name}</th>");
    }
    h.push_str("</tr>\n");
    for (i, r) in c.runs.iter().enumerate() {
        let _ = write!(
            h,
            "<tr><td data-label=\"run\"><span class=\"swatch\" style=\"background:{}\"></span>\
             #{}{}</td>",
            color(i),
            r.id,
            if i == 0 && c.runs.len() > 1 {
                " (baseline)"
            } else {
                ""
            },
        );
        let mut values = vec![
            r.label.clone().unwrap_or_default(),
            r.created_at.clone(),
            format!(
                "{} {}",
                r.source_text(),
                r.tool_version.as_deref().unwrap_or("")
            ),
            r.suite_text().unwrap_or_default(),
            r.target.clone().unwrap_or_default(),
            r.status.to_string(),
        ];
        if judged {
            values.push(r.judgement.as_ref().map_or(String::new(), |j| j.describe()));
        }
        // On narrow screens each run becomes a card whose lines name their column.
        for (name, value) in columns[1..].iter().zip(&values) {
            let _ = write!(h, "<td data-label=\"{name}\">{}</td>", esc(value));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
}

fn color(run: usize) -> &'static str {
    COLORS[run % COLORS.len()]
}

/// The key to a chart's colours: one swatch and name per run.
fn legend(h: &mut String, c: &Comparison) {
    h.push_str("<div class=\"legend\">");
    for (i, r) in c.runs.iter().enumerate() {
        let _ = write!(
            h,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            color(i),
            esc(&r.name())
        );
    }
    h.push_str("</div>\n");
}

fn test_section(h: &mut String, c: &Comparison, title: &str, rows: &[&Row]) {
    let _ = writeln!(h, "<h3>{}</h3>", esc(title));
    if let Some(row) = rows
        .iter()
        .find(|r| r.headline && r.metric.higher_is_better())
    {
        bar_chart(h, c, row);
    }
    match rows.iter().find(|r| r.direction == "wall") {
        // A timed command's runs: their spread is the result, not percentiles of one run.
        Some(_) => {
            if let Some(times) = rows.iter().find(|r| r.metric == Metric::LatMean) {
                times_chart(h, c, times);
            }
        }
        None => latency_chart(h, c, rows),
    }
    if let Some(first) = rows.first() {
        per_second_chart(h, c, first.test);
    }
    // Every figure, one column per run.
    h.push_str("<div class=\"wide\"><table><tr><th>figure</th>");
    for r in &c.runs {
        let _ = write!(h, "<th>{}</th>", esc(&r.column()));
    }
    h.push_str("</tr>\n");
    if let Some(first) = rows.first().filter(|r| r.direction == "sync") {
        h.push_str("<tr><td>flushes</td>");
        for n in &c.tests[first.test].sync_counts {
            let _ = write!(
                h,
                "<td class=\"num\">{}</td>",
                n.map_or("-".to_string(), |n| n.to_string())
            );
        }
        h.push_str("</tr>\n");
    }
    for row in rows {
        let _ = write!(h, "<tr><td>{}</td>", esc(row.metric_label()));
        for cell in &row.cells {
            match cell {
                None => h.push_str("<td class=\"num muted\">-</td>"),
                Some(cell) => {
                    let _ = write!(
                        h,
                        "<td class=\"num\">{}",
                        esc(&row.metric.format(cell.value))
                    );
                    if let Some(ch) = cell.change_pct {
                        let class = match cell.significance {
                            Significance::Worse { .. } => "worse",
                            Significance::Better { .. } => "better",
                            _ => "muted",
                        };
                        let _ = write!(
                            h,
                            " <span class=\"{class}\">{ch:+.1}%</span><br><span class=\"muted\">{}</span>",
                            esc(&cell.significance.describe())
                        );
                    }
                    h.push_str("</td>");
                }
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
}

/// Points a per-second line holds at most: a longer test is averaged into this many.
const PER_SECOND_POINTS: usize = 1200;

/// A sustained test's bandwidth second by second, a line per run, with each run's cliff
/// marked (a dashed line where the rate fell, its mean before and after) and said in words
/// below. Drawn for tests that recorded a cliff, and for every test of a sustained run.
fn per_second_chart(h: &mut String, c: &Comparison, test: usize) {
    let Some(info) = c.tests.get(test) else {
        return;
    };
    let sustained = |run: usize| {
        c.runs
            .get(run)
            .and_then(|r| r.suite.as_ref())
            .is_some_and(|(name, _)| name == "sustained")
    };
    let lines: Vec<(usize, &crate::compare::PerSecond)> = info
        .per_second
        .iter()
        .enumerate()
        .filter_map(|(run, p)| p.as_ref().map(|p| (run, p)))
        .filter(|(run, p)| p.cliff.is_some() || sustained(*run))
        .collect();
    let seconds = lines
        .iter()
        .map(|(_, p)| p.bytes_per_s.len())
        .max()
        .unwrap_or(0);
    let top_rate = lines
        .iter()
        .flat_map(|(_, p)| p.bytes_per_s.iter().flatten())
        .copied()
        .fold(0.0, f64::max);
    if seconds < 2 || top_rate <= 0.0 {
        return;
    }
    let (left, top, w, ht) = (84.0, 24.0, 640.0, 180.0);
    let (width, height) = (left + w + 20.0, top + ht + 40.0);
    let x = |t: f64| left + w * t / seconds as f64;
    let y = |v: f64| top + ht * (1.0 - v / top_rate);
    let _ = writeln!(
        h,
        "<svg class=\"chart per-second\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"bandwidth per second\">"
    );
    let _ = writeln!(
        h,
        "<text x=\"0\" y=\"14\" font-weight=\"600\">bandwidth per second (first repeat)</text>"
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = top_rate * frac;
        let _ = writeln!(
            h,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + w,
            left - 6.0,
            y(v) + 4.0,
            esc(&crate::units::format_bandwidth(v)),
            y = y(v)
        );
    }
    for t in [0, seconds / 2, seconds] {
        let _ = writeln!(
            h,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t} s</text>",
            x(t as f64),
            top + ht + 18.0
        );
    }
    for (run, p) in &lines {
        let color = color(*run);
        let every = p.bytes_per_s.len().div_ceil(PER_SECOND_POINTS).max(1);
        let points: Vec<String> = p
            .bytes_per_s
            .chunks(every)
            .enumerate()
            .filter_map(|(i, chunk)| {
                let known: Vec<f64> = chunk.iter().flatten().copied().collect();
                (!known.is_empty()).then(|| {
                    let mean = known.iter().sum::<f64>() / known.len() as f64;
                    // The value covers the second that ends at its index + 1.
                    let t = (i * every + chunk.len()) as f64;
                    format!("{:.1},{:.1}", x(t), y(mean))
                })
            })
            .collect();
        let _ = writeln!(
            h,
            "<polyline class=\"rate\" data-run=\"{run}\" fill=\"none\" stroke=\"{color}\" \
             stroke-width=\"1.5\" points=\"{}\"/>",
            points.join(" ")
        );
        if let Some(cl) = &p.cliff {
            let at = x(cl.at_s.clamp(0.0, seconds as f64));
            let _ = writeln!(
                h,
                "<line class=\"cliff\" data-run=\"{run}\" data-at-s=\"{:.1}\" x1=\"{at:.1}\" \
                 x2=\"{at:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"{color}\" \
                 stroke-dasharray=\"5 3\"/>\
                 <line x1=\"{left}\" x2=\"{at:.1}\" y1=\"{b:.1}\" y2=\"{b:.1}\" \
                 stroke=\"{color}\" stroke-dasharray=\"2 3\"/>\
                 <line x1=\"{at:.1}\" x2=\"{:.1}\" y1=\"{a:.1}\" y2=\"{a:.1}\" \
                 stroke=\"{color}\" stroke-dasharray=\"2 3\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\">cliff</text>",
                cl.at_s,
                top + ht,
                left + w,
                at + 4.0,
                top + 12.0,
                b = y(cl.before_bytes_per_s.min(top_rate)),
                a = y(cl.after_bytes_per_s.min(top_rate)),
            );
        }
    }
    h.push_str("</svg>\n<ul class=\"cliffs\">\n");
    for (run, p) in &lines {
        let said = match &p.cliff {
            Some(cl) => format!(
                "cliff after {:.0} s: {} for the first {}, then {} ({:.0}%)",
                cl.at_s,
                crate::units::format_bandwidth(cl.before_bytes_per_s),
                crate::units::format_bytes_approx(cl.bytes_before),
                crate::units::format_bandwidth(cl.after_bytes_per_s),
                cl.after_pct
            ),
            None => "no cliff: the rate did not fall".into(),
        };
        let _ = writeln!(
            h,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}: {}</li>",
            color(*run),
            esc(&c.runs[*run].column()),
            esc(&said)
        );
    }
    h.push_str("</ul>\n");
}

/// Horizontal bars, one per run, of the test's throughput figure.
fn bar_chart(h: &mut String, c: &Comparison, row: &Row) {
    let max = row
        .cells
        .iter()
        .flatten()
        .map(|c| c.value)
        .fold(0.0, f64::max);
    if max <= 0.0 {
        return;
    }
    let (label_w, bar_w, bar_h, gap) = (150.0, 300.0, 22.0, 6.0);
    let height = (bar_h + gap) * row.cells.len() as f64 + 24.0;
    let width = label_w + bar_w + 150.0;
    let _ = writeln!(
        h,
        "<svg class=\"chart bars\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"{} per run\">",
        esc(row.metric_label())
    );
    let _ = writeln!(
        h,
        "<text x=\"0\" y=\"14\" font-weight=\"600\">{}</text>",
        esc(row.metric_label())
    );
    for (i, (cell, run)) in row.cells.iter().zip(&c.runs).enumerate() {
        let y = 22.0 + i as f64 * (bar_h + gap);
        let _ = writeln!(
            h,
            "<text x=\"0\" y=\"{:.0}\">#{} {}</text>",
            y + 15.0,
            run.id,
            esc(&truncate(&run.title, 18))
        );
        let Some(cell) = cell else { continue };
        let w = (cell.value / max * bar_w).max(1.0);
        let mut note = row.metric.format(cell.value);
        if let Some(ch) = cell.change_pct {
            let _ = write!(note, " ({ch:+.1}%)");
        }
        let _ = writeln!(
            h,
            "<rect class=\"series\" x=\"{label_w}\" y=\"{y:.0}\" width=\"{w:.1}\" \
             height=\"{bar_h}\" fill=\"{}\">\
             <title>{}</title></rect><text x=\"{:.1}\" y=\"{:.0}\">{}</text>",
            color(i),
            esc(&cell.significance.describe()),
            label_w + w + 6.0,
            y + 15.0,
            esc(&note)
        );
    }
    h.push_str("</svg>\n");
    legend(h, c);
}

/// Latency percentiles (p50 … p99.99) on a logarithmic axis, one line per run.
fn latency_chart(h: &mut String, c: &Comparison, rows: &[&Row]) {
    let series: Vec<Vec<Option<f64>>> = (0..c.runs.len())
        .map(|run| {
            Metric::PERCENTILES
                .iter()
                .map(|(m, _)| {
                    rows.iter()
                        .find(|r| r.metric == *m)
                        .and_then(|r| r.cells[run].as_ref())
                        .map(|c| c.value)
                        .filter(|v| *v > 0.0)
                })
                .collect()
        })
        .collect();
    let values: Vec<f64> = series.iter().flatten().flatten().copied().collect();
    if values.is_empty() {
        return;
    }
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = values
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let (left, top, w, ht) = (64.0, 24.0, 400.0, 160.0);
    let x = |i: usize| left + w * i as f64 / (Metric::PERCENTILES.len() - 1) as f64;
    let y = |v: f64| top + ht * (1.0 - (v.log10() - lo) / (hi - lo));
    let (width, height) = (left + w + 40.0, top + ht + 40.0);
    let flush = rows.iter().any(|r| r.direction == "sync");
    let what = if flush { "flush latency" } else { "latency" };
    let _ = writeln!(
        h,
        "<svg class=\"chart latency\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"{what} percentiles\">"
    );
    let _ = writeln!(
        h,
        "<text x=\"0\" y=\"14\" font-weight=\"600\">{what} percentiles (log scale)</text>"
    );
    let mut decade = lo;
    while decade <= hi {
        let v = 10f64.powf(decade);
        let _ = writeln!(
            h,
            "<line x1=\"{left}\" x2=\"{:.0}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + w,
            y(v),
            y(v),
            left - 6.0,
            y(v) + 4.0,
            esc(&format_latency_ns(v))
        );
        decade += 1.0;
    }
    for (i, (_, name)) in Metric::PERCENTILES.iter().enumerate() {
        let _ = writeln!(
            h,
            "<text x=\"{:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{name}</text>",
            x(i),
            top + ht + 20.0
        );
    }
    for (run, points) in series.iter().enumerate() {
        let color = COLORS[run % COLORS.len()];
        let coords: Vec<String> = points
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        if coords.is_empty() {
            continue;
        }
        let _ = writeln!(
            h,
            "<polyline class=\"series\" points=\"{}\" fill=\"none\" stroke=\"{color}\" \
             stroke-width=\"2\"/>",
            coords.join(" ")
        );
        for (i, v) in points.iter().enumerate() {
            if let Some(v) = v {
                let _ = writeln!(
                    h,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\">\
                     <title>#{} {}: {}</title></circle>",
                    x(i),
                    y(*v),
                    c.runs[run].id,
                    Metric::PERCENTILES[i].1,
                    esc(&format_latency_ns(*v))
                );
            }
        }
    }
    h.push_str("</svg>\n");
    legend(h, c);
}

/// A timed command's run times, one lane per run: a dot per run of the command and a bar at
/// the median, on a linear axis from zero, so spread and overlap show at a glance.
fn times_chart(h: &mut String, c: &Comparison, row: &Row) {
    let max = row
        .cells
        .iter()
        .flatten()
        .flat_map(|c| c.samples.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if max <= 0.0 {
        return;
    }
    let (left, top, w, lane) = (40.0, 24.0, 380.0, 34.0);
    let lanes = row.cells.len() as f64;
    let (width, height) = (left + w + 40.0, top + lane * lanes + 40.0);
    let x = |v: f64| left + w * v / max;
    let _ = writeln!(
        h,
        "<svg class=\"chart times\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         style=\"max-width:{width:.0}px\" role=\"img\" aria-label=\"run times\">\n\
         <text x=\"0\" y=\"14\" font-weight=\"600\">time of each run</text>"
    );
    let axis_y = top + lane * lanes + 6.0;
    for tick in 0..=4 {
        let v = max * f64::from(tick) / 4.0;
        let _ = writeln!(
            h,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top}\" y2=\"{axis_y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\">{2}</text>",
            x(v),
            axis_y + 16.0,
            esc(&format_latency_ns(v))
        );
    }
    for (i, (cell, run)) in row.cells.iter().zip(&c.runs).enumerate() {
        let Some(cell) = cell else { continue };
        let y = top + lane * (i as f64 + 0.5);
        let _ = writeln!(
            h,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">#{}</text>",
            left - 6.0,
            y + 4.0,
            run.id
        );
        for (n, v) in cell.samples.iter().enumerate() {
            let _ = writeln!(
                h,
                "<circle class=\"series\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{}\" \
                 fill-opacity=\"0.6\"><title>#{} run {}: {}</title></circle>",
                x(*v),
                color(i),
                run.id,
                n + 1,
                esc(&format_latency_ns(*v))
            );
        }
        if let Some(median) = crate::stats::median(&cell.samples) {
            let _ = writeln!(
                h,
                "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{3}\" \
                 stroke-width=\"3\"><title>median {4}</title></line>",
                x(median),
                y - 10.0,
                y + 10.0,
                color(i),
                esc(&format_latency_ns(median))
            );
        }
    }
    h.push_str("</svg>\n");
    legend(h, c);
}

fn fingerprint_table(h: &mut String, c: &Comparison) {
    h.push_str(
        "<h2>Machine and method</h2>\n<table class=\"fp\"><colgroup><col class=\"key\">\
         </colgroup><tr><th>setting</th>",
    );
    for r in &c.runs {
        let _ = write!(h, "<th>{}</th>", esc(&r.column()));
    }
    h.push_str("</tr>\n");
    for row in &c.fingerprint {
        let class = if row.differs() {
            " class=\"differs\""
        } else {
            ""
        };
        let _ = write!(h, "<tr{class}><td>{}</td>", esc(row.key));
        for v in &row.values {
            match v {
                Some(v) => {
                    let _ = write!(h, "<td>{}</td>", esc(v));
                }
                None => h.push_str("<td class=\"muted\">not recorded</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// Escapes text for HTML element content and quoted attribute values alike.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Inert in a browser, but not for whoever `cat`s the file: shown escaped. A
            // bidirectional override is not inert in a browser either: it reorders the page.
            c if crate::text::needs_escape(c) => out.push_str(&crate::text::escape(&c.to_string())),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_could_open_markup() {
        assert_eq!(
            esc("<script>alert('x\"y')</script>&"),
            "&lt;script&gt;alert(&#39;x&quot;y&#39;)&lt;/script&gt;&amp;"
        );
        assert_eq!(esc("rtl\u{202e}txt"), "rtl\\u{202e}txt");
        assert_eq!(esc("a\u{1b}[2J\n"), r"a\e[2J\n");
    }

    #[test]
    fn truncates_on_characters() {
        assert_eq!(truncate("äöüäöü", 4), "äöü…");
        assert_eq!(truncate("short", 26), "short");
    }
}
