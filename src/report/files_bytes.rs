//! `tacho files --bytes`: bytes read and written per process and file, then each process's
//! syncs per file with their latency, the sizes written before them and the `bench disk` test
//! that mimics it. Text or one JSON document (`tacho.files.bytes.v1`).

use crate::bpf::files::{FileIo, MAX_IOCBS, MAX_IOVECS, Uncounted};
use crate::bpf::hist::log2_percentile_us as percentile_us;
use crate::text;
use crate::units::{format_bytes_approx, format_latency_ns};
use serde_json::json;
use std::io::{self, Write};
use std::path::PathBuf;

/// A traced (process, file) with its path when found.
pub struct Row {
    /// What the tracer counted.
    pub io: FileIo,
    /// The file's path, when the process had it open while tacho looked.
    pub path: Option<PathBuf>,
}

impl Row {
    /// The file for a terminal: its path escaped from its exact bytes.
    fn file(&self) -> String {
        match &self.path {
            Some(p) => crate::text::path(p),
            // The kernel's last component, never a path another file holds now.
            None => format!(
                "…/{} (inode {} on {}:{}; no path seen while it was open)",
                crate::text::EscapedBytes(&self.io.name),
                self.io.ino,
                self.io.dev.0,
                self.io.dev.1
            ),
        }
    }
}

/// A process whose requests were not all counted, with its command name (and the name's
/// exact bytes in hex when not UTF-8) when one of its rows gives it.
pub struct Short {
    /// What the tracer could not count.
    pub uncounted: Uncounted,
    /// Its command name, from its rows.
    pub comm: Option<(String, Option<String>)>,
}

/// One line per process whose figures are short, saying by how much and why (names escaped).
pub fn short_lines(short: &[Short]) -> Vec<String> {
    short
        .iter()
        .map(|s| {
            let u = &s.uncounted;
            let who = match &s.comm {
                Some((comm, hex)) => {
                    format!("{} (pid {})", text::exact(comm, hex.as_deref()), u.pid)
                }
                None => format!("pid {}", u.pid),
            };
            let mut parts = Vec::new();
            if u.requests > 0 {
                parts.push(format!(
                    "{} not counted (an io_submit of more than {MAX_IOCBS}, an unreadable \
                     request, or no room left for another file)",
                    crate::units::plural(u.requests, "request")
                ));
            }
            if u.partial > 0 {
                parts.push(format!(
                    "{} counted for their first {MAX_IOVECS} buffers only",
                    crate::units::plural(u.partial, "vectored request")
                ));
            }
            format!("{who}: {}; its bytes above are short", parts.join(", "))
        })
        .collect()
}

/// Writes that small, each followed by a sync, are what etcd's WAL does and what `bench disk
/// --suite etcd` measures.
const SMALL_WRITE: u64 = 16 * 1024;

/// The sync line of a row, when it synced: count, latency and what to benchmark (names
/// escaped for a terminal).
pub fn sync_line(r: &Row) -> Option<String> {
    let io = &r.io;
    if io.syncs == 0 {
        return None;
    }
    let pct = |q| {
        percentile_us(&io.sync_hist, q).map_or_else(|| "-".into(), |us| format_latency_ns(us * 1e3))
    };
    let mut line = format!(
        "{} (pid {}) {}: {}, mean {}, p50 {}, p99 {}",
        text::exact(&io.comm, io.comm_hex.as_deref()),
        io.pid,
        r.file(),
        crate::units::plural(io.syncs, "sync"),
        format_latency_ns(io.sync_ns as f64 / io.syncs as f64),
        pct(0.5),
        pct(0.99),
    );
    if let Some((min, max)) = io.write_range {
        let sizes = if min == max {
            format_bytes_approx(min)
        } else {
            format!("{}–{}", format_bytes_approx(min), format_bytes_approx(max))
        };
        line.push_str(&format!("; writes {sizes} between them"));
        if max <= SMALL_WRITE && io.writes >= io.syncs / 2 {
            line.push_str(": try `tacho bench disk --suite etcd`");
        }
    }
    Some(line)
}

/// The table of the first `top` rows (0: all), then the syncs of every row.
pub fn write_text(
    rows: &[Row],
    short: &[Short],
    seconds: f64,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "bytes per process and file over {seconds:.1} s (eBPF, read/write-family syscalls, io_uring and libaio on regular files)"
    )?;
    writeln!(
        out,
        "{:>8}  {:<15}  {:>10}  {:>10}  {:>8}  {:>8}  {:>6}  FILE",
        "PID", "COMMAND", "READ", "WRITTEN", "READS", "WRITES", "SYNCS"
    )?;
    let shown = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    for r in &rows[..shown] {
        writeln!(
            out,
            "{:>8}  {:<15}  {:>10}  {:>10}  {:>8}  {:>8}  {:>6}  {}",
            r.io.pid,
            text::exact(&r.io.comm, r.io.comm_hex.as_deref()),
            format_bytes_approx(r.io.read_bytes),
            format_bytes_approx(r.io.write_bytes),
            r.io.reads,
            r.io.writes,
            r.io.syncs,
            r.file(),
        )?;
    }
    if shown < rows.len() {
        writeln!(out, "({} more; --top 0 lists them all)", rows.len() - shown)?;
    }
    for line in short_lines(short) {
        writeln!(out, "not counted: {line}")?;
    }
    let syncs: Vec<String> = rows.iter().filter_map(sync_line).collect();
    if !syncs.is_empty() {
        writeln!(out, "\nsyncs (fsync, fdatasync, sync_file_range):")?;
        for line in syncs {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// One `tacho.files.bytes.v1` document.
pub fn write_json(
    rows: &[Row],
    short: &[Short],
    seconds: f64,
    out: &mut impl Write,
) -> io::Result<()> {
    let files: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let io = &r.io;
            let us = |q| percentile_us(&io.sync_hist, q);
            json!({
                "pid": io.pid, "comm": io.comm, "comm_hex": io.comm_hex,
                "path": r.path.as_ref().map(|p| p.to_string_lossy()),
                // A name that is not UTF-8 keeps its exact bytes here, as `files --json` does.
                "path_hex": r.path.as_ref().and_then(|p| {
                    crate::text::hex_if_not_utf8(std::os::unix::ffi::OsStrExt::as_bytes(
                        p.as_os_str(),
                    ))
                }),
                // The last component the kernel saw at the first I/O, and the inode's
                // generation: a row whose path was not seen is still told apart.
                "name": String::from_utf8_lossy(&io.name),
                "name_hex": crate::text::hex_if_not_utf8(&io.name),
                "dev": format!("{}:{}", io.dev.0, io.dev.1), "inode": io.ino,
                "generation": io.generation,
                "read_bytes": io.read_bytes, "reads": io.reads,
                "write_bytes": io.write_bytes, "writes": io.writes,
                "write_min_bytes": io.write_range.map(|w| w.0),
                "write_max_bytes": io.write_range.map(|w| w.1),
                "syncs": io.syncs,
                "sync_mean_ns": (io.syncs > 0).then(|| io.sync_ns as f64 / io.syncs as f64),
                "sync_p50_ns": us(0.5).map(|u| u * 1e3),
                "sync_p99_ns": us(0.99).map(|u| u * 1e3),
                "suggestion": sync_line(r).filter(|l| l.contains("try `")).map(|_| "tacho bench disk --suite etcd"),
            })
        })
        .collect();
    let uncounted: Vec<serde_json::Value> = short
        .iter()
        .map(|s| {
            let u = &s.uncounted;
            json!({
                "pid": u.pid,
                "comm": s.comm.as_ref().map(|c| &c.0),
                "comm_hex": s.comm.as_ref().and_then(|c| c.1.as_ref()),
                "requests_not_counted": u.requests,
                "requests_counted_in_part": u.partial,
            })
        })
        .collect();
    let doc = json!({
        "schema": "tacho.files.bytes.v1", "seconds": seconds, "files": files,
        "uncounted": uncounted,
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn row(path: &[u8]) -> Row {
        Row {
            io: FileIo {
                pid: 1,
                comm: "w\x1b[2J\u{fffd}".into(),
                comm_hex: Some("771b5b324aff".into()),
                dev: (8, 1),
                ino: 12,
                generation: 7,
                name: b"a".to_vec(),
                read_bytes: 0,
                reads: 0,
                write_bytes: 2300,
                writes: 1,
                write_range: Some((2300, 2300)),
                syncs: 1,
                sync_ns: 1000,
                sync_hist: vec![1; 1],
                fsyncs: 0,
                fdatasyncs: 1,
                busy_ns: 0,
            },
            path: Some(PathBuf::from(std::ffi::OsStr::from_bytes(path))),
        }
    }

    #[test]
    fn a_path_that_is_not_utf8_keeps_its_bytes_and_nothing_reaches_the_terminal_raw() {
        let rows = [row(b"/tmp/a\xff\nb")];
        let short = [Short {
            uncounted: Uncounted {
                pid: 1,
                requests: 4032,
                partial: 0,
            },
            comm: Some((rows[0].io.comm.clone(), rows[0].io.comm_hex.clone())),
        }];
        let mut json = Vec::new();
        write_json(&rows, &short, 1.0, &mut json).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(doc["files"][0]["path_hex"], "2f746d702f61ff0a62");
        assert_eq!(doc["uncounted"][0]["requests_not_counted"], 4032);
        assert_eq!(doc["uncounted"][0]["comm_hex"], "771b5b324aff");
        let mut text = Vec::new();
        write_text(&rows, &short, 1.0, 0, &mut text).unwrap();
        assert!(
            !text.contains(&0x1b) && !text.contains(&0xff),
            "{}",
            String::from_utf8_lossy(&text)
        );
        // Bytes that are not UTF-8 show as \xNN, in the table, the short figures' line and
        // the sync line.
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains('\u{fffd}'), "{text}");
        assert_eq!(text.matches(r"w\e[2J\xff").count(), 3, "{text}");
        assert!(
            text.contains(r"not counted: w\e[2J\xff (pid 1): 4032 requests not counted"),
            "{text}"
        );
        assert_eq!(text.matches(r"/tmp/a\xff\nb").count(), 2, "{text}");
        assert_eq!(doc["files"][0]["comm_hex"], "771b5b324aff");
    }
}
