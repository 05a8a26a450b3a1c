//! `--summary`: which files and which processes had the most events, per operation letter.
//!
//! Counts are of events as shown (after filters), so one merged "CW" counts once for C and
//! once for W. Files are ranked by their writes first (the question is usually "what is being
//! written all the time"), then by all events; processes by all events.

use super::Shown;
use super::ops::{Op, Ops};
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

/// Running counts for the summary.
#[derive(Debug, Default)]
pub struct Summary {
    files: HashMap<PathBuf, Counts>,
    processes: HashMap<(i32, String), Counts>,
    events: u64,
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
}

/// The summary as JSON (in the trailer of `--json`).
#[derive(Debug, Serialize)]
pub struct Report {
    pub verdict: String,
    pub events: u64,
    pub files: Vec<Row>,
    pub processes: Vec<Row>,
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
                    "{n} of its {} events from {}({pid})",
                    counts.events,
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
                .map(|(p, c)| Row {
                    events: c.events,
                    by_op: row(c),
                    path: Some(p.to_string_lossy().into_owned()),
                    path_hex: text::hex_if_not_utf8(p.as_os_str().as_bytes()),
                    pid: None,
                    comm: None,
                })
                .collect(),
            processes: self
                .ranked_processes()
                .into_iter()
                .take(TOP_PROCESSES)
                .map(|((pid, comm), c)| Row {
                    events: c.events,
                    by_op: row(c),
                    path: None,
                    path_hex: None,
                    pid: Some(*pid),
                    comm: Some(comm.clone()),
                })
                .collect(),
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
