//! `tacho load`: an open-loop HTTP/1.1 and HTTP/2 load generator (http and https) and the
//! search for a service's knee.
//!
//! Requests are due on a fixed schedule (request `i` of a step at `i / rate` after its start)
//! whatever the server does, and each one's latency is counted from the moment it was due, not
//! from the moment a connection was free to send it (wrk2's correction of coordinated
//! omission): a server that stalls shows the stall in the latency of every request that waited
//! behind it. [`engine`] runs one step at one rate ([`h1`]: HTTP/1.1 in the clear, by
//! hand), [`knee`] judges each step and finds where the service stopped following the offered
//! rate, [`target`] checks each URL, [`urls`] reads a weighted list of them, [`tls`] makes
//! https connections, [`watch`] reads a remote `tacho top --listen`'s findings.
//!
//! Nothing here prints; `cmd::load` resolves the options and `report::load` writes the text.

pub(crate) mod engine;
pub(crate) mod h1;
pub(crate) mod knee;
pub(crate) mod target;
pub(crate) mod tls;
pub(crate) mod urls;
pub(crate) mod watch;

use serde::Serialize;
use std::time::Duration;

/// The schema of `tacho load --json` and of a stored load run.
pub const SCHEMA: &str = "tacho.load.v1";

/// Most requests a second a step may offer: beyond what one core of this generator sends.
pub const MAX_RATE: u64 = 1_000_000;

/// What each request is and how it is sent.
#[derive(Debug, Clone)]
pub struct Options {
    /// Keep-alive connections kept open to each origin (each carries one request at a time
    /// over HTTP/1.1, up to `streams` over HTTP/2).
    pub connections: u32,
    /// Requests at once (streams) on one HTTP/2 connection.
    pub streams: u32,
    /// Extra headers, as given (`Name: value`), already checked.
    pub headers: Vec<(String, String)>,
    /// The request body (empty for none).
    pub body: Vec<u8>,
    /// How long a request may take from being sent to its last byte, and a connection to
    /// be made.
    pub timeout: Duration,
    /// HTTP/2 only: without asking over http:// (prior knowledge), the only protocol offered
    /// by ALPN over https://.
    pub http2: bool,
    /// https without checking the server's certificate.
    pub insecure: bool,
}

/// Requests that failed, by what went wrong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    /// No connection could be made (refused, unreachable, or not within the timeout).
    pub connect: u64,
    /// Sent, but the whole response did not arrive within `--timeout`.
    pub timeout: u64,
    /// Answered with a 4xx status.
    pub status_4xx: u64,
    /// Answered with a 5xx status.
    pub status_5xx: u64,
    /// Anything else: the connection closed or broke mid-request, a malformed response.
    pub other: u64,
}

impl std::ops::AddAssign for Errors {
    fn add_assign(&mut self, o: Errors) {
        self.connect += o.connect;
        self.timeout += o.timeout;
        self.status_4xx += o.status_4xx;
        self.status_5xx += o.status_5xx;
        self.other += o.other;
    }
}

impl Errors {
    /// Every failed request.
    pub fn total(&self) -> u64 {
        self.connect + self.timeout + self.status_4xx + self.status_5xx + self.other
    }

    /// The kinds that happened, with their counts: `timeout 12, status_5xx 3`.
    pub fn kinds(&self) -> Vec<(&'static str, u64)> {
        [
            ("connect", self.connect),
            ("timeout", self.timeout),
            ("status_4xx", self.status_4xx),
            ("status_5xx", self.status_5xx),
            ("other", self.other),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// Latency percentiles, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// The percentiles of a histogram of nanoseconds; `None` when it is empty.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Option<Latency> {
        if h.is_empty() {
            return None;
        }
        let q = |q: f64| h.value_at_quantile(q) as f64;
        Some(Latency {
            mean: h.mean(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p99_9: q(0.999),
            max: h.max() as f64,
        })
    }
}

/// How late the generator itself sent requests it was free to send on time (its own timing
/// error, not the server's), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Lag {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// One step: a rate held for a time, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Requests a second offered.
    pub offered_rps: f64,
    /// How long requests were due (the step's planned length, or less when interrupted).
    pub duration_s: f64,
    /// Requests due in the step.
    pub due: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests due that were never sent: every connection was still busy when the step
    /// ended (a sign of a server that did not keep up).
    pub unsent: u64,
    /// Responses with a 1xx, 2xx or 3xx status, read whole.
    pub ok: u64,
    /// Failed requests, by kind.
    pub errors: Errors,
    /// Successful responses a second, over the step from its start to its last response.
    pub achieved_rps: f64,
    /// Latency of the successful responses, from the moment each request was due;
    /// `null` when none succeeded.
    pub latency_ns: Option<Latency>,
    /// The generator's own lateness; `null` when no request could be sent on time.
    pub schedule_lag_ns: Option<Lag>,
    /// The counts of each URL of the mix, in the order given.
    pub by_url: Vec<UrlCounts>,
    /// Why the step bent (empty when the service followed the offered rate): see
    /// [`knee::Rule`].
    pub bent: Vec<String>,
    /// What the server's own findings were over the step (`tacho top`'s), when it is this
    /// host; `null` when not watched.
    pub server: Option<Vec<ServerFinding>>,
}

/// What one URL of the mix got in a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UrlCounts {
    /// Requests sent to it.
    pub sent: u64,
    /// Successful responses.
    pub ok: u64,
    /// Failed requests, by kind.
    pub errors: Errors,
}

impl std::ops::AddAssign for UrlCounts {
    fn add_assign(&mut self, o: UrlCounts) {
        self.sent += o.sent;
        self.ok += o.ok;
        self.errors += o.errors;
    }
}

/// One origin (scheme, host and port) loaded, with its own connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// `https://host:port`.
    pub origin: String,
    /// The address connected to.
    pub address: String,
    /// `HTTP/1.1` or `HTTP/2`, as the first connection agreed.
    pub protocol: &'static str,
    /// The TLS version (`TLSv1_3`); `null` in the clear.
    pub tls_version: Option<String>,
    /// Whether the server's certificate was checked (`false` with `--insecure`); `null` in
    /// the clear.
    pub verified: Option<bool>,
}

/// One URL of the mix, as the document records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UrlInfo {
    /// The URL as given.
    pub url: String,
    /// Its method.
    pub method: String,
    /// Its share of the requests, relative to the others'.
    pub weight: u32,
}

/// A finding of `tacho top` about the server over one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerFinding {
    /// Its stable code (`cpu_saturated`, `cpu_throttled`, …).
    pub code: String,
    /// What it is about (a CPU, a cgroup, a disk).
    pub subject: String,
    /// The sentence `tacho top` says.
    pub message: String,
}

/// `tacho load`'s document (`tacho.load.v1`): the steps, judged, and the knee.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that made the run.
    pub tool_version: &'static str,
    /// The machine the load came from.
    pub host: crate::kernel::host::Host,
    /// What was loaded and how.
    pub target: TargetInfo,
    /// `rate` (one step at --rate) or `ramp`.
    pub mode: &'static str,
    /// How each step was judged.
    pub rule: knee::Rule,
    /// The steps run, in order (a ramp's last one is the first that bent).
    pub steps: Vec<Step>,
    /// Where the service bent (a ramp only; `null` for a fixed rate).
    pub knee: Option<knee::Knee>,
    /// What could not be measured and why (the server not watched, no root).
    pub notes: Vec<String>,
    /// Stopped by a signal: the steps hold what was measured until then.
    pub interrupted: bool,
}

/// The target and the request, as the document records them.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// The URL as given; several, separated by spaces, for a mix.
    pub url: String,
    /// The first origin's address.
    pub address: String,
    /// The first URL's method.
    pub method: String,
    /// Every URL of the mix, in the order given.
    pub urls: Vec<UrlInfo>,
    /// Every origin loaded, each with its own connections.
    pub origins: Vec<Origin>,
    /// Keep-alive connections.
    pub connections: u32,
    /// Requests at once (streams) on each HTTP/2 connection (`--streams`; HTTP/1.1 carries
    /// one).
    pub streams: u32,
    /// `--timeout`, in seconds.
    pub timeout_s: f64,
    /// Bytes of request body.
    pub body_bytes: usize,
    /// Whether the target is this host (loopback), so its findings were sampled.
    pub local: bool,
}

/// A rate range to ramp over: `FROM..TO` requests a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ramp {
    /// The first step's rate.
    pub from: u64,
    /// The last step's rate, at least `from`.
    pub to: u64,
}

impl Ramp {
    /// Reads `FROM..TO` (`100..5000`): whole requests a second, FROM at least 1, TO at least
    /// FROM and at most [`MAX_RATE`].
    pub fn parse(text: &str) -> Result<Ramp, String> {
        let shape = || {
            format!(
                "{text:?} is not a range of rates; give FROM..TO in requests a second, e.g. 100..5000"
            )
        };
        let (from, to) = text.split_once("..").ok_or_else(shape)?;
        let rate = |s: &str| s.trim().parse::<u64>().map_err(|_| shape());
        let (from, to) = (rate(from)?, rate(to)?);
        if from == 0 {
            return Err(format!(
                "{text:?} starts at 0; give a first rate of at least 1, e.g. 100..{to}"
            ));
        }
        if to < from {
            return Err(format!(
                "{text:?} goes down; give the lower rate first, e.g. {to}..{from}"
            ));
        }
        if to > MAX_RATE {
            return Err(format!(
                "{text:?} goes past {MAX_RATE} requests a second; give a lower top rate"
            ));
        }
        Ok(Ramp { from, to })
    }

    /// `steps` rates evenly spaced from `from` to `to` (one when they are equal), rounded to
    /// whole requests a second, without repeats.
    pub fn rates(&self, steps: u32) -> Vec<u64> {
        let steps = u64::from(steps.max(2));
        let span = self.to - self.from;
        let mut rates: Vec<u64> = (0..steps)
            .map(|i| self.from + (span * i + (steps - 1) / 2) / (steps - 1))
            .collect();
        rates.dedup();
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ramps_read_and_refuse() {
        assert_eq!(
            Ramp::parse("100..5000"),
            Ok(Ramp {
                from: 100,
                to: 5000
            })
        );
        assert_eq!(Ramp::parse(" 7 .. 7 "), Ok(Ramp { from: 7, to: 7 }));
        for (bad, says) in [
            ("5000..100", "goes down"),
            ("abc", "not a range"),
            ("1..x", "not a range"),
            ("0..10", "starts at 0"),
            ("-5..10", "not a range"),
            ("1..99999999", "goes past"),
        ] {
            let e = Ramp::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn rates_are_evenly_spaced_from_first_to_last() {
        let r = Ramp { from: 100, to: 300 };
        assert_eq!(r.rates(3), [100, 200, 300]);
        assert_eq!(r.rates(21)[1], 110);
        assert_eq!(Ramp { from: 5, to: 5 }.rates(10), [5]);
        assert_eq!(Ramp { from: 1, to: 3 }.rates(10), [1, 2, 3]);
    }

    proptest! {
        /// Any text reads as a ramp or is refused on one line; a ramp's rates run from its
        /// first to its last, rising.
        #[test]
        fn any_ramp_text(text in ".{0,24}", from in 1u64..1000, span in 0u64..100_000, steps in 0u32..200) {
            if let Err(e) = Ramp::parse(&text) {
                prop_assert!(!e.contains('\n'));
            }
            let ramp = Ramp { from, to: from + span };
            let rates = ramp.rates(steps);
            prop_assert_eq!(rates.first().copied(), Some(from));
            prop_assert_eq!(rates.last().copied(), Some(from + span));
            prop_assert!(rates.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
