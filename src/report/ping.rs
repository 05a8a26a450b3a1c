//! `tacho ping`'s output: ioping's line per request and summary, or one JSON document.

use crate::bench::ping::{Request, Summary};
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_count, format_latency_ns, format_size};
use serde::Serialize;
use std::io::{self, Write};

/// Schema of the JSON document.
pub const SCHEMA: &str = "tacho.ping.v1";

/// What was pinged, as the lines and the JSON name it.
#[derive(Debug, Clone, Serialize)]
pub struct PingTarget {
    /// The target as given (the test file's directory for a directory).
    pub path: String,
    /// The filesystem holding it, if any.
    pub filesystem: Option<String>,
    /// The block device under it, if known.
    pub device: Option<String>,
    /// `read` or `write`.
    pub operation: &'static str,
    /// Whether requests bypass the page cache.
    pub direct: bool,
    /// Bytes the offsets are drawn from.
    pub work_bytes: u64,
}

fn label(t: &PingTarget) -> String {
    let under: Vec<&str> = [t.filesystem.as_deref(), t.device.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if under.is_empty() {
        t.path.clone()
    } else {
        format!("{} ({})", t.path, under.join(" "))
    }
}

/// One request's line: `4 KiB <<< /srv (ext4 vda): request=2 time=181µs`.
pub fn write_request(t: &PingTarget, r: &Request, out: &mut impl Write) -> io::Result<()> {
    let arrows = if t.operation == "write" { ">>>" } else { "<<<" };
    writeln!(
        out,
        "{} {arrows} {}: request={} time={}{}",
        format_size(r.bytes),
        Escaped(&label(t)),
        r.request,
        format_latency_ns(r.time_ns as f64),
        if r.warmup { " (warmup)" } else { "" }
    )
}

/// ioping's statistics block.
pub fn write_summary(t: &PingTarget, s: Option<&Summary>, out: &mut impl Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "--- {} ping statistics ---", Escaped(&label(t)))?;
    let Some(s) = s else {
        return writeln!(out, "no request counted (the first is a warm-up)");
    };
    let lat = |ns: u64| format_latency_ns(ns as f64);
    writeln!(
        out,
        "{} completed in {}, {} {}, {} iops, {}",
        crate::units::plural(s.requests, "request"),
        lat(s.total_ns),
        format_size(s.bytes),
        if t.operation == "write" {
            "written"
        } else {
            "read"
        },
        format_count(s.iops),
        format_bandwidth(s.bytes_per_s)
    )?;
    writeln!(
        out,
        "min/avg/max/mdev = {} / {} / {} / {}",
        lat(s.min_ns),
        lat(s.avg_ns),
        lat(s.max_ns),
        lat(s.mdev_ns)
    )
}

/// The JSON document (`schema`, `target`, every request, `summary`, `interrupted`), written
/// as the requests come so that an endless ping keeps none of them: [`JsonDocument::start`]
/// before the first, [`JsonDocument::request`] for each, [`JsonDocument::finish`] after the
/// last. A run that fails midway leaves it unfinished (the error is on stderr, exit 2).
pub struct JsonDocument {
    requests: u64,
}

impl JsonDocument {
    /// Writes the head, up to the opening of the request list.
    pub fn start(target: &PingTarget, out: &mut impl Write) -> io::Result<JsonDocument> {
        write!(
            out,
            "{{\n  \"schema\": {},\n  \"target\": {},\n  \"requests\": [",
            serde_json::to_string(SCHEMA)?,
            serde_json::to_string(target)?
        )?;
        Ok(JsonDocument { requests: 0 })
    }

    /// Writes one request.
    pub fn request(&mut self, r: &Request, out: &mut impl Write) -> io::Result<()> {
        let comma = if self.requests == 0 { "" } else { "," };
        self.requests += 1;
        write!(out, "{comma}\n    {}", serde_json::to_string(r)?)
    }

    /// Closes the list and writes the summary over the counted requests (null when none was
    /// counted) and whether Ctrl-C or SIGTERM stopped it before `--count` requests.
    pub fn finish(
        self,
        summary: Option<&Summary>,
        interrupted: bool,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let close = if self.requests == 0 { "]" } else { "\n  ]" };
        writeln!(
            out,
            "{close},\n  \"summary\": {},\n  \"interrupted\": {interrupted}\n}}",
            serde_json::to_string(&summary)?
        )
    }
}
