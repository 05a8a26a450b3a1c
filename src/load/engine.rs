//! One step of load: requests due at a fixed rate, sent over keep-alive HTTP/1.1 or HTTP/2
//! connections, in the clear or over TLS on one thread (a single-threaded tokio runtime),
//! latency counted from each request's due time. HTTP/1.1 in the clear is written by hand
//! in the worker's own task ([`h1`]); HTTP/2 and https go through hyper and tokio-rustls.
//!
//! The requests are a mix of one or more [`Request`]s, taken in a fixed, evenly interleaved
//! order by their weights (smooth weighted round robin). Each origin (scheme, host and port)
//! has its own connections: a worker keeps at most one open to each, so no origin ever has
//! more than `--connections`, and nothing is sent anywhere not named.
//!
//! The schedule is one counter shared by the connections: a connection that is free (over
//! HTTP/2: with fewer than `--streams` requests open) takes the next request, waits for its
//! due time if that is still ahead (on the [`Alarm`], not tokio's millisecond timer), and
//! sends it; one that comes free late takes the next request at once, and that request's
//! latency includes the time it waited for a connection. So the rate offered never follows the server's pace, and a stall
//! shows in the latency of everything that was due during it. Requests still waiting for a
//! connection when the step ends are sent for a grace of a tenth of the step (at most the
//! timeout), so a server a little past its capacity is measured on all of its backlog; those
//! left after it stay unsent (counted). The connections stay open for the next step.

use super::h1;
use super::target::Target;
use super::tls::Tls;
use super::{Errors, Lag, Latency, Options, Origin, Step, UrlCounts};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper::header::{HOST, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use hyper::{Method, Request as HttpRequest, Uri};
use hyper_util::rt::TokioIo;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Longest latency kept in a histogram (one hour); longer ones count as this.
const HIGHEST_NS: u64 = 3_600_000_000_000;

/// Waits due within this of the earliest one end together, at the last of their due times:
/// one wake-up for requests close in time instead of one each (each costs the thread a sleep
/// and a wake, and the server's answers come back apart too), at the price of sending the
/// earlier ones up to this late.
const GATHER: Duration = Duration::from_micros(200);

/// How often a waiting connection looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Longest cycle of the weighted order; weights are bounded so that it fits.
pub const MAX_CYCLE: u64 = 100_000;

/// Wakes connections waiting for their requests' due times, to within a fraction of a
/// millisecond.
///
/// tokio's timer rounds every deadline up to its next millisecond tick (and its runtime sleeps
/// in `epoll_wait`, whose timeout is in milliseconds), so requests left 0.8–1.9 ms late. The
/// alarm is one `timerfd` (a kernel high-resolution timer, with no timer slack) armed for the
/// earliest wait (or a little after it, to end the waits close to it together: [`GATHER`])
/// and read through the runtime's own reactor: the thread still sleeps in `epoll_wait` and
/// wakes when the timer fires, with no second thread and no spinning. Waits join the queue in
/// the order the schedule hands out requests, which is the order of their due times, so the
/// queue's front is always the earliest.
struct Alarm {
    timer: AsyncFd<OwnedFd>,
    /// An instant and the monotonic clock's reading at it (`Instant` is that clock), to arm
    /// the timer at absolute times.
    base: (Instant, Duration),
    /// Who waits and until when, earliest first.
    waiting: RefCell<VecDeque<(Instant, Rc<Notify>)>>,
    /// Rung when a wait joins an empty queue.
    kick: Notify,
}

impl Alarm {
    /// Must be called within the runtime (the timer registers with its reactor).
    fn new() -> std::io::Result<Alarm> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let at = Instant::now();
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let base = Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        );
        // SAFETY: the descriptor is the timer's own, owned by the `AsyncFd` from here to its
        // drop, so it stays open and the same for as long as it is registered.
        let timer = unsafe {
            AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
                .map_err(std::io::Error::from)?
        };
        Ok(Alarm {
            timer,
            base: (at, base),
            waiting: RefCell::new(VecDeque::new()),
            kick: Notify::new(),
        })
    }

    /// Waits until `due` (or until the alarm's task lets every wait go, at a stop); `me` is
    /// the waiting connection's own bell.
    async fn until(&self, due: Instant, me: &Rc<Notify>) {
        let first = {
            let mut waiting = self.waiting.borrow_mut();
            let first = waiting.is_empty();
            waiting.push_back((due, Rc::clone(me)));
            first
        };
        if first {
            self.kick.notify_one();
        }
        me.notified().await;
    }

    /// Arms the timer to fire at `at`.
    fn arm(&self, at: Instant) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let t = self.base.1 + at.saturating_duration_since(self.base.0);
        let value = Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            // A zero time disarms the timer.
            tv_nsec: i64::from(t.subsec_nanos().max(1)),
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        timerfd_settime(self.timer.get_ref(), TimerfdTimerFlags::ABSTIME, &spec)?;
        Ok(())
    }

    /// Lets go every wait due by now (every wait at a stop).
    fn ring(&self, all: bool) {
        let now = Instant::now();
        let mut waiting = self.waiting.borrow_mut();
        while waiting.front().is_some_and(|w| all || w.0 <= now) {
            if let Some((_, bell)) = waiting.pop_front() {
                bell.notify_one();
            }
        }
    }
}

/// The alarm's task for one step: sleeps until the earliest wait is due, lets it go, and looks
/// at the stop flag at least every [`STOP_POLL`].
async fn alarm(shared: Rc<Shared>) {
    let alarm = &shared.alarm;
    loop {
        if shared.stopped() {
            alarm.ring(true);
        }
        let front = alarm.waiting.borrow().front().map(|w| w.0);
        let Some(due) = front else {
            alarm.kick.notified().await;
            continue;
        };
        let now = Instant::now();
        if due <= now {
            alarm.ring(false);
            continue;
        }
        let last = alarm
            .waiting
            .borrow()
            .iter()
            .map(|w| w.0)
            .take_while(|d| *d <= due + GATHER)
            .last()
            .unwrap_or(due);
        if alarm.arm(last.min(now + STOP_POLL)).is_err() {
            // Not with a valid time; tokio's millisecond timer instead.
            tokio::time::sleep_until(due.into()).await;
            continue;
        }
        match alarm.timer.readable().await {
            // Arming the timer clears its count (no read needed), and each expiry is a new
            // edge for the reactor.
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => tokio::time::sleep_until(due.into()).await,
        }
    }
}

/// One request of the mix: a URL, its method and its share.
#[derive(Debug, Clone)]
pub struct Request {
    /// Where it goes.
    pub target: Target,
    /// Its method, as given.
    pub method: String,
    /// Its share of the requests, relative to the others' (at least 1).
    pub weight: u32,
}

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1, one request at a time.
    Http1,
    /// HTTP/2, up to `--streams` streams at once per connection.
    Http2,
}

impl Protocol {
    /// `HTTP/1.1`, `HTTP/2`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2",
        }
    }
}

/// The sending half of a connection.
enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
    /// HTTP/1.1 in the clear, by hand in the worker's own task ([`h1`]).
    Plain(h1::Conn),
}

/// An open connection: the handle requests are sent through and the task driving it (none
/// for [`Sender::Plain`]).
struct Conn {
    sender: Sender,
    driver: Option<JoinHandle<()>>,
    protocol: Protocol,
    /// The TLS version agreed (`TLSv1_3`), for https.
    tls_version: Option<String>,
}

impl Conn {
    fn is_closed(&mut self) -> bool {
        match &mut self.sender {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
            Sender::Plain(c) => c.is_closed(),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection given up on mid-request (a timeout) is closed, not left to finish.
        if let Some(driver) = &self.driver {
            driver.abort();
        }
    }
}

/// Runs HTTP/2's background tasks on this thread.
#[derive(Clone, Copy)]
struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: std::future::Future + 'static,
    F::Output: 'static,
{
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

/// A request of the mix, checked once, in the forms each protocol sends.
#[derive(Debug)]
struct Template {
    method: Method,
    /// `/path?query`, as HTTP/1.1 sends it, with `Host` among the headers.
    origin_form: Uri,
    /// `scheme://host:port/path?query`, as HTTP/2 sends it (its `:authority`).
    absolute: Uri,
    headers_h1: HeaderMap,
    headers_h2: HeaderMap,
    body: Bytes,
    /// The whole request as HTTP/1.1 sends it, for the connections written by hand.
    wire: Box<[u8]>,
    /// Its method is HEAD (whose answer has no body).
    to_head: bool,
    /// Its origin, by index into the client's connectors.
    origin: usize,
}

/// How to open a connection to one origin.
struct Connector {
    origin: String,
    addr: SocketAddr,
    timeout: Duration,
    /// HTTP/2 without asking (`--http2` over http://), or only HTTP/2 (over https).
    http2: bool,
    tls: Option<Tls>,
    /// HTTP/1.1 in the clear, written by hand ([`h1`]) rather than through hyper.
    plain: bool,
}

/// The generator: its runtime, the requests and the connections kept from step to step.
pub struct Client {
    /// Declared before the runtime, so it leaves the reactor before the runtime goes.
    alarm: Rc<Alarm>,
    runtime: tokio::runtime::Runtime,
    /// Where the connections' drivers run, kept so connections outlive a step.
    local: tokio::task::LocalSet,
    templates: Rc<[Template]>,
    /// Which template request `i` of a step is: `cycle[i % len]`.
    cycle: Rc<[u32]>,
    connectors: Rc<[Connector]>,
    timeout: Duration,
    streams: u32,
    /// Whether a request of the run has ended yet.
    answered: bool,
    /// Each worker's connections, one slot per origin.
    conns: Vec<Vec<Option<Conn>>>,
    origins: Vec<Origin>,
}

/// `--header` values and the method, checked; each failure one line naming it.
fn headers(opts: &Options) -> Result<HeaderMap, String> {
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
    if !headers.contains_key(USER_AGENT) {
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("tacho/", env!("CARGO_PKG_VERSION"))),
        );
    }
    Ok(headers)
}

fn method(text: &str) -> Result<Method, String> {
    Method::from_bytes(text.as_bytes()).map_err(|_| {
        format!(
            "the method {:?} is not an HTTP method; give e.g. GET or POST",
            crate::text::Escaped(text).to_string()
        )
    })
}

/// The order of a mix by weight: smooth weighted round robin over one whole cycle (each
/// request as often as its weight, spread evenly).
pub fn cycle(weights: &[u32]) -> Vec<u32> {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    let mut current = vec![0i64; weights.len()];
    (0..total)
        .map(|_| {
            for (c, w) in current.iter_mut().zip(weights) {
                *c += i64::from(*w);
            }
            let best = (0..current.len())
                .max_by_key(|&i| (current[i], std::cmp::Reverse(i)))
                .unwrap_or(0);
            current[best] -= total;
            best as u32
        })
        .collect()
}

impl Client {
    /// Checks the requests (methods, headers), resolves each origin and opens a first
    /// connection to it within the timeout (TLS verified unless `--insecure`); each failure
    /// is one line naming it.
    pub fn new(requests: &[Request], opts: &Options) -> Result<Client, String> {
        if requests.is_empty() {
            return Err("no URL given; give http://HOST[:PORT]/PATH or --urls FILE".into());
        }
        let common = headers(opts)?;
        let by_hand = h1::fits(&common);
        let weights: Vec<u32> = requests.iter().map(|r| r.weight).collect();
        if weights.contains(&0) || weights.iter().map(|w| u64::from(*w)).sum::<u64>() > MAX_CYCLE {
            return Err(format!(
                "the weights must be at least 1 and add up to at most {MAX_CYCLE}"
            ));
        }
        let mut connectors: Vec<Connector> = Vec::new();
        let mut templates = Vec::with_capacity(requests.len());
        for r in requests {
            let t = &r.target;
            let origin = t.origin();
            let index = match connectors.iter().position(|c| c.origin == origin) {
                Some(i) => i,
                None => {
                    connectors.push(Connector {
                        origin,
                        addr: t.resolve()?,
                        timeout: opts.timeout,
                        http2: opts.http2,
                        tls: if t.tls {
                            Some(Tls::new(&t.host, opts.insecure, opts.http2)?)
                        } else {
                            None
                        },
                        plain: !t.tls && !opts.http2 && by_hand,
                    });
                    connectors.len() - 1
                }
            };
            let cannot = |what: &str| {
                format!(
                    "{:?}: the {what} cannot be sent",
                    crate::text::Escaped(&t.url).to_string()
                )
            };
            let mut headers_h1 = common.clone();
            if !headers_h1.contains_key(HOST) {
                let host = HeaderValue::from_str(&t.authority).map_err(|_| cannot("host"))?;
                headers_h1.insert(HOST, host);
            }
            let method = method(&r.method)?;
            let origin_form: Uri = t.path.parse().map_err(|_| cannot("path"))?;
            templates.push(Template {
                wire: h1::request(&method, &t.path, &headers_h1, &opts.body).into(),
                to_head: method == Method::HEAD,
                method,
                origin_form,
                absolute: format!("{}{}", t.origin(), t.path)
                    .parse()
                    .map_err(|_| cannot("URL"))?,
                headers_h1,
                headers_h2: common.clone(),
                body: Bytes::from(opts.body.clone()),
                origin: index,
            });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the client's runtime: {e}"))?;
        let local = tokio::task::LocalSet::new();
        let alarm = {
            let _inside = runtime.enter();
            Alarm::new().map_err(|e| format!("cannot make the client's timer: {e}"))?
        };
        // A first connection to each origin, so an unreachable target or a certificate that
        // does not verify stops the command before it starts; kept for the first worker.
        let mut first = Vec::with_capacity(connectors.len());
        let mut origins = Vec::with_capacity(connectors.len());
        for c in &connectors {
            let conn = local.block_on(&runtime, connect(c)).map_err(|e| {
                format!(
                    "cannot connect to {} ({}): {e}",
                    crate::text::Escaped(&c.origin),
                    c.addr
                )
            })?;
            if c.http2 && c.tls.is_none() {
                local
                    .block_on(&runtime, speaks_h2c(c))
                    .map_err(|e| format!("{}: {e}", crate::text::Escaped(&c.origin)))?;
            }
            origins.push(Origin {
                origin: c.origin.clone(),
                address: c.addr.to_string(),
                protocol: conn.protocol.name(),
                tls_version: conn.tls_version.clone(),
                verified: c.tls.as_ref().map(|_| !opts.insecure),
            });
            first.push(Some(conn));
        }
        let mut conns: Vec<Vec<Option<Conn>>> = (1..opts.connections)
            .map(|_| connectors.iter().map(|_| None).collect())
            .collect();
        conns.insert(0, first);
        Ok(Client {
            alarm: Rc::new(alarm),
            runtime,
            local,
            templates: templates.into(),
            cycle: cycle(&weights).into(),
            connectors: connectors.into(),
            timeout: opts.timeout,
            streams: opts.streams.max(1),
            answered: false,
            conns,
            origins,
        })
    }

    /// Each origin, as its first connection found it.
    pub fn origins(&self) -> &[Origin] {
        &self.origins
    }

    /// Offers `rate` requests a second for `duration` (less when `stop` is set) and returns
    /// what came of it (not yet judged: `bent` is empty, `server` null).
    ///
    /// When the first request of the run is answered with something that is not HTTP (a TLS
    /// port spoken to in the clear, another protocol), every request would fail the same way:
    /// the step ends there, and the error is one line naming it.
    pub fn step(
        &mut self,
        rate: f64,
        duration: Duration,
        stop: &Arc<AtomicBool>,
    ) -> Result<Step, String> {
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
            templates: Rc::clone(&self.templates),
            cycle: Rc::clone(&self.cycle),
            connectors: Rc::clone(&self.connectors),
            timeout: self.timeout,
            streams: self.streams,
            tally: RefCell::new(Tally::new(self.templates.len())),
            alarm: Rc::clone(&self.alarm),
            first: Cell::new(!self.answered),
            not_http: Cell::new(None),
        });
        let conns = std::mem::take(&mut self.conns);
        let back: Vec<Vec<Option<Conn>>> = self.local.block_on(&self.runtime, async {
            let ringing = tokio::task::spawn_local(alarm(Rc::clone(&shared)));
            let workers: Vec<_> = conns
                .into_iter()
                .map(|c| tokio::task::spawn_local(worker(Rc::clone(&shared), c)))
                .collect();
            let mut back = Vec::with_capacity(workers.len());
            for w in workers {
                back.push(
                    w.await
                        .unwrap_or_else(|_| shared.connectors.iter().map(|_| None).collect()),
                );
            }
            ringing.abort();
            back
        });
        self.conns = back;
        self.answered |= !shared.first.get();
        if let Some(which) = shared.not_http.get() {
            return Err(format!(
                "{}: the first answer was not HTTP; check the port, and the scheme \
                 (https:// for a TLS port)",
                crate::text::Escaped(&self.origins[self.templates[which].origin].origin)
            ));
        }
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
        Ok(Step {
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
            by_url: tally.by_url,
            bent: Vec::new(),
            server: None,
        })
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
    templates: Rc<[Template]>,
    cycle: Rc<[u32]>,
    connectors: Rc<[Connector]>,
    timeout: Duration,
    /// Streams at once on an HTTP/2 connection.
    streams: u32,
    tally: RefCell<Tally>,
    alarm: Rc<Alarm>,
    /// No request of the run has ended yet.
    first: Cell<bool>,
    /// The first request of the run was answered with something not HTTP: which it was.
    not_http: Cell<Option<usize>>,
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

    /// The origin of the next request, without taking it; `None` when none is left.
    fn peek_origin(&self) -> Option<usize> {
        let i = self.next.get();
        (i < self.total).then(|| {
            let which = self.cycle[(i % self.cycle.len() as u64) as usize] as usize;
            self.templates[which].origin
        })
    }

    /// Counts a request that ended at `done`: a failure of kind `failed`, or a success when
    /// `failed` is empty.
    fn count(&self, which: usize, due: Instant, failed: Errors, done: Instant) {
        let mut t = self.tally.borrow_mut();
        t.last_done = Some(t.last_done.map_or(done, |l| l.max(done)));
        if failed.total() == 0 {
            t.ok += 1;
            t.by_url[which].ok += 1;
            t.latency.saturating_record(ns(done - due));
        }
        t.errors += failed;
        t.by_url[which].errors += failed;
    }

    /// Counts how a request ended; whether its connection is still fit to use (not after a
    /// timeout or a broken exchange).
    fn counted(&self, which: usize, due: Instant, outcome: Outcome) -> bool {
        if self.first.replace(false) && matches!(outcome, Outcome::NotHttp) {
            self.not_http.set(Some(which));
        }
        let mut failed = Errors::default();
        match outcome {
            Outcome::Status(s) if s >= 500 => failed.status_5xx = 1,
            Outcome::Status(s) if s >= 400 => failed.status_4xx = 1,
            Outcome::Status(_) => {}
            Outcome::Timeout => failed.timeout = 1,
            Outcome::Broken | Outcome::NotHttp => failed.other = 1,
        }
        self.count(which, due, failed, Instant::now());
        failed.timeout + failed.other == 0
    }

    /// The next request (by template), when it is due and the time now; `None` when the
    /// step is over.
    fn take(&self) -> Option<(usize, Instant, Instant)> {
        let i = self.next.get();
        if i >= self.total || self.stopped() || self.not_http.get().is_some() {
            return None;
        }
        let due = self.start + Duration::from_secs_f64(i as f64 / self.rate);
        let now = Instant::now();
        if now >= self.end + self.grace {
            return None;
        }
        self.next.set(i + 1);
        let which = self.cycle[(i % self.cycle.len() as u64) as usize] as usize;
        Some((which, due, now))
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
    by_url: Vec<UrlCounts>,
}

impl Tally {
    fn new(urls: usize) -> Tally {
        // Bounds and precision are constants that hdrhistogram accepts.
        let h = || Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds");
        Tally {
            sent: 0,
            ok: 0,
            errors: Errors::default(),
            latency: h(),
            lag: h(),
            last_done: None,
            by_url: vec![UrlCounts::default(); urls],
        }
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::new(0)
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// How one request ended.
enum Outcome {
    Status(u16),
    Timeout,
    /// The connection closed or broke, or the exchange failed otherwise.
    Broken,
    /// The answer was not HTTP (it could not be parsed as a response).
    NotHttp,
}

/// One worker's loop: take the next request, wait for its due time, send it over this
/// worker's connection to its origin, read the whole response, count it; returns the
/// connections when the step is over and its requests have ended.
///
/// Over HTTP/1.1 the worker sends one request at a time and waits for its response. Over
/// HTTP/2 each request is a stream of its own, run beside the worker, and the worker goes on
/// taking requests while fewer than `--streams` are open on its connection to that origin
/// (hyper holds any beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS until one ends).
async fn worker(shared: Rc<Shared>, mut conns: Vec<Option<Conn>>) -> Vec<Option<Conn>> {
    let bell = Rc::new(Notify::new());
    // Streams open on each origin's connection, and the bell each one rings as it ends.
    let open: Rc<[Cell<u32>]> = conns.iter().map(|_| Cell::new(0)).collect();
    let ended = Rc::new(Notify::new());
    // Wait for a free stream before taking a request bound for a full connection.
    while let Some(origin) = shared.peek_origin() {
        let h2 = conns[origin]
            .as_ref()
            .is_some_and(|c| c.protocol == Protocol::Http2);
        if h2 && open[origin].get() >= shared.streams {
            ended.notified().await;
            continue;
        }
        let Some((which, due, now)) = shared.take() else {
            break;
        };
        let on_time = now < due;
        if on_time {
            shared.alarm.until(due, &bell).await;
            if shared.stopped() {
                break;
            }
        }
        // Late, it goes now (one reading of the clock fewer per request at full speed).
        let sent_at = if on_time { Instant::now() } else { now };
        {
            let mut t = shared.tally.borrow_mut();
            t.sent += 1;
            t.by_url[which].sent += 1;
            if on_time {
                t.lag.saturating_record(ns(sent_at - due));
            }
        }
        let slot = &mut conns[origin];
        if slot.as_mut().is_none_or(Conn::is_closed) {
            *slot = match connect(&shared.connectors[origin]).await {
                Ok(c) => Some(c),
                Err(_) => {
                    let failed = Errors {
                        connect: 1,
                        ..Errors::default()
                    };
                    shared.count(which, due, failed, Instant::now());
                    continue;
                }
            };
        }
        let Some(conn) = slot.as_mut() else {
            continue;
        };
        match &mut conn.sender {
            Sender::Plain(c) => {
                let template = &shared.templates[which];
                let outcome = match tokio::time::timeout(
                    shared.timeout,
                    c.exchange(&template.wire, template.to_head),
                )
                .await
                {
                    Ok(h1::Ended::Status(status)) => Outcome::Status(status),
                    Ok(h1::Ended::NotHttp) => Outcome::NotHttp,
                    Ok(h1::Ended::Broken) => Outcome::Broken,
                    Err(_) => Outcome::Timeout,
                };
                if !shared.counted(which, due, outcome) {
                    *slot = None;
                }
            }
            Sender::H1(sender) => {
                let outcome = exchange_h1(sender, &shared.templates[which], shared.timeout).await;
                if !shared.counted(which, due, outcome) {
                    // Given up on mid-request, or broken: closed, and opened anew.
                    *slot = None;
                }
            }
            Sender::H2(sender) => {
                let (shared, sender) = (Rc::clone(&shared), sender.clone());
                let (open, ended) = (Rc::clone(&open), Rc::clone(&ended));
                open[origin].set(open[origin].get() + 1);
                tokio::task::spawn_local(async move {
                    let template = &shared.templates[which];
                    let outcome = exchange_h2(sender, template, shared.timeout).await;
                    // A stream that timed out was reset; the connection stays, or shows
                    // itself closed at the next request.
                    shared.counted(which, due, outcome);
                    open[origin].set(open[origin].get() - 1);
                    ended.notify_one();
                });
            }
        }
    }
    while open.iter().any(|n| n.get() > 0) {
        ended.notified().await;
    }
    conns
}

/// A request ready to send: the template's method, URI and headers, and its body.
fn request(template: &Template, h2: bool) -> HttpRequest<Full<Bytes>> {
    let mut req = HttpRequest::new(Full::new(template.body.clone()));
    *req.method_mut() = template.method.clone();
    if h2 {
        *req.headers_mut() = template.headers_h2.clone();
        *req.uri_mut() = template.absolute.clone();
    } else {
        *req.headers_mut() = template.headers_h1.clone();
        *req.uri_mut() = template.origin_form.clone();
    }
    req
}

/// Reads a response's whole body, each frame dropped as it comes (nothing is kept).
async fn drain(response: hyper::Response<hyper::body::Incoming>) -> Result<u16, hyper::Error> {
    let status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame?;
    }
    Ok(status)
}

/// What became of an exchange given `timeout`.
async fn within(
    timeout: Duration,
    exchange: impl std::future::Future<Output = Result<u16, hyper::Error>>,
) -> Outcome {
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(status)) => Outcome::Status(status),
        Ok(Err(e)) if e.is_parse() => Outcome::NotHttp,
        Ok(Err(_)) => Outcome::Broken,
        Err(_) => Outcome::Timeout,
    }
}

/// Sends the request over HTTP/1.1 and reads its whole response within `timeout`.
async fn exchange_h1(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    template: &Template,
    timeout: Duration,
) -> Outcome {
    within(timeout, async {
        sender.ready().await?;
        drain(sender.send_request(request(template, false)).await?).await
    })
    .await
}

/// Sends the request as a stream of its own over HTTP/2 and reads its whole response within
/// `timeout` (the stream is reset when it runs out).
async fn exchange_h2(
    mut sender: http2::SendRequest<Full<Bytes>>,
    template: &Template,
    timeout: Duration,
) -> Outcome {
    within(timeout, async {
        sender.ready().await?;
        drain(sender.send_request(request(template, true)).await?).await
    })
    .await
}

/// A new keep-alive connection (no Nagle delay), TLS when the origin is https, its driver on
/// this thread; all within the timeout.
async fn connect(c: &Connector) -> Result<Conn, String> {
    let opening = async {
        let stream = tokio::net::TcpStream::connect(c.addr)
            .await
            .map_err(|e| format!("{e}; check that the service listens there"))?;
        // Small requests go out at once.
        let _ = stream.set_nodelay(true);
        match &c.tls {
            None if c.plain => Ok(Conn {
                sender: Sender::Plain(h1::Conn::new(stream)),
                driver: None,
                protocol: Protocol::Http1,
                tls_version: None,
            }),
            None => handshake(TokioIo::new(stream), c.http2, None).await,
            Some(tls) => {
                let (stream, h2, version) = tls.connect(stream).await?;
                handshake(TokioIo::new(stream), h2, Some(version)).await
            }
        }
    };
    match tokio::time::timeout(c.timeout, opening).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no answer within {:?}; check the address, or give a longer --timeout",
            c.timeout
        )),
    }
}

/// Whether the server of `c` speaks HTTP/2 over cleartext, asked before the run on a
/// connection of its own: HTTP/2's connection preface and an empty SETTINGS frame, to which
/// an HTTP/2 server answers with a frame of its own (its SETTINGS) and an HTTP/1.1 server
/// with a status line, or by closing. No request is sent. A server that says nothing within
/// the timeout is taken to be slow, not refused: the run goes on (its requests will say).
async fn speaks_h2c(c: &Connector) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    let refused = "it does not speak HTTP/2 over cleartext (h2c); drop --http2 or use https://";
    let asking = async {
        let Ok(mut stream) = tokio::net::TcpStream::connect(c.addr).await else {
            // It answered a moment ago: gone now is not a refusal of HTTP/2.
            return Ok(());
        };
        stream
            .write_all(PREFACE)
            .await
            .map_err(|_| refused.to_string())?;
        // A frame's header: 3 bytes of length, its type (4: SETTINGS), flags, stream 0.
        let mut head = [0u8; 9];
        match stream.read_exact(&mut head).await {
            Ok(_) if head[3] == 4 && head[5..9] == [0, 0, 0, 0] => Ok(()),
            _ => Err(refused.to_string()),
        }
    };
    tokio::time::timeout(c.timeout, asking)
        .await
        .unwrap_or(Ok(()))
}

/// HTTP/1.1's or HTTP/2's handshake over `io`.
async fn handshake<T>(io: T, h2: bool, tls_version: Option<String>) -> Result<Conn, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    let (sender, driver) = if h2 {
        let (sender, connection) = http2::Builder::new(LocalExec)
            .handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        (Sender::H2(sender), driver)
    } else {
        let (sender, connection) = http1::handshake(io).await.map_err(|e| e.to_string())?;
        // Its end (closed, broken) shows to the sender as a closed connection.
        let driver = tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        (Sender::H1(sender), driver)
    };
    Ok(Conn {
        sender,
        driver: Some(driver),
        protocol: if h2 { Protocol::Http2 } else { Protocol::Http1 },
        tls_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weighted_order_spreads_each_request_by_its_weight() {
        assert_eq!(cycle(&[1]), [0]);
        assert_eq!(cycle(&[3, 1]), [0, 0, 1, 0]);
        let c = cycle(&[5, 1, 1]);
        assert_eq!(c.len(), 7);
        assert_eq!(c.iter().filter(|i| **i == 0).count(), 5);
        // Never all of the heavy one in a row.
        assert!(c.windows(4).all(|w| w.iter().any(|i| *i != 0)), "{c:?}");
    }
}
