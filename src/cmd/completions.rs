//! `tacho completions SHELL`: clap's script, plus what a static script cannot know — the
//! machine's disks for `report disk DISK`, listed from /sys/block when the user presses Tab
//! (not when the script was made: a packaged script is made on another machine).

use std::io::Write;

use anyhow::{Result, bail};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The shell command that lists the disks at completion time.
const LIST_DISKS: &str = "command ls /sys/block 2>/dev/null";

/// Writes the completion script for `shell`.
pub fn run(shell: Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "tacho", &mut script);
    let script = String::from_utf8(script)?;
    std::io::stdout().write_all(with_disks(shell, script)?.as_bytes())?;
    Ok(())
}

/// `script` with `report disk`'s DISK completed from the disks present; shells whose scripts
/// have no place for it (elvish, PowerShell) keep clap's.
fn with_disks(shell: Shell, script: String) -> Result<String> {
    let edited = match shell {
        // The case of `tacho report disk` offers its options; the disks join them.
        Shell::Bash => {
            let case = "tacho__subcmd__report__subcmd__disk)\n            opts=\"";
            insert_after(&script, case, &format!("$({LIST_DISKS}) "))
        }
        // The positional's action was `_default` (files).
        Shell::Zsh => {
            let spec = "\\[default\\: every disk with a device\\]:_default'";
            let with = format!("\\[default\\: every disk with a device\\]:( $({LIST_DISKS}) )'");
            script
                .contains(spec)
                .then(|| script.replacen(spec, &with, 1))
        }
        Shell::Fish => Some(format!(
            "{script}complete -c tacho -n \"__fish_tacho_using_subcommand report; and \
             __fish_seen_subcommand_from disk\" -f -a \"({LIST_DISKS})\"\n"
        )),
        _ => Some(script.clone()),
    };
    match edited {
        Some(s) => Ok(s),
        // clap changed its script's shape: a test catches this before a user does.
        None => bail!("the {shell} completion script has no place for disk names"),
    }
}

/// `text` with `what` inserted after the first `marker`, or `None` without one.
fn insert_after(text: &str, marker: &str, what: &str) -> Option<String> {
    let at = text.find(marker)? + marker.len();
    Some(format!("{}{what}{}", &text[..at], &text[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(shell: Shell) -> String {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "tacho", &mut out);
        with_disks(shell, String::from_utf8(out).unwrap()).unwrap()
    }

    #[test]
    fn every_shell_s_script_lists_the_disks_at_completion_time() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let s = script(shell);
            assert_eq!(s.matches(LIST_DISKS).count(), 1, "{shell}");
        }
        assert!(script(Shell::Bash).contains("opts=\"$(command ls /sys/block 2>/dev/null) -h"));
    }
}
