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
    state: Mutex<Option<(ProgressBar, Work, Instant, u64, u64)>>,
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
    fn start(&self, label: &str, total: Work) {
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
        *self.state.lock().expect("progress lock") = Some((bar, total, Instant::now(), 0, 0));
    }

    fn tick(&self, ctl: &Control) {
        let mut guard = self.state.lock().expect("progress lock");
        let Some((bar, total, since, last_ios, last_bytes)) = guard.as_mut() else {
            return;
        };
        let ios = ctl.done_ios.load(Ordering::Relaxed);
        let bytes = ctl.done_bytes.load(Ordering::Relaxed);
        let secs = since.elapsed().as_secs_f64().max(1e-3);
        match total {
            Work::Bytes(_) => bar.set_position(bytes),
            Work::Time(_) => bar.set_position(since.elapsed().as_millis() as u64),
        }
        // Rates over the whole phase so far (the ramp included): a live indication only.
        bar.set_message(format!(
            "{} IOPS  {}",
            format_count((ios - *last_ios) as f64 / secs),
            format_bandwidth((bytes - *last_bytes) as f64 / secs)
        ));
        let _ = (last_ios, last_bytes);
    }

    fn finish(&self) {
        if let Some((bar, ..)) = self.state.lock().expect("progress lock").take() {
            bar.finish_and_clear();
        }
    }
}
