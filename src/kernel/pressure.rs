//! Pressure stall information (/proc/pressure/{cpu,io,memory}): the share of time tasks were
//! stalled waiting for a resource, as running averages and as a cumulative stall time.
//!
//! Hand-parsed: procfs-core's `parse_pressure_record` slices the line at a fixed byte offset
//! and panics on a short or non-ASCII line, which a reader here must never do.

use super::Malformed;
use std::path::Path;

use super::{KernelError, Result, SysRoot, read_text};

/// One `some` or `full` line.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PressureLine {
    /// Percent of the last 10 s in stall, as the kernel averages it.
    pub avg10: f64,
    /// Percent of the last 60 s.
    pub avg60: f64,
    /// Percent of the last 300 s.
    pub avg300: f64,
    /// Cumulative stall time in microseconds.
    pub total_us: u64,
}

/// One resource's file: `some` (at least one task stalled) and `full` (all non-idle tasks
/// stalled at once). The CPU file of kernels before 5.13 has no `full` line.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Pressure {
    /// At least one task stalled.
    pub some: PressureLine,
    /// All non-idle tasks stalled at once; `None` where the file has no `full` line (the CPU file
    /// before 5.13).
    pub full: Option<PressureLine>,
}

/// The three resources; a file that cannot be read is `None` with the reason kept, since PSI
/// is optional (`CONFIG_PSI`, or `psi=0` on the kernel command line gives EOPNOTSUPP).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PressureAll {
    /// CPU pressure; `None` when the file could not be read.
    pub cpu: Option<Pressure>,
    /// I/O pressure; `None` when the file could not be read.
    pub io: Option<Pressure>,
    /// Memory pressure; `None` when the file could not be read.
    pub memory: Option<Pressure>,
    /// Why a resource is missing, one message per file, naming it.
    pub unavailable: Vec<String>,
}

/// Reads the three files; never fails as a whole (see [`PressureAll`]), but a file that is
/// there and malformed is an error.
pub fn read_pressure(root: &SysRoot) -> Result<PressureAll> {
    let mut all = PressureAll::default();
    for (name, slot) in [
        ("cpu", &mut all.cpu),
        ("io", &mut all.io),
        ("memory", &mut all.memory),
    ] {
        let path = root.proc.join("pressure").join(name);
        match read_text(&path) {
            Ok(text) => *slot = Some(parse_pressure(&text, &path)?),
            Err(e) => all.unavailable.push(e.to_string()),
        }
    }
    Ok(all)
}

/// Parses one pressure file; `path` only names it in errors.
pub fn parse_pressure(text: &str, path: &Path) -> Result<Pressure> {
    let mut some = None;
    let mut full = None;
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let Some(kind) = words.next() else { continue };
        let parsed = parse_line(words).map_err(|reason| {
            KernelError::parse(path, Some(i + 1), format!("{reason}: {line:?}"))
        })?;
        match kind {
            "some" => some = Some(parsed),
            "full" => full = Some(parsed),
            _ => {
                return Err(KernelError::parse(
                    path,
                    Some(i + 1),
                    format!("expected 'some' or 'full': {line:?}"),
                ));
            }
        }
    }
    let some = some.ok_or_else(|| KernelError::parse(path, None, "no 'some' line"))?;
    Ok(Pressure { some, full })
}

fn parse_line<'a>(
    words: impl Iterator<Item = &'a str>,
) -> std::result::Result<PressureLine, Malformed> {
    let (mut avg10, mut avg60, mut avg300, mut total) = (None, None, None, None);
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, found {word:?}"))?;
        let pct = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..=100.0).contains(v))
                .ok_or_else(|| format!("{key} {value:?} is not a percentage"))
        };
        match key {
            "avg10" => avg10 = Some(pct()?),
            "avg60" => avg60 = Some(pct()?),
            "avg300" => avg300 = Some(pct()?),
            "total" => {
                total = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("total {value:?} is not a number"))?,
                )
            }
            // Newer kernels may add fields; ignoring them keeps old tacho working.
            _ => {}
        }
    }
    match (avg10, avg60, avg300, total) {
        (Some(avg10), Some(avg60), Some(avg300), Some(total_us)) => Ok(PressureLine {
            avg10,
            avg60,
            avg300,
            total_us,
        }),
        _ => Err(Malformed("expected avg10, avg60, avg300 and total".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture;
    use proptest::prelude::*;

    const IO: &str = include_str!("../../tests/fixtures/top/firecracker/a/proc/pressure/io");

    #[test]
    fn reads_real_capture() {
        let p = parse_pressure(IO, Path::new("/proc/pressure/io")).unwrap();
        assert!(p.some.total_us >= p.full.unwrap().total_us);
        let cpu = parse_pressure(
            "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\n",
            Path::new("/proc/pressure/cpu"),
        )
        .unwrap();
        assert_eq!(
            (cpu.some.avg10, cpu.some.total_us, cpu.full),
            (1.5, 12345, None)
        );
    }

    #[test]
    fn missing_files_are_listed_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        fixture::write(dir.path(), "proc/pressure/io", IO);
        let all = read_pressure(&SysRoot::under(dir.path())).unwrap();
        assert!(all.io.is_some() && all.cpu.is_none() && all.memory.is_none());
        assert_eq!(all.unavailable.len(), 2);
        assert!(all.unavailable[0].contains("pressure/cpu"));
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let p = Path::new("/proc/pressure/io");
        for bad in [
            "some avg10=1 avg60=1 avg300=1 total=1\nfull avg10=x avg60=1 avg300=1 total=1\n",
            "some avg10=1 avg60=1 avg300=1 total=1\nfull avg10=1\n",
            "some avg10=1 avg60=1 avg300=1 total=1\nhalf avg10=1 avg60=1 avg300=1 total=1\n",
            "some avg10=1 avg60=1 avg300=1 total=1\nfull avg10=101 avg60=1 avg300=1 total=1\n",
            "some avg10=1 avg60=1 avg300=1 total=1\nfull nonsense\n",
        ] {
            let err = parse_pressure(bad, p).unwrap_err().to_string();
            assert!(err.contains("/proc/pressure/io line 2"), "{err}");
        }
        assert!(parse_pressure("full avg10=1 avg60=1 avg300=1 total=1\n", p).is_err());
        assert!(parse_pressure("some", p).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,120}") {
            let _ = parse_pressure(&s, Path::new("/x"));
        }
    }
}
