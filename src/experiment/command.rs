//! A change the catalogue lacks: `--change-cmd APPLY --revert-cmd REVERT`, two shell command
//! lines root gives on the command line, each run with `sh -c` and judged by its exit status.
//! The revert command is the one command a journal may hold (see [`super::journal`]).

use std::process::{Command, Stdio};

use crate::text::Escaped;

/// Longest command line taken (a journal holding a longer one is not a journal tacho wrote).
pub const MAX_LEN: usize = 4096;

/// The two command lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commands {
    /// Makes the change.
    pub apply: String,
    /// Undoes it; exit status 0 means it is undone.
    pub revert: String,
}

/// A command line that did not succeed.
#[derive(Debug, thiserror::Error)]
#[error("{what} `{}` {outcome}", Escaped(.cmd))]
pub struct CommandError {
    /// `--change-cmd` or `--revert-cmd`.
    pub what: &'static str,
    /// The command line.
    pub cmd: String,
    /// How it ended (`exited with status 1`, `could not be started: …`).
    pub outcome: String,
}

/// Checks a command line given for `what`: not empty, not longer than [`MAX_LEN`].
pub fn check(what: &'static str, cmd: &str) -> Result<(), CommandError> {
    let bad = |outcome: String| CommandError {
        what,
        cmd: cmd.to_string(),
        outcome,
    };
    if cmd.trim().is_empty() {
        return Err(bad("is empty: give a shell command line".into()));
    }
    if cmd.len() > MAX_LEN {
        return Err(bad(format!(
            "is longer than {MAX_LEN} bytes: put it in a root-owned script and give its path"
        )));
    }
    Ok(())
}

/// Runs `cmd` with `sh -c`, stdin closed and its output on tacho's stderr (stdout may be a
/// JSON document); `Ok` when it exits 0.
pub fn run(what: &'static str, cmd: &str) -> Result<(), CommandError> {
    check(what, cmd)?;
    let bad = |outcome: String| CommandError {
        what,
        cmd: cmd.to_string(),
        outcome,
    };
    let status = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| bad(format!("could not be started: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(bad(format!("failed ({status})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_decides() {
        run("--change-cmd", "true").unwrap();
        let e = run("--revert-cmd", "exit 3").unwrap_err().to_string();
        assert!(
            e.starts_with("--revert-cmd `exit 3` failed") && e.contains('3'),
            "{e}"
        );
        let e = run("--change-cmd", " ").unwrap_err().to_string();
        assert!(e.contains("is empty"), "{e}");
        let e = check("--change-cmd", &"x".repeat(MAX_LEN + 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("longer than"), "{e}");
    }
}
