//! Ctrl-C, SIGTERM and SIGHUP for long-running commands. The first and the second set a flag
//! the work polls, so it stops, cleans up and reports what finished: `timeout -s INT` signals
//! twice (the process and then its group), and an impatient admin presses Ctrl-C twice, and
//! neither may cost the report or leave a test file behind. A third exits at once, after
//! removing the test files registered in `crate::abandon` (the report is lost).

use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Exit status after an interruption, as shells report a process killed by SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Signals that only ask to stop; the next one abandons.
const SIGNALS_THAT_STOP: usize = 2;

/// A new flag, set by the first of SIGINT, SIGTERM or SIGHUP (see the module's comment).
pub fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(&stop)?;
    Ok(stop)
}

/// Sets `stop` on the first of SIGINT, SIGTERM or SIGHUP (see the module's comment).
pub fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static COUNTING: std::sync::OnceLock<std::io::Result<()>> = std::sync::OnceLock::new();
    // One count for the three signals, however many flags there are: a SIGINT and a SIGTERM
    // are two.
    static RECEIVED: AtomicUsize = AtomicUsize::new(0);
    let counting = COUNTING.get_or_init(|| {
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            // SAFETY: the action touches atomics and makes system calls (unlinkat, _exit),
            // all async-signal-safe (see `crate::abandon`).
            unsafe {
                signal_hook::low_level::register(signal, || {
                    if RECEIVED.fetch_add(1, Ordering::SeqCst) >= SIGNALS_THAT_STOP {
                        crate::abandon::remove_all();
                        signal_hook::low_level::exit(i32::from(EXIT_INTERRUPTED));
                    }
                })?;
            }
        }
        Ok(())
    });
    if let Err(e) = counting {
        anyhow::bail!("cannot handle signals: {e}");
    }
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(stop))?;
    }
    Ok(())
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
