//! The terminal report: verdict, table, target, warnings.

use crate::bench::result::{BenchReport, DirResult, TestResult, Warning};
use crate::bench::verdict::verdict;
use crate::io::LatencySummary;
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_bytes_approx, format_count, format_latency_ns};
use crate::warning::Code;
use std::io::{self, Write};

/// The figure columns and their priority on a narrow terminal (0 kept longest): IOPS,
/// bandwidth and p99 say what the disk does, the others refine it.
const HEADER: [(&str, u8); 8] = [
    ("IOPS", 0),
    ("bandwidth", 1),
    ("mean", 4),
    ("p50", 2),
    ("p99", 1),
    ("p99.9", 3),
    ("max", 5),
    ("spread", 3),
];

/// Each figure column's width, two spaces apart.
const CELL: usize = 10;

/// Writes the disk report for a terminal: verdict, a table of the tests, the target and the
/// warnings; the table leaves out its least important columns to fit `width` (a terminal's).
pub fn write(report: &BenchReport, out: &mut impl Write, width: Option<usize>) -> io::Result<()> {
    writeln!(out, "{}", Escaped(&verdict(report)))?;
    // Reasons to doubt the figures come right under the verdict, before anyone reads the table.
    // The run's and the tests' together, what makes a figure wrong first.
    let mut lines: Vec<(Code, String)> = report
        .warnings
        .iter()
        .map(|w| (w.code, w.message.clone()))
        .chain(test_warnings(report))
        .collect();
    lines.sort_by_key(|(code, _)| crate::bench::honesty::weight(*code));
    for (code, message) in lines {
        writeln!(out, "warning [{code}]: {}", Escaped(&message))?;
    }
    if let Some(probe) = report.host_cache.as_ref().filter(|p| !p.seen()) {
        writeln!(out, "host-cache probe: {}", Escaped(&probe.summary))?;
    }
    if let Some(p) = &report.precondition {
        writeln!(out, "{}", p.summary())?;
    }
    if let Some(like) = &report.like {
        write_like(like, out)?;
    }
    writeln!(out)?;
    let rows: Vec<Row> = report.tests.iter().flat_map(rows_of).collect();
    let name_width = rows
        .iter()
        .map(|r| Escaped(&r.label).to_string().chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let sizes: Vec<(usize, u8)> = std::iter::once((name_width, 0))
        .chain(HEADER.iter().map(|&(_, p)| (CELL, p)))
        .collect();
    let shown = crate::fit::choose(&sizes, 2, width.unwrap_or(usize::MAX));
    write!(out, "{:<name_width$}", "test")?;
    for (i, (h, _)) in HEADER.iter().enumerate() {
        if shown.contains(&(i + 1)) {
            write!(out, "  {h:>CELL$}")?;
        }
    }
    writeln!(out)?;
    for row in &rows {
        write!(out, "{:<name_width$}", Escaped(&row.label))?;
        for (i, cell) in row.cells.iter().enumerate() {
            if shown.contains(&(i + 1)) {
                write!(out, "  {cell:>CELL$}")?;
            }
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    write_pooling(report, out)?;
    write_row_meanings(report, out)?;
    write_curve(report, out)?;
    write_sustained(report, out)?;
    write_target(report, out)
}

/// `--like-pid`: whether the target held the rates the watched process needed, file by file,
/// with the flushes' latency here against the process's own.
fn write_like(like: &crate::bench::result::Like, out: &mut impl Write) -> io::Result<()> {
    let comms: Vec<String> = like.comms.iter().map(|c| Escaped(c).to_string()).collect();
    let all = like
        .files
        .iter()
        .map(|f| f.holds)
        .collect::<Option<Vec<bool>>>();
    let least = like
        .files
        .iter()
        .filter_map(|f| f.headroom)
        .min_by(f64::total_cmp);
    let verdict = match (all, least) {
        (Some(all), Some(h)) if all.iter().all(|&b| b) => {
            format!("this target holds its pattern ({h:.1}x the rates it needed)")
        }
        (Some(_), Some(h)) => format!(
            "this target does NOT hold its pattern (it reached {:.0}% of a rate it needed)",
            100.0 * h
        ),
        _ => "not every job finished, so whether this target holds it is not known".into(),
    };
    writeln!(
        out,
        "like process {} ({}), watched {:.1} s: {verdict}",
        like.pid,
        comms.join(", "),
        like.watched_s
    )?;
    let rates = |r: &crate::bench::result::Rates| {
        let mut parts = Vec::new();
        if r.write_bytes_per_s > 0.0 {
            parts.push(format!("{} written", format_bandwidth(r.write_bytes_per_s)));
        }
        if r.read_bytes_per_s > 0.0 {
            parts.push(format!("{} read", format_bandwidth(r.read_bytes_per_s)));
        }
        if r.syncs_per_s > 0.0 {
            parts.push(format!("{} flushes/s", format_count(r.syncs_per_s)));
        }
        parts.join(", ")
    };
    for f in &like.files {
        let path = f
            .path
            .as_deref()
            .map_or("(path not seen)".to_string(), |p| Escaped(p).to_string());
        let here = match (&f.achieved, f.headroom) {
            (Some(a), Some(h)) => format!("; here {}: {h:.1}x", rates(a)),
            _ => "; here: the test did not finish".into(),
        };
        writeln!(
            out,
            "  {} {path}: needed {}{here}",
            Escaped(&f.test),
            rates(&f.needed)
        )?;
        if let Some(mean) = f.process_sync_mean_ns {
            let p99 = f
                .process_sync_p99_ns
                .map_or(String::new(), |p| format!(", p99 {}", format_latency_ns(p)));
            let here = f.sync_lat_ns.map_or(String::new(), |l| {
                format!(
                    "; here p50 {}, p99 {}",
                    format_latency_ns(l.p50 as f64),
                    format_latency_ns(l.p99 as f64)
                )
            });
            writeln!(
                out,
                "    flush latency: the process's mean {}{p99}{here}",
                format_latency_ns(mean)
            )?;
        }
    }
    Ok(())
}

/// Which data a row's figures come from, once repeats were run: all of them pooled, so no
/// reader takes IOPS for one repeat's and latency for another's.
fn write_pooling(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let mut counts: Vec<usize> = report.tests.iter().map(|t| t.pooled_repeats).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [n] if *n > 1 => writeln!(
            out,
            "figures pool all {n} repeats (IOPS and bandwidth over their time together, \
             latencies over every I/O); spread: how far the repeats' IOPS differ"
        ),
        [_, .., max] if *max > 1 => writeln!(
            out,
            "figures pool all of each test's repeats (IOPS and bandwidth over their time \
             together, latencies over every I/O); spread: how far the repeats' IOPS differ"
        ),
        _ => Ok(()),
    }
}

/// What each row measures, for suites that say (dd's rows differ by what they wait for).
fn write_row_meanings(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let Some(suite) = report
        .suite
        .as_ref()
        .and_then(|s| crate::bench::suite::find(&s.name).ok())
    else {
        return Ok(());
    };
    let meanings: Vec<_> = suite
        .tests
        .iter()
        .filter_map(|t| t.about.map(|a| (&t.name, a)))
        .collect();
    if meanings.is_empty() {
        return Ok(());
    }
    writeln!(out, "what each row measures:")?;
    for (name, about) in meanings {
        writeln!(out, "  {name}: {about}")?;
    }
    writeln!(out)
}

/// Where each test of a sustained run fell off a cliff (or that it did not), with its
/// bandwidth second by second as a strip of bars.
fn write_sustained(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let sustained = report.suite.as_ref().is_some_and(|s| s.name == "sustained");
    if !sustained && report.tests.iter().all(|t| t.cliff.is_none()) {
        return Ok(());
    }
    for t in &report.tests {
        let rates = t.first_repeat_bytes_per_s();
        match &t.cliff {
            Some(c) => writeln!(out, "{}: {}", t.name, c.summary())?,
            None => {
                let written: u64 = t.write.map_or(0, |w| w.bytes);
                writeln!(
                    out,
                    "{}: no cliff: {} over {} written",
                    t.name,
                    format_bandwidth(t.total_bw()),
                    format_bytes_approx(written)
                )?
            }
        }
        if !rates.is_empty() {
            writeln!(out, "  per second: {}", bars(&rates, 60))?;
        }
    }
    writeln!(out)
}

/// Values as a strip of at most `width` bars (eighths of the largest), neighbours averaged.
fn bars(values: &[f64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let per = values.len().div_ceil(width.max(1));
    let cells: Vec<f64> = values
        .chunks(per)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    let top = cells.iter().copied().fold(0.0, f64::max);
    cells
        .iter()
        .map(|v| {
            let level = if top > 0.0 {
                (v / top * 7.0).floor()
            } else {
                0.0
            };
            BARS[(level.max(0.0) as usize).min(7)]
        })
        .collect()
}

/// The `full` suite's queue-depth sweep as a latency-versus-IOPS curve: where IOPS stop
/// growing and latency starts to, the device is saturated.
fn write_curve(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let sweep: Vec<&TestResult> = report
        .tests
        .iter()
        .filter(|t| t.name.starts_with("sweep "))
        .collect();
    if sweep.is_empty() {
        return Ok(());
    }
    writeln!(out, "latency vs IOPS (4 KiB random):")?;
    writeln!(
        out,
        "{:>6}  {:>10} {:>10} {:>10}  {:>10} {:>10} {:>10}",
        "QD", "read IOPS", "p50", "p99", "write IOPS", "p50", "p99"
    )?;
    let mut depths: Vec<u32> = sweep.iter().map(|t| t.iodepth).collect();
    depths.sort_unstable();
    depths.dedup();
    for qd in depths {
        let cells = |pick: fn(&TestResult) -> Option<DirResult>| {
            sweep
                .iter()
                .filter(|t| t.iodepth == qd)
                .find_map(|t| pick(t))
                .map_or(["-".into(), "-".into(), "-".into()], |d| {
                    [
                        format_count(d.iops),
                        format_latency_ns(d.lat_ns.p50 as f64),
                        format_latency_ns(d.lat_ns.p99 as f64),
                    ]
                })
        };
        let [ri, rp50, rp99] = cells(|t| t.read);
        let [wi, wp50, wp99] = cells(|t| t.write);
        writeln!(
            out,
            "{qd:>6}  {ri:>10} {rp50:>10} {rp99:>10}  {wi:>10} {wp50:>10} {wp99:>10}"
        )?;
    }
    for (label, pick) in [
        (
            "reads",
            (|t: &TestResult| t.read) as fn(&TestResult) -> Option<DirResult>,
        ),
        ("writes", |t: &TestResult| t.write),
    ] {
        let points: Vec<(u32, f64)> = sweep
            .iter()
            .filter_map(|t| pick(t).map(|d| (t.iodepth, d.iops)))
            .collect();
        if let Some((qd, iops)) = saturation(&points) {
            writeln!(
                out,
                "{label}: IOPS stop growing past QD{qd} ({}); deeper queues only add latency",
                format_count(iops)
            )?;
        }
    }
    writeln!(out)
}

/// The first queue depth after which doubling the depth gains less than 10% IOPS.
fn saturation(points: &[(u32, f64)]) -> Option<(u32, f64)> {
    points
        .windows(2)
        .find(|w| w[1].1 < w[0].1 * 1.1)
        .map(|w| w[0])
}

/// One line per warning code: the first test's sentence, then the other tests it applies to,
/// so seven noisy tests do not bury the table.
fn test_warnings(report: &BenchReport) -> Vec<(Code, String)> {
    let mut codes: Vec<Code> = Vec::new();
    for w in report.tests.iter().flat_map(|t| &t.warnings) {
        if !codes.contains(&w.code) {
            codes.push(w.code);
        }
    }
    codes
        .into_iter()
        .map(|code| {
            let hits: Vec<(&TestResult, &Warning)> = report
                .tests
                .iter()
                .flat_map(|t| t.warnings.iter().map(move |w| (t, w)))
                .filter(|(_, w)| w.code == code)
                .collect();
            let mut line = hits[0].1.message.clone();
            if hits.len() > 1 {
                let others: Vec<&str> = hits[1..].iter().map(|(t, _)| t.name.as_str()).collect();
                line.push_str(&format!(" (also: {})", others.join(", ")));
            }
            (code, line)
        })
        .collect()
}

struct Row {
    label: String,
    cells: Vec<String>,
}

fn rows_of(t: &TestResult) -> Vec<Row> {
    let mut rows = Vec::new();
    let mixed = t.read.is_some() && t.write.is_some();
    for (dir, d) in [("read", t.read), ("write", t.write)] {
        let Some(d) = d else { continue };
        let label = if mixed {
            format!("{} ({dir})", t.name)
        } else {
            t.name.clone()
        };
        let mut cells = dir_cells(&d);
        cells.push(t.spread_pct.map_or("-".into(), |s| format!("{s:.1}%")));
        rows.push(Row { label, cells });
    }
    if let (Some(sync), Some(every)) = (t.sync, t.sync_every) {
        // Flushes over all repeats, so over the time of all repeats.
        let secs: f64 = t.repeats.iter().map(|r| r.runtime_s).sum();
        let per_s = if secs > 0.0 {
            sync.count as f64 / secs
        } else {
            0.0
        };
        let mut cells = vec![format_count(per_s), "-".into()];
        cells.extend(lat_cells(&sync.lat_ns));
        cells.push("-".into());
        rows.push(Row {
            label: format!("  └ {} ({}/s)", every.kind, "flushes"),
            cells,
        });
    }
    rows
}

fn dir_cells(d: &DirResult) -> Vec<String> {
    let mut cells = vec![format_count(d.iops), format_bandwidth(d.bw_bytes_per_s)];
    cells.extend(lat_cells(&d.lat_ns));
    cells
}

fn lat_cells(l: &LatencySummary) -> Vec<String> {
    [l.mean, l.p50, l.p99, l.p99_9, l.max]
        .iter()
        .map(|&ns| format_latency_ns(ns as f64))
        .collect()
}

fn write_target(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    let t = &report.target;
    let mut line = format!("target: {} ({}", t.path, t.kind.as_str().replace('_', " "));
    if let Some(fs) = &t.filesystem {
        line.push_str(&format!(", {fs}"));
    }
    if !t.devices.is_empty() {
        line.push_str(&format!(" on {}", t.devices.join(" → ")));
    }
    if let Some(model) = &t.device_model {
        line.push_str(&format!(", {model}"));
    }
    if let Some(sched) = &t.scheduler {
        line.push_str(&format!(", scheduler {sched}"));
    }
    line.push_str(&format!(
        "), region {}",
        format_bytes_approx(t.region_bytes)
    ));
    if let Some(first) = report.tests.first() {
        line.push_str(&format!(
            ", {}, {}",
            if first.direct { "O_DIRECT" } else { "buffered" },
            first.engine
        ));
    }
    // The target is a path: escaped like every path printed.
    writeln!(out, "{}", Escaped(&line))
}

#[cfg(test)]
mod tests {
    use super::{bars, saturation};

    #[test]
    fn bars_scale_to_the_largest_and_fit_the_width() {
        assert_eq!(bars(&[8.0, 8.0, 1.0, 1.0], 60), "██▁▁");
        assert_eq!(bars(&[8.0; 120], 60).chars().count(), 60);
        assert_eq!(bars(&[0.0, 0.0], 60), "▁▁");
    }

    #[test]
    fn saturation_is_where_gains_stop() {
        let curve = [(1, 10e3), (2, 19e3), (4, 35e3), (8, 37e3), (16, 38e3)];
        assert_eq!(saturation(&curve), Some((4, 35e3)));
        assert_eq!(saturation(&[(1, 1.0), (2, 2.0)]), None);
    }
}
