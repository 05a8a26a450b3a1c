//! A progress bar on stderr, only when stderr is a terminal (never in pipes, logs or CI).

use crate::bench::run::{Progress, Work};
use crate::io::Control;
use crate::units::{format_bandwidth, format_count};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub struct Bar {
    state: Mutex<Option<Phase>>,
}

/// The phase on screen, and the counters when it began (the control's counters run on).
struct Phase {
    bar: ProgressBar,
    total: Work,
    since: Instant,
    ios_at_start: u64,
    bytes_at_start: u64,
}

impl Bar {
    pub fn new() -> Bar {
        Bar {
            state: Mutex::new(None),
        }
    }

    fn enabled() -> bool {
        std::io::stderr().is_terminal()
    }
}

impl Progress for Bar {
    fn start(&self, label: &str, total: Work, ctl: &Control) {
        if !Self::enabled() {
            return;
        }
        let len = match total {
            Work::Bytes(b) => b,
            Work::Time(d) => d.as_millis() as u64,
        };
        let bar = ProgressBar::new(len.max(1));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>26} [{bar:30}] {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        *self.state.lock().expect("progress lock") = Some(Phase {
            bar,
            total,
            since: Instant::now(),
            ios_at_start: ctl.done_ios.load(Ordering::Relaxed),
            bytes_at_start: ctl.done_bytes.load(Ordering::Relaxed),
        });
    }

    fn tick(&self, ctl: &Control) {
        let mut guard = self.state.lock().expect("progress lock");
        let Some(p) = guard.as_mut() else {
            return;
        };
        let ios = ctl.done_ios.load(Ordering::Relaxed) - p.ios_at_start;
        let bytes = ctl.done_bytes.load(Ordering::Relaxed) - p.bytes_at_start;
        let secs = p.since.elapsed().as_secs_f64().max(1e-3);
        match p.total {
            Work::Bytes(_) => p.bar.set_position(bytes),
            Work::Time(_) => p.bar.set_position(p.since.elapsed().as_millis() as u64),
        }
        // Rates over the whole phase so far (the ramp included): a live indication only.
        p.bar.set_message(format!(
            "{} IOPS  {}",
            format_count(ios as f64 / secs),
            format_bandwidth(bytes as f64 / secs)
        ));
    }

    fn finish(&self) {
        if let Some(p) = self.state.lock().expect("progress lock").take() {
            p.bar.finish_and_clear();
        }
    }
}
