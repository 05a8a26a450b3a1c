//! The fio job file of `tacho files --derive-job`: a comment block saying what was observed,
//! then one job per file, which fio and `tacho bench disk --fio-job` both run.

use crate::bench::derive::{DerivedJob, Pattern};
use crate::units::{format_bytes_approx, plural};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

/// Who was watched, for the comment block.
pub struct Watched<'a> {
    /// The process ids given with `--pid`.
    pub pids: &'a [i32],
    /// Their command names, as the tracer saw them (escaped here).
    pub comms: Vec<String>,
    /// How long tacho watched.
    pub seconds: f64,
    /// Threads the processes had when the watch ended.
    pub threads: Option<u64>,
}

/// Writes the job file: the observations as `#` comments (text from the system escaped, so a
/// file name cannot end a comment line and add an option), then `[global]` and the jobs.
pub fn write(jobs: &[DerivedJob], watched: &Watched, out: &mut impl Write) -> io::Result<()> {
    out.write_all(text(jobs, watched).as_bytes())
}

fn text(jobs: &[DerivedJob], watched: &Watched) -> String {
    let mut t = String::new();
    let pids: Vec<String> = watched.pids.iter().map(i32::to_string).collect();
    let comms: Vec<String> = watched
        .comms
        .iter()
        .map(|c| crate::text::escape(c).into_owned())
        .collect();
    let _ = writeln!(
        t,
        "# Derived by tacho files --derive-job from what process {} ({}) did in {:.1} s.",
        pids.join(", "),
        comms.join(", "),
        watched.seconds
    );
    let _ = writeln!(
        t,
        "# Run it on another disk: tacho bench disk DIR --fio-job FILE, or fio --directory=DIR FILE"
    );
    for (i, j) in jobs.iter().enumerate() {
        let o = &j.observed;
        let name = o
            .path
            .as_deref()
            .map_or("(path not seen: closed before tacho looked)".into(), |p| {
                crate::text::path(p)
            });
        let _ = writeln!(t, "#");
        let _ = writeln!(t, "# file{}: {name}", i + 1);
        let writes = match o.write_range {
            _ if o.writes == 0 => "none".to_string(),
            Some((min, max)) if min == max => format!(
                "{}, {}, each {min} bytes",
                plural(o.writes, "call"),
                format_bytes_approx(o.write_bytes)
            ),
            Some((min, max)) => format!(
                "{}, {}, {min} to {max} bytes (bs is their mean)",
                plural(o.writes, "call"),
                format_bytes_approx(o.write_bytes)
            ),
            None => format!(
                "{}, {}",
                plural(o.writes, "call"),
                format_bytes_approx(o.write_bytes)
            ),
        };
        let _ = writeln!(t, "#   writes: {writes}");
        let reads = if o.reads == 0 {
            "none".to_string()
        } else {
            format!(
                "{}, {}",
                plural(o.reads, "call"),
                format_bytes_approx(o.read_bytes)
            )
        };
        let _ = writeln!(t, "#   reads: {reads}");
        let kinds = format!(
            "{} fsync, {} fdatasync, {} sync_file_range",
            o.fsyncs,
            o.fdatasyncs,
            o.syncs
                .saturating_sub(o.fsyncs)
                .saturating_sub(o.fdatasyncs)
        );
        let syncs = match j.fdatasync {
            Some(n) => format!(
                "{} ({kinds}), one per {}; written as {} (sync_file_range counts as fdatasync)",
                plural(o.syncs, "call"),
                plural(u64::from(n), "write"),
                j.flush.word()
            ),
            None if o.syncs > 0 => format!("{} ({kinds}) without writes", plural(o.syncs, "call")),
            None => "none".into(),
        };
        let _ = writeln!(t, "#   flushes: {syncs}");
        let threads = o
            .io_threads
            .map_or("not seen".to_string(), |n| plural(n, "thread"));
        let _ = writeln!(
            t,
            "#   concurrency: observed: {threads} of the process made read, write or sync calls \
             on files; estimated: {} of its calls in flight on this file on average (their \
             summed time over the watched time): numjobs={}",
            j.mean_in_flight
                .map_or("not known".to_string(), |m| format!("{m:.2}")),
            j.numjobs
        );
        let sequential = match j.sequential_pct {
            Some(p) => format!("{p:.0}% of the bytes written grew the file (appends)"),
            None => "not seen (the file was seen open once at most); written as sequential".into(),
        };
        let _ = writeln!(t, "#   sequential share: {sequential}");
        let _ = writeln!(
            t,
            "#   size: {}",
            o.size.map_or("not seen".into(), |s| format!("{s} bytes"))
        );
    }
    let _ = writeln!(t, "#");
    let threads = watched.threads.map_or(String::new(), |n| {
        format!(" (the process had {} at the end)", plural(n, "thread"))
    });
    let _ = writeln!(
        t,
        "# Concurrency: read, write and sync calls are synchronous, one at a time per thread: \
         iodepth=1, and numjobs is the mean number in flight (estimated), rounded, at most the \
         threads that made them (observed){threads}. io_uring and AIO requests are counted for \
         bytes but not timed."
    );
    let _ = writeln!(
        t,
        "# Buffered, as the process wrote (direct=0); one file after another (stonewall)."
    );
    let _ = writeln!(t);
    let _ = writeln!(t, "[global]");
    let _ = writeln!(t, "ioengine=sync");
    let _ = writeln!(t, "direct=0");
    let _ = writeln!(t, "iodepth=1");
    let _ = writeln!(t, "runtime={}s", runtime(watched.seconds).as_secs());
    let _ = writeln!(t, "time_based=1");
    for (i, j) in jobs.iter().enumerate() {
        let _ = writeln!(t);
        let _ = writeln!(t, "[file{}]", i + 1);
        let _ = writeln!(t, "stonewall");
        let _ = writeln!(t, "rw={}", j.rw.word());
        let _ = writeln!(t, "bs={}", j.bs);
        if let Some(p) = j
            .rwmixread
            .filter(|_| matches!(j.rw, Pattern::ReadWrite | Pattern::RandRw))
        {
            let _ = writeln!(t, "rwmixread={p}");
        }
        let _ = writeln!(t, "numjobs={}", j.numjobs);
        if let Some(n) = j.fdatasync {
            let _ = writeln!(t, "{}={n}", j.flush.word());
        }
        let _ = writeln!(t, "size={}", j.size);
    }
    t
}

/// The watched time in whole seconds, at least one.
fn runtime(seconds: f64) -> Duration {
    Duration::from_secs(if seconds.is_finite() && seconds >= 1.0 {
        seconds.round() as u64
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::derive::{Observed, derive};

    #[test]
    fn a_file_name_cannot_add_an_option() {
        let o = Observed {
            path: Some("/tmp/a\nrw=randread\n[x]".into()),
            writes: 1,
            write_bytes: 4096,
            write_range: Some((4096, 4096)),
            ..Observed::default()
        };
        let w = Watched {
            pids: &[7],
            comms: vec!["evil\nbs=1".into()],
            seconds: 2.0,
            threads: Some(1),
        };
        let text = text(&derive(&[o], 2.0), &w);
        for line in text.lines() {
            assert!(
                line.starts_with('#') || line.is_empty() || !line.contains("randread"),
                "{text}"
            );
            assert_ne!(line, "bs=1", "{text}");
            assert_ne!(line, "[x]", "{text}");
        }
        assert!(
            text.contains("\nbs=4096\n") && text.contains("\nrw=write\n"),
            "{text}"
        );
    }
}
