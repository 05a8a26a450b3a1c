//! `--print-fio`: the fio command line that runs the same test, so any result can be
//! reproduced with the industry's reference tool.

use super::plan::{Plan, PlannedTest};
use super::run::PreconditionShape;
use super::suite::UntilFlat;
use super::sustained;
use super::target::{Inspected, Kind};
use crate::io::{EngineKind, IO_URING_SUBMIT_BATCH, SyncKind, spec::MIX_ALIGN};
use std::fmt::Write;
use std::time::Duration;

/// One fio command per test, each on its own line, preceded by a comment naming the test.
pub fn commands(plan: &Plan, target: &Inspected) -> String {
    let mut out = String::new();
    if plan.repeat > 1 {
        let _ = writeln!(out, "# tacho runs each test {} times", plan.repeat);
    }
    if let (Some(round), Some(first)) = (plan.precondition, plan.tests.first()) {
        precondition(&mut out, plan, first, round, target);
    }
    for test in &plan.tests {
        let _ = writeln!(out, "# {}", test.name);
        if test.until_flat.is_some() {
            until_flat(&mut out, test, plan.flat_for);
        }
        let _ = writeln!(out, "{}", command(test, target, plan.flat_for));
    }
    out
}

/// What fio's steady-state stop does for a sustained test, and what it does otherwise.
fn until_flat(out: &mut String, test: &PlannedTest, flat_for: Duration) {
    let pct = (sustained::FLAT_TOLERANCE * 100.0).round();
    let _ = writeln!(
        out,
        "# Stops once the bandwidth has stayed within {pct}% of its mean for {} (ss=bw:{pct}%, \
         ss_dur), or the region is written (io_size).",
        fio_time(flat_for)
    );
    if test.until_flat == Some(UntilFlat::AfterCliff) {
        let _ = writeln!(
            out,
            "# Not the same: tacho counts a flat rate only after the rate fell (a device writing \
             into its cache is flat too); fio stops at the first flat window, cache or not."
        );
    }
    let _ = writeln!(
        out,
        "# fio does not find the cliff: plot the per-second log it writes (write_bw_log, 1 s \
         averages) to see where the rate fell."
    );
}

/// `--precondition` as two fio jobs: the sequential passes, then random writes until fio's
/// steady state, with what fio does otherwise than tacho said in comments.
fn precondition(
    out: &mut String,
    plan: &Plan,
    first: &PlannedTest,
    round: Duration,
    target: &Inspected,
) {
    let s = &first.spec;
    let shape = PreconditionShape::of(plan, s.engine());
    let base = |name: &str, rw: &str, bs: u64, depth: u32| -> Vec<String> {
        let mut args = vec![
            "fio".into(),
            format!("--name={name}"),
            format!("--filename={}", filename(target).display()),
            format!("--rw={rw}"),
            format!("--bs={bs}"),
            format!("--ioengine={}", fio_engine(s.engine())),
            format!("--iodepth={depth}"),
        ];
        args.extend(batch_submit(s.engine(), depth));
        args.extend([
            "--numjobs=1".into(),
            format!("--direct={}", u8::from(s.direct())),
            format!("--size={}", plan.region_bytes),
        ]);
        args
    };
    let _ = writeln!(
        out,
        "# precondition: the region written {}x sequentially",
        PreconditionShape::PASSES
    );
    let mut seq = base(
        "precondition_sequential",
        "write",
        shape.sequential_bs,
        shape.sequential_depth,
    );
    seq.push(format!("--loops={}", PreconditionShape::PASSES));
    let _ = writeln!(out, "{}", line(&seq));
    let rounds = sustained::STEADY_ROUNDS as u32;
    let _ = writeln!(
        out,
        "# precondition: random writes until steady: tacho's rule holds over its last {rounds} \
         rounds of {} (each within {:.0}% of their mean and the fitted slope within {:.0}%), at \
         most {} rounds.",
        fio_time(round),
        sustained::STEADY_EXCURSION * 100.0,
        sustained::STEADY_SLOPE * 100.0,
        sustained::MAX_ROUNDS
    );
    let _ = writeln!(
        out,
        "# Not the same: fio takes one criterion per job (here the slope, ss=iops_slope:{:.0}%; \
         the {:.0}% excursion is not checked) and judges one-second samples over a rolling \
         window of the same length (ss_dur), not means of whole rounds.",
        sustained::STEADY_SLOPE * 100.0,
        sustained::STEADY_EXCURSION * 100.0
    );
    let mut random = base(
        "precondition_random",
        "randwrite",
        shape.random_bs,
        shape.random_depth,
    );
    random.push(format!(
        "--runtime={}",
        fio_time(round * sustained::MAX_ROUNDS as u32)
    ));
    random.push("--time_based".into());
    random.push(format!(
        "--ss=iops_slope:{:.0}%",
        sustained::STEADY_SLOPE * 100.0
    ));
    random.push(format!("--ss_dur={}", fio_time(round * rounds)));
    let _ = writeln!(out, "{}", line(&random));
}

/// Where fio does its I/O: its own file in a directory (it creates and lays it out, as tacho
/// does), else the file or device itself.
fn filename(target: &Inspected) -> std::path::PathBuf {
    match target.kind {
        Kind::Directory => target.path.join("tacho-fio.tmp"),
        Kind::File | Kind::BlockDevice => target.path.clone(),
    }
}

/// Arguments as one shell line.
fn line(args: &[String]) -> String {
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn command(test: &PlannedTest, target: &Inspected, flat_for: Duration) -> String {
    let s = &test.spec;
    let mut args: Vec<String> = vec!["fio".into(), format!("--name={}", slug(&test.name))];
    args.push(format!("--filename={}", filename(target).display()));
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
    args.extend(batch_submit(s.engine(), iodepth));
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
    if test.until_flat.is_some() {
        let pct = (sustained::FLAT_TOLERANCE * 100.0).round();
        args.push(format!("--ss=bw:{pct}%"));
        args.push(format!("--ss_dur={}", fio_time(flat_for)));
        args.push(format!("--write_bw_log={}", slug(&test.name)));
        args.push("--log_avg_msec=1000".into());
    }
    args.push("--group_reporting".into());
    line(&args)
}

/// How many I/Os tacho's io_uring engine hands the kernel per system call, as fio's nearest
/// option (fio's default is one; with this one fio still submits about one a call, as it
/// commits before each wait, so the device sees the same and only fio's system calls
/// differ); nothing when at most one I/O is in flight.
fn batch_submit(engine: EngineKind, iodepth: u32) -> Option<String> {
    (engine == EngineKind::IoUring && iodepth > 1)
        .then(|| format!("--iodepth_batch_submit={IO_URING_SUBMIT_BATCH}"))
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
    fn batch_submit_is_said_for_io_uring_deeper_than_one() {
        let said = format!("--iodepth_batch_submit={IO_URING_SUBMIT_BATCH}");
        assert_eq!(batch_submit(EngineKind::IoUring, 32), Some(said));
        assert_eq!(batch_submit(EngineKind::IoUring, 1), None);
        assert_eq!(batch_submit(EngineKind::Psync, 32), None);
        assert_eq!(batch_submit(EngineKind::Sync, 4), None);
    }

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
