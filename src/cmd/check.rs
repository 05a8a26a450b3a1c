//! `tacho check`: read the system, judge every rule, print the table, JSON or scripts.
//! Nothing here writes anywhere but stdout.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use crate::check::{self, Options, Severity};
use crate::cli::CheckArgs;
use crate::kernel::SysRoot;

pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    let (facts, findings) = check::check(
        &SysRoot::real(),
        Options {
            profile: args.profile,
        },
    );
    let document = crate::report::check::document(
        facts.host.hostname.as_deref(),
        &findings,
        args.profile,
        args.only,
        &facts.unreadable,
    );
    if args.save.save {
        // Every finding, whatever `--only` lists: drift compares whole results.
        let whole = crate::report::check::document(
            facts.host.hostname.as_deref(),
            &findings,
            args.profile,
            None,
            &facts.unreadable,
        );
        super::record::save_document(&args.save, &whole)?;
    }
    let mut stdout = std::io::stdout().lock();
    if let Some(kind) = args.emit_script {
        let host = facts.host.hostname.as_deref().unwrap_or("this host");
        let listed: Vec<_> = findings
            .iter()
            .filter(|f| args.only.is_none_or(|o| f.severity >= o))
            .cloned()
            .collect();
        crate::report::fix_script::write_script(&mut stdout, &listed, kind, host)?;
    } else if args.json {
        serde_json::to_writer_pretty(&mut stdout, &document)?;
        writeln!(stdout)?;
    } else {
        let mut fitted = crate::fit::Fit::new(&mut stdout, crate::fit::stdout_width());
        crate::report::check::write_text(
            &mut fitted,
            &findings,
            args.profile,
            args.only,
            &facts.unreadable,
        )?;
    }
    stdout.flush()?;
    let failed = args.strict && findings.iter().any(|f| f.severity >= Severity::Warn);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
