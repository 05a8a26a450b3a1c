//! Where a benchmark's results go besides the terminal: the results store, and for disk runs
//! the Prometheus textfile written at the end. Disk runs are saved test by test as each
//! finishes (so Ctrl-C or a crash in a later test keeps the earlier ones); cpu, mem and time
//! runs, whose figures arrive together, in one transaction at the end.

use crate::bench::result::{BenchReport, TestResult};
use crate::bench::session::Hosts;
use crate::cli::{RecordArgs, SaveArgs};
use crate::kernel::SysRoot;
use crate::report::prom;
use crate::store::{NewRun, Place, Results, Store};
use crate::store::{RunSource, RunStatus};
use anyhow::{Context, Result, anyhow, bail};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a run waiting at its group's barrier marks itself as still there.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// A waiting run not marked for this long is taken for gone (killed, or its host lost): it
/// no longer counts toward the group.
const LEASE: Duration = Duration::from_secs(3);

/// The one line of a barrier that did not fill: who came, who did not (by name when the
/// group names its hosts), and the fix; `timeout` is `None` when it was interrupted.
fn not_filled(
    name: &str,
    hosts: &Hosts,
    waiting: &[(i64, String)],
    timeout: Option<Duration>,
) -> String {
    let name = crate::text::escape(name);
    let how = match timeout {
        Some(t) => format!("waited {} s", t.as_secs_f64()),
        None => "was interrupted while waiting".to_string(),
    };
    let raise = if timeout.is_some() {
        " (or raise --group-timeout)"
    } else {
        ""
    };
    match hosts {
        Hosts::Count(n) => {
            let came: Vec<String> = waiting
                .iter()
                .map(|(i, host)| format!("{} (run {i})", crate::text::escape(host)))
                .collect();
            format!(
                "group {name} {how} with {} of {n} hosts ({}); the other {} did not come: start \
                 the same bench disk … --group {name} on each (--db the same store), or lower \
                 --hosts{raise}",
                waiting.len(),
                came.join(", "),
                (*n as usize).saturating_sub(waiting.len()),
            )
        }
        Hosts::Named(names) => {
            let mut came = Vec::new();
            let mut absent = Vec::new();
            for n in names {
                match waiting.iter().find(|(_, h)| h == n) {
                    Some((i, _)) => came.push(format!("{} (run {i})", crate::text::escape(n))),
                    None => absent.push(crate::text::escape(n).into_owned()),
                }
            }
            format!(
                "group {name} {how} with {} of {} hosts ({}); did not come: {}: start the same \
                 bench disk … --group {name} on each (--db the same store), or leave them out \
                 of --hosts{raise}",
                came.len(),
                names.len(),
                came.join(", "),
                absent.join(", "),
            )
        }
    }
}

fn ids(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run being recorded. Dropping it unfinished (the benchmark failed) marks the run `failed`.
pub struct Recorder {
    args: RecordArgs,
    db: Option<(Results, i64)>,
    saved: usize,
    /// The first save that failed; later saves are skipped and `finish` reports it.
    error: Option<anyhow::Error>,
}

impl Recorder {
    /// Opens the store and starts a run from the report as it stands before any test, unless
    /// `--no-save`. A database that cannot be used stops the benchmark before it starts.
    pub fn begin(args: &RecordArgs, report: &BenchReport) -> Result<Recorder> {
        if let Some(path) = &args.prom_textfile {
            check_prom_textfile(path)?;
        }
        let db = if args.save.no_save {
            None
        } else {
            let mut store = Results::open(
                &Place::resolve(args.save.db.db.as_deref())?,
                &SysRoot::real(),
            )?;
            let id = store.begin_run(&new_run(report, args)?)?;
            Some((store, id))
        };
        Ok(Recorder {
            args: args.clone(),
            db,
            saved: 0,
            error: None,
        })
    }

    /// Waits at group `name`'s start barrier in the store until `hosts` wait there (this run
    /// among the first `hosts`; with names, the first run of each named host), looking every
    /// 20 ms and marking this run as waiting every [`HEARTBEAT`]; returns their run ids. A host
    /// not named is refused; past `timeout`, or when `stop` is set, one line naming the hosts
    /// that came (and, by name, those that did not).
    pub fn wait_for_group(
        &mut self,
        name: &str,
        hosts: &Hosts,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Result<Vec<i64>> {
        let Some((store, id)) = &mut self.db else {
            bail!("--group meets the other hosts in the shared store; drop --no-save");
        };
        let start = Instant::now();
        let since = chrono::Utc::now()
            - chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
        let since = since.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        let shown = crate::text::escape(name);
        let mut marked: Option<Instant> = None;
        loop {
            if marked.is_none_or(|m| m.elapsed() >= HEARTBEAT) {
                store.group_heartbeat(*id)?;
                marked = Some(Instant::now());
            }
            let waiting = store.group_waiting(name, &since, LEASE.as_secs_f64())?;
            // This run's own row, as the others see it (absent only if its mark lapsed).
            let mine = waiting
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, host)| host.clone());
            let first = match (hosts, mine) {
                (Hosts::Count(n), _) => {
                    let n = *n as usize;
                    (waiting.len() >= n).then(|| waiting.iter().take(n).cloned().collect())
                }
                (Hosts::Named(_), None) => None,
                (Hosts::Named(names), Some(mine)) => {
                    if !names.contains(&mine) {
                        bail!(
                            "this host, {}, is not one of group {shown}'s hosts ({}); run it on \
                             one of them, or add it to --hosts on every host",
                            crate::text::escape(&mine),
                            crate::text::escape(&names.join(","))
                        );
                    }
                    if let Some((other, _)) = waiting.iter().find(|(_, h)| *h == mine)
                        && other != id
                    {
                        bail!(
                            "host {} already waits in group {shown} (run {other}); run tacho once \
                             per host, or give this run another --group name",
                            crate::text::escape(&mine)
                        );
                    }
                    let firsts: Vec<(i64, String)> = names
                        .iter()
                        .filter_map(|n| waiting.iter().find(|(_, h)| h == n).cloned())
                        .collect();
                    (firsts.len() == names.len()).then_some(firsts)
                }
            };
            if let Some(first) = first {
                let first: Vec<i64> = first.iter().map(|(i, _)| *i).collect();
                if !first.contains(id) {
                    bail!(
                        "group {shown} already has its {} hosts (runs {}); give this run \
                         another --group name",
                        hosts.count(),
                        ids(&first)
                    );
                }
                return Ok(first);
            }
            let stopped = stop.load(Ordering::Relaxed);
            if stopped || start.elapsed() >= timeout {
                bail!(
                    "{}",
                    not_filled(name, hosts, &waiting, (!stopped).then_some(timeout))
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Saves one finished test.
    pub fn test(&mut self, test: &TestResult) {
        let Some((store, id)) = &mut self.db else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let saved = serde_json::to_value(test)
            .map_err(anyhow::Error::from)
            .and_then(|json| store.add_test(*id, self.saved, &json));
        match saved {
            Ok(()) => self.saved += 1,
            Err(e) => self.error = Some(e),
        }
    }

    /// Marks the run finished or interrupted with the final report's fields, writes the
    /// Prometheus textfile, and says on stderr where the run was saved.
    pub fn finish(mut self, report: &BenchReport) -> Result<()> {
        let db = self.db.take();
        let mut run_id = None;
        if let Some((mut store, id)) = db {
            if let Some(e) = self.error.take() {
                let _ = store.set_status(id, RunStatus::Failed);
                return Err(e.context("the results above were printed but not all saved"));
            }
            let mut run = new_run(report, &self.args)?;
            run.status = if report.interrupted {
                RunStatus::Interrupted
            } else {
                RunStatus::Finished
            };
            store.finish_run(id, &run)?;
            eprintln!(
                "saved as run {id} in {} (tacho runs show {id})",
                crate::text::Escaped(&store.shown())
            );
            run_id = Some(id);
        }
        if let Some(path) = &self.args.prom_textfile {
            let text = prom::bench::render(
                report,
                &prom::RunInfo {
                    label: self.args.save.label.as_deref(),
                    run_id,
                    timestamp_s: unix_now_s(),
                },
            );
            write_prom_textfile(path, &text)?;
        }
        Ok(())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some((store, id)) = &mut self.db {
            let _ = store.set_status(*id, RunStatus::Failed);
        }
    }
}

/// The report as a run to store (its tests are saved one by one, not from here).
fn new_run(report: &BenchReport, args: &RecordArgs) -> Result<NewRun> {
    let mut doc = serde_json::to_value(report)?;
    if let Some(tests) = doc.get_mut("tests") {
        *tests = serde_json::Value::Array(Vec::new());
    }
    let mut run = NewRun::from_bench_doc(&doc, RunSource::Bench).map_err(|e| anyhow!(e))?;
    run.label = args.save.label.clone();
    Ok(run)
}

/// Where a `bench cpu`, `bench mem` or `time` run goes, checked before the run starts (a
/// database that cannot be used stops it before it runs) and written once at the end, when
/// the figures arrive together; a run that fails creates no database file.
pub struct RunSaver {
    place: Option<Place>,
    label: Option<String>,
}

impl RunSaver {
    pub fn open(args: &SaveArgs) -> Result<RunSaver> {
        let place = if args.no_save {
            None
        } else {
            let place = Place::resolve(args.db.db.as_deref())?;
            check_database(&place)?;
            Some(place)
        };
        Ok(RunSaver {
            place,
            label: args.label.clone(),
        })
    }

    /// Prints the report on stdout (its JSON document with `--json`, else `human`), then
    /// saves it; returns the run's id when saved.
    pub fn print_and_save<R: serde::Serialize>(
        self,
        report: &R,
        json: bool,
        human: impl FnOnce(&R, &mut dyn Write) -> std::io::Result<()>,
    ) -> Result<Option<i64>> {
        let mut out = std::io::stdout().lock();
        let printed = if json {
            serde_json::to_writer_pretty(&mut out, report)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
        } else {
            human(report, &mut out)
        };
        drop(out);
        // Saved whatever became of the output: a reader that closed the pipe early
        // (`| head`) did not undo the run.
        let id = self.save(report)?;
        printed?;
        Ok(id)
    }

    /// The `--label` given.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// Saves runs made by the command itself (an experiment's sides, in pairs) and says on
    /// stderr where they went and how to compare each pair; returns their ids, none without a
    /// place (`--no-save`).
    pub fn save_pairs(self, pairs: &[[NewRun; 2]]) -> Result<Vec<[i64; 2]>> {
        let Some(place) = self.place else {
            return Ok(Vec::new());
        };
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let mut store = Results::open(&place, &SysRoot::real())?;
        let mut ids = Vec::new();
        for [a, b] in pairs {
            let (a, b) = (store.insert_run(a)?, store.insert_run(b)?);
            eprintln!(
                "saved as runs {a} and {b} in {} (tacho compare {a} {b})",
                crate::text::Escaped(&store.shown())
            );
            ids.push([a, b]);
        }
        Ok(ids)
    }

    /// Saves the run from its JSON document and says on stderr where it went.
    fn save(self, doc: &impl serde::Serialize) -> Result<Option<i64>> {
        let Some(place) = self.place else {
            return Ok(None);
        };
        let doc = serde_json::to_value(doc)?;
        let mut run =
            crate::store::kinds::to_run(&doc, RunSource::Bench).map_err(|e| anyhow!(e))?;
        run.label = self.label;
        let mut store = Results::open(&place, &SysRoot::real())?;
        let id = store.insert_run(&run)?;
        eprintln!(
            "saved as run {id} in {} (tacho runs show {id})",
            crate::text::Escaped(&store.shown())
        );
        Ok(Some(id))
    }
}

/// Saves a `check` or `snapshot` document as a run (`--save`) and says where on stderr.
pub fn save_document(args: &crate::cli::SaveDocArgs, doc: &serde_json::Value) -> Result<()> {
    let mut run = crate::store::kinds::to_run(doc, RunSource::Bench).map_err(|e| anyhow!(e))?;
    run.label = args.label.clone();
    let mut store = Results::open(&Place::resolve(args.db.db.as_deref())?, &SysRoot::real())?;
    let id = store.insert_run(&run)?;
    eprintln!(
        "saved as run {id} in {} (tacho runs show {id})",
        crate::text::Escaped(&store.shown())
    );
    Ok(())
}

/// Refuses a results database that could not be used, without creating it: an existing file
/// must be tacho's (it is opened and checked); for a new one, an existing directory must take
/// a new file (the default file's missing directory must be one this process can make, and is
/// made when the run is saved; another path's must exist). A server is connected
/// to (and its tables made) now, so a wrong URL or password stops the run before it starts.
fn check_database(place: &Place) -> Result<()> {
    let path = match place {
        Place::File(path) => path,
        Place::Server(_) => return Results::open(place, &SysRoot::real()).map(drop),
    };
    if let Some(store) = Store::open_existing(path)? {
        return store.writable();
    }
    if crate::store::directory_to_make(path)?.is_some() {
        return Ok(());
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    // An empty file fits on a full filesystem; the database would not.
    if crate::history::store::filesystem_full(path) {
        anyhow::bail!(
            "the filesystem holding the results database {} is full; free some space there, \
             or pass --db PATH on another filesystem (or --no-save)",
            path.display()
        );
    }
    tempfile::Builder::new()
        .prefix(".tacho-")
        .tempfile_in(dir)
        .map(drop)
        .with_context(|| {
            format!(
                "cannot write the results database {}; pass a writable --db PATH or --no-save",
                path.display()
            )
        })
}

/// Refuses a `--prom-textfile` that could not be written, before anything runs or is saved:
/// its directory must exist and take a new file (the textfile is written as a temporary file
/// there and renamed), and the path must not be a directory.
pub fn check_prom_textfile(path: &std::path::Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let fail = |why: String| {
        anyhow!(
            "cannot write the Prometheus textfile {}: {why}; pass a writable --prom-textfile PATH",
            path.display()
        )
    };
    // A link planted at the name, or a directory, is refused now rather than after the run.
    crate::report::outfile::check(path, crate::report::outfile::Existing::Replace)
        .map_err(|e| fail(e.to_string()))?;
    // A probe file, removed when dropped: the one sure test of write permission.
    tempfile::Builder::new()
        .prefix(".tacho-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    Ok(())
}

/// Writes `text` as the Prometheus textfile at `path`, replacing it atomically.
pub fn write_prom_textfile(path: &std::path::Path, text: &str) -> Result<()> {
    crate::report::write_file_atomically(path, text).with_context(|| {
        format!(
            "cannot write the Prometheus textfile {}; pass a writable --prom-textfile PATH",
            path.display()
        )
    })
}

/// Seconds since the epoch, for the textfile's run timestamp.
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
