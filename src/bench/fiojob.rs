//! `bench disk --fio-job FILE`: fio's job files, read into tacho's own tests.
//!
//! A job file is INI-like, but not INI: options may be bare words (`time_based`, `stonewall`),
//! a section name may repeat, a `[global]` section applies only to the jobs after it, and `;`
//! or `#` start a comment anywhere on a line. The INI crates either reject bare keys or merge
//! repeated sections (losing their order), so this is a small hand parser, property-tested.
//!
//! Every option tacho does not carry out is refused by name: a job file that asks for
//! something tacho would silently not do would produce figures that mean something else.

use super::plan::{self, DiskOptions, Plan};
use super::target::Inspected;
use crate::io::{BsShare, EngineKind, OpenSync, Rw};
use crate::units::{parse_duration, parse_size};
use crate::warning::{Code, Warning};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Duration;

/// The longest a job without `runtime` may run: fio's size-based jobs run until their bytes
/// are done, and tacho's engine needs an end in time too.
pub const SIZE_BASED_CAP: Duration = Duration::from_secs(3600);

/// Largest block size tacho's engine takes (its buffers are this big).
const MAX_BS: u64 = 256 << 20;

/// One `key` or `key=value` line of a section, with its line number.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based line number, for messages.
    pub number: usize,
    /// The option's name.
    pub key: String,
    /// Its value; `None` for a bare option (`time_based`).
    pub value: Option<String>,
    /// The section it is written in (`global` for the options every later job takes), which
    /// messages name.
    pub section: String,
}

/// A job section, with the `[global]` options in force where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The section's name.
    pub name: String,
    /// Global options first, then the section's own (later ones win).
    pub lines: Vec<Line>,
}

/// Why a job file or one of its jobs cannot be run, as one sentence that names the line or
/// section and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JobFileError(String);

/// Parses a job file's text into its job sections.
pub fn parse(text: &str) -> Result<Vec<Section>, JobFileError> {
    let mut global: Vec<Line> = Vec::new();
    let mut jobs: Vec<Section> = Vec::new();
    // Where options go: None before any section, Some(None) in [global], Some(Some(i)) in job i.
    let mut current: Option<Option<usize>> = None;
    let mut section = String::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let line = raw
            .split(['#', ';'])
            .next()
            .unwrap_or_default()
            .trim_matches(|c: char| c.is_whitespace());
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    JobFileError(format!(
                        "line {number}: a section header is [NAME], e.g. [rand-read]"
                    ))
                })?;
            section = name.to_string();
            if name == "global" {
                current = Some(None);
            } else {
                jobs.push(Section {
                    name: name.to_string(),
                    lines: global.clone(),
                });
                current = Some(Some(jobs.len() - 1));
            }
            continue;
        }
        if line.starts_with("include ") || line == "include" {
            return Err(JobFileError(format!(
                "line {number}: include is not supported; paste the included file's sections in"
            )));
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(JobFileError(format!(
                "line {number}: '{line}' is not an option; write KEY=VALUE or a bare KEY"
            )));
        }
        if value.as_deref().is_some_and(|v| v.contains("${")) {
            return Err(JobFileError(format!(
                "line {number}: {key} uses an environment variable (${{...}}); write the value"
            )));
        }
        let entry = Line {
            number,
            key: key.to_string(),
            value,
            section: section.clone(),
        };
        match current {
            None => {
                return Err(JobFileError(format!(
                    "line {number}: {key} comes before any section; put it under [global] or a \
                     job's [NAME]"
                )));
            }
            Some(None) => global.push(entry),
            Some(Some(j)) => jobs[j].lines.push(entry),
        }
    }
    if jobs.is_empty() {
        return Err(JobFileError(
            "the job file has no job section; add one, e.g. [job1] with rw=randread".into(),
        ));
    }
    Ok(jobs)
}

/// A job, in tacho's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The section's name, used as the test's name.
    pub name: String,
    /// The test, as the command line's options would give it.
    pub options: DiskOptions,
    /// Where fio would do its I/O: `directory` joined with `filename`, or either alone.
    pub target: Option<PathBuf>,
    /// Waits for the jobs before it (`stonewall`, `wait_for_previous`).
    pub stonewall: bool,
    /// What runs otherwise than the file says, and why the figures still compare.
    pub notes: Vec<Warning>,
}

/// What a job's options mean to tacho; refuses what tacho does not do, by name.
pub fn job(section: &Section) -> Result<Job, JobFileError> {
    let mut o = DiskOptions::default();
    let (mut filename, mut directory) = (None, None);
    let (mut stonewall, mut time_based) = (false, false);
    let (mut size, mut rw) = (None, None);
    let mut libaio = None;
    for line in &section.lines {
        let key = line.key.as_str();
        // A [global] line is blamed on [global]: that is where it is fixed.
        let place = || format!("[{}] line {}", line.section, line.number);
        let at = |what: String| JobFileError(format!("{}: {what}", place()));
        let value = || {
            line.value
                .as_deref()
                .ok_or_else(|| at(format!("{key} needs a value ({key}=...)")))
        };
        let number = |max: u32| -> Result<u32, JobFileError> {
            let v = value()?;
            v.parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| at(format!("{key}={v} is not a whole number from 1 to {max}")))
        };
        let size_of = || -> Result<u64, JobFileError> {
            let v = value()?;
            parse_size(v).map_err(|e| at(format!("{key}: {e}")))
        };
        let time_of = || -> Result<Duration, JobFileError> {
            let v = value()?;
            parse_duration(v).map_err(|e| at(format!("{key}: {e}")))
        };
        let flag = || -> Result<bool, JobFileError> {
            match line.value.as_deref() {
                None | Some("1") | Some("true") => Ok(true),
                Some("0") | Some("false") => Ok(false),
                Some(v) => Err(at(format!("{key}={v}: give 1 or 0"))),
            }
        };
        match key {
            // Names and reporting: how fio prints, not what runs.
            "name" | "description" | "group_reporting" => {}
            "rw" | "readwrite" => {
                let v = value()?;
                rw = Some(parse_rw(v).ok_or_else(|| {
                    at(format!(
                        "rw={v} is not one of read, write, randread, randwrite, rw, randrw"
                    ))
                })?);
            }
            "bs" | "blocksize" => {
                let bs = size_of()?;
                if bs == 0 || bs > MAX_BS {
                    return Err(at(format!("{key} must be from 1 byte to 256M")));
                }
                o.bs = Some(bs);
            }
            "bssplit" => o.bssplit = parse_mix(value()?).map_err(|e| at(e.0))?,
            "iodepth" => o.iodepth = Some(number(4096)?),
            "numjobs" => o.numjobs = Some(number(256)?),
            "rwmixread" | "rwmixwrite" => {
                let v = value()?;
                let pct = v
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p <= 100)
                    .ok_or_else(|| at(format!("{key}={v} is not a percentage")))?;
                o.rwmixread = Some(if key == "rwmixread" { pct } else { 100 - pct });
            }
            "fsync" => o.fsync = Some(number(u32::MAX)?),
            "fdatasync" => o.fdatasync = Some(number(u32::MAX)?),
            "sync" => {
                o.open_sync = match value()? {
                    "0" | "none" => None,
                    "1" | "sync" => Some(OpenSync::Sync),
                    "dsync" => Some(OpenSync::Dsync),
                    v => return Err(at(format!("sync={v}: give none, sync or dsync"))),
                }
            }
            "ioengine" => {
                o.engine = Some(match value()? {
                    "io_uring" => EngineKind::IoUring,
                    "psync" => EngineKind::Psync,
                    "sync" => EngineKind::Sync,
                    // The first line of most job files. Both submit I/O asynchronously and
                    // reap completions from a ring, so the jobs keep their meaning.
                    "libaio" => {
                        libaio = Some(format!("{}: ioengine=libaio", place()));
                        EngineKind::IoUring
                    }
                    v => {
                        return Err(at(format!(
                            "ioengine={v} is not one tacho runs; use io_uring (libaio runs as \
                             io_uring), psync or sync"
                        )));
                    }
                })
            }
            "direct" => o.buffered = !flag()?,
            "buffered" => o.buffered = flag()?,
            "size" => size = Some(size_of()?),
            "runtime" => o.runtime = Some(time_of()?),
            "ramp_time" => o.ramp = Some(time_of()?),
            "randseed" => {
                let v = value()?;
                o.randseed = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|s| *s <= i64::MAX as u64)
                        .ok_or_else(|| at(format!("randseed={v} is not a number below 2^63")))?,
                );
            }
            "time_based" => time_based = flag()?,
            "stonewall" | "wait_for_previous" => stonewall = flag()?,
            "filename" => {
                let v = value()?;
                if v.contains(':') {
                    return Err(at(format!(
                        "filename={v} names several files (fio splits it at ':'); tacho runs \
                         against one: give one"
                    )));
                }
                filename = Some(PathBuf::from(v));
            }
            "directory" => directory = Some(PathBuf::from(value()?)),
            other => {
                return Err(at(format!(
                    "{other} is not an option tacho carries out; remove it (tacho takes: rw, \
                     bs, bssplit, iodepth, numjobs, rwmixread, rwmixwrite, fsync, fdatasync, \
                     sync, ioengine, direct, buffered, size, runtime, ramp_time, randseed, \
                     time_based, stonewall, filename, directory, name, group_reporting)"
                )));
            }
        }
    }
    let name = &section.name;
    o.rw = Some(rw.unwrap_or(Rw::Read));
    o.size = size;
    if time_based {
        if o.runtime.is_none() {
            return Err(JobFileError(format!(
                "[{name}]: time_based needs a runtime, or the job never ends; add runtime=..."
            )));
        }
    } else {
        // fio's default: the job ends when it has done its size (or at runtime, if sooner).
        let bytes = size.ok_or_else(|| {
            JobFileError(format!(
                "[{name}]: a job without time_based ends after size bytes; give size=..."
            ))
        })?;
        o.io_limit = Some(bytes);
        o.runtime = Some(o.runtime.unwrap_or(SIZE_BASED_CAP));
    }
    if o.rwmixread.is_some() && !o.rw.is_some_and(Rw::is_mixed) {
        // fio ignores a mix on a one-way pattern; tacho's plan would refuse it.
        o.rwmixread = None;
    }
    let target = match (directory, filename) {
        (Some(d), Some(f)) => Some(d.join(f)),
        (d, f) => d.or(f),
    };
    let notes = libaio
        .map(|line| Warning {
            code: Code::FioLibaioAsIoUring,
            message: format!(
                "{line} runs on io_uring, tacho's asynchronous engine: both queue direct I/O \
                 up to iodepth{}",
                if o.buffered {
                    "; buffered, fio's libaio waits for each I/O while io_uring does not, so \
                     these figures can be higher than fio's"
                } else {
                    ", so the figures compare with fio's libaio"
                }
            ),
        })
        .into_iter()
        .collect();
    Ok(Job {
        name: name.clone(),
        options: o,
        target,
        stonewall,
        notes,
    })
}

/// The plan of a job file's jobs, run one after another: fio runs jobs with no `stonewall`
/// between them at the same time, which tacho's engine does not, so such a file is refused.
/// `repeat` is `--repeat`, if given; `engine` is io_uring, or psync where io_uring is blocked.
pub fn plan(
    jobs: &[Job],
    target: &Inspected,
    engine: EngineKind,
    repeat: Option<u32>,
) -> anyhow::Result<Plan> {
    let mut tests = Vec::new();
    let mut first: Option<Plan> = None;
    for (i, job) in jobs.iter().enumerate() {
        if i > 0 && !job.stonewall {
            bail!(
                "job [{}] has no stonewall, so fio would run it at the same time as [{}]; tacho \
                 runs jobs one after another: add stonewall to [{}]",
                job.name,
                jobs[i - 1].name,
                job.name
            );
        }
        let options = DiskOptions {
            repeat,
            ..job.options.clone()
        };
        // io_uring, or the fallback the caller chose where io_uring is blocked.
        let engine = match job.options.engine {
            Some(EngineKind::IoUring) | None => engine,
            Some(blocking) => blocking,
        };
        let mut p = plan::plan(&options, target, engine)
            .map_err(|e| anyhow::anyhow!("job [{}]: {e}", job.name))?;
        if let Some(f) = &first
            && f.region_bytes != p.region_bytes
        {
            bail!(
                "jobs [{}] and [{}] cover different sizes; tacho uses one region per run: \
                     give every job the same size",
                jobs[0].name,
                job.name
            );
        }
        for t in &mut p.tests {
            t.name = job.name.clone();
        }
        tests.append(&mut p.tests);
        first.get_or_insert(p);
    }
    let first = first.context("the job file has no job")?;
    Ok(Plan {
        standard: false,
        writes: tests.iter().any(|t| t.spec.rw().writes()),
        tests,
        ..first
    })
}

fn parse_rw(v: &str) -> Option<Rw> {
    Some(match v {
        "read" => Rw::Read,
        "write" => Rw::Write,
        "randread" => Rw::RandRead,
        "randwrite" => Rw::RandWrite,
        "rw" | "readwrite" => Rw::ReadWrite,
        "randrw" => Rw::RandRw,
        _ => return None,
    })
}

/// A block-size mix, `4k/60:64k/40`, its percentages adding up to 100.
fn parse_mix(text: &str) -> Result<Vec<BsShare>, JobFileError> {
    let mut shares = Vec::new();
    for part in text.split(':') {
        let (size, pct) = part.split_once('/').ok_or_else(|| {
            JobFileError(format!(
                "bssplit: '{part}' is not SIZE/PERCENT, e.g. 4k/60:64k/40"
            ))
        })?;
        let pct: u8 = pct
            .parse()
            .ok()
            .filter(|p| (1..=100).contains(p))
            .ok_or_else(|| {
                JobFileError(format!(
                    "bssplit: '{pct}' is not a percentage from 1 to 100"
                ))
            })?;
        let size = parse_size(size).map_err(|e| JobFileError(format!("bssplit: {e}")))?;
        if size == 0 || size > MAX_BS {
            return Err(JobFileError("bssplit: sizes go from 1 byte to 256M".into()));
        }
        shares.push(BsShare { size, pct });
    }
    let total: u32 = shares.iter().map(|s| u32::from(s.pct)).sum();
    if total != 100 {
        return Err(JobFileError(format!(
            "bssplit: the percentages add up to {total}, not 100"
        )));
    }
    Ok(shares)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TIOBENCH_LIKE: &str = "; a comment\n[global]\ndirect=1\nsize=512m\n\
        numjobs=4\t; 4 threads per job\nioengine=io_uring\n\n[f1]\nrw=write\n\n\
        [f2]\nstonewall\nrw=randwrite\n";

    #[test]
    fn sections_take_the_globals_before_them() {
        let jobs = parse(TIOBENCH_LIKE).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].name, "f2");
        let keys: Vec<_> = jobs[1].lines.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(
            keys,
            ["direct", "size", "numjobs", "ioengine", "stonewall", "rw"]
        );
        assert_eq!(jobs[0].lines[2].value.as_deref(), Some("4"), "comment cut");
        let f2 = job(&jobs[1]).unwrap();
        assert!(f2.stonewall);
        assert_eq!(f2.options.rw, Some(Rw::RandWrite));
        assert_eq!(f2.options.numjobs, Some(4));
        assert_eq!(f2.options.io_limit, Some(512 << 20));
        assert!(!f2.options.buffered);
        // A later [global] applies only to the jobs after it.
        let later = parse("[a]\nrw=read\n[global]\nbs=8k\n[b]\n").unwrap();
        assert!(later[0].lines.iter().all(|l| l.key != "bs"));
        assert!(later[1].lines.iter().any(|l| l.key == "bs"));
    }

    #[test]
    fn unsupported_options_are_refused_by_name() {
        let jobs = parse("[j]\nrw=read\nsize=1m\nverify=crc32c\n").unwrap();
        let err = job(&jobs[0]).unwrap_err().to_string();
        assert!(
            err.starts_with("[j] line 4: verify is not an option"),
            "{err}"
        );
        let jobs = parse("[j]\nsize=1m\nioengine=mmap\n").unwrap();
        assert!(
            job(&jobs[0])
                .unwrap_err()
                .to_string()
                .contains("ioengine=mmap")
        );
        let jobs = parse("[global]\nioengine=libaio\n[j]\nsize=1m\n").unwrap();
        let j = job(&jobs[0]).unwrap();
        assert_eq!(j.options.engine, Some(EngineKind::IoUring));
        assert!(
            j.notes[0]
                .message
                .starts_with("[global] line 2: ioengine=libaio")
        );
        let jobs = parse("[global]\nbs=0\n[j]\nsize=1m\n").unwrap();
        let err = job(&jobs[0]).unwrap_err().to_string();
        assert!(err.starts_with("[global] line 2: bs"), "{err}");
        let jobs = parse("[j]\nrw=randread\ntime_based\n").unwrap();
        assert!(
            job(&jobs[0])
                .unwrap_err()
                .to_string()
                .contains("needs a runtime")
        );
        assert!(
            parse("bs=4k\n[j]\n")
                .unwrap_err()
                .to_string()
                .contains("before any section")
        );
        assert!(
            parse("[global]\nbs=4k\n")
                .unwrap_err()
                .to_string()
                .contains("no job")
        );
        assert!(
            parse("include other.fio\n")
                .unwrap_err()
                .to_string()
                .contains("include")
        );
        assert!(
            parse("[j]\nfilename=${HOME}/x\n")
                .unwrap_err()
                .to_string()
                .contains("environment")
        );
        let jobs = parse("[j]\nsize=1m\nfilename=/dev/sda:/dev/sdb\n").unwrap();
        assert!(
            job(&jobs[0])
                .unwrap_err()
                .to_string()
                .contains("several files")
        );
    }

    #[test]
    fn targets_join_directory_and_filename() {
        let jobs = parse("[j]\nsize=1m\ndirectory=/srv\nfilename=t.fio\n").unwrap();
        assert_eq!(
            job(&jobs[0]).unwrap().target,
            Some(PathBuf::from("/srv/t.fio"))
        );
    }

    proptest! {
        #[test]
        fn no_text_makes_the_parser_panic(text in "\\PC{0,200}") {
            if let Ok(jobs) = parse(&text) {
                for j in &jobs {
                    let _ = job(j);
                }
            }
        }

        #[test]
        fn lines_of_options_parse_back(
            keys in proptest::collection::vec("[a-z_]{1,12}", 1..8),
            values in proptest::collection::vec("[a-zA-Z0-9/:.]{0,10}", 8),
        ) {
            let mut text = String::from("[job]\n");
            for (k, v) in keys.iter().zip(&values) {
                if v.is_empty() {
                    text.push_str(&format!("{k}\n"));
                } else {
                    text.push_str(&format!("  {k} = {v} ; note\n"));
                }
            }
            let jobs = parse(&text).unwrap();
            prop_assert_eq!(jobs.len(), 1);
            let got: Vec<_> = jobs[0].lines.iter().map(|l| (l.key.clone(), l.value.clone())).collect();
            let want: Vec<_> = keys.iter().zip(&values)
                .map(|(k, v)| (k.clone(), (!v.is_empty()).then(|| v.clone())))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
