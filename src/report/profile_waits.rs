//! `tacho profile --off-cpu` and `--wall` output: the verdict, the time by reason, processes
//! and threads with their time and what they waited on, the heaviest waits (text); one
//! `tacho.profile.offcpu.v1` document (JSON); folded stacks in microseconds; a flame graph.

use super::profile::xml_text;
use crate::fit::{Col, table};
use crate::profile::waits::{ReasonTime, TaskTime, WaitProfile};
use crate::profile::why::Why;
use crate::text::Escaped;
use std::io::{self, Write};

/// Rows of each table.
const SHOWN: usize = 15;

const PROCESS_COLUMNS: [Col; 7] = [
    Col::num("ON-CPU", 3, 8),
    Col::num("OFF-CPU", 0, 8),
    Col::num("OFF%", 0, 5),
    Col::num("PID", 1, 7),
    Col::text("PROCESS", 0, 15),
    Col::num("THREADS", 4, 7),
    Col::text("MOSTLY", 2, 40),
];

const THREAD_COLUMNS: [Col; 7] = [
    Col::num("ON-CPU", 3, 8),
    Col::num("OFF-CPU", 0, 8),
    Col::num("OFF%", 0, 5),
    Col::num("TID", 1, 7),
    Col::text("THREAD", 0, 15),
    Col::text("PROCESS", 4, 15),
    Col::text("MOSTLY", 2, 40),
];

const WAIT_COLUMNS: [Col; 7] = [
    Col::num("TIME", 0, 8),
    Col::num("%", 1, 5),
    Col::text("WHY", 0, 18),
    Col::text("ON", 2, 24),
    Col::text("PROCESS", 1, 15),
    Col::text("FUNCTION", 0, 30),
    Col::text("KERNEL", 3, 24),
];

fn time(ms: f64) -> String {
    crate::units::format_latency_ns(ms * 1e6)
}

fn reasons_line(reasons: &[ReasonTime]) -> String {
    reasons
        .iter()
        .take(6)
        .map(|r| format!("{} {:.0}%", r.why.words(), r.pct))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row's largest reason, with what it waited on.
fn mostly(t: &TaskTime) -> String {
    let Some(r) = t.reasons.first() else {
        return "-".into();
    };
    // What it waited on belongs to its largest off-CPU reason.
    let first_wait = t.reasons.iter().find(|r| r.why != Why::Cpu).map(|r| r.why);
    let on = if Some(r.why) == first_wait {
        t.waiting_on
            .as_ref()
            .map(|o| format!(" ({})", Escaped(o)))
            .unwrap_or_default()
    } else {
        String::new()
    };
    format!("{} {:.0}%{on}", r.why.words(), r.pct)
}

fn task_rows(tasks: &[TaskTime], by_thread: bool) -> Vec<Vec<String>> {
    tasks
        .iter()
        .take(SHOWN)
        .map(|t| {
            vec![
                time(t.on_cpu_ms),
                time(t.off_cpu_ms),
                format!("{:.0}", t.off_cpu_pct),
                t.tid.to_string(),
                Escaped(&t.name).to_string(),
                if by_thread {
                    Escaped(&t.process).to_string()
                } else {
                    t.threads.to_string()
                },
                mostly(t),
            ]
        })
        .collect()
}

/// Verdict, time by reason, processes, threads, waits (in the columns that fit `width`), notes.
pub fn write_text(p: &WaitProfile, out: &mut impl Write, width: Option<usize>) -> io::Result<()> {
    writeln!(out, "{}", Escaped(&p.verdict))?;
    let wall = p.mode == "wall";
    if wall {
        writeln!(
            out,
            "{} on and {} off the CPU over {:.1} s: {}",
            time(p.on_cpu_ms),
            time(p.off_cpu_ms),
            p.seconds,
            reasons_line(&p.reasons)
        )?;
    } else {
        writeln!(
            out,
            "{} off the CPU over {:.1} s in {} of {}: {}",
            time(p.off_cpu_ms),
            p.seconds,
            crate::units::plural(p.threads.len() as u64, "thread"),
            crate::units::plural(p.processes.len() as u64, "process"),
            reasons_line(&p.reasons)
        )?;
    }
    // The ON-CPU column only when there is something in it.
    let skip = usize::from(!wall);
    let drop_first = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
        rows.into_iter()
            .map(|r| r.into_iter().skip(skip).collect())
            .collect()
    };
    writeln!(out)?;
    table(
        out,
        &PROCESS_COLUMNS[skip..],
        &drop_first(task_rows(&p.processes, false)),
        width,
    )?;
    writeln!(out)?;
    table(
        out,
        &THREAD_COLUMNS[skip..],
        &drop_first(task_rows(&p.threads, true)),
        width,
    )?;
    if !p.waits.is_empty() {
        let rows: Vec<Vec<String>> = p
            .waits
            .iter()
            .take(SHOWN)
            .map(|w| {
                vec![
                    time(w.ms),
                    format!("{:.1}", w.pct),
                    w.why.words().to_string(),
                    w.on.as_deref()
                        .map_or_else(|| "-".into(), |o| Escaped(o).to_string()),
                    Escaped(&w.process).to_string(),
                    Escaped(&w.function).to_string(),
                    w.kernel_function
                        .as_deref()
                        .map_or_else(|| "-".into(), |k| Escaped(k).to_string()),
                ]
            })
            .collect();
        writeln!(out)?;
        table(out, &WAIT_COLUMNS, &rows, width)?;
    }
    for note in &p.notes {
        writeln!(out, "note: {}", Escaped(note))?;
    }
    Ok(())
}

/// The document.
pub fn write_json(p: &WaitProfile, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, p)?;
    writeln!(out)
}

/// One `stack microseconds` line per distinct stack (control characters escaped, as the
/// on-CPU profile's).
pub fn write_folded(p: &WaitProfile, out: &mut impl Write) -> io::Result<()> {
    for (stack, n) in &p.folded {
        writeln!(out, "{} {n}", Escaped(stack))?;
    }
    Ok(())
}

/// A flame graph of the folded stacks, widths in time; with nothing traced, a page that says
/// so (the verdict), so `--svg` always leaves a file that opens.
pub fn write_svg(p: &WaitProfile, title: &str, out: &mut impl Write) -> io::Result<()> {
    if p.folded.is_empty() {
        return write!(
            out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" \
             height=\"60\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"35\" \
             font-family=\"Verdana\" font-size=\"14\">{}</text></svg>\n",
            crate::report::html::esc(&xml_text(title))
        );
    }
    let lines: Vec<String> = p
        .folded
        .iter()
        .map(|(s, n)| format!("{} {n}", xml_text(s)))
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.direction = inferno::flamegraph::Direction::Inverted;
    opts.title = xml_text(title);
    opts.count_name = "µs".into();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
}
