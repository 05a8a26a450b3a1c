//! `tacho load URL`: resolve the options, run the steps (watching the server when it is this
//! host, or a remote `tacho top --listen` with `--watch`), judge them, find the knee, print
//! and save.

use super::interrupt;
use super::record::RunSaver;
use crate::cli::LoadArgs;
use crate::diagnose::live::{Connections, Pipeline};
use crate::diagnose::model::{ModelOptions, SortKey};
use crate::diagnose::sample::{Sample, Sampler};
use crate::kernel::SysRoot;
use crate::kernel::host::Host;
use crate::load::engine::Client;
use crate::load::knee::{self, Rule};
use crate::load::watch::Remote;
use crate::load::{Options, Report, SCHEMA, ServerFinding, TargetInfo, UrlInfo, urls};
use crate::text::Escaped;
use anyhow::{Context, Result, anyhow};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Runs `tacho load`: 130 after an interruption (what was measured is printed and saved).
pub fn run(args: &LoadArgs) -> Result<ExitCode> {
    if let (Some(id), Some(peak)) = (args.knee_from, args.peak) {
        return headroom(args, id, peak);
    }
    let requests = match &args.urls {
        Some(path) => {
            let shown = path.display();
            urls::parse(&read_urls(path)?, &args.method)
                .map_err(|e| anyhow!("--urls {shown}: {e}"))?
        }
        None => urls::of_args(&args.url, &args.method).map_err(|e| anyhow!(e))?,
    };
    let opts = Options {
        connections: args.connections,
        streams: args.streams,
        headers: args.header.clone(),
        body: args.body.clone().unwrap_or_default().into_bytes(),
        timeout: args.timeout,
        http2: args.http2,
        insecure: args.insecure,
    };
    if let Some(page) = &args.html {
        crate::report::outfile::check(page, crate::report::outfile::Existing::Replace)
            .with_context(|| {
                format!(
                    "cannot write {}; pass a writable --html FILE",
                    page.display()
                )
            })?;
    }
    let saver = RunSaver::open(&args.save)?;
    let mut client = Client::new(&requests, &opts).map_err(|e| anyhow!(e))?;
    let origins = client.origins().to_vec();
    if args.insecure && origins.iter().any(|o| o.verified == Some(false)) {
        eprintln!(
            "warning: --insecure: the server's TLS certificate is NOT checked; the figures may \
             come from any server that answered"
        );
    }
    let plan: Vec<(u64, Duration)> = match args.ramp {
        Some(ramp) => ramp
            .rates(args.steps)
            .into_iter()
            .map(|r| (r, args.step))
            .collect(),
        None => vec![(args.rate, args.duration)],
    };
    let stop = interrupt::stop_flag()?;
    let mut notes = Vec::new();
    let remote = match &args.watch {
        Some(url) => {
            let r = Remote::new(url, args.timeout).map_err(|e| anyhow!(e))?;
            // Read once before the load, so a wrong address stops the command first.
            r.findings().map_err(|e| {
                anyhow!(
                    "--watch {}: {e}; give the /metrics URL of a running tacho top --listen",
                    Escaped(r.url())
                )
            })?;
            Some(r)
        }
        None => None,
    };
    let local = origins.iter().all(|o| {
        o.address
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback())
    });
    let mut watch = if remote.is_some() {
        None
    } else if local {
        match Watch::new() {
            Ok(w) => Some(w),
            Err(e) => {
                notes.push(format!("the server's findings were not sampled: {e:#}"));
                None
            }
        }
    } else {
        notes.push(
            "the target is not (only) this host: what bent on the server is not known here \
             (run tacho top on it)"
                .into(),
        );
        None
    };
    let rule = Rule::new(args.p99_limit);
    let mut steps = Vec::with_capacity(plan.len());
    for (i, (rate, duration)) in plan.iter().enumerate() {
        interrupt::status_line(&format!(
            "load: step {}/{}: {rate} requests a second for {}",
            i + 1,
            plan.len(),
            humantime(*duration)
        ));
        let before = watch.as_mut().and_then(|w| w.begin(&mut notes));
        let mut step = client.step(*rate as f64, *duration, &stop).map_err(|e| {
            interrupt::clear_status();
            anyhow!(e)
        })?;
        if let (Some(w), Some(a)) = (watch.as_mut(), before) {
            step.server = w.end(&a, &mut notes);
        }
        if let Some(r) = &remote {
            step.server = r
                .findings()
                .map_err(|e| {
                    note_once(
                        &mut notes,
                        format!("--watch {} was not read: {e}", Escaped(r.url())),
                    )
                })
                .ok();
        }
        step.bent = rule.judge(&step);
        let bent = !step.bent.is_empty();
        steps.push(step);
        if stop.load(Ordering::Relaxed) || (args.ramp.is_some() && bent) {
            break;
        }
    }
    interrupt::clear_status();
    let interrupted = stop.load(Ordering::Relaxed);
    let report = Report {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        host: Host::read(&SysRoot::real()),
        target: TargetInfo {
            url: requests
                .iter()
                .map(|r| r.target.url.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            address: origins
                .first()
                .map(|o| o.address.clone())
                .unwrap_or_default(),
            method: requests
                .first()
                .map(|r| r.method.clone())
                .unwrap_or_default(),
            urls: requests
                .iter()
                .map(|r| UrlInfo {
                    url: r.target.url.clone(),
                    method: r.method.clone(),
                    weight: r.weight,
                })
                .collect(),
            origins,
            connections: args.connections,
            streams: args.streams,
            timeout_s: args.timeout.as_secs_f64(),
            body_bytes: opts.body.len(),
            local,
        },
        mode: if args.ramp.is_some() { "ramp" } else { "rate" },
        rule,
        knee: args.ramp.and_then(|_| knee::find(&steps)),
        steps,
        notes,
        interrupted,
    };
    if let Some(page) = &args.html {
        let mut html = Vec::new();
        crate::report::load_html::write(&report, &mut html)?;
        super::output::write_page(page, &html)?;
    }
    saver.print_and_save(&report, args.json, |r, out| {
        crate::report::load::write(r, out)
    })?;
    Ok(if interrupted {
        ExitCode::from(interrupt::EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--knee-from RUN --peak RPS`: the peak as a share of the stored run's knee, judged by the
/// 40–50% rule (a service kept under half its capacity survives the loss of one of two
/// servers).
fn headroom(args: &LoadArgs, id: i64, peak: f64) -> Result<ExitCode> {
    let run = super::runs::load(&args.save.db, &[id])?
        .pop()
        .ok_or_else(|| anyhow!("no run {id}"))?;
    if run.kind != crate::store::RunKind::Load {
        return Err(anyhow!(
            "run {id} is a {} run, not a load run; give the id of a tacho load --ramp run \
             (tacho runs list)",
            run.kind
        ));
    }
    let knee = run
        .tests
        .iter()
        .find(|t| t.name == "knee")
        .and_then(|t| t.figures.iter().find(|f| f.sample == 0)?.iops)
        .filter(|k| *k > 0.0)
        .ok_or_else(|| {
            anyhow!("run {id} has no knee (a --rate run, or nothing succeeded); give a --ramp run")
        })?;
    let bent = run.extra.get("knee").is_some_and(|k| !k["bent"].is_null());
    let share = 100.0 * peak / knee;
    let verdict = match share {
        s if s > 50.0 => {
            "above the 40–50% rule: should one of two servers fail, the other \
             gets twice this, past its knee"
        }
        s if s >= 40.0 => "inside the 40–50% rule",
        _ => "below 40%: more headroom than the 40–50% rule asks",
    };
    let target = run.target["url"].as_str().unwrap_or("");
    if args.json {
        let doc = serde_json::json!({
            "schema": "tacho.load.headroom.v1",
            "run": id,
            "url": target,
            "knee_rps": knee,
            "knee_found": bent,
            "peak_rps": peak,
            "share_pct": share,
            "within_rule": share <= 50.0,
            "verdict": verdict,
        });
        println!("{doc:#}");
    } else {
        println!(
            "knee of run {id} ({}, {}): {knee:.0} requests a second{}",
            Escaped(target),
            Escaped(&run.created_at),
            if bent {
                ""
            } else {
                " (no knee within that ramp: the knee is higher, so the share below is an upper bound)"
            }
        );
        println!("peak {peak:.0} requests a second is {share:.0}% of the knee: {verdict}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The text of a `--urls` file (at most 1 MiB).
fn read_urls(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
        .map_err(|e| anyhow!("cannot read --urls {}: {e}", path.display()))?;
    Ok(text)
}

/// `10s`, `500ms`.
fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The server's side of each step, when it is this host: `tacho top`'s pipeline over a
/// sample at the step's start and one at its end.
struct Watch {
    sampler: Sampler,
    opts: ModelOptions,
    pipeline: Pipeline,
}

impl Watch {
    fn new() -> Result<Watch> {
        let sampler = Sampler::new(SysRoot::real())?;
        let opts = ModelOptions::for_this_host(5, SortKey::Cpu, sampler.delayacct);
        Ok(Watch {
            sampler,
            opts,
            pipeline: Pipeline::new(false),
        })
    }

    /// The sample a step starts from; `None` (and a note, once) when it could not be taken.
    fn begin(&mut self, notes: &mut Vec<String>) -> Option<Sample> {
        self.sampler
            .sample()
            .map_err(|e| note_once(notes, format!("a server sample failed: {e}")))
            .ok()
    }

    /// The findings over the step that started at `a`.
    fn end(&mut self, a: &Sample, notes: &mut Vec<String>) -> Option<Vec<ServerFinding>> {
        let b = self
            .sampler
            .sample()
            .map_err(|e| note_once(notes, format!("a server sample failed: {e}")))
            .ok()?;
        let s = self.pipeline.step(
            (a, &b),
            self.sampler.devices(),
            &self.opts,
            Connections::Sampled,
        );
        Some(
            s.findings
                .iter()
                .map(|f| ServerFinding {
                    code: f.code.as_str().to_string(),
                    subject: f.subject.clone(),
                    message: f.message.clone(),
                })
                .collect(),
        )
    }
}

fn note_once(notes: &mut Vec<String>, note: String) {
    if !notes.contains(&note) {
        notes.push(note);
    }
}
