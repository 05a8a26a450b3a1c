//! Ctrl-C, SIGTERM and SIGHUP for long-running commands: the first sets a flag the work polls,
//! so it stops, cleans up and reports what finished; a second one exits at once.

use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Exit status after an interruption, as shells report a process killed by SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_conditional_shutdown(
            signal,
            i32::from(EXIT_INTERRUPTED),
            Arc::clone(&stop),
        )?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    Ok(stop)
}

/// Prints what is about to run on stderr, overwriting the line, only on a terminal.
pub fn status_line(text: &str) {
    use std::io::{IsTerminal, Write};
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
    }
}

/// Clears the status line before the report.
pub fn clear_status() {
    status_line("");
}
