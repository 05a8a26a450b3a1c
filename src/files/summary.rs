//! `--summary`: which files and which processes had the most events, per operation letter.
//!
//! Counts are of events as shown (after filters), so one merged "CW" counts once for C and
//! once for W. Files are ranked by their writes first (the question is usually "what is being
//! written all the time"), then by all events; processes by all events.

use super::Shown;
use super::ops::{Op, Ops};
use crate::bpf::files::Uncounted;
use crate::text::{self, Escaped};
use serde::Serialize;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Rows listed per table.
pub(crate) const TOP_FILES: usize = 20;
pub(crate) const TOP_PROCESSES: usize = 10;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) events: u64,
    pub(crate) by_op: [u64; 8],
    /// For files: the process with the most events on it, and how many.
    top: HashMap<(i32, String), u64>,
}

impl Counts {
    fn add(&mut self, ops: Ops) {
        self.events += 1;
        for op in ops.iter() {
            self.by_op[op.index()] += 1;
        }
    }

    fn writes(&self) -> u64 {
        self.by_op[Op::Write.index()]
    }
}

/// Bytes read and written, from the eBPF file tracer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bytes {
    pub read: u64,
    pub written: u64,
}

/// Bytes per file, and per (pid, command name).
type ByteCounts = (HashMap<PathBuf, Bytes>, HashMap<(i32, String), Bytes>);

/// Running counts for the summary.
#[derive(Debug, Default)]
pub struct Summary {
    files: HashMap<PathBuf, Counts>,
    processes: HashMap<(i32, String), Counts>,
    events: u64,
    /// Per file and per process, when the byte tracer ran beside the watch.
    bytes: Option<ByteCounts>,
    /// Processes whose requests the byte tracer could not all count.
    uncounted: Vec<Uncounted>,
}

/// One ranked row of the JSON summary.
#[derive(Debug, Serialize)]
pub struct Row {
    pub events: u64,
    /// Count per operation letter, only letters that occurred.
    pub by_op: HashMap<char, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path's bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Bytes read, when counted (eBPF, root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Bytes written, when counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_bytes: Option<u64>,
}

/// The summary as JSON (in the trailer of `--json`).
#[derive(Debug, Serialize)]
pub struct Report {
    pub verdict: String,
    pub events: u64,
    pub files: Vec<Row>,
    pub processes: Vec<Row>,
    /// Processes whose bytes above are short: requests the byte tracer could not count whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bytes_uncounted: Vec<Uncounted>,
}

impl Summary {
    pub fn add(&mut self, e: &Shown<'_>) {
        self.events += 1;
        let file = self.files.entry(e.path.to_path_buf()).or_default();
        file.add(e.ops);
        *file.top.entry((e.pid, e.comm.to_owned())).or_default() += 1;
        self.processes
            .entry((e.pid, e.comm.to_owned()))
            .or_default()
            .add(e.ops);
    }

    pub(crate) fn ranked_files(&self) -> Vec<(&PathBuf, &Counts)> {
        let mut files: Vec<_> = self.files.iter().collect();
        files.sort_by(|a, b| {
            (b.1.writes(), b.1.events)
                .cmp(&(a.1.writes(), a.1.events))
                .then_with(|| a.0.cmp(b.0))
        });
        files
    }

    pub(crate) fn ranked_processes(&self) -> Vec<(&(i32, String), &Counts)> {
        let mut procs: Vec<_> = self.processes.iter().collect();
        procs.sort_by(|a, b| b.1.events.cmp(&a.1.events).then_with(|| a.0.cmp(b.0)));
        procs
    }

    /// Notes that the byte tracer ran, so the tables show bytes (zero for files it saw none of).
    pub fn counted_bytes(&mut self) {
        self.bytes.get_or_insert_default();
    }

    /// Adds what the byte tracer counted for one process and file (its path when known).
    pub fn add_bytes(&mut self, pid: i32, comm: &str, path: Option<&std::path::Path>, b: Bytes) {
        let (files, procs) = self.bytes.get_or_insert_default();
        let add = |into: &mut Bytes| {
            into.read += b.read;
            into.written += b.written;
        };
        if let Some(path) = path {
            add(files.entry(path.to_path_buf()).or_default());
        }
        add(procs.entry((pid, comm.to_owned())).or_default());
    }

    /// The processes whose requests the byte tracer could not all count.
    pub fn uncounted(&mut self, uncounted: Vec<Uncounted>) {
        self.uncounted = uncounted;
    }

    /// Whether the byte tracer ran beside the watch.
    pub(crate) fn has_bytes(&self) -> bool {
        self.bytes.is_some()
    }

    /// Bytes of a file, when the byte tracer ran (zero for a file it did not see move data).
    pub(crate) fn file_bytes(&self, path: &std::path::Path) -> Option<Bytes> {
        self.bytes
            .as_ref()
            .map(|(files, _)| files.get(path).copied().unwrap_or_default())
    }

    /// Bytes of a process, when the byte tracer ran.
    pub(crate) fn process_bytes(&self, key: &(i32, String)) -> Option<Bytes> {
        self.bytes
            .as_ref()
            .map(|(_, procs)| procs.get(key).copied().unwrap_or_default())
    }

    /// Events counted so far.
    pub(crate) fn events(&self) -> u64 {
        self.events
    }

    /// Distinct files counted so far.
    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// One line an admin can act on.
    pub fn verdict(&self, seconds: f64) -> String {
        let Some((path, counts)) = self.ranked_files().into_iter().next() else {
            return format!("no file activity matched in {seconds:.1} s");
        };
        let top = counts
            .top
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|((pid, comm), n)| {
                format!(
                    "{n} of its {} from {}({pid})",
                    crate::units::plural(counts.events, "event"),
                    Escaped(comm)
                )
            })
            .unwrap_or_default();
        if counts.writes() > 0 {
            format!(
                "most written: {} ({} write events in {seconds:.1} s; {top})",
                text::path(path),
                counts.writes()
            )
        } else {
            format!(
                "nothing written; busiest: {} ({} events in {seconds:.1} s; {top})",
                text::path(path),
                counts.events
            )
        }
    }

    pub fn report(&self, seconds: f64) -> Report {
        let row = |c: &Counts| -> HashMap<char, u64> {
            Op::ALL
                .iter()
                .filter(|op| c.by_op[op.index()] > 0)
                .map(|op| (op.letter(), c.by_op[op.index()]))
                .collect()
        };
        Report {
            verdict: self.verdict(seconds),
            events: self.events,
            files: self
                .ranked_files()
                .into_iter()
                .take(TOP_FILES)
                .map(|(p, c)| {
                    let b = self.file_bytes(p);
                    Row {
                        events: c.events,
                        by_op: row(c),
                        path: Some(p.to_string_lossy().into_owned()),
                        path_hex: text::hex_if_not_utf8(p.as_os_str().as_bytes()),
                        pid: None,
                        comm: None,
                        read_bytes: b.map(|b| b.read),
                        write_bytes: b.map(|b| b.written),
                    }
                })
                .collect(),
            processes: self
                .ranked_processes()
                .into_iter()
                .take(TOP_PROCESSES)
                .map(|(key, c)| {
                    let b = self.process_bytes(key);
                    Row {
                        events: c.events,
                        by_op: row(c),
                        path: None,
                        path_hex: None,
                        pid: Some(key.0),
                        comm: Some(key.1.clone()),
                        read_bytes: b.map(|b| b.read),
                        write_bytes: b.map(|b| b.written),
                    }
                })
                .collect(),
            bytes_uncounted: self.uncounted.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::SystemTime;

    fn add(s: &mut Summary, pid: i32, comm: &str, ops: &str, path: &str) {
        s.add(&Shown {
            time: SystemTime::now(),
            pid,
            comm,
            ops: Ops::parse(ops).unwrap(),
            path: Path::new(path),
        });
    }

    #[test]
    fn files_rank_by_writes_and_the_verdict_names_the_writer() {
        let mut s = Summary::default();
        for _ in 0..5 {
            add(&mut s, 1, "reader", "R", "/etc/hosts");
        }
        for _ in 0..3 {
            add(&mut s, 9, "postgres", "W", "/var/lib/pg/wal");
        }
        add(&mut s, 10, "cp", "CW", "/var/lib/pg/wal");
        let verdict = s.verdict(2.0);
        assert_eq!(
            verdict,
            "most written: /var/lib/pg/wal (4 write events in 2.0 s; 3 of its 4 events from \
             postgres(9))"
        );
        let report = s.report(2.0);
        assert_eq!(report.events, 9);
        assert_eq!(report.files[0].path.as_deref(), Some("/var/lib/pg/wal"));
        assert_eq!(report.files[0].by_op[&'W'], 4);
        assert_eq!(report.files[0].by_op[&'C'], 1);
        assert_eq!(report.processes[0].comm.as_deref(), Some("reader"));
    }

    #[test]
    fn empty_and_read_only_summaries_say_so() {
        let mut s = Summary::default();
        assert_eq!(s.verdict(1.0), "no file activity matched in 1.0 s");
        add(&mut s, 3, "cat", "RO", "/etc/passwd");
        assert!(
            s.verdict(1.0)
                .starts_with("nothing written; busiest: /etc/passwd")
        );
    }
}
