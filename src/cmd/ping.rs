//! `tacho ping`: open the target once, refuse unsafe writes, ping, report.

use crate::bench::ping::{self, PingOptions};
use crate::bench::target::{self, Kind, Target};
use crate::cli::PingArgs;
use crate::io::Control;
use crate::kernel::SysRoot;
use crate::report::ping::{self as out, JsonDocument, PingTarget};
use crate::units::format_size;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn run(args: &PingArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    if args.size == 0 {
        bail!("--size must be at least 1 byte, e.g. 4k");
    }
    let opened = target::open(&args.target)?;
    let inspected = target::inspect(&root, &opened)?;
    let work_size = match (args.work_size, inspected.kind) {
        (Some(w), _) => w,
        (None, Kind::Directory) => ping::DIRECTORY_WORK_SIZE.max(args.size),
        (None, _) => inspected.capacity,
    };
    if work_size < args.size {
        bail!(
            "--work-size {} is smaller than one request ({}); give at least --size",
            format_size(work_size),
            format_size(args.size)
        );
    }
    if inspected.kind != Kind::Directory && work_size > inspected.capacity {
        bail!(
            "--work-size {} is larger than the target ({}); give at most that",
            format_size(work_size),
            format_size(inspected.capacity)
        );
    }
    let lbs = u64::from(inspected.info.logical_block_size.max(1));
    if !args.buffered && !args.size.is_multiple_of(lbs) {
        bail!(
            "--size {} is not a multiple of the logical block size ({lbs} bytes), which direct \
             I/O requires; use a multiple of {lbs}, or add --buffered",
            args.size
        );
    }
    let consent =
        target::consent_if_writing(args.write, &root, &opened, &inspected, args.destroy_data)?;
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let ctl = Control::new(stop);
    let region = work_size / args.size * args.size;
    let (target, notes) = Target::prepare(&opened, &inspected, consent, region)?;
    // ping records no device counters, so their absence is no news.
    let notes = inspected.notes.iter().chain(&notes);
    for n in notes.filter(|n| n.code != crate::warning::Code::NoDevice) {
        // Not on stdout: the lines and the JSON stay ioping's.
        eprintln!("warning [{}]: {}", n.code, crate::text::Escaped(&n.message));
    }
    if !args.buffered && !target.direct_supported()? {
        bail!(
            "{} does not support direct I/O (O_DIRECT); add --buffered",
            inspected.path.display()
        );
    }
    if target.test_file.is_some() && !args.write {
        // Reads of a test file must find data, not holes.
        let writer = target
            .open(false)
            .context("cannot open the test file to lay it out")?;
        crate::io::fill(&writer, region, &ctl)?;
    }
    let who = PingTarget {
        path: inspected.path.display().to_string(),
        filesystem: inspected.info.filesystem.clone(),
        device: inspected.info.devices.first().cloned(),
        operation: if args.write { "write" } else { "read" },
        direct: !args.buffered,
        work_bytes: region,
    };
    let opts = PingOptions {
        count: args.count,
        interval: args.interval,
        size: args.size,
        work_size: region,
        write: args.write,
        direct: !args.buffered,
    };
    let mut stdout = std::io::stdout().lock();
    // Running figures, not the requests: an endless ping runs in constant memory.
    let mut tally = ping::Tally::default();
    let mut json = if args.json {
        Some(JsonDocument::start(&who, &mut stdout)?)
    } else {
        None
    };
    let mut printed = Ok(());
    let made = ping::run(&target, &opts, &ctl, &mut |r| {
        tally.add(r);
        if printed.is_ok() {
            printed = match json.as_mut() {
                Some(doc) => doc.request(r, &mut stdout),
                None => out::write_request(&who, r, &mut stdout).and_then(|()| stdout.flush()),
            };
        }
    })
    .map_err(|e| anyhow::anyhow!("{e} (target {})", target.path.display()))?;
    drop(target);
    printed?;
    let summary = tally.summary();
    let interrupted = args.count.is_some_and(|c| made < c);
    match json {
        Some(doc) => doc.finish(summary.as_ref(), interrupted, &mut stdout)?,
        None => out::write_summary(&who, summary.as_ref(), &mut stdout)?,
    }
    Ok(if interrupted {
        ExitCode::from(super::EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}
