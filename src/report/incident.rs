//! The incident report of `tacho top --from T1 --to T2 --html FILE`: one self-contained page
//! (inline CSS, uPlot and tacho's chart script embedded, no request to anywhere) with the
//! findings in the order they fired, charts of the window with the findings marked on their
//! time axis, the top processes and services, the host, and what could not be known.
//! Every text from the system is escaped: in the HTML by [`esc`], in the embedded JSON by
//! [`charts::script_json`] (and the script sets it as text).

use std::fmt::Write as _;
use std::io::{self, Write};

use super::charts::{self, Mark};
use super::html::esc;
use crate::history::summary::Summary;
use crate::history::timeline::{Point, Timeline};
use crate::kernel::host::Host;
use crate::units::format_bytes_approx;

/// Findings listed unfolded at most; a longer list starts folded.
const OPEN_FINDINGS: usize = 12;
/// Culprits named per finding (most often named first).
const CULPRITS: usize = 5;
/// A row's small timeline: width in pixels...
const SPARK_WIDTH: usize = 120;
/// ... height ...
const SPARK_HEIGHT: usize = 22;
/// ... and the most values it draws (a longer window is averaged into this many).
const SPARK_BUCKETS: usize = 120;

/// What the page is made of.
pub struct Incident<'a> {
    /// The window's summary (findings with their culprits, totals, peaks).
    pub summary: &'a Summary,
    /// Its intervals' figures.
    pub timeline: &'a Timeline,
    /// The host's name, for the title.
    pub host_name: String,
    /// The host's settings, each known or not.
    pub fingerprint: Vec<(&'static str, Option<String>)>,
    /// Where they come from.
    pub fingerprint_source: &'static str,
    /// What the source could not know, besides what the window says.
    pub notes: Vec<String>,
    /// Processes listed per table.
    pub top: usize,
}

/// This machine's settings, read now (the local history keeps none).
pub fn fingerprint_of(host: &Host) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("hostname", host.hostname.clone()),
        ("os", host.os.clone()),
        ("kernel", host.kernel.clone()),
        ("cpu", host.cpu_model.clone()),
        ("cpus", host.cpus.map(|n| n.to_string())),
        ("memory", host.mem_total_bytes.map(format_bytes_approx)),
        ("virtualization", host.virtualization.clone()),
    ]
}

/// The whole page.
pub fn write(i: &Incident, out: &mut impl Write) -> io::Result<()> {
    let s = i.summary;
    let title = format!(
        "tacho: {} from {} to {}",
        i.host_name,
        when(s.from_unix_s, true),
        when(s.to_unix_s, true)
    );
    let mut h = charts::page_head(&title);
    let mut spans = s.findings.clone();
    spans.sort_by(|a, b| {
        a.from_unix_s
            .total_cmp(&b.from_unix_s)
            .then(b.severity.cmp(&a.severity))
    });
    match s.findings.first() {
        _ if s.intervals == 0 => h.push_str(
            "<p class=\"verdict warning\">The history holds no interval in this window.</p>\n",
        ),
        None => h.push_str("<p class=\"verdict\">Nothing stood out in this window.</p>\n"),
        Some(worst) => {
            let _ = writeln!(
                h,
                "<p class=\"verdict warning\">{} finding(s); the worst: {} ({}) from {} to {}.</p>",
                s.findings.len(),
                esc(&worst.code.to_string()),
                esc(&worst.subject),
                when(worst.from_unix_s, false),
                when(worst.to_unix_s, false)
            );
        }
    }
    h.push_str("<h2>What happened</h2>\n");
    if spans.is_empty() {
        h.push_str("<p class=\"muted\">No finding fired.</p>\n");
    } else {
        // A long list is folded, so the charts are not pages away.
        let _ = writeln!(
            h,
            "<details{}><summary>{} finding(s) in the order they fired</summary>",
            if spans.len() <= OPEN_FINDINGS {
                " open"
            } else {
                ""
            },
            spans.len()
        );
        h.push_str("<ul class=\"findings\" id=\"verdicts\">\n");
        for f in &spans {
            let _ = write!(
                h,
                "<li class=\"finding {sev}\" data-code=\"{code}\" data-subject=\"{subject}\" \
                 data-from=\"{from}\" data-to=\"{to}\"><span class=\"when\">{a}–{b}</span> \
                 <b>{sev} {code} ({subject})</b> {message}",
                sev = charts::severity(f.severity),
                code = esc(&f.code.to_string()),
                subject = esc(&f.subject),
                from = f.from_unix_s,
                to = f.to_unix_s,
                a = when(f.from_unix_s, false),
                b = when(f.to_unix_s, false),
                message = esc(&f.message),
            );
            if !f.culprits.is_empty() {
                let mut named: Vec<String> = f
                    .culprits
                    .iter()
                    .take(CULPRITS)
                    .map(|c| {
                        let unit = c
                            .unit
                            .as_deref()
                            .map_or(String::new(), |u| format!(" in {u}"));
                        format!(
                            "{}{unit}: {} interval(s), up to {:.0}%",
                            c.comm, c.intervals, c.peak_share_pct
                        )
                    })
                    .collect();
                if f.culprits.len() > CULPRITS {
                    named.push(format!("{} more", f.culprits.len() - CULPRITS));
                }
                let _ = write!(
                    h,
                    "<div class=\"culprits\">culprits: {}</div>",
                    esc(&named.join("; "))
                );
            }
            h.push_str("</li>\n");
        }
        h.push_str("</ul></details>\n");
    }
    h.push_str(
        "<h2>Charts</h2>\n<p class=\"muted\">Findings are shaded on the charts of their \
         subject (a disk's on its charts, the others on CPU, memory and pressure); hover one \
         for its sentence.</p>\n<div id=\"charts\"></div>\n\
         <noscript><p class=\"note\">The charts need JavaScript.</p></noscript>\n",
    );
    processes(&mut h, i);
    host(&mut h, i);
    notes(&mut h, i);
    let marks: Vec<Mark> = spans
        .iter()
        .map(|f| Mark {
            code: f.code,
            severity: f.severity,
            subject: f.subject.clone(),
            from: f.from_unix_s,
            to: f.to_unix_s,
            message: f.message.clone(),
        })
        .collect();
    let doc = charts::doc(i.timeline, marks);
    let _ = write!(
        h,
        "<p class=\"muted\">Generated by tacho {} from the history of tacho record; charts drawn \
         by uPlot (MIT).</p>\n<script type=\"application/json\" id=\"tacho-data\">{}</script>\n\
         <script>{}</script>\n<script>{}\ntacho.render(JSON.parse(document.getElementById(\
         'tacho-data').textContent), document.getElementById('charts'));</script>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION"),
        charts::script_json(&doc),
        charts::UPLOT_JS,
        charts::CHARTS_JS
    );
    out.write_all(h.as_bytes())
}

fn processes(h: &mut String, i: &Incident) {
    let s = i.summary;
    let points: Vec<&Point> = i.timeline.points().collect();
    h.push_str(
        "<h2>Top processes</h2>\n<p class=\"muted\">Each row's small timeline spans the \
         window on its own scale (hover it for its peak); a gap is a time it was not among \
         the busiest of its interval, or not running.</p>\n",
    );
    // Rows of escaped cells, then the timeline's markup.
    let table = |h: &mut String, title: &str, head: &[&str], rows: Vec<(Vec<String>, String)>| {
        let _ = writeln!(h, "<h3>{}</h3>", esc(title));
        if rows.is_empty() {
            h.push_str("<p class=\"muted\">none in the window</p>\n");
            return;
        }
        h.push_str("<div class=\"wide\"><table><tr>");
        for c in head {
            let _ = write!(h, "<th>{c}</th>");
        }
        h.push_str("<th>over the window</th></tr>\n");
        for (row, spark) in rows {
            h.push_str("<tr>");
            for (n, cell) in row.iter().enumerate() {
                let class = if n == 0 { "" } else { " class=\"num\"" };
                let _ = write!(h, "<td{class}>{}</td>", esc(cell));
            }
            let _ = write!(h, "<td class=\"spark\">{spark}</td>");
            h.push_str("</tr>\n");
        }
        h.push_str("</table></div>\n");
    };
    let process = |pid: u32, comm: &str, cpu: bool| {
        spark(&points, cpu, |p| {
            p.activity
                .processes
                .iter()
                .find(|q| q.pid == pid && q.comm == comm)
                .map(|q| if cpu { q.cpu_pct } else { q.io_bytes_per_s })
        })
    };
    table(
        h,
        "By CPU",
        &["process", "pid", "CPU seconds"],
        s.top_cpu
            .iter()
            .map(|p| {
                (
                    vec![p.comm.clone(), p.pid.to_string(), format!("{:.1}", p.cpu_s)],
                    process(p.pid, &p.comm, true),
                )
            })
            .collect(),
    );
    table(
        h,
        "By storage I/O",
        &["process", "pid", "read", "written"],
        s.top_io
            .iter()
            .map(|p| {
                (
                    vec![
                        p.comm.clone(),
                        p.pid.to_string(),
                        format_bytes_approx(p.read_bytes),
                        format_bytes_approx(p.write_bytes),
                    ],
                    process(p.pid, &p.comm, false),
                )
            })
            .collect(),
    );
    table(
        h,
        "By network (TCP, sent and received)",
        &["process", "unit", "bytes"],
        i.timeline
            .net_processes(i.top)
            .into_iter()
            .map(|(p, u, b)| {
                let line = spark(&points, false, |q| {
                    q.activity
                        .net
                        .iter()
                        .find(|((c, v), _)| *c == p && *v == u)
                        .map(|(_, b)| *b)
                });
                (
                    vec![p, u.unwrap_or_default(), format_bytes_approx(b as u64)],
                    line,
                )
            })
            .collect(),
    );
    table(
        h,
        "Services by storage I/O",
        &["cgroup", "read", "written"],
        s.services
            .iter()
            .map(|c| {
                let line = spark(&points, false, |p| {
                    p.activity
                        .services
                        .iter()
                        .find(|(path, _)| *path == c.path)
                        .map(|(_, b)| *b)
                });
                (
                    vec![
                        c.path.clone(),
                        format_bytes_approx(c.read_bytes),
                        format_bytes_approx(c.write_bytes),
                    ],
                    line,
                )
            })
            .collect(),
    );
}

/// A row's small timeline: `value` of each point (CPU percent of one CPU when `cpu`, else
/// bytes per second) averaged into at most [`SPARK_BUCKETS`], on the window's time axis and
/// its own scale, as an inline SVG path broken where it is not known; its peak in its title.
fn spark(points: &[&Point], cpu: bool, value: impl Fn(&Point) -> Option<f64>) -> String {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return String::new();
    };
    let (t0, t1) = (first.t - first.interval_s, last.t);
    let every = points.len().div_ceil(SPARK_BUCKETS).max(1);
    let buckets: Vec<(f64, Option<f64>)> = points
        .chunks(every)
        .map(|b| {
            let known: Vec<f64> = b.iter().filter_map(|p| value(p)).collect();
            let t = b.last().map_or(t1, |p| p.t);
            (
                t,
                (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64),
            )
        })
        .collect();
    let Some((peak_t, peak)) = buckets
        .iter()
        .filter_map(|(t, v)| v.map(|v| (*t, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return "<span class=\"muted\">not among the busiest</span>".into();
    };
    let (w, hgt) = (SPARK_WIDTH as f64, SPARK_HEIGHT as f64);
    let x = |t: f64| {
        if t1 > t0 {
            ((t - t0) / (t1 - t0) * w).clamp(0.0, w)
        } else {
            w
        }
    };
    let y = |v: f64| {
        if peak > 0.0 {
            hgt - 1.0 - v / peak * (hgt - 2.0)
        } else {
            hgt - 1.0
        }
    };
    let mut d = String::new();
    let mut drawing = false;
    for (t, v) in &buckets {
        match v {
            Some(v) => {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if drawing { "L" } else { "M" },
                    x(*t),
                    y(*v)
                );
                // A point alone shows as a dash.
                if !drawing {
                    d.push_str("h1");
                }
                drawing = true;
            }
            None => drawing = false,
        }
    }
    let peak_text = if cpu {
        format!("{peak:.0}% of a CPU")
    } else {
        format!("{}/s", format_bytes_approx(peak as u64))
    };
    let known = buckets.iter().filter(|(_, v)| v.is_some()).count();
    format!(
        "<svg class=\"spark\" width=\"{SPARK_WIDTH}\" height=\"{SPARK_HEIGHT}\" \
         viewBox=\"0 0 {SPARK_WIDTH} {SPARK_HEIGHT}\" data-known=\"{known}\" \
         data-peak-t=\"{peak_t}\"><title>{}</title><path d=\"{d}\"/></svg>",
        esc(&format!("peak {peak_text} at {}", when(peak_t, false)))
    )
}

fn host(h: &mut String, i: &Incident) {
    let _ = writeln!(
        h,
        "<h2>Host</h2>\n<table class=\"fp\"><colgroup><col class=\"key\"></colgroup>\
         <tr><th>setting</th><th>value ({})</th></tr>",
        esc(i.fingerprint_source)
    );
    for (key, value) in &i.fingerprint {
        match value {
            Some(v) => {
                let _ = writeln!(h, "<tr><td>{key}</td><td>{}</td></tr>", esc(v));
            }
            None => {
                let _ = writeln!(
                    h,
                    "<tr><td>{key}</td><td class=\"muted\">not known</td></tr>"
                );
            }
        }
    }
    h.push_str("</table>\n");
}

fn notes(h: &mut String, i: &Incident) {
    let s = i.summary;
    let mut notes: Vec<String> = Vec::new();
    if s.gaps > 0 {
        notes.push(format!(
            "the recorder was not running in {} gap(s) of the window; nothing is known of them",
            s.gaps
        ));
    }
    if s.exit_overruns > 0 {
        notes.push(format!(
            "the recorder lost processes' exit records {} time(s): a process that exited then \
             may be missing or undercounted",
            s.exit_overruns
        ));
    }
    notes.extend(i.notes.iter().cloned());
    notes.extend(i.timeline.notes().iter().cloned());
    notes.push(
        "settings that changed in the window are not known: the history keeps samples, not \
         snapshots of settings (tacho snapshot and tacho diff compare two)"
            .into(),
    );
    h.push_str("<h2>What could not be known</h2>\n<ul>\n");
    for n in notes {
        let _ = writeln!(h, "<li class=\"note\">{}</li>", esc(&n));
    }
    h.push_str("</ul>\n");
}

/// A Unix time in local time: with the date and offset, or only the time of day.
fn when(unix_s: f64, full: bool) -> String {
    let Some(t) = chrono::DateTime::from_timestamp(unix_s.floor() as i64, 0) else {
        return format!("{unix_s}");
    };
    let t = t.with_timezone(&chrono::Local);
    if full {
        t.format("%Y-%m-%d %H:%M:%S %:z").to_string()
    } else {
        t.format("%H:%M:%S").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::summary::{FindingSpan, NamedTotal};

    #[test]
    fn names_from_the_system_stay_text_in_the_markup_and_the_script() {
        let name = "</script><img src=x onerror=alert(1)><!--\u{202e}";
        let mut timeline = Timeline::new(10);
        let mut s = crate::diagnose::findings::tests::fixture_top_sample();
        s.findings[0].message = format!("written by {name}");
        s.findings[0].subject = name.to_string();
        timeline.push(&s);
        let mut summary = crate::history::summary::Window::new(0.0, 1.0).finish(5);
        summary.intervals = 1;
        summary.findings.push(FindingSpan {
            code: s.findings[0].code,
            severity: s.findings[0].severity,
            subject: name.into(),
            message: format!("written by {name}"),
            from_unix_s: 0.0,
            to_unix_s: 1.0,
            culprits: vec![NamedTotal {
                comm: name.into(),
                unit: Some(name.into()),
                intervals: 1,
                peak_share_pct: 100.0,
            }],
        });
        let mut page = Vec::new();
        write(
            &Incident {
                summary: &summary,
                timeline: &timeline,
                host_name: name.into(),
                fingerprint: vec![("hostname", Some(name.into()))],
                fingerprint_source: "test",
                notes: vec![name.into()],
                top: 5,
            },
            &mut page,
        )
        .unwrap();
        let page = String::from_utf8(page).unwrap();
        // The only tags are the page's own: no img, and `</script>` closes only its scripts.
        assert!(!page.contains("<img"));
        assert_eq!(page.matches("</script>").count(), 3);
        assert_eq!(page.matches("<script").count(), 3);
        assert!(!page.contains("<!--") && !page.contains('\u{202e}'));
        assert!(page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&lt;!--"));
    }

    #[test]
    fn each_top_process_has_its_small_timeline_broken_where_it_was_not_kept() {
        use crate::history::interval::{Interval, Proc};
        let name = "</script><svg onload=alert(1)>";
        let mut timeline = Timeline::whole(100);
        let mut s = crate::diagnose::findings::tests::fixture_top_sample();
        s.findings.clear();
        // Busy, not kept (another is busier, and it did nothing), busy again.
        for (n, cpu_s) in [(1, 5.0), (2, 0.0), (3, 10.0)] {
            s.time_unix_s = f64::from(n) * 10.0;
            s.interval_s = 10.0;
            let i = Interval {
                start_unix_s: s.time_unix_s - 10.0,
                end_unix_s: s.time_unix_s,
                processes: vec![Proc {
                    pid: 7,
                    comm: name.into(),
                    read_bytes: 0,
                    write_bytes: 0,
                    cpu_s,
                }],
                ..Interval::default()
            };
            timeline.push_judged(&s, &i);
        }
        let mut summary = crate::history::summary::Window::new(0.0, 30.0).finish(5);
        summary.intervals = 3;
        summary.top_cpu.push(crate::history::summary::ProcessTotal {
            pid: 7,
            comm: name.into(),
            read_bytes: 0,
            write_bytes: 0,
            cpu_s: 15.0,
        });
        let mut page = Vec::new();
        write(
            &Incident {
                summary: &summary,
                timeline: &timeline,
                host_name: "h".into(),
                fingerprint: Vec::new(),
                fingerprint_source: "test",
                notes: Vec::new(),
                top: 5,
            },
            &mut page,
        )
        .unwrap();
        let page = String::from_utf8(page).unwrap();
        let row = page
            .split("<tr>")
            .find(|r| r.contains("<td class=\"num\">7</td>"))
            .expect("the process's row");
        assert!(
            row.contains("&lt;/script&gt;&lt;svg onload=alert(1)&gt;"),
            "{row}"
        );
        assert!(!page.contains("<svg onload"));
        // Two stretches (the middle interval is not known, not zero), the second at the top
        // of its scale (100% of a CPU, its peak) at the end of the window.
        let d = row.split("d=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert!(
            d.ends_with(&format!("M{:.1},1.0h1", SPARK_WIDTH as f64)),
            "{d}"
        );
        assert!(row.contains("data-known=\"2\"") && row.contains("peak 100% of a CPU"));
    }
}
