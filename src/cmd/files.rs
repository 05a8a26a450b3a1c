//! `tacho files`: resolve options, check privileges, watch (or map sectors), report.

use crate::cli::FilesArgs;
use crate::files::filter::FilterSpec;
use crate::files::procs::{self, CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN};
use crate::files::summary::Summary;
use crate::files::watch::{self, Names, Outcome, Sink, WatchConfig, WatchError, Watcher};
use crate::kernel::SysRoot;
use crate::report::files::{self as output, EventWriter, Format};
use crate::report::outfile::NewFile;
use crate::text::Escaped;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs `tacho files`: a live watch until the duration or Ctrl-C, or the `--sector` map.
pub fn run(args: &FilesArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    if !args.sector.is_empty() {
        return super::sector::run(&root, &args.sector, args.relative, args.json);
    }
    if args.derive_job {
        return super::files_bytes::derive_job(args);
    }
    let config = resolve(&root, args)?;
    if args.bytes
        && let Some(code) = super::files_bytes::run(args, config.clone())?
    {
        return Ok(code);
    }
    // Checked before fanotify is touched, so the message names both capabilities even where
    // fanotify_init would succeed unprivileged (kernels from 5.13 allow limited groups).
    if !procs::has_capability(&root, CAP_SYS_ADMIN)
        || !procs::has_capability(&root, CAP_DAC_READ_SEARCH)
    {
        return Err(WatchError::NeedPrivilege.into());
    }
    let mut watcher = Watcher::new(&root, config)?;
    // The output file is created only once watching is set up, so a refused start leaves
    // nothing behind.
    // A file that could not be written whole is removed when this returns early (`made`).
    let (out, made): (Option<Box<dyn Write>>, _) = match &args.output {
        Some(path) => {
            let (file, made) = create_output(path)?;
            (Some(Box::new(BufWriter::new(file))), Some(made))
        }
        None if args.summary => (None, None),
        None => (Some(Box::new(BufWriter::new(std::io::stdout()))), None),
    };
    let format = if args.json {
        Format::Json
    } else {
        Format::Text {
            timestamps: args.timestamps,
        }
    };
    // The summary also counts bytes per file and process where eBPF allows (--bytes alone
    // reports only those).
    let beside = args
        .summary
        .then(|| super::files_bytes::Beside::start("the summary counts events only, without bytes"))
        .flatten();
    let mut sink = Sink {
        events: out.map(|out| EventWriter { out, format }),
        summary: args.summary.then(Summary::default),
        inodes: beside.is_some().then(Names::default),
    };
    eprintln!(
        "tacho: watching {}{}",
        Escaped(&watcher.watching.join(", ")),
        if args.duration.is_some() {
            ""
        } else {
            "; Ctrl-C to stop"
        }
    );
    for note in &watcher.notes {
        eprintln!("tacho: note: {}", Escaped(note));
    }
    if format == Format::Json
        && let Some(out) = sink.events.as_mut()
    {
        output::write_json_header(&mut out.out, &watcher.watching)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let outcome = watcher
        .run(&mut sink, &stop)
        .map_err(|e| full_output(args, e))?;
    if let (Some(beside), Some(summary)) = (beside, sink.summary.as_mut()) {
        summary.counted_bytes();
        let inodes = sink.inodes.take().unwrap_or_default();
        let (rows, short) = beside.finish(args, &inodes);
        for line in crate::report::files_bytes::short_lines(&short) {
            eprintln!("tacho: note: {line}");
        }
        summary.uncounted(short.into_iter().map(|s| s.uncounted).collect());
        for row in rows {
            let b = crate::files::summary::Bytes {
                read: row.io.read_bytes,
                written: row.io.write_bytes,
            };
            summary.add_bytes(row.io.pid as i32, &row.io.comm, row.path.as_deref(), b);
        }
    }
    finish(args, sink, &outcome)?;
    if let Some(made) = made {
        made.keep();
    }
    Ok(ExitCode::SUCCESS)
}

/// A full filesystem under `-o FILE` named with its fix; other failures as they are.
fn full_output(args: &FilesArgs, e: WatchError) -> anyhow::Error {
    let full = matches!(&e, WatchError::Write(io)
        if matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)));
    match &args.output {
        Some(path) if full => anyhow::anyhow!(
            "the filesystem holding {} is full (or the quota is used up), so not every event \
             could be written and the file was removed; free some space there, or pass -o FILE \
             on another filesystem",
            path.display()
        ),
        _ => e.into(),
    }
}

/// Turns the arguments into a watch configuration; every bad value dies here, before any
/// side effect.
fn resolve(root: &SysRoot, args: &FilesArgs) -> Result<WatchConfig> {
    let to_tgid = |pid: i32, option: &str| -> Result<i32> {
        procs::tgid(root, pid)
            .with_context(|| format!("{option} {pid}: no such process; check the id with ps -e"))
    };
    let pids = args
        .pid
        .iter()
        .map(|&p| to_tgid(p, "--pid"))
        .collect::<Result<Vec<_>>>()?;
    let exclude_pids = args
        .exclude_pid
        .iter()
        .map(|&p| procs::tgid(root, p).unwrap_or(p))
        .collect();
    let paths: Vec<PathBuf> = args
        .path
        .iter()
        .map(|p| path_filter(p))
        .collect::<Result<_>>()?;
    let mounts = if !args.mount.is_empty() {
        args.mount
            .iter()
            .map(|m| {
                std::fs::canonicalize(m).with_context(|| {
                    format!(
                        "--mount {}: no such file or directory; give an existing path",
                        m.display()
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?
    } else if !paths.is_empty() {
        watch::mounts_for_paths(root, &paths)?
    } else {
        watch::default_mounts(root)?
    };
    if mounts.is_empty() {
        bail!("no device-backed filesystem is mounted; name one with --mount PATH");
    }
    for name in args.comm.iter().chain(&args.exclude_comm) {
        // The kernel keeps 15 bytes of a command name; a longer one would never match.
        if name.len() > 15 || name.is_empty() {
            bail!(
                "--comm {name:?}: command names are 1 to 15 bytes as the kernel keeps them; \
                 use the name ps -o comm shows"
            );
        }
    }
    if let Some(path) = &args.output {
        crate::report::outfile::check(path, crate::report::outfile::Existing::Refuse)
            .context("--output")?;
    }
    Ok(WatchConfig {
        mounts,
        filter: FilterSpec {
            pids,
            children: args.children,
            comms: args.comm.clone(),
            paths,
            ops: args.ops,
            exclude_pids,
            exclude_comms: args.exclude_comm.clone(),
        },
        duration: args.duration,
        unbounded_queue: args.unbounded_queue,
    })
}

/// A `--path` as the events name it; one that does not exist is refused (`--path
/// /nonexistent` once watched nothing in silence). A file about to be created is watched
/// through its directory, which the message offers.
fn path_filter(p: &Path) -> Result<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(p) {
        return Ok(real);
    }
    let full = absolute(p);
    match full.parent().filter(|d| d.is_dir()) {
        Some(dir) => bail!(
            "--path {}: no such file or directory; give one that exists (for a file not \
             created yet, its directory: --path {})",
            p.display(),
            dir.display()
        ),
        None => bail!(
            "--path {}: no such file or directory, nor its directory; give an existing \
             directory or file",
            p.display()
        ),
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn create_output(path: &Path) -> Result<(std::fs::File, NewFile)> {
    crate::report::outfile::create_new_streaming(path).context("--output")
}

/// Totals, the lost-event warning and the summary, after the watch ends.
fn finish(args: &FilesArgs, mut sink: Sink<EventWriter>, outcome: &Outcome) -> Result<()> {
    // Written out now: a dropped BufWriter would lose a failed last write without a word.
    if let Some(events) = sink.events.as_mut() {
        events
            .out
            .flush()
            .map_err(|e| full_output(args, WatchError::Write(e)))?;
    }
    let seconds = outcome.elapsed.as_secs_f64();
    if outcome.overflows > 0 {
        eprintln!(
            "tacho: warning: the event queue overflowed {} time(s); at least {} event(s) were \
             lost (the kernel does not count them); try --unbounded-queue",
            outcome.overflows, outcome.overflows
        );
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        #[derive(Serialize)]
        struct Trailer {
            schema: &'static str,
            duration_ms: u64,
            events_read: u64,
            events_shown: u64,
            overflows: u64,
            lost_events_min: u64,
            /// Events lost because the kernel could not open their file (descriptor mode).
            undeliverable: u64,
            /// Stopped by Ctrl-C or a signal rather than --duration.
            interrupted: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            summary: Option<crate::files::summary::Report>,
        }
        let trailer = Trailer {
            schema: output::SCHEMA,
            duration_ms: outcome.elapsed.as_millis() as u64,
            events_read: outcome.events_read,
            events_shown: outcome.events_shown,
            overflows: outcome.overflows,
            lost_events_min: outcome.overflows,
            undeliverable: outcome.undeliverable,
            interrupted: outcome.interrupted,
            summary: sink.summary.as_ref().map(|s| s.report(seconds)),
        };
        // The trailer follows the events in the same stream, or goes to stdout when the events
        // went to a file (or were not listed).
        let out: &mut dyn Write = match (&mut sink.events, &args.output) {
            (Some(events), None) => &mut events.out,
            _ => &mut stdout,
        };
        serde_json::to_writer(&mut *out, &trailer)?;
        out.write_all(b"\n")?;
        out.flush()?;
    } else if let Some(summary) = &sink.summary {
        output::write_summary(&mut stdout, summary, seconds)?;
    }
    eprintln!(
        "tacho: {} event(s) shown of {} read in {seconds:.1} s",
        outcome.events_shown, outcome.events_read
    );
    Ok(())
}
