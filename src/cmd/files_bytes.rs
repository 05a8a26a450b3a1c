//! `tacho files --bytes`: counts bytes per process and file with eBPF until the duration or
//! Ctrl-C, finding each file's path while its process holds it open, then reports.

use crate::bench::derive::{self, Growth, Observed};
use crate::bpf::files::{FileIo, FileTracer, Uncounted};
use crate::cli::FilesArgs;
use crate::files::inode_paths::{self, FileId};
use crate::files::watch::{Names, Sink, WatchConfig, Watcher};
use crate::kernel::SysRoot;
use crate::report::derived_job;
use crate::report::files::EventWriter;
use crate::report::files_bytes::{self as show, Row, Short};
use crate::report::outfile::{self, Existing};
use anyhow::Result;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often paths are looked up while counting: a file opened, written and closed faster
/// than this may stay known by its inode only.
const LOOK: Duration = Duration::from_millis(100);

/// Runs the byte count; `Ok(None)` when eBPF is refused (after saying why), so the caller
/// watches as without `--bytes`. Files are named from their processes' descriptors, and from
/// a fanotify watch of `config` beside it (a file written and closed between two looks at the
/// descriptors is named by the watch's events).
pub fn run(args: &FilesArgs, config: WatchConfig) -> Result<Option<ExitCode>> {
    let Some(beside) = Beside::start("--bytes needs it, so files are watched without byte counts")
    else {
        return Ok(None);
    };
    let root = SysRoot::real();
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    eprintln!(
        "tacho: counting bytes per process and file{}",
        if args.duration.is_some() {
            ""
        } else {
            "; Ctrl-C to stop"
        }
    );
    let start = Instant::now();
    let inodes = match Watcher::new(&root, config) {
        Ok(mut watcher) => {
            let mut sink: Sink<EventWriter> = Sink {
                events: None,
                summary: None,
                inodes: Some(Names::default()),
            };
            watcher.run(&mut sink, &stop)?;
            sink.inodes.unwrap_or_default()
        }
        Err(e) => {
            eprintln!(
                "tacho: note: files closed within {} ms may stay unnamed ({})",
                LOOK.as_millis(),
                crate::text::Escaped(&e.to_string())
            );
            let deadline = args.duration.map(|d| start + d);
            while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
                std::thread::sleep(LOOK);
            }
            Names::default()
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let (rows, short) = beside.finish(args, &inodes);
    let mut out = std::io::stdout().lock();
    if args.json {
        show::write_json(&rows, &short, seconds, &mut out)?;
    } else {
        show::write_text(&rows, &short, seconds, args.top, &mut out)?;
    }
    Ok(Some(ExitCode::SUCCESS))
}

/// `tacho files --pid P --derive-job`: counts the processes' reads, writes and flushes per
/// file with eBPF, and how much each file grows, until the duration or Ctrl-C; then writes the
/// fio job they amount to. Nothing seen is an error (exit 2), with no file written.
pub fn derive_job(args: &FilesArgs) -> Result<ExitCode> {
    if let Some(path) = &args.output {
        outfile::check(path, Existing::Replace)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let seen = watch(&args.pid, args.duration, "--derive-job", &stop)?;
    let mut text = Vec::new();
    derived_job::write(&seen.jobs, &seen.watched(&args.pid), &mut text)?;
    match &args.output {
        Some(path) => {
            outfile::write_atomically(path, &text, Existing::Replace)?;
            eprintln!(
                "tacho: wrote {} for {} to {}",
                crate::units::plural(seen.jobs.len() as u64, "job"),
                crate::units::plural(seen.jobs.len() as u64, "file"),
                crate::text::path(path)
            );
        }
        None => std::io::stdout().lock().write_all(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// What the watched processes did, and the jobs it amounts to.
pub(super) struct Derived {
    /// The jobs, busiest file first (never empty).
    pub jobs: Vec<derive::DerivedJob>,
    /// The tracer's counts for each file of `jobs`, in the same order.
    pub counts: Vec<FileIo>,
    /// The processes' command names, as the tracer saw them.
    pub comms: Vec<String>,
    /// How long tacho watched, in seconds.
    pub seconds: f64,
    /// Threads the processes had when the watch ended.
    pub threads: Option<u64>,
}

impl Derived {
    /// Who was watched, for the job file's comments.
    pub fn watched<'a>(&self, pids: &'a [i32]) -> derived_job::Watched<'a> {
        derived_job::Watched {
            pids,
            comms: self.comms.clone(),
            seconds: self.seconds,
            threads: self.threads,
        }
    }
}

/// Counts the reads, writes and flushes of `pids` per file with eBPF, and how much each file
/// grows, for `duration` (or until `stop`), and derives their jobs. `option` names the option
/// that asked, for its errors: a process that is not there, eBPF refused, or no I/O seen.
pub(super) fn watch(
    pids: &[i32],
    duration: Option<Duration>,
    option: &str,
    stop: &AtomicBool,
) -> Result<Derived> {
    let root = SysRoot::real();
    if let Some(gone) = pids
        .iter()
        .find(|pid| !root.proc.join(pid.to_string()).is_dir())
    {
        anyhow::bail!("there is no process {gone}; give the pid of a running process");
    }
    let tracer = FileTracer::start().map_err(|reason| {
        anyhow::anyhow!(
            "{option} counts each read, write and flush with eBPF, which is not available \
             here: {}",
            crate::text::escape(&reason.to_string())
        )
    })?;
    let shown: Vec<String> = pids.iter().map(i32::to_string).collect();
    eprintln!(
        "tacho: watching the file I/O of process {}{}",
        shown.join(", "),
        match duration {
            Some(d) => format!(" for {} s", d.as_secs_f64()),
            None => "; Ctrl-C to stop".into(),
        }
    );
    let start = Instant::now();
    let deadline = duration.map(|d| start + d);
    let mut seen = HashMap::new();
    let mine = |totals: Vec<FileIo>| -> Vec<FileIo> {
        totals
            .into_iter()
            .filter(|io| pids.contains(&(io.pid as i32)))
            .collect()
    };
    // The calls' time in flight is counted between the first look and the last, over the
    // time between them: the tracer counted from before `start`.
    let first_look = mine(tracer.totals());
    let first_at = Instant::now();
    let busy_before: HashMap<(u32, FileId), u64> = first_look
        .iter()
        .map(|io| ((io.pid, (io.dev, io.ino)), io.busy_ns))
        .collect();
    watch_files(&root, &first_look, &mut seen);
    loop {
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        std::thread::sleep(LOOK);
        watch_files(&root, &mine(tracer.totals()), &mut seen);
    }
    let totals = mine(tracer.totals());
    let window = first_at.elapsed().as_secs_f64();
    watch_files(&root, &totals, &mut seen);
    let seconds = start.elapsed().as_secs_f64();
    let threads = tracer.io_threads();
    let observed: Vec<Observed> = totals
        .iter()
        .map(|io| {
            let key = (io.pid, (io.dev, io.ino));
            Observed {
                busy_ns: io
                    .busy_ns
                    .saturating_sub(busy_before.get(&key).copied().unwrap_or(0)),
                io_threads: threads.get(&io.pid).copied(),
                ..observed(io, seen.get(&key))
            }
        })
        .collect();
    let jobs = derive::derive(&observed, window);
    if jobs.is_empty() {
        anyhow::bail!(
            "no reads or writes of process {} were seen in {seconds:.1} s, so there is no job to \
             derive; watch while it does I/O (a longer --duration) or check the pid",
            shown.join(", ")
        );
    }
    let counts = jobs
        .iter()
        .filter_map(|j| {
            let i = observed.iter().position(|o| *o == j.observed)?;
            totals.get(i).cloned()
        })
        .collect();
    let mut comms: Vec<String> = Vec::new();
    for io in &totals {
        if !comms.contains(&io.comm) {
            comms.push(io.comm.clone());
        }
    }
    let threads = pids
        .iter()
        .map(|pid| {
            std::fs::read_dir(root.proc.join(pid.to_string()).join("task"))
                .map(|d| d.count() as u64)
                .ok()
        })
        .sum::<Option<u64>>();
    Ok(Derived {
        jobs,
        counts,
        comms,
        seconds,
        threads,
    })
}

/// A file's size and the bytes written to it, the first and the last time it was seen open.
struct Seen {
    path: PathBuf,
    first: (u64, u64),
    last: Option<(u64, u64)>,
}

/// Looks at the open descriptors of the processes in `totals` for their files' sizes.
fn watch_files(root: &SysRoot, totals: &[FileIo], seen: &mut HashMap<(u32, FileId), Seen>) {
    let mut wanted: HashMap<u32, HashSet<FileId>> = HashMap::new();
    for io in totals {
        wanted.entry(io.pid).or_default().insert((io.dev, io.ino));
    }
    for (pid, ids) in wanted {
        for (id, (path, size)) in inode_paths::open_files(root, pid, &ids) {
            let Some(io) = totals
                .iter()
                .find(|io| io.pid == pid && (io.dev, io.ino) == id)
            else {
                continue;
            };
            // A path names the file only if it ends in the name the kernel gave at its first I/O.
            if !inode_paths::names_match(&path, &io.name) {
                continue;
            }
            let now = (size, io.write_bytes);
            seen.entry((pid, id))
                .and_modify(|s| s.last = Some(now))
                .or_insert(Seen {
                    path,
                    first: now,
                    last: None,
                });
        }
    }
}

/// What the tracer counted for one file, with its size and growth when seen open.
fn observed(io: &FileIo, seen: Option<&Seen>) -> Observed {
    Observed {
        path: seen.map(|s| s.path.clone()),
        read_bytes: io.read_bytes,
        reads: io.reads,
        write_bytes: io.write_bytes,
        writes: io.writes,
        write_range: io.write_range,
        syncs: io.syncs,
        fsyncs: io.fsyncs,
        fdatasyncs: io.fdatasyncs,
        busy_ns: io.busy_ns,
        io_threads: None,
        size: seen.map(|s| s.last.unwrap_or(s.first).0),
        growth: seen.and_then(|s| {
            let (first, last) = (s.first, s.last?);
            Some(Growth {
                grew: last.0.saturating_sub(first.0),
                written: last.1.saturating_sub(first.1),
            })
        }),
    }
}

/// Paths seen per (process, device and inode): more than one when a deleted file's inode
/// number was given to a new file. Each counted file takes the one that ends in its own name.
type Paths = HashMap<(u32, FileId), Vec<PathBuf>>;

/// Bytes counted beside the `--summary` watch: a thread learns paths while the watch runs.
pub(super) struct Beside {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<FileIo>, Vec<Uncounted>, Paths)>,
}

impl Beside {
    /// Starts counting when eBPF can (root, BTF, the load allowed); otherwise says once why,
    /// then `without` (what the command does instead), and returns `None`.
    pub(super) fn start(without: &str) -> Option<Beside> {
        let tracer = match FileTracer::start() {
            Ok(t) => t,
            Err(reason) => {
                let reason = reason.to_string();
                eprintln!("tacho: note: {}; {without}", crate::text::Escaped(&reason));
                return None;
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let until = done.clone();
        let thread = std::thread::spawn(move || {
            let root = SysRoot::real();
            let mut paths = HashMap::new();
            loop {
                learn_paths(&root, &tracer.totals(), &mut paths);
                if until.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(LOOK);
            }
            (tracer.totals(), tracer.uncounted(), paths)
        });
        Some(Beside { done, thread })
    }

    /// Stops counting; the rows the filters of `args` keep, each with its path when known
    /// (from the process's descriptors, else from the watch's events, `inodes`), and the
    /// processes among them whose requests were not all counted.
    pub(super) fn finish(self, args: &FilesArgs, inodes: &Names) -> (Vec<Row>, Vec<Short>) {
        self.done.store(true, Ordering::Relaxed);
        let Ok((totals, uncounted, mut paths)) = self.thread.join() else {
            return (Vec::new(), Vec::new());
        };
        for io in &totals {
            let id = (io.dev, io.ino);
            if let Some(path) = inodes.get(&id) {
                add_path(&mut paths, (io.pid, id), path);
            }
        }
        let rows = rows(args, totals, &paths);
        let short = short(args, uncounted, &rows);
        (rows, short)
    }
}

/// The processes with requests not counted whole, named as their rows name them, filtered as
/// `args` say (with `--path`, only those with a kept row: their uncounted requests may be for
/// any file).
fn short(args: &FilesArgs, uncounted: Vec<Uncounted>, rows: &[Row]) -> Vec<Short> {
    uncounted
        .into_iter()
        .filter_map(|u| {
            let row = rows.iter().find(|r| r.io.pid == u.pid);
            let pid = u.pid as i32;
            let comm = row.map(|r| (r.io.comm.clone(), r.io.comm_hex.clone()));
            let comm_ok = |c: &Option<(String, Option<String>)>| {
                (args.comm.is_empty() || c.as_ref().is_some_and(|c| args.comm.contains(&c.0)))
                    && !c.as_ref().is_some_and(|c| args.exclude_comm.contains(&c.0))
            };
            let kept = (args.pid.is_empty() || args.pid.contains(&pid))
                && !args.exclude_pid.contains(&pid)
                && comm_ok(&comm)
                && (args.path.is_empty() || row.is_some())
                && u.pid != std::process::id();
            kept.then_some(Short { uncounted: u, comm })
        })
        .collect()
}

/// The counted files of other processes than tacho, with their paths, filtered as `args` say.
fn rows(args: &FilesArgs, totals: Vec<FileIo>, paths: &Paths) -> Vec<Row> {
    let me = std::process::id();
    totals
        .into_iter()
        .filter(|io| io.pid != me)
        .map(|io| {
            let path = named(paths, &io).cloned();
            Row { io, path }
        })
        .filter(|r| wanted(args, r))
        .collect()
}

/// The path seen for `io`'s device and inode that ends in the file's own name, if any.
fn named<'a>(paths: &'a Paths, io: &FileIo) -> Option<&'a PathBuf> {
    paths
        .get(&(io.pid, (io.dev, io.ino)))?
        .iter()
        .find(|p| inode_paths::names_match(p, &io.name))
}

fn add_path(paths: &mut Paths, key: (u32, FileId), path: &PathBuf) {
    let seen = paths.entry(key).or_default();
    if !seen.contains(path) {
        seen.push(path.clone());
    }
}

/// Finds the paths of files not yet named, among their processes' open descriptors.
fn learn_paths(root: &SysRoot, totals: &[FileIo], paths: &mut Paths) {
    let mut missing: HashMap<u32, HashSet<FileId>> = HashMap::new();
    for io in totals {
        if named(paths, io).is_none() {
            missing.entry(io.pid).or_default().insert((io.dev, io.ino));
        }
    }
    for (pid, ids) in missing {
        for (id, path) in inode_paths::open_paths(root, pid, &ids) {
            add_path(paths, (pid, id), &path);
        }
    }
}

/// `--pid`, `--comm` and `--path` (a prefix of the file's path), and their exclusions.
fn wanted(args: &FilesArgs, r: &Row) -> bool {
    let pid = r.io.pid as i32;
    (args.pid.is_empty() || args.pid.contains(&pid))
        && (args.comm.is_empty() || args.comm.contains(&r.io.comm))
        && (args.path.is_empty()
            || r.path
                .as_ref()
                .is_some_and(|p| args.path.iter().any(|prefix| p.starts_with(prefix))))
        && !args.exclude_pid.contains(&pid)
        && !args.exclude_comm.contains(&r.io.comm)
}
