//! `tacho record` (samples into the history file) and the history side of `tacho top`:
//! `--replay [--at TIME]` and `--from TIME [--to TIME]`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use crate::cli::{HistoryRecordArgs, TopArgs};
use crate::config::Settings;
use crate::diagnose::live::{Pipeline, Session};
use crate::diagnose::model::TopSample;
use crate::diagnose::sample::Sampler;
use crate::history::store::{self, is_disk_full};
use crate::history::timeline::Timeline;
use crate::history::{History, Make, Record, summary, when};
use crate::kernel::SysRoot;
use crate::report::incident::{self, Incident};
use crate::report::top::{text, write_json_line};

/// A full disk that refused no row for this long is a new episode, said again.
const DISK_FULL_EPISODE: std::time::Duration = std::time::Duration::from_secs(600);

/// The unit `--print-unit` prints and `contrib/` ships.
const UNIT: &str = include_str!("../../contrib/tacho-record.service");
/// The binary the unit's ExecStart runs.
const PACKAGED: &str = "/usr/bin/tacho";
/// Intervals judged before a replayed moment, so a device's await baseline is as it was live.
const BASELINE_INTERVALS: usize = 60;

/// `tacho record`.
pub fn record(args: &HistoryRecordArgs, settings: &Settings) -> Result<ExitCode> {
    if args.print_unit {
        print!("{UNIT}");
        // The unit runs the package's binary; one copied elsewhere by hand needs ExecStart
        // edited (a unit that ran whatever path tacho was started from could run, as root, a
        // file another user may replace).
        if let Ok(exe) = std::env::current_exe()
            && exe != std::path::Path::new(PACKAGED)
        {
            eprintln!(
                "note: the unit's ExecStart runs {PACKAGED} (where the Debian package puts \
                 tacho); this binary is {}: edit ExecStart if it stays there",
                crate::text::Escaped(&exe.to_string_lossy())
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    // The flag, else the config file, else the default (`Settings` chose).
    let interval = settings.record_interval.value;
    let keep = settings.record_keep.value;
    // Only the default place is made whole; a typed path gets at most its last directory.
    let (path, make) = match (&args.dir, &args.file) {
        (Some(dir), _) => (dir.join("history.db"), Make::OwnDirectory),
        (None, Some(file)) => (file.clone(), Make::OwnDirectory),
        (None, None) if std::env::var_os("TACHO_HISTORY").is_some_and(|p| !p.is_empty()) => {
            (store::resolve_path(None)?, Make::OwnDirectory)
        }
        (None, None) => (store::resolve_path(None)?, Make::Chain),
    };
    let history = History::create(&path, make)?;
    let fleet = super::fleet::Settings::resolve(args.fleet.db.as_deref(), &args.fleet.labels)?;
    let mut ship = match &fleet.url {
        Some(url) => Some(shipper(&history, url, &fleet, args.fleet.backlog)?),
        None => None,
    };
    let mut judge = summary::Judge::default();
    let mut sampler = Sampler::new(SysRoot::real()).context("cannot start sampling")?;
    // As live `top` does: each request's submitter, so a replay blames the writer exactly
    // (not the shell that reaped it). Without eBPF, the samples say why and /proc stands in.
    // Loaded for this run alone: a recorder runs for days, and holding the set kept for the
    // boot would make every `top` beside it load its own.
    sampler.trace_block_io(false);
    if args.waits {
        sampler.trace_waits();
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let host = crate::diagnose::model::ModelOptions::for_this_host(
        1,
        crate::diagnose::model::SortKey::Io,
        sampler.delayacct,
    );
    eprintln!(
        "recording to {} every {}s (keep {}, at most {}); stop with Ctrl-C or SIGTERM",
        crate::text::Escaped(&path.display().to_string()),
        interval.as_secs_f64(),
        age(keep),
        crate::units::format_bytes_approx(args.max_size),
    );
    let mut first = true;
    // When the disk last refused a row (and the recorder said so).
    let mut disk_full: Option<std::time::Instant> = None;
    let mut short_of_descriptors = false;
    // Connections are too many to keep raw: each record keeps the interval's TCP traffic
    // by process, service and peer, computed here from the previous sample.
    let mut prev: Option<crate::diagnose::sample::Sample> = None;
    let mut settings = crate::history::settings::Recorder::default();
    let root = SysRoot::real();
    Session::samples(
        &mut sampler,
        interval,
        args.count,
        &stop,
        |sample, devices| {
            let sample = match sample {
                Ok(sample) => sample,
                // Said once per shortage; the next moment tries again.
                Err(e) => {
                    if !std::mem::replace(&mut short_of_descriptors, true) {
                        eprintln!("warning: {e}; skipping samples until descriptors are free");
                    }
                    return Ok(());
                }
            };
            short_of_descriptors = false;
            if std::mem::take(&mut first) {
                first_notes(&sample);
            }
            let connections = prev.as_ref().and_then(|a| {
                let dt = sample.taken.duration_since(a.taken).as_secs_f64();
                crate::diagnose::model::conns::between(a, &sample, dt, 0)
            });
            prev = Some(sample.clone());
            let mut rec = Record::new(sample, devices, &host, interval.as_secs_f64());
            rec.connections = connections;
            rec.settings = settings.store(crate::history::settings::read(&root, devices));
            let now = rec.sample.unix_time_s;
            let stored = history
                .append(&rec)
                .and_then(|()| history.prune(now, keep, args.max_size));
            if let Some(ship) = &mut ship
                && let Some(i) = judge.push(rec, |_| true)
            {
                send(ship, &i)?;
            }
            match stored {
                Ok(_) => {}
                Err(e) if is_disk_full(&e) => {
                    // One line per episode, not one per sample; the next sample tries again. A
                    // nearly full disk refuses the larger rows (a key, the settings) and takes
                    // the small ones between them, so a stored row does not end the episode:
                    // ten minutes without a refusal do.
                    if disk_full.is_none_or(|t| t.elapsed() >= DISK_FULL_EPISODE) {
                        eprintln!("tacho: {}", crate::text::Escaped(&format!("{e:#}")));
                    }
                    disk_full = Some(std::time::Instant::now());
                }
                Err(e) => return Err(e),
            }
            Ok(())
        },
    )?;
    if let Some(ship) = &mut ship {
        finish(ship);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "pg")]
type Shipper<'h> = crate::history::ship::Shipper<'h>;
/// Without the PostgreSQL client there is nothing to send to (`shipper` refuses `--db`).
#[cfg(not(feature = "pg"))]
type Shipper<'h> = std::marker::PhantomData<&'h ()>;

/// The shipper of `record --db`: this machine's identity and the resolved labels.
#[cfg(feature = "pg")]
fn shipper<'h>(
    history: &'h History,
    url: &str,
    fleet: &super::fleet::Settings,
    backlog: u64,
) -> Result<Shipper<'h>> {
    let host = crate::kernel::host::Host::read(&SysRoot::real());
    let machine_id = host.machine_id.ok_or_else(|| {
        anyhow!(
            "/etc/machine-id is missing or not a machine id, and the shared store tells hosts \
             apart by it; create it (systemd-machine-id-setup)"
        )
    })?;
    let who = crate::history::ship::Identity {
        machine_id,
        hostname: host.hostname.unwrap_or_default(),
        labels: fleet.labels.clone(),
    };
    let ship = Shipper::start(history, url, who, backlog)?;
    eprintln!(
        "sending each interval to {}",
        crate::text::Escaped(ship.shown())
    );
    Ok(ship)
}

#[cfg(not(feature = "pg"))]
fn shipper<'h>(_: &'h History, _: &str, _: &super::fleet::Settings, _: u64) -> Result<Shipper<'h>> {
    Err(crate::features::Missing(crate::features::Feature::Pg).into())
}

#[cfg(feature = "pg")]
fn send(ship: &mut Shipper<'_>, i: &crate::history::interval::Interval) -> Result<()> {
    use crate::history::interval::{COMPACT_TOP, COMPACT_TOP_CPU};
    ship.add(&i.clone().compact(COMPACT_TOP, COMPACT_TOP_CPU))
}

#[cfg(not(feature = "pg"))]
fn send(_: &mut Shipper<'_>, _: &crate::history::interval::Interval) -> Result<()> {
    Ok(())
}

/// Sends what is left when the recorder stops, and says what could not be.
#[cfg(feature = "pg")]
fn finish(ship: &mut Shipper<'_>) {
    ship.flush();
    let left = ship.pending();
    if left > 0 {
        eprintln!(
            "{left} interval(s) wait in the history file's backlog; the next `tacho record \
             --db` sends them"
        );
    }
}

#[cfg(not(feature = "pg"))]
fn finish(_: &mut Shipper<'_>) {}

/// Said once, from the first sample: what the recorder cannot see, each with its fix.
fn first_notes(sample: &crate::diagnose::sample::Sample) {
    // A sandbox that hides the network leaves it out of every sample silently.
    for note in network_notes(sample) {
        eprintln!("note: {}", crate::text::Escaped(&note));
    }
    if let Some(why) = &sample.waits_unavailable {
        eprintln!(
            "note: {}",
            crate::text::Escaped(&format!("waits are not recorded: {why}"))
        );
    }
    if let Some(why) = &sample.block_io_unavailable {
        eprintln!(
            "note: {}",
            crate::text::Escaped(&format!(
                "block I/O is not traced ({why}), so writers are attributed from \
                 /proc and cgroup counters (likely, not exact)"
            ))
        );
    }
    // A process that starts and ends between two samples is known only from its exit record.
    if let Some(why) = &sample.exits_unavailable {
        eprintln!(
            "note: {}",
            crate::text::Escaped(&format!(
                "processes that exit between samples are not recorded: {why}; give the \
                 recorder CAP_NET_ADMIN (systemd: add it to CapabilityBoundingSet=)"
            ))
        );
    }
}

/// What the first sample says the recorder cannot see of the network, each with its fix.
fn network_notes(sample: &crate::diagnose::sample::Sample) -> Vec<String> {
    let mut notes = Vec::new();
    if sample.net.iter().all(|n| n.name == "lo") {
        notes.push(
            "no network interface but lo is visible (a private network namespace, such as \
             systemd's PrivateNetwork=yes), so no network traffic is recorded; run the \
             recorder in the host's network namespace"
                .to_string(),
        );
    }
    if let Some(why) = &sample.conns.unavailable {
        notes.push(format!(
            "TCP connections cannot be read ({why}), so none are recorded; allow AF_NETLINK \
             sockets (systemd: RestrictAddressFamilies=AF_UNIX AF_NETLINK)"
        ));
    }
    notes
}

/// `7d`, `12h` for the start-up line.
pub(super) fn age(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(86_400) {
        format!("{}d", s / 86_400)
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else {
        format!("{s}s")
    }
}

/// Whether `tacho top` was asked for the history rather than live figures.
pub fn wants_history(args: &TopArgs) -> bool {
    args.replay || args.from.is_some()
}

/// `tacho top --replay` or `tacho top --from … --to …`.
pub fn top(args: &TopArgs) -> Result<ExitCode> {
    let path: PathBuf = store::resolve_path(args.history.as_deref())?;
    let now = chrono::Local::now();
    let at = |text: &str| -> Result<f64> {
        let t = when::parse(text, &now).map_err(|e| anyhow!(e))?;
        Ok(t.timestamp() as f64 + f64::from(t.timestamp_subsec_millis()) / 1000.0)
    };
    if let Some(from) = &args.from {
        let from = at(from)?;
        let to = args.to.as_deref().map_or(Ok(now_unix()), at)?;
        if to <= from {
            bail!("--to must be after --from");
        }
        if let Some(url) = &args.db {
            return fleet_top(args, url, from, to);
        }
        let history = History::open(&path)?;
        if let Some(page) = &args.html {
            return incident(&history, from, to, usize::from(args.top), page);
        }
        let summary = summary::summarise(&history, from, to, usize::from(args.top))?;
        write_summary(&summary, args.json, &mut std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    let history = History::open(&path)?;
    let times = history.times()?;
    if times.len() < 2 {
        bail!(
            "{} holds {} sample(s); a replay needs two: let `tacho record` run for one interval",
            path.display(),
            times.len()
        );
    }
    let target = args.at.as_deref().map_or(Ok(f64::INFINITY), at)?;
    // The first index whose interval ends at or before the target (at least the second).
    let index = times.iter().rposition(|&t| t <= target).unwrap_or(1).max(1);
    let top = usize::from(args.top);
    let sort = args.sort;
    let load = |i: usize, top: usize, sort| -> Result<TopSample> {
        interval(&history, times[i], top, sort)
    };
    if args.json || args.batch || !std::io::stdout().is_terminal() {
        let s = load(index, top, sort)?;
        if args.json {
            write_json_line(&mut std::io::stdout().lock(), &s)?;
        } else {
            let width = crate::fit::stdout_width();
            let mut out = crate::fit::Fit::new(std::io::stdout().lock(), width);
            text::Batch::new(width, args.show_idle).write_sample(&mut out, &s)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    crate::tui::replay(times.len(), index, sort, |i, sort| {
        load(i, 200.max(top), sort)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `tacho top --from … --to … --html FILE`: the window's incident report.
fn incident(
    history: &History,
    from: f64,
    to: f64,
    top: usize,
    page: &std::path::Path,
) -> Result<ExitCode> {
    check_page(page)?;
    let mut timeline = Timeline::whole(crate::report::charts::MAX_POINTS);
    // The settings in force at the start: the recorder stores them at least every
    // `STORE_EVERY` rows.
    let mut settings = crate::history::settings::Window::default();
    let mut stored = |rec: &Record| {
        if let Some(s) = &rec.settings {
            settings.push(rec.sample.unix_time_s, s, from);
        }
    };
    let rows = crate::history::settings::STORE_EVERY as usize + 1;
    history.scan_back(from, rows, f64::NEG_INFINITY, |rec| stored(&rec))?;
    let summary = summary::summarise_each(history, from, to, top, stored, |s, i| {
        timeline.push_judged(s, i)
    })?;
    let host = crate::kernel::host::Host::read(&SysRoot::real());
    let incident = Incident {
        summary: &summary,
        timeline: &timeline,
        host_name: host.hostname.clone().unwrap_or_else(|| "this host".into()),
        fingerprint: incident::fingerprint_of(&host),
        fingerprint_source: "read when this report was made",
        notes: Vec::new(),
        top,
        settings: Some(&settings),
    };
    write_incident(&incident, page)
}

/// Checks that `page` can be written, before the window is judged.
fn check_page(page: &std::path::Path) -> Result<()> {
    crate::report::outfile::check(page, crate::report::outfile::Existing::Replace).with_context(
        || {
            format!(
                "cannot write {}; pass a writable --html FILE",
                page.display()
            )
        },
    )
}

fn write_incident(incident: &Incident, page: &std::path::Path) -> Result<ExitCode> {
    let mut html = Vec::new();
    incident::write(incident, &mut html)?;
    super::output::write_page(page, &html)?;
    Ok(ExitCode::SUCCESS)
}

/// `tacho top --from … --to … --db URL`: the fleet's window, or with a `--host` naming one
/// host, its replay summary as `tacho top --from` on that host would print it.
#[cfg(feature = "pg")]
fn fleet_top(args: &TopArgs, url: &str, from: f64, to: f64) -> Result<ExitCode> {
    use crate::history::fleet;
    use crate::store::pg::{PgStore, history::Hosts};
    if let Some(page) = &args.html {
        check_page(page)?;
    }
    let settings = super::fleet::Settings::resolve(Some(url), &[])?;
    let url = settings.url.as_deref().unwrap_or(url);
    let hosts = Hosts {
        glob: args.host.clone(),
        labels: crate::labels::collect(args.labels.iter().map(String::as_str))
            .map_err(anyhow::Error::msg)?,
    };
    let mut server = PgStore::connect(url, SysRoot::real())?;
    let one = args.host.as_deref().filter(|h| !h.contains(['*', '?']));
    let mut out = std::io::stdout().lock();
    if let Some(name) = one {
        let recorded = server.history_hosts_named(from, to, &hosts)?;
        let [(machine_id, ..)] = recorded.as_slice() else {
            let ids: Vec<String> = recorded
                .iter()
                .map(|(id, host, ..)| format!("{} ({id})", crate::text::Escaped(host)))
                .collect();
            bail!(
                "--host {} matches {} hosts that recorded in this window{}; name one by its \
                 machine id",
                crate::text::Escaped(name),
                recorded.len(),
                if ids.is_empty() {
                    String::new()
                } else {
                    format!(": {}", ids.join(", "))
                }
            );
        };
        let intervals = server.host_intervals(from, to, machine_id)?;
        let Some(page) = &args.html else {
            let summary = summary::of_intervals(from, to, intervals, usize::from(args.top));
            write_summary(&summary, args.json, &mut out)?;
            return Ok(ExitCode::SUCCESS);
        };
        let mut timeline = Timeline::whole(crate::report::charts::MAX_POINTS);
        for i in &intervals {
            timeline.push_interval(i);
        }
        let summary = summary::of_intervals(from, to, intervals, usize::from(args.top));
        let hostname = recorded[0].1.clone();
        let incident = Incident {
            summary: &summary,
            timeline: &timeline,
            host_name: hostname.clone(),
            fingerprint: vec![
                ("hostname", Some(hostname)),
                ("machine id", Some(machine_id.clone())),
            ],
            fingerprint_source: "from the shared store, which keeps the host's names only",
            notes: vec![
                "the shared store keeps each interval compact: the CPU split, used memory and \
                 cache, disk latency, CPU pressure, TCP traffic by process and the host's \
                 settings are not in it, nor processes beyond the busiest few of each interval \
                 (tacho top --from on the host itself has them)"
                    .into(),
            ],
            top: usize::from(args.top),
            settings: None,
        };
        return write_incident(&incident, page);
    }
    let recorded = server.history_hosts(from, to, &hosts)?;
    if let Some(page) = &args.html {
        return fleet_page(&mut server, from, to, recorded, page);
    }
    let mut findings: std::collections::HashMap<String, Vec<_>> = Default::default();
    server.findings_each(from, to, &hosts, |machine_id, interval| {
        findings.entry(machine_id).or_default().push(interval);
        Ok(())
    })?;
    let fleet = fleet::build(from, to, recorded, findings);
    if args.json {
        serde_json::to_writer_pretty(&mut out, &fleet)?;
        writeln!(out)?;
    } else {
        let mut fitted = crate::fit::Fit::new(&mut out, crate::fit::stdout_width());
        crate::report::history::write_fleet(&mut fitted, &fleet)?;
        fitted.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Hosts a page of several draws at most, worst first.
#[cfg(feature = "pg")]
const PAGE_HOSTS: usize = 50;
/// Points of each host's charts on it.
#[cfg(feature = "pg")]
const PAGE_HOST_POINTS: usize = 300;

/// `tacho top --from … --to … --db URL --html FILE` selecting several hosts: a row of small
/// charts per host, worst first.
#[cfg(feature = "pg")]
fn fleet_page(
    server: &mut crate::store::pg::PgStore,
    from: f64,
    to: f64,
    recorded: Vec<crate::history::fleet::Recorded>,
    page: &std::path::Path,
) -> Result<ExitCode> {
    use crate::report::incident_fleet::{self, HostRow};
    if recorded.is_empty() {
        bail!(
            "no host of this selection recorded between --from and --to; widen the window or \
             the selection (--host, --label)"
        );
    }
    let mut hosts = Vec::new();
    for (machine_id, hostname, ..) in recorded {
        let intervals = server.host_intervals(from, to, &machine_id)?;
        let mut timeline = Timeline::whole(PAGE_HOST_POINTS);
        for i in &intervals {
            timeline.push_interval(i);
        }
        hosts.push(HostRow {
            machine_id,
            hostname,
            summary: summary::of_intervals(from, to, intervals, 0),
            timeline,
        });
    }
    incident_fleet::worst_first(&mut hosts);
    let left_out = hosts.len().saturating_sub(PAGE_HOSTS);
    hosts.truncate(PAGE_HOSTS);
    let mut html = Vec::new();
    incident_fleet::write(&hosts, from, to, left_out, &mut html)?;
    super::output::write_page(page, &html)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "pg"))]
fn fleet_top(_: &TopArgs, _: &str, _: f64, _: f64) -> Result<ExitCode> {
    Err(crate::features::Missing(crate::features::Feature::Pg).into())
}

/// The interval ending at `end` as `top` showed it live: judged after the intervals before it,
/// so baselines are as they were.
fn interval(
    history: &History,
    end: f64,
    top: usize,
    sort: crate::diagnose::model::SortKey,
) -> Result<TopSample> {
    let no_interval = || anyhow!("the history has no interval at that time");
    let last = history.recent(end, 1)?.pop().ok_or_else(no_interval)?;
    let since = end - BASELINE_INTERVALS as f64 * last.interval_s;
    drop(last);
    // At most the baseline's samples, however many rows a file crowds into that time, read in
    // order and judged in pairs: only the previous sample is kept.
    let mut pipeline = Pipeline::new(false);
    let mut previous: Option<Record> = None;
    let mut shown = None;
    history.scan_back(end, BASELINE_INTERVALS + 1, since, |rec| {
        if let Some(p) = &previous {
            shown = Some(summary::judged(p, &rec, &mut pipeline, top, sort));
        }
        previous = Some(rec);
    })?;
    shown.ok_or_else(no_interval)
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A window's replay summary (local or one host's from the shared store): one JSON document,
/// or text fitted to the terminal.
fn write_summary(summary: &summary::Summary, json: bool, out: &mut impl Write) -> Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, summary)?;
        writeln!(out)?;
    } else {
        let mut fitted = crate::fit::Fit::new(out, crate::fit::stdout_width());
        crate::report::history::write_summary(&mut fitted, summary)?;
        fitted.flush()?;
    }
    Ok(())
}
