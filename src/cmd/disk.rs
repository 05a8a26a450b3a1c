//! `tacho bench disk`: resolve the arguments, run `bench::session`, report and save.

use super::progress::Bar;
use super::record::Recorder;
use crate::bench::result::{BenchReport, TestResult};
use crate::bench::session::{self, Ending, Request};
use crate::bench::suite;
use crate::bench::{fiojob, like};
use crate::cli::DiskArgs;
use crate::kernel::SysRoot;
use crate::report;
use anyhow::{Result, bail};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs `tacho bench disk`: the exit status is 1 when the etcd suite's threshold failed, 130 after
/// Ctrl-C.
pub fn run(args: &DiskArgs) -> Result<ExitCode> {
    if args.list_suites {
        return list_suites(args.json);
    }
    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    let like = match args.like_pid {
        Some(pid) => Some(like_jobs(pid, args.duration.unwrap_or(LIKE_WATCH), &stop)?),
        None => None,
    };
    if like.is_some() && stop.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("tacho: interrupted while watching the process; nothing was run");
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }
    let jobs = match &like {
        Some((_, jobs)) => Some(jobs.clone()),
        None => args.fio_job.as_deref().map(read_jobs).transpose()?,
    };
    let req = Request {
        target: args.target.clone(),
        options: args.options(),
        engine: args.engine,
        jobs,
        repeat: args.repeat,
        destroy_data: args.destroy_data,
        allow_buffered: args.allow_buffered,
        method_changes: method_changes(args),
        group: args.group.clone().zip(args.hosts.clone()),
    };
    if args.group.is_some() && args.record.save.no_save {
        bail!("--group meets the other hosts in the shared store; drop --no-save");
    }
    let planned = session::plan(SysRoot::real(), &req)?;
    if args.print_fio {
        std::io::stdout().write_all(planned.fio_commands().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut saving = Saving {
        args: &args.record,
        recorder: None,
        group: req.group.clone(),
        group_timeout: args.group_timeout.unwrap_or(GROUP_TIMEOUT),
        stop: stop.clone(),
        started: None,
    };
    let mut report = planned.run(&req, stop, &Bar::new(), &mut saving)?;
    if let (Some(group), Some((runs, at))) = (report.group.as_mut(), saving.started.take()) {
        group.runs = runs;
        group.started_unix_ns = Some(at);
    }
    if let (Some(pid), Some((seen, _))) = (args.like_pid, &like) {
        report.like = Some(like::judge(
            pid,
            seen.comms.clone(),
            seen.seconds,
            &like_seen(seen),
            &report.tests,
        ));
    }
    let printed = if args.json {
        report::json::write(&report, &mut std::io::stdout().lock())
    } else {
        let width = crate::fit::stdout_width();
        let mut out = crate::fit::Fit::new(std::io::stdout().lock(), width);
        report::table::write(&report, &mut out, width).and_then(|()| out.flush())
    };
    // Saved whatever became of the output: a reader that closed the pipe early (`| head`)
    // did not make the run fail.
    if let Some(recorder) = saving.recorder {
        recorder.finish(&report)?;
    }
    printed?;
    Ok(match report.ending() {
        Ending::Interrupted => ExitCode::from(super::EXIT_INTERRUPTED),
        Ending::ThresholdFailed => ExitCode::from(1),
        Ending::Passed => ExitCode::SUCCESS,
    })
}

/// How long a `--group` host waits for the others when `--group-timeout` is not given.
const GROUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The store's side of a run: begun with the report's head, each test saved as it finishes;
/// for a group, the start barrier once the run is saved, right before the first test.
struct Saving<'a> {
    args: &'a crate::cli::RecordArgs,
    recorder: Option<Recorder>,
    group: Option<(String, crate::bench::session::Hosts)>,
    group_timeout: std::time::Duration,
    stop: Arc<AtomicBool>,
    /// The group's run ids and when this host started, in ns since the Unix epoch.
    started: Option<(Vec<i64>, u64)>,
}

impl session::Observer for Saving<'_> {
    fn started(&mut self, report: &BenchReport) -> Result<()> {
        let recorder = self.recorder.insert(Recorder::begin(self.args, report)?);
        if let Some((name, hosts)) = &self.group {
            eprintln!(
                "tacho: waiting for {} hosts of group {}",
                hosts.count(),
                crate::text::escape(name)
            );
            let runs = recorder.wait_for_group(name, hosts, self.group_timeout, &self.stop)?;
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            self.started = Some((runs, at));
        }
        Ok(())
    }

    fn test(&mut self, test: &TestResult) {
        if let Some(r) = &mut self.recorder {
            r.test(test);
        }
    }
}

/// How long `--like-pid` watches the process when `--duration` is not given.
const LIKE_WATCH: std::time::Duration = std::time::Duration::from_secs(10);

/// `--like-pid`: the process watched and its jobs, derived as `files --derive-job` derives
/// them and read back from that job file's text, as `--fio-job` reads one.
fn like_jobs(
    pid: i32,
    duration: std::time::Duration,
    stop: &AtomicBool,
) -> Result<(super::files_bytes::Derived, Vec<fiojob::Job>)> {
    let seen = super::files_bytes::watch(&[pid], Some(duration), "--like-pid", stop)?;
    let mut text = Vec::new();
    report::derived_job::write(&seen.jobs, &seen.watched(&[pid]), &mut text)?;
    let text = String::from_utf8_lossy(&text);
    let jobs = fiojob::parse(&text)
        .and_then(|sections| sections.iter().map(fiojob::job).collect())
        .map_err(|e| anyhow::anyhow!("the jobs derived from process {pid}: {e}"))?;
    Ok((seen, jobs))
}

/// What each derived job's file asked of its disk, in the jobs' order.
fn like_seen(seen: &super::files_bytes::Derived) -> Vec<like::Seen> {
    seen.jobs
        .iter()
        .zip(&seen.counts)
        .map(|(job, io)| like::Seen {
            path: job
                .observed
                .path
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            syncs: if job.fdatasync.is_some() { io.syncs } else { 0 },
            sync_mean_ns: (io.syncs > 0).then(|| io.sync_ns as f64 / io.syncs as f64),
            sync_p99_ns: crate::bpf::hist::log2_percentile_us(&io.sync_hist, 0.99)
                .map(|us| us * 1e3),
        })
        .collect()
}

/// A fio job file is a few KiB; anything past this is not one (`/dev/zero` would never end).
const JOB_FILE_LIMIT: u64 = 1 << 20;

/// The jobs of a fio job file, each refused option named.
fn read_jobs(file: &Path) -> Result<Vec<fiojob::Job>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(JOB_FILE_LIMIT + 1).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("cannot read the job file {}: {e}", file.display()))?;
    if bytes.len() as u64 > JOB_FILE_LIMIT {
        bail!(
            "the job file {} is larger than 1 MiB, which no fio job file is; give a fio job file",
            file.display()
        );
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "the job file {} is not text (UTF-8); give a fio job file",
            file.display()
        )
    })?;
    let sections =
        fiojob::parse(&text).map_err(|e| anyhow::anyhow!("job file {}: {e}", file.display()))?;
    sections
        .iter()
        .map(fiojob::job)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("job file {}: {e}", file.display()))
}

fn list_suites(json: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let suites = suite::all();
    if json {
        let doc = serde_json::json!({ "schema": "tacho.suites.v1", "suites": suites });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        report::suites::write(&suites, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The options that changed a suite's method, in words (`runtime 1s`), so a stored run says
/// what made it non-standard.
fn method_changes(args: &DiskArgs) -> Vec<String> {
    let secs = |d: std::time::Duration| format!("{}s", d.as_secs_f64());
    let mut out = Vec::new();
    if let Some(d) = args.runtime {
        out.push(format!("runtime {}", secs(d)));
    }
    if let Some(d) = args.ramp {
        out.push(format!("ramp {}", secs(d)));
    }
    if let Some(d) = args.flat_for {
        out.push(format!("flat for {}", secs(d)));
    }
    if let Some(size) = args.size {
        out.push(format!("size {}", crate::units::format_size(size)));
    }
    if args.buffered {
        out.push("buffered".into());
    }
    out
}
