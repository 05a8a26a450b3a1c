//! `--print-fio`: the fio command line that runs the same test, so any result can be
//! reproduced with the industry's reference tool.

use super::plan::{Plan, PlannedTest};
use super::target::{Inspected, Kind};
use crate::io::{EngineKind, SyncKind, spec::MIX_ALIGN};
use std::fmt::Write;
use std::time::Duration;

/// One fio command per test, each on its own line, preceded by a comment naming the test.
pub fn commands(plan: &Plan, target: &Inspected) -> String {
    let mut out = String::new();
    if plan.repeat > 1 {
        let _ = writeln!(out, "# tacho runs each test {} times", plan.repeat);
    }
    for test in &plan.tests {
        let _ = writeln!(out, "# {}", test.name);
        let _ = writeln!(out, "{}", command(test, target));
    }
    out
}

fn command(test: &PlannedTest, target: &Inspected) -> String {
    let s = &test.spec;
    let filename = match target.kind {
        // fio creates and lays out its own file, as tacho does.
        Kind::Directory => target.path.join("tacho-fio.tmp"),
        Kind::File | Kind::BlockDevice => target.path.clone(),
    };
    let mut args: Vec<String> = vec!["fio".into(), format!("--name={}", slug(&test.name))];
    args.push(format!("--filename={}", filename.display()));
    args.push(format!("--rw={}", s.rw().fio_name()));
    if s.bssplit().is_empty() {
        args.push(format!("--bs={}", s.bs()));
    } else {
        let mix: Vec<String> = s
            .bssplit()
            .iter()
            .map(|b| format!("{}/{}", b.size, b.pct))
            .collect();
        args.push(format!("--bssplit={}", mix.join(":")));
        args.push(format!("--blockalign={MIX_ALIGN}"));
    }
    // fio's psync ignores iodepth; tacho runs one thread per queued I/O, so say it in jobs.
    let (iodepth, numjobs) = match s.engine() {
        EngineKind::IoUring => (s.iodepth(), s.numjobs()),
        EngineKind::Psync | EngineKind::Sync => (1, s.numjobs() * s.iodepth()),
    };
    args.push(format!("--ioengine={}", fio_engine(s.engine())));
    args.push(format!("--iodepth={iodepth}"));
    args.push(format!("--numjobs={numjobs}"));
    args.push(format!("--direct={}", u8::from(s.direct())));
    args.push(format!("--size={}", s.region_bytes()));
    if let Some(limit) = s.io_limit() {
        args.push(format!("--io_size={limit}"));
        args.push(format!("--runtime={}", fio_time(s.runtime())));
    } else {
        args.push(format!("--runtime={}", fio_time(s.runtime())));
        args.push("--time_based".into());
    }
    if !s.ramp().is_zero() {
        args.push(format!("--ramp_time={}", fio_time(s.ramp())));
    }
    if s.rw().is_mixed() {
        args.push(format!("--rwmixread={}", s.rwmixread()));
    }
    if let Some(sync) = s.sync() {
        let opt = match sync.kind {
            SyncKind::Fsync => "fsync",
            SyncKind::Fdatasync => "fdatasync",
        };
        args.push(format!("--{opt}={}", sync.every));
    }
    if let Some(o) = s.open_sync() {
        args.push(format!("--sync={o}"));
    }
    if test.fresh {
        // Removed after the run, so the next one writes into a new file again.
        args.push("--unlink=1".into());
    }
    args.push(format!("--randseed={}", s.seed()));
    args.push("--group_reporting".into());
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn fio_engine(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::IoUring => "io_uring",
        EngineKind::Psync => "psync",
        EngineKind::Sync => "sync",
    }
}

/// fio takes times with unit suffixes; whole seconds read best.
fn fio_time(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// A job name fio accepts on the command line: letters, digits, `-` and `_`.
fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Single quotes when the word has anything a shell would interpret.
fn shell_quote(word: &str) -> String {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=./:,%+@".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_names() {
        assert_eq!(shell_quote("--rw=randread"), "--rw=randread");
        assert_eq!(shell_quote("--filename=/a b"), "'--filename=/a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(slug("RND4K Q32T1 read"), "RND4K_Q32T1_read");
        assert_eq!(fio_time(Duration::from_millis(500)), "500ms");
        assert_eq!(fio_time(Duration::from_secs(5)), "5s");
    }
}
