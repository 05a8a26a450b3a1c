//! Progress on stderr. On a terminal: a bar per phase, sized to the terminal so it never
//! wraps (a wrapped bar reprints itself as a new line at every tick), under the whole run's
//! line ("test 3 of 8, about 1 m 40 s left"). Elsewhere (a pipe, a log): only the whole run's
//! line, once per test.

use crate::bench::run::{Progress, Work};
use crate::io::Control;
use crate::units::{format_bandwidth, format_count, format_time_left};
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Widest label (a test's name) and bar, and the room kept for the rates ("123k IOPS  1.12
/// GiB/s"), in columns.
const LABEL: usize = 26;
const BAR: usize = 30;
const RATES: usize = 22;

/// Assumed when stderr is a terminal that does not tell its size.
const DEFAULT_WIDTH: usize = 80;

pub struct Bar {
    /// Columns of stderr's terminal; `None` when stderr is not a terminal.
    width: Option<usize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    phase: Option<Phase>,
    /// The whole run: test n of N and the planned time left, from when it was said.
    run: Option<(usize, usize, Duration, Instant)>,
}

/// The phase on screen, and the counters when it began (the control's counters run on).
struct Phase {
    bar: ProgressBar,
    /// The whole run's line shown above the bar, to redraw only when it changes.
    run_line: Option<String>,
    label: String,
    total: Work,
    since: Instant,
    ios_at_start: u64,
    bytes_at_start: u64,
}

impl Bar {
    pub fn new() -> Bar {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Bar {
            width: terminal.then(|| crate::fit::stderr_width().unwrap_or(DEFAULT_WIDTH)),
            state: Mutex::new(State::default()),
        }
    }

    /// The bar's template for `label`, with the run's line above it when there is one; sized
    /// so that no line is wider than the terminal.
    fn style(&self, label: &str, run_line: Option<&str>) -> ProgressStyle {
        let (width, label_room, bar, _) = layout(self.width.unwrap_or(DEFAULT_WIDTH));
        // The label and the run's line go into the template as literal text: braces doubled.
        let literal = |s: &str| s.replace('{', "{{").replace('}', "}}");
        let mut template = String::new();
        if let Some(line) = run_line {
            template.push_str(&literal(&crate::fit::ellipsis(line, width)));
            template.push('\n');
        }
        if label_room > 0 {
            // A test's name may come from a job file: escaped like any text from a file.
            let label = crate::fit::ellipsis(&crate::text::escape(label), label_room);
            let label = format!("{label:>label_room$}");
            template.push_str(&literal(&label));
            template.push(' ');
        }
        if bar > 0 {
            template.push_str(&format!("[{{bar:{bar}}}] "));
        }
        template.push_str("{msg}");
        ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ")
    }

    /// The whole run's line now: the time left counts down through the test.
    fn run_line(state: &State) -> Option<String> {
        let (n, of, left, since) = state.run?;
        Some(format!(
            "test {n} of {of}, about {} left",
            format_time_left(left.saturating_sub(since.elapsed()))
        ))
    }

    /// Rates cut to the room the template keeps for them.
    fn rates(&self, text: String) -> String {
        let (_, _, _, room) = layout(self.width.unwrap_or(DEFAULT_WIDTH));
        crate::fit::ellipsis(&text, room)
    }
}

/// The columns a terminal `width` wide gives to a line, the label, the bar (0: none) and the
/// rates, the bar's line being `label + 1 + [bar] + 1 + rates`. One column stays spare: a
/// character in the last column makes some terminals wrap. The rates go last, first the bar.
fn layout(width: usize) -> (usize, usize, usize, usize) {
    let line = width.saturating_sub(1);
    let rates = RATES.min(line);
    let label = LABEL.min(line.saturating_sub(rates + 1));
    let bar = BAR.min(line.saturating_sub(rates + label + 4));
    // A bar of a few columns shows nothing: leave it out.
    let bar = if bar < 5 { 0 } else { bar };
    (line, label, bar, rates)
}

impl Progress for Bar {
    fn start(&self, label: &str, total: Work, ctl: &Control) {
        if self.width.is_none() {
            return;
        }
        let len = match total {
            Work::Bytes(b) => b,
            Work::Time(d) => d.as_millis() as u64,
        };
        let mut state = self.state.lock().expect("progress lock");
        let run_line = Self::run_line(&state);
        let bar = ProgressBar::new(len.max(1));
        bar.set_style(self.style(label, run_line.as_deref()));
        state.phase = Some(Phase {
            bar,
            run_line,
            label: label.to_string(),
            total,
            since: Instant::now(),
            ios_at_start: ctl.done_ios.load(Ordering::Relaxed),
            bytes_at_start: ctl.done_bytes.load(Ordering::Relaxed),
        });
    }

    fn tick(&self, ctl: &Control) {
        let mut guard = self.state.lock().expect("progress lock");
        let run_line = Self::run_line(&guard);
        let Some(p) = guard.phase.as_mut() else {
            return;
        };
        if run_line != p.run_line {
            p.bar.set_style(self.style(&p.label, run_line.as_deref()));
            p.run_line = run_line;
        }
        let ios = ctl.done_ios.load(Ordering::Relaxed) - p.ios_at_start;
        let bytes = ctl.done_bytes.load(Ordering::Relaxed) - p.bytes_at_start;
        let secs = p.since.elapsed().as_secs_f64().max(1e-3);
        match p.total {
            Work::Bytes(_) => p.bar.set_position(bytes),
            Work::Time(_) => p.bar.set_position(p.since.elapsed().as_millis() as u64),
        }
        // Rates over the whole phase so far (the ramp included): a live indication only.
        p.bar.set_message(self.rates(format!(
            "{} IOPS  {}",
            format_count(ios as f64 / secs),
            format_bandwidth(bytes as f64 / secs)
        )));
    }

    fn finish(&self) {
        if let Some(p) = self.state.lock().expect("progress lock").phase.take() {
            p.bar.finish_and_clear();
        }
    }

    fn whole_run(&self, n: usize, of: usize, left: Duration) {
        self.state.lock().expect("progress lock").run = Some((n, of, left, Instant::now()));
        if self.width.is_none() {
            // A log keeps one line per test: where the run is, and how long it still takes.
            eprintln!("test {n} of {of}, about {} left", format_time_left(left));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_line_is_never_wider_than_the_terminal() {
        for width in 1..200 {
            let (line, label, bar, rates) = layout(width);
            let bar_line = label + 1 + if bar > 0 { bar + 3 } else { 0 } + rates;
            assert!(line < width.max(1), "{width}");
            assert!(bar_line <= width.max(2), "{width}: {bar_line}");
        }
        assert_eq!(layout(80), (79, 26, 27, 22));
        assert_eq!(layout(200), (199, 26, 30, 22));
    }
}
