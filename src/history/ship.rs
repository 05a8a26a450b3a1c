//! `tacho record --db`: each judged interval goes to the shared store through a backlog kept
//! in the history file, oldest first. While the server cannot be reached the backlog grows
//! (to a bound: the oldest entries are then dropped, and said); once it answers, the backlog
//! is sent in order. A batch is removed from the backlog only after the server committed
//! it, and the server keeps each (host, interval) once, so a batch sent again after a lost
//! reply adds nothing: no interval is lost or stored twice.

use anyhow::Result;

use crate::history::History;
use crate::history::interval::Interval;
use crate::kernel::SysRoot;
use crate::store::pg::PgStore;
use crate::store::pg::history::HistoryRow;
use crate::text::Escaped;

/// Backlog entries sent per transaction.
const BATCH: usize = 500;

/// Who is recording: what every row carries.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// The host name.
    pub hostname: String,
    /// The host's labels.
    pub labels: crate::labels::Labels,
}

/// Sends intervals to the shared store through the backlog.
pub struct Shipper<'h> {
    history: &'h History,
    url: String,
    shown: String,
    server: Option<PgStore>,
    who: Identity,
    bound: u64,
    /// Why the server could not be reached, while it cannot.
    down: Option<String>,
    /// Intervals dropped from a full backlog since the server was last reached.
    dropped: u64,
}

impl<'h> Shipper<'h> {
    /// Connects (a wrong URL, login or schema stops the recorder before it starts), binds the
    /// machine id to this role, and sends what the backlog holds from an earlier run.
    pub fn start(history: &'h History, url: &str, who: Identity, bound: u64) -> Result<Self> {
        let mut server = PgStore::connect(url, SysRoot::real())?;
        server.claim_host(&who.machine_id)?;
        history.backlog_init()?;
        let mut shipper = Shipper {
            history,
            url: url.to_owned(),
            shown: server.shown().to_owned(),
            server: Some(server),
            who,
            bound,
            down: None,
            dropped: 0,
        };
        shipper.flush();
        Ok(shipper)
    }

    /// Where the intervals go, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Queues one interval and sends what is queued.
    pub fn add(&mut self, interval: &Interval) -> Result<()> {
        let row = row(&self.who, interval);
        let dropped = self
            .history
            .backlog_push(&serde_json::to_string(&row)?, self.bound)?;
        if let (Some(first), Some(last)) = (dropped.first(), dropped.last()) {
            if self.dropped == 0 {
                eprintln!(
                    "warning: the backlog for {} is full ({} intervals): dropping the oldest \
                     (ending {} to {}); raise --backlog to keep more",
                    Escaped(&self.shown),
                    self.bound,
                    clock(*first),
                    clock(*last)
                );
            }
            self.dropped += dropped.len() as u64;
        }
        self.flush();
        Ok(())
    }

    /// Sends the backlog, oldest first, while the server takes it; says once when it cannot
    /// and again when it can.
    pub fn flush(&mut self) {
        let mut sent = 0u64;
        loop {
            let batch = match self.history.backlog_oldest(BATCH) {
                Ok(b) => b,
                Err(e) => return self.went_down(format!("{e:#}")),
            };
            let Some(&(last_id, _)) = batch.last() else {
                break;
            };
            let rows: Vec<HistoryRow> = batch
                .iter()
                .filter_map(|(_, data)| serde_json::from_str(data).ok())
                .collect();
            let server = match self.server.take().filter(|s| !s.is_closed()) {
                Some(s) => s,
                None => match PgStore::connect(&self.url, SysRoot::real()) {
                    Ok(s) => s,
                    Err(e) => return self.went_down(format!("{e:#}")),
                },
            };
            let mut server = server;
            match server.ship(&rows) {
                Ok(_) => {
                    self.server = Some(server);
                    if let Err(e) = self.history.backlog_remove_upto(last_id) {
                        return self.went_down(format!("{e:#}"));
                    }
                    sent += batch.len() as u64;
                }
                Err(e) => {
                    return self.went_down(crate::store::pg::error_chain(&e));
                }
            }
        }
        if self.down.take().is_some() {
            let lost = match self.dropped {
                0 => "none lost".to_owned(),
                n => format!("{n} dropped from the full backlog"),
            };
            eprintln!(
                "the shared store {} answers again: sent {sent} interval(s) kept meanwhile ({lost})",
                Escaped(&self.shown)
            );
            self.dropped = 0;
        }
    }

    /// Says once that the server cannot be reached.
    fn went_down(&mut self, why: String) {
        self.server = None;
        if self.down.is_none() {
            eprintln!(
                "warning: cannot send to the shared store {} ({}); keeping the intervals in the \
                 history file's backlog (at most {}) and sending them when it answers",
                Escaped(&self.shown),
                Escaped(&why),
                self.bound
            );
        }
        self.down = Some(why);
    }

    /// Intervals still waiting in the backlog.
    pub fn pending(&self) -> u64 {
        self.history.backlog_len().unwrap_or(0)
    }
}

/// The row the shared store keeps of `interval`: its findings apart from its other figures.
pub fn row(who: &Identity, interval: &Interval) -> HistoryRow {
    let mut summary = serde_json::to_value(interval).unwrap_or_default();
    // The row's own columns say when; the findings have a column of their own.
    let findings = summary.as_object_mut().and_then(|o| {
        o.remove("start_unix_s");
        o.remove("end_unix_s");
        o.remove("findings")
    });
    let findings = findings.unwrap_or(serde_json::Value::Array(Vec::new()));
    HistoryRow {
        machine_id: who.machine_id.clone(),
        hostname: who.hostname.clone(),
        labels: who.labels.clone(),
        at_unix_s: interval.end_unix_s,
        seconds: interval.end_unix_s - interval.start_unix_s,
        findings,
        summary,
    }
}

fn clock(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s.floor() as i64, 0)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| format!("{unix_s:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row and back gives the interval again.
    #[test]
    fn an_interval_survives_its_row() {
        let i = Interval {
            start_unix_s: 10.0,
            end_unix_s: 20.0,
            cpu_busy_pct: 12.5,
            findings: vec![crate::history::interval::Found {
                code: crate::diagnose::findings::Code::DiskBusy,
                severity: crate::diagnose::findings::Severity::Warning,
                subject: "sda".into(),
                message: "busy".into(),
                culprits: Vec::new(),
            }],
            ..Interval::default()
        };
        let who = Identity {
            machine_id: "0".repeat(32),
            hostname: "h".into(),
            labels: Default::default(),
        };
        let r = row(&who, &i);
        assert_eq!(r.seconds, 10.0);
        assert_eq!(r.findings.as_array().map(Vec::len), Some(1));
        assert_eq!(r.interval(), Some(i));
    }
}
