//! One step of load: requests due at a fixed rate, sent over keep-alive HTTP/1.1 connections
//! (hyper) on one thread (a single-threaded tokio runtime), latency counted from each
//! request's due time.
//!
//! The schedule is one counter shared by the connections: a connection that is free takes the
//! next request, waits for its due time if that is still ahead, and sends it; one that comes
//! free late takes the next request at once, and that request's latency includes the time it
//! waited for a connection. So the rate offered never follows the server's pace, and a stall
//! shows in the latency of everything that was due during it. Requests still waiting for a
//! connection when the step ends are sent for a grace of a tenth of the step (at most the
//! timeout), so a server a little past its capacity is measured on all of its backlog; those
//! left after it stay unsent (counted). The connections stay open for the next step.

use super::target::Target;
use super::{Errors, Lag, Latency, Options, Step};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HOST, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Longest latency kept in a histogram (one hour); longer ones count as this.
const HIGHEST_NS: u64 = 3_600_000_000_000;

/// How often a waiting connection looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// An open connection: the handle requests are sent through and the task driving it.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection given up on mid-request (a timeout) is closed, not left to finish.
        self.driver.abort();
    }
}

/// The request every step sends, checked once.
#[derive(Debug, Clone)]
struct Template {
    method: Method,
    path: hyper::Uri,
    headers: HeaderMap,
    body: Bytes,
}

/// The generator: its runtime, the target and the connections kept from step to step.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    /// Where the connections' drivers run, kept so connections outlive a step.
    local: tokio::task::LocalSet,
    addr: SocketAddr,
    template: Template,
    timeout: Duration,
    conns: Vec<Option<Conn>>,
}

impl Client {
    /// Checks the request (method, headers) and that the target takes a TCP connection
    /// within the timeout; each failure is one line naming it.
    pub fn new(target: &Target, addr: SocketAddr, opts: &Options) -> Result<Client, String> {
        let method = Method::from_bytes(opts.method.as_bytes()).map_err(|_| {
            format!(
                "--method {:?} is not an HTTP method; give e.g. GET or POST",
                crate::text::Escaped(&opts.method).to_string()
            )
        })?;
        let mut headers = HeaderMap::new();
        for (name, value) in &opts.headers {
            let bad = || {
                format!(
                    "--header {:?} is not a valid header; give 'Name: value'",
                    crate::text::Escaped(&format!("{name}: {value}")).to_string()
                )
            };
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let v = HeaderValue::from_str(value).map_err(|_| bad())?;
            headers.append(n, v);
        }
        if !headers.contains_key(HOST) {
            let host = HeaderValue::from_str(&target.authority)
                .map_err(|_| format!("{:?}: the host cannot be sent", target.authority))?;
            headers.insert(HOST, host);
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(
                USER_AGENT,
                HeaderValue::from_static(concat!("tacho/", env!("CARGO_PKG_VERSION"))),
            );
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the client's runtime: {e}"))?;
        // A first connection, so an unreachable target stops the command before it starts.
        std::net::TcpStream::connect_timeout(&addr, opts.timeout).map_err(|e| {
            format!(
                "cannot connect to {} ({addr}): {e}; check that the service listens there",
                crate::text::Escaped(&target.authority)
            )
        })?;
        Ok(Client {
            runtime,
            local: tokio::task::LocalSet::new(),
            addr,
            template: Template {
                method,
                path: target.path.parse().map_err(|_| {
                    format!(
                        "{:?}: the path cannot be sent",
                        crate::text::Escaped(&target.path).to_string()
                    )
                })?,
                headers,
                body: Bytes::from(opts.body.clone()),
            },
            timeout: opts.timeout,
            conns: (0..opts.connections).map(|_| None).collect(),
        })
    }

    /// Offers `rate` requests a second for `duration` (less when `stop` is set) and returns
    /// what came of it (not yet judged: `bent` is empty, `server` null).
    pub fn step(&mut self, rate: f64, duration: Duration, stop: &Arc<AtomicBool>) -> Step {
        let total = (rate * duration.as_secs_f64()).floor() as u64;
        let start = Instant::now() + Duration::from_millis(1);
        let shared = Rc::new(Shared {
            next: Cell::new(0),
            total,
            rate,
            start,
            end: start + duration,
            grace: (duration / 10).min(self.timeout),
            stopped_at: Cell::new(None),
            stop: Arc::clone(stop),
            template: self.template.clone(),
            addr: self.addr,
            timeout: self.timeout,
            tally: RefCell::new(Tally::new()),
        });
        let conns = std::mem::take(&mut self.conns);
        let back: Vec<Option<Conn>> = self.local.block_on(&self.runtime, async {
            let workers: Vec<_> = conns
                .into_iter()
                .map(|c| tokio::task::spawn_local(worker(Rc::clone(&shared), c)))
                .collect();
            let mut back = Vec::with_capacity(workers.len());
            for w in workers {
                back.push(w.await.ok().flatten());
            }
            back
        });
        self.conns = back;
        let tally = shared.tally.take();
        let ended = shared
            .stopped_at
            .get()
            .map_or(shared.end, |s| s.min(shared.end));
        let scheduled = ended.saturating_duration_since(start);
        let due = if shared.stopped_at.get().is_some() {
            ((rate * scheduled.as_secs_f64()).ceil() as u64).min(total)
        } else {
            total
        };
        let sent = tally.sent;
        let elapsed = tally.last_done.map_or(ended, |d| d.max(ended)) - start;
        Step {
            offered_rps: rate,
            duration_s: scheduled.as_secs_f64(),
            due,
            sent,
            unsent: due.saturating_sub(sent),
            ok: tally.ok,
            errors: tally.errors,
            achieved_rps: if elapsed.is_zero() {
                0.0
            } else {
                tally.ok as f64 / elapsed.as_secs_f64()
            },
            latency_ns: Latency::of(&tally.latency),
            schedule_lag_ns: (!tally.lag.is_empty()).then(|| Lag {
                p50: tally.lag.value_at_quantile(0.5) as f64,
                p99: tally.lag.value_at_quantile(0.99) as f64,
                max: tally.lag.max() as f64,
            }),
            bent: Vec::new(),
            server: None,
        }
    }
}

/// What the connections of one step share: the schedule and the tally.
struct Shared {
    /// The next request to take.
    next: Cell<u64>,
    /// Requests due in the step.
    total: u64,
    rate: f64,
    start: Instant,
    end: Instant,
    /// How long after `end` requests due before it are still sent.
    grace: Duration,
    /// When a connection first saw the stop flag.
    stopped_at: Cell<Option<Instant>>,
    stop: Arc<AtomicBool>,
    template: Template,
    addr: SocketAddr,
    timeout: Duration,
    tally: RefCell<Tally>,
}

impl Shared {
    fn stopped(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            if self.stopped_at.get().is_none() {
                self.stopped_at.set(Some(Instant::now()));
            }
            return true;
        }
        false
    }

    /// The next request and when it is due; `None` when the step is over.
    fn take(&self) -> Option<Instant> {
        let i = self.next.get();
        if i >= self.total || self.stopped() {
            return None;
        }
        let due = self.start + Duration::from_secs_f64(i as f64 / self.rate);
        if Instant::now() >= self.end + self.grace {
            return None;
        }
        self.next.set(i + 1);
        Some(due)
    }
}

/// The counts and histograms of a step.
struct Tally {
    sent: u64,
    ok: u64,
    errors: Errors,
    latency: Histogram<u64>,
    lag: Histogram<u64>,
    last_done: Option<Instant>,
}

impl Tally {
    fn new() -> Tally {
        // Bounds and precision are constants that hdrhistogram accepts.
        let h = || Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds");
        Tally {
            sent: 0,
            ok: 0,
            errors: Errors::default(),
            latency: h(),
            lag: h(),
            last_done: None,
        }
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::new()
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// How one request ended.
enum Outcome {
    Status(u16),
    Timeout,
    Broken,
}

/// One connection's loop: take the next request, wait for its due time, send it, read the
/// whole response, count it; returns the connection when the step is over.
async fn worker(shared: Rc<Shared>, mut conn: Option<Conn>) -> Option<Conn> {
    while let Some(due) = shared.take() {
        let on_time = Instant::now() < due;
        while Instant::now() < due {
            if shared.stopped() {
                return conn;
            }
            let wake = due.min(Instant::now() + STOP_POLL);
            tokio::time::sleep_until(wake.into()).await;
        }
        let sent_at = Instant::now();
        {
            let mut t = shared.tally.borrow_mut();
            t.sent += 1;
            if on_time {
                t.lag.saturating_record(ns(sent_at - due));
            }
        }
        if conn.as_ref().is_none_or(|c| c.sender.is_closed()) {
            conn = match connect(shared.addr, shared.timeout).await {
                Ok(c) => Some(c),
                Err(_) => {
                    let mut t = shared.tally.borrow_mut();
                    t.errors.connect += 1;
                    t.last_done = Some(Instant::now());
                    continue;
                }
            };
        }
        let outcome = match conn.as_mut() {
            Some(c) => send(c, &shared.template, shared.timeout).await,
            None => Outcome::Broken,
        };
        let done = Instant::now();
        let mut t = shared.tally.borrow_mut();
        t.last_done = Some(t.last_done.map_or(done, |l| l.max(done)));
        match outcome {
            Outcome::Status(s) if s >= 500 => t.errors.status_5xx += 1,
            Outcome::Status(s) if s >= 400 => t.errors.status_4xx += 1,
            Outcome::Status(_) => {
                t.ok += 1;
                t.latency.saturating_record(ns(done - due));
            }
            Outcome::Timeout => {
                t.errors.timeout += 1;
                conn = None;
            }
            Outcome::Broken => {
                t.errors.other += 1;
                conn = None;
            }
        }
    }
    conn
}

/// Sends the request and reads its whole response within `timeout`.
async fn send(conn: &mut Conn, template: &Template, timeout: Duration) -> Outcome {
    let mut req = Request::new(Full::new(template.body.clone()));
    *req.method_mut() = template.method.clone();
    *req.headers_mut() = template.headers.clone();
    *req.uri_mut() = template.path.clone();
    let exchange = async {
        conn.sender.ready().await?;
        let response = conn.sender.send_request(req).await?;
        let status = response.status().as_u16();
        response.into_body().collect().await?;
        Ok::<u16, hyper::Error>(status)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(status)) => Outcome::Status(status),
        Ok(Err(_)) => Outcome::Broken,
        Err(_) => Outcome::Timeout,
    }
}

/// A new keep-alive connection (no Nagle delay), its driver on this thread.
async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Conn, String> {
    let stream = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer within {timeout:?}")),
    };
    // Small requests go out at once.
    let _ = stream.set_nodelay(true);
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::task::spawn_local(async move {
        // Its end (closed, broken) shows to the sender as a closed connection.
        let _ = connection.await;
    });
    Ok(Conn { sender, driver })
}
