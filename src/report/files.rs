//! `tacho files` output: events as fatrace's `comm(pid): OPS path` lines, or one JSON object per line, and the `--summary` tables.
//!
//! `--json` output is JSON Lines: a header object naming the schema (`tacho.files.v1`), one
//! object per event (`ts`, `pid`, `comm`, `ops`, `path`), an object per queue overflow, and a
//! trailer with the totals (and the summary when asked). A path that is not UTF-8 also gets
//! `path_hex`, its exact bytes (see [`crate::text`]); text lines escape control characters.

use crate::files::Shown;
use crate::files::ops::Op;
use crate::files::summary::Summary;
use crate::files::watch::Events;
use crate::text::{self, Escaped};
use serde::Serialize;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::time::{SystemTime, UNIX_EPOCH};

/// The schema name of the `--json` stream.
pub const SCHEMA: &str = "tacho.files.v1";

/// The event stream in one format: what a watch hands its events to.
pub struct EventWriter {
    /// Where the lines go.
    pub out: Box<dyn Write>,
    /// How each event is written.
    pub format: Format,
}

impl Events for EventWriter {
    fn event(&mut self, e: &Shown<'_>) -> io::Result<()> {
        write_event(&mut self.out, self.format, e)
    }

    fn overflow(&mut self, time: SystemTime) -> io::Result<()> {
        match self.format {
            Format::Json => write_json_overflow(&mut self.out, time),
            Format::Text { .. } => Ok(()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Output format of the event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// fatrace's lines, optionally led by the local time of day.
    Text {
        /// Lead each line with `HH:MM:SS.micros`.
        timestamps: bool,
    },
    /// JSON Lines (see the module docs).
    Json,
}

#[derive(Serialize)]
struct JsonEvent<'a> {
    /// Seconds since the Unix epoch, microsecond resolution.
    ts: f64,
    pid: i32,
    comm: &'a str,
    ops: String,
    path: std::borrow::Cow<'a, str>,
    /// The path's exact bytes in hex, only when they are not UTF-8: `path` then shows U+FFFD
    /// where they were, and two such names would otherwise look the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    path_hex: Option<String>,
}

/// One event as a text line or a JSON line.
fn write_event(out: &mut impl Write, format: Format, e: &Shown<'_>) -> io::Result<()> {
    match format {
        Format::Text { timestamps } => {
            if timestamps {
                write!(out, "{} ", local_time_of_day(e.time))?;
            }
            // Names and paths are chosen by any user: escaped, so none forges a line.
            writeln!(
                out,
                "{}({}): {:<3} {}",
                Escaped(e.comm),
                e.pid,
                e.ops,
                text::path(e.path)
            )
        }
        Format::Json => {
            let event = JsonEvent {
                ts: epoch_seconds(e.time),
                pid: e.pid,
                comm: e.comm,
                ops: e.ops.to_string(),
                path: e.path.to_string_lossy(),
                path_hex: text::hex_if_not_utf8(e.path.as_os_str().as_bytes()),
            };
            serde_json::to_writer(&mut *out, &event)?;
            out.write_all(b"\n")
        }
    }
}

/// The JSON stream's first line.
pub fn write_json_header(out: &mut impl Write, watching: &[String]) -> io::Result<()> {
    #[derive(Serialize)]
    struct Header<'a> {
        schema: &'static str,
        tool_version: &'static str,
        watching: &'a [String],
    }
    serde_json::to_writer(
        &mut *out,
        &Header {
            schema: SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION"),
            watching,
        },
    )?;
    out.write_all(b"\n")
}

/// Marks in the JSON stream where the kernel dropped events.
fn write_json_overflow(out: &mut impl Write, time: SystemTime) -> io::Result<()> {
    writeln!(out, "{{\"ts\":{},\"overflow\":true}}", epoch_seconds(time))
}

/// Seconds since the Unix epoch, to the microsecond.
fn epoch_seconds(t: SystemTime) -> f64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    // Rounded to microseconds, as fatrace prints them.
    (d.as_micros() as f64) / 1e6
}

/// `HH:MM:SS.micros` in the local time zone.
pub(crate) fn local_time_of_day(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: localtime_r reads `secs` and fills the caller's `tm`; it is thread-safe.
    let ok = !unsafe { libc::localtime_r(&secs, tm.as_mut_ptr()) }.is_null();
    let (h, m, s) = if ok {
        // SAFETY: localtime_r succeeded, so `tm` is initialised.
        let tm = unsafe { tm.assume_init() };
        (tm.tm_hour, tm.tm_min, tm.tm_sec)
    } else {
        let day = d.as_secs() % 86_400;
        (
            (day / 3600) as i32,
            (day / 60 % 60) as i32,
            (day % 60) as i32,
        )
    };
    format!("{h:02}:{m:02}:{s:02}.{:06}", d.subsec_micros())
}

/// `--summary` as text: the verdict line, then the files table, then the processes table.
pub fn write_summary(out: &mut impl Write, summary: &Summary, seconds: f64) -> io::Result<()> {
    use crate::files::summary::{Counts, TOP_FILES, TOP_PROCESSES};
    let cells = |c: &Counts| -> String { c.by_op.iter().map(|n| format!("{n:>7}")).collect() };
    writeln!(out, "{}", summary.verdict(seconds))?;
    if summary.events() == 0 {
        return Ok(());
    }
    let header: String = Op::ALL
        .iter()
        .map(|op| format!("{:>7}", op.letter()))
        .collect();
    // Bytes (eBPF) when they were counted: two more columns before the name.
    let bytes = |b: Option<crate::files::summary::Bytes>| {
        b.map_or(String::new(), |b| {
            format!(
                "{:>10}{:>10}",
                crate::units::format_bytes_approx(b.read),
                crate::units::format_bytes_approx(b.written)
            )
        })
    };
    let counted = summary.has_bytes();
    let bytes_header = if counted {
        format!("{:>10}{:>10}", "read", "written")
    } else {
        String::new()
    };
    writeln!(out)?;
    writeln!(out, "{:>8}{header}{bytes_header}  file", "events")?;
    for (path, c) in summary.ranked_files().into_iter().take(TOP_FILES) {
        writeln!(
            out,
            "{:>8}{}{}  {}",
            c.events,
            cells(c),
            bytes(summary.file_bytes(path)),
            text::path(path)
        )?;
    }
    if summary.file_count() > TOP_FILES {
        writeln!(
            out,
            "{:>8}  ({} more files)",
            "",
            summary.file_count() - TOP_FILES
        )?;
    }
    writeln!(out)?;
    writeln!(out, "{:>8}{header}{bytes_header}  process", "events")?;
    for (key, c) in summary.ranked_processes().into_iter().take(TOP_PROCESSES) {
        writeln!(
            out,
            "{:>8}{}{}  {}({})",
            c.events,
            cells(c),
            bytes(summary.process_bytes(key)),
            Escaped(&key.1),
            key.0
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::ops::Ops;
    use std::path::Path;
    use std::time::Duration;

    fn shown(path: &Path) -> Shown<'_> {
        Shown {
            time: UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456),
            pid: 42,
            comm: "sh",
            ops: Ops::parse("CW").unwrap(),
            path,
        }
    }

    #[test]
    fn text_lines_look_like_fatrace() {
        let mut out = Vec::new();
        let fmt = Format::Text { timestamps: false };
        write_event(&mut out, fmt, &shown(Path::new("/tmp/a b"))).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "sh(42): CW  /tmp/a b\n");
        let mut out = Vec::new();
        let fmt = Format::Text { timestamps: true };
        write_event(&mut out, fmt, &shown(Path::new("/x"))).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert!(line.ends_with(".123456 sh(42): CW  /x\n"), "{line}");
        assert_eq!(line.find(' '), Some(15), "HH:MM:SS.micros first: {line}");
    }

    #[test]
    fn text_lines_escape_names_and_json_keeps_the_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(b"/t/x\nsshd(1): W /etc/\xff"));
        let mut e = shown(path);
        e.comm = "\u{1b}]0;x\u{7}";
        let mut out = Vec::new();
        write_event(&mut out, Format::Text { timestamps: false }, &e).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\\e]0;x\\a(42): CW  /t/x\\nsshd(1): W /etc/\\xff\n"
        );
        let mut out = Vec::new();
        write_event(&mut out, Format::Json, &e).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["path"], "/t/x\nsshd(1): W /etc/\u{fffd}");
        assert_eq!(
            v["path_hex"],
            "2f742f780a737368642831293a2057202f6574632fff"
        );
        let mut out = Vec::new();
        write_event(&mut out, Format::Json, &shown(Path::new("/ok"))).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(
            v.get("path_hex").is_none(),
            "only for names that are not UTF-8"
        );
    }

    #[test]
    fn json_events_carry_the_five_fields() {
        let mut out = Vec::new();
        write_event(&mut out, Format::Json, &shown(Path::new("/tmp/\"q\""))).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["pid"], 42);
        assert_eq!(v["comm"], "sh");
        assert_eq!(v["ops"], "CW");
        assert_eq!(v["path"], "/tmp/\"q\"");
        assert!((v["ts"].as_f64().unwrap() - 1_700_000_000.123456).abs() < 1e-5);
        let mut out = Vec::new();
        write_json_header(&mut out, &["/".into()]).unwrap();
        write_json_overflow(&mut out, UNIX_EPOCH).unwrap();
        let lines: Vec<serde_json::Value> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines[0]["schema"], SCHEMA);
        assert_eq!(lines[1]["overflow"], true);
    }

    #[test]
    fn summary_table_lists_each_letter_per_file() {
        let mut s = Summary::default();
        for _ in 0..5 {
            s.add(&Shown {
                path: Path::new("/etc/hosts"),
                ops: Ops::parse("R").unwrap(),
                ..shown(Path::new("/"))
            });
        }
        for ops in ["W", "W", "W", "CW"] {
            s.add(&Shown {
                ops: Ops::parse(ops).unwrap(),
                ..shown(Path::new("/var/lib/pg/wal"))
            });
        }
        let mut out = Vec::new();
        write_summary(&mut out, &s, 2.0).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("most written: /var/lib/pg/wal"));
        let wal = text
            .lines()
            .find(|l| l.ends_with("  /var/lib/pg/wal"))
            .unwrap();
        let nums: Vec<&str> = wal.split_whitespace().collect();
        assert_eq!(&nums[..9], ["4", "0", "1", "4", "0", "0", "0", "0", "0"]);
        assert!(text.lines().any(|l| l.ends_with("  sh(42)")), "{text}");
    }
}
