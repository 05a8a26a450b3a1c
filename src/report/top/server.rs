//! The HTTP endpoint for `--listen`: `GET /metrics` answers the latest sample's Prometheus
//! text, `/` the live page (`live`: verdict, findings, charts of the last 15 minutes), which
//! fetches `/live.json` every interval; other paths get 404, other
//! methods 405. It runs on its own threads and never blocks
//! sampling.
//!
//! Whoever reaches the port is a client, so everything a client can make tacho spend is
//! bounded: the request head (8 KiB, 32 headers), the time a connection may live (5 s to send
//! its request and take the answer), the connections served at once (64, fewer under a low
//! open-file limit), and one request per connection. Each connection has its own small thread,
//! so a client that never reads blocks only itself. When every slot is taken, the connection
//! that has waited longest without completing its request is closed to make room: idle
//! sockets cannot lock out a client that asks at once. The bodies are rendered once per sample
//! and shared by every answer; the live page's window is at most `live::MAX_POINTS`
//! intervals, whatever clients ask.
//!
//! Plain threads and `httparse` rather than an async stack: at most 64 short connections and
//! one tiny answer need no runtime, and blocking sockets with timeouts keep every bound
//! visible in a few lines. With `--web-config` ([`WebConfig`]) the same exchange runs inside
//! a rustls session (the handshake within the same 5 s) and asks for a bcrypt-checked user.

use super::live::{self, Live};
use super::webconfig::{Verdict, WebConfig};
use crate::diagnose::model::TopSample;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Request line plus headers; a scrape sends a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
const MAX_HEADERS: usize = 32;
/// From accept to the last byte of the answer.
const CONNECTION_TIME: Duration = Duration::from_secs(5);
const MAX_CONNECTIONS: usize = 64;
/// A connection's thread holds the 8 KiB head buffer and little else…
const THREAD_STACK: usize = 64 * 1024;
/// …unless it runs a TLS handshake, whose key exchange and certificate code need far more
/// (virtual memory, touched only as used).
const TLS_THREAD_STACK: usize = 1024 * 1024;
/// After an accept error (out of file descriptors or memory), before trying again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Text appended to every sample's (the host's own figures), made by the caller.
type Extra = Box<dyn FnMut() -> String + Send>;

/// The text served; replaced after every sample.
#[derive(Clone, Default)]
pub struct Latest {
    body: Arc<Mutex<Option<Arc<[u8]>>>>,
    extra: Arc<Mutex<Option<Extra>>>,
    /// The last 15 minutes, and their JSON for `/live.json`.
    live: Arc<Mutex<Live>>,
}

impl Latest {
    /// Replaces the text served from now on (followed by [`Latest::append_each`]'s text).
    pub fn set(&self, mut text: String) {
        if let Some(extra) = lock(&self.extra).as_mut() {
            text.push_str(&extra());
        }
        let body: Arc<[u8]> = Arc::from(text.into_bytes());
        *lock(&self.body) = Some(body);
    }

    /// Appends what `extra` returns to every sample's text from now on; it runs on the
    /// sampling thread, once per sample, so it should cache what is costly.
    pub fn append_each(&self, extra: impl FnMut() -> String + Send + 'static) {
        *lock(&self.extra) = Some(Box::new(extra));
    }

    /// Adds the interval `s` to the live page's window and renders its JSON once, for every
    /// client until the next.
    pub fn record(&self, s: &TopSample) {
        lock(&self.live).push(s);
    }

    fn get(&self) -> Option<Arc<[u8]>> {
        lock(&self.body).clone()
    }

    fn live_json(&self, after: Option<u64>) -> Option<Arc<[u8]>> {
        let live = lock(&self.live);
        match after {
            Some(seq) => live.json_after(seq),
            None => live.json(),
        }
    }
}

/// A poisoned lock only means another connection's thread panicked; the data is still whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Binds `addr` (an error names it, e.g. when the port is taken) and serves from a thread;
/// returns the text to serve and the address bound. Until the first interval completes,
/// /metrics answers 503 with a reason.
pub fn serve(addr: SocketAddr, web: WebConfig) -> anyhow::Result<(Latest, SocketAddr)> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        anyhow::anyhow!("cannot listen on {addr}: {e}; pick a free port with --listen")
    })?;
    let bound = listener.local_addr().unwrap_or(addr);
    deepen_queue(&listener);
    let latest = Latest::default();
    let shared = latest.clone();
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || accept_loop(&listener, &shared, &web))?;
    Ok((latest, bound))
}

/// What `/` answers: the live page, fixed text made once (what comes from the system reaches
/// it as `/live.json` and is set as text).
fn root_page() -> Arc<[u8]> {
    static PAGE: std::sync::OnceLock<Arc<[u8]>> = std::sync::OnceLock::new();
    Arc::clone(PAGE.get_or_init(|| Arc::from(live::page().into_bytes())))
}

/// Connections waiting to be accepted; std's 128 overflows in a burst of connections, and
/// the kernel then drops a scraper's SYN, which costs it a 1 s retransmission. Emptying the
/// queue is cheap (each connection is accepted, then served or closed at once).
const LISTEN_QUEUE: libc::c_int = 1024;

/// Listens again with [`LISTEN_QUEUE`] (Linux takes a second listen() as a new backlog);
/// on failure the first backlog simply stays.
fn deepen_queue(listener: &TcpListener) {
    let _ = rustix::net::listen(listener, LISTEN_QUEUE);
}

/// A connection being served.
struct Slot {
    id: u64,
    accepted: Instant,
    stream: Arc<TcpStream>,
    /// Its request is not complete yet: it may be closed to make room.
    waiting: bool,
}

#[derive(Default)]
struct Slots {
    next_id: u64,
    live: Vec<Slot>,
}

fn accept_loop(listener: &TcpListener, latest: &Latest, web: &WebConfig) {
    let cap = connection_cap();
    let slots = Arc::new(Mutex::new(Slots::default()));
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            // Out of descriptors or memory: the connection stays queued until one frees.
            Err(_) => {
                std::thread::sleep(ACCEPT_PAUSE);
                continue;
            }
        };
        let stream = Arc::new(stream);
        let Some(id) = admit(&slots, &stream, cap) else {
            continue; // dropped: closed at once
        };
        let (slots_t, latest_t, stream_t) = (Arc::clone(&slots), latest.clone(), stream);
        let web_t = web.clone();
        let stack = if web.tls.is_some() {
            TLS_THREAD_STACK
        } else {
            THREAD_STACK
        };
        let spawned = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                // A client that hung up or timed out is its own problem.
                let _ = serve_one(&stream_t, &latest_t, &slots_t, id, &web_t);
                lock(&slots_t).live.retain(|s| s.id != id);
            });
        if spawned.is_err() {
            lock(&slots).live.retain(|s| s.id != id);
        }
    }
}

/// Takes a slot for `stream`, closing the longest-waiting incomplete request when all are
/// taken; None when every slot is answering (the new connection is then refused).
fn admit(slots: &Mutex<Slots>, stream: &Arc<TcpStream>, cap: usize) -> Option<u64> {
    let mut s = lock(slots);
    if s.live.len() >= cap {
        let oldest = s
            .live
            .iter_mut()
            .filter(|c| c.waiting)
            .min_by_key(|c| c.accepted)?;
        // Wakes its thread, which then frees the slot; the stream's descriptor stays open
        // until then because this list holds it, so the shutdown cannot hit another socket.
        let _ = oldest.stream.shutdown(Shutdown::Both);
        oldest.waiting = false;
        // Threads woken this way leave within microseconds; a flood faster than that is
        // refused rather than allowed to grow the list.
        if s.live.len() >= 2 * cap {
            return None;
        }
    }
    s.next_id += 1;
    let id = s.next_id;
    s.live.push(Slot {
        id,
        accepted: Instant::now(),
        stream: Arc::clone(stream),
        waiting: true,
    });
    Some(id)
}

/// At most [`MAX_CONNECTIONS`], and at most half the open-file limit, so that running out of
/// descriptors is met by closing idle connections rather than by failing to accept.
fn connection_cap() -> usize {
    // None: unlimited (RLIM_INFINITY).
    let current = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let half = usize::try_from(current.unwrap_or(u64::MAX) / 2).unwrap_or(usize::MAX);
    half.clamp(1, MAX_CONNECTIONS)
}

/// Time left before `deadline`, or a timeout error once it has passed.
fn left(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))
}

/// Serves one connection, in TLS when configured, within [`CONNECTION_TIME`].
fn serve_one(
    stream: &TcpStream,
    latest: &Latest,
    slots: &Mutex<Slots>,
    id: u64,
    web: &WebConfig,
) -> io::Result<()> {
    let deadline = Instant::now() + CONNECTION_TIME;
    let Some(tls) = &web.tls else {
        return exchange(&mut &*stream, stream, deadline, latest, slots, id, web);
    };
    #[cfg(not(feature = "tls"))]
    match *tls {}
    #[cfg(feature = "tls")]
    {
        let mut session =
            rustls::ServerConnection::new(Arc::clone(tls)).map_err(io::Error::other)?;
        // Timeouts first: the handshake happens inside the first read.
        stream.set_read_timeout(Some(left(deadline)?))?;
        stream.set_write_timeout(Some(left(deadline)?))?;
        let mut socket = stream;
        let mut io = rustls::Stream::new(&mut session, &mut socket);
        exchange(&mut io, stream, deadline, latest, slots, id, web)?;
        session.send_close_notify();
        let _ = session.write_tls(&mut socket);
        Ok(())
    }
}

/// Reads one request head from `io` and answers it; anything after the head is ignored.
/// `stream` is the socket under `io`, whose timeouts bound each read and write.
fn exchange(
    io: &mut (impl Read + Write),
    stream: &TcpStream,
    deadline: Instant,
    latest: &Latest,
    slots: &Mutex<Slots>,
    id: u64,
    web: &WebConfig,
) -> io::Result<()> {
    // Password checks are rationed per client address (see webconfig).
    let peer = stream
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip().to_canonical());
    let mut head = [0u8; MAX_HEAD];
    let mut len = 0;
    let answer = loop {
        if len == head.len() {
            break Answer::plain(431, "request head over 8 KiB\n");
        }
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = io.read(&mut head[len..])?;
        if n == 0 {
            return Ok(());
        }
        // Parse only once the blank line has arrived, so a client sending a byte at a time
        // costs one scan of what it sent, not one parse per byte.
        let from = len.saturating_sub(3);
        len += n;
        let fresh = &head[from..len];
        if !fresh.windows(4).any(|w| w == b"\r\n\r\n") && !fresh.windows(2).any(|w| w == b"\n\n") {
            continue;
        }
        if let Some(answer) = answer_head(&head[..len], latest, web, peer) {
            break answer;
        }
    };
    if let Some(slot) = lock(slots).live.iter_mut().find(|s| s.id == id) {
        slot.waiting = false;
    }
    stream.set_write_timeout(Some(left(deadline)?))?;
    io.write_all(answer.head.as_bytes())?;
    if let Some(body) = &answer.body {
        io.write_all(body)?;
    }
    io.flush()?;
    if web.tls.is_none() {
        stream.shutdown(Shutdown::Write)?;
    }
    Ok(())
}

/// The answer to a request head, or None while it is incomplete.
fn answer_head(head: &[u8], latest: &Latest, web: &WebConfig, peer: IpAddr) -> Option<Answer> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {
            let authorization = request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                .map(|h| h.value);
            match web.auth.as_ref().map(|a| a.verdict(authorization, peer)) {
                None | Some(Verdict::Allowed) => {}
                Some(Verdict::Denied) => {
                    return Some(Answer::new(
                        401,
                        "WWW-Authenticate: Basic realm=\"tacho\"\r\n",
                        Arc::from(&b"a user and password are required\n"[..]),
                    ));
                }
                Some(Verdict::Busy) => {
                    return Some(Answer::new(
                        429,
                        "Retry-After: 1\r\n",
                        Arc::from(&b"a password check is under way; retry in a second\n"[..]),
                    ));
                }
            }
            Some(route(&request, latest))
        }
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => {
            Some(Answer::plain(431, "more than 32 request headers\n"))
        }
        Err(_) => Some(Answer::plain(400, "not an HTTP request\n")),
    }
}

/// A response: its head, and its body unless the request was HEAD.
struct Answer {
    head: String,
    body: Option<Arc<[u8]>>,
}

impl Answer {
    fn new(status: u16, extra: &str, body: Arc<[u8]>) -> Answer {
        let kind = if status == 200 {
            "text/plain; version=0.0.4; charset=utf-8"
        } else {
            "text/plain; charset=utf-8"
        };
        Answer::typed(status, kind, extra, body)
    }

    fn typed(status: u16, kind: &str, extra: &str, body: Arc<[u8]>) -> Answer {
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            405 => "Method Not Allowed",
            429 => "Too Many Requests",
            431 => "Request Header Fields Too Large",
            _ => "Service Unavailable",
        };
        Answer {
            head: format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                 {extra}Connection: close\r\n\r\n",
                body.len()
            ),
            body: Some(body),
        }
    }

    fn plain(status: u16, text: &str) -> Answer {
        Answer::new(status, "", Arc::from(text.as_bytes()))
    }
}

fn route(request: &httparse::Request, latest: &Latest) -> Answer {
    let method = request.method.unwrap_or("");
    if method != "GET" && method != "HEAD" {
        return Answer::new(
            405,
            "Allow: GET, HEAD\r\n",
            Arc::from(&b"only GET and HEAD\n"[..]),
        );
    }
    let path = request.path.unwrap_or("");
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    let mut answer = if path == "/" {
        Answer::typed(200, "text/html; charset=utf-8", "", root_page())
    } else if path == "/live.json" {
        // Nothing, or `after=` a sequence number an answer gave.
        let after = match query.map(|q| q.strip_prefix("after=").map(str::parse::<u64>)) {
            None => Ok(None),
            Some(Some(Ok(seq))) => Ok(Some(seq)),
            Some(_) => Err(()),
        };
        match after.map(|after| latest.live_json(after)) {
            Err(()) => Answer::plain(
                400,
                "/live.json takes nothing or ?after=SEQ, the seq of an earlier answer\n",
            ),
            Ok(Some(body)) => {
                Answer::typed(200, "application/json", "Cache-Control: no-store\r\n", body)
            }
            Ok(None) => Answer::plain(503, "no sample yet: the first interval is still running\n"),
        }
    } else if path != "/metrics" {
        Answer::plain(404, "tacho serves /, /live.json and /metrics\n")
    } else if let Some(body) = latest.get() {
        Answer::new(200, "", body)
    } else {
        Answer::plain(503, "no sample yet: the first interval is still running\n")
    };
    if method == "HEAD" {
        answer.body = None;
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn answer(raw: &[u8], latest: &Latest) -> Answer {
        answer_head(
            raw,
            latest,
            &WebConfig::default(),
            Ipv4Addr::LOCALHOST.into(),
        )
        .expect("a complete head")
    }

    #[test]
    fn routes_by_method_and_path() {
        let latest = Latest::default();
        let get = b"GET /metrics HTTP/1.1\r\n\r\n";
        assert!(answer(get, &latest).head.starts_with("HTTP/1.1 503 "));
        latest.set("a 1\n".into());
        let ok = answer(get, &latest);
        assert!(ok.head.starts_with("HTTP/1.1 200 "), "{}", ok.head);
        assert!(ok.head.contains("Content-Length: 4\r\n"));
        assert_eq!(ok.body.as_deref(), Some(&b"a 1\n"[..]));
        let head = answer(b"HEAD /metrics?x=1 HTTP/1.1\r\n\r\n", &latest);
        assert!(head.head.contains("Content-Length: 4\r\n") && head.body.is_none());
        let root = answer(b"GET / HTTP/1.1\r\n\r\n", &latest);
        assert!(root.head.contains(" 200 ") && root.head.contains("text/html"));
        assert!(
            answer(b"GET /other HTTP/1.1\r\n\r\n", &latest)
                .head
                .contains(" 404 ")
        );
        let post = answer(b"POST /metrics HTTP/1.1\r\n\r\n", &latest);
        assert!(post.head.contains(" 405 ") && post.head.contains("Allow: GET, HEAD"));
        let many = format!("GET /metrics HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(40));
        assert!(answer(many.as_bytes(), &latest).head.contains(" 431 "));
        assert!(
            answer(b"\x01\x02 junk\r\n\r\n", &latest)
                .head
                .contains(" 400 ")
        );
    }

    #[test]
    fn the_live_page_and_its_json_are_served() {
        let latest = Latest::default();
        let root = answer(b"GET / HTTP/1.1\r\n\r\n", &latest);
        let page = String::from_utf8(root.body.unwrap().to_vec()).unwrap();
        assert!(
            page.contains("live.json") && page.contains("uPlot"),
            "{page}"
        );
        // No script, style or font from elsewhere.
        assert!(!page.contains("src=") && !page.contains("@import") && !page.contains("url("));
        let get = b"GET /live.json HTTP/1.1\r\n\r\n";
        assert!(answer(get, &latest).head.starts_with("HTTP/1.1 503 "));
        let mut s = crate::diagnose::findings::tests::fixture_top_sample();
        // At 10 s a sample, 15 minutes are 90 intervals.
        for n in 0..120 {
            s.time_unix_s += 10.0;
            s.interval_s = 10.0;
            latest.record(&s);
            if n == 0 {
                let ok = answer(get, &latest);
                assert!(ok.head.contains("application/json"), "{}", ok.head);
            }
        }
        let body = answer(get, &latest).body.unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        // However long it runs, the window holds at most 15 minutes of intervals.
        assert_eq!(doc["t"].as_array().unwrap().len(), 90);
        assert_eq!(doc["verdict"], s.verdict.as_str());
        assert!(doc["charts"].as_array().unwrap().len() >= 3, "{doc}");
        // After a sequence number: only the intervals since, each chart's new values.
        let seq = doc["seq"].as_u64().unwrap();
        assert_eq!(seq, 120);
        let json = |raw: &[u8]| -> serde_json::Value {
            let a = answer(raw, &latest);
            assert!(a.head.starts_with("HTTP/1.1 200 "), "{}", a.head);
            serde_json::from_slice(&a.body.unwrap()).unwrap()
        };
        for (k, after) in [(1, seq - 1), (3, seq - 3), (0, seq)] {
            let d = json(format!("GET /live.json?after={after} HTTP/1.1\r\n\r\n").as_bytes());
            assert_eq!(d["after"], after);
            assert_eq!(d["points"], 90);
            let t = d["t"].as_array().unwrap();
            assert_eq!(t.len(), k);
            assert_eq!(t.last(), doc["t"].as_array().unwrap()[90 - k..].last());
            let chart = &d["charts"][0];
            assert_eq!(chart["id"], doc["charts"][0]["id"]);
            assert_eq!(chart["values"][0].as_array().unwrap().len(), k);
            assert!(body.len() > 4 * serde_json::to_vec(&d).unwrap().len());
        }
        // One the window no longer holds, or one not made yet: the whole window.
        for after in [0, seq - 91, seq + 1, u64::MAX] {
            let d = json(format!("GET /live.json?after={after} HTTP/1.1\r\n\r\n").as_bytes());
            assert!(d.get("after").is_none(), "{after}");
            assert_eq!(d["t"].as_array().unwrap().len(), 90);
        }
        assert_eq!(
            json(format!("GET /live.json?after={} HTTP/1.1\r\n\r\n", seq - 89).as_bytes())["t"]
                .as_array()
                .unwrap()
                .len(),
            89
        );
        // Anything else is refused, not guessed at.
        for bad in [
            "after=",
            "after=-1",
            "after=x",
            "after=18446744073709551616",
            "seq=3",
            "after=1&after=2",
            "",
        ] {
            let a = answer(
                format!("GET /live.json?{bad} HTTP/1.1\r\n\r\n").as_bytes(),
                &latest,
            );
            assert!(a.head.starts_with("HTTP/1.1 400 "), "{bad}: {}", a.head);
        }
    }

    proptest! {
        /// Whatever a client sends, the answer is absent (incomplete) or a well-formed
        /// response whose Content-Length matches its body.
        #[test]
        fn any_head_gets_a_well_formed_answer(
            raw in proptest::collection::vec(any::<u8>(), 0..600),
            prefix in "(GET|HEAD|POST) /[a-z?=]{0,12} HTTP/1\\.[01]\r\n",
        ) {
            let latest = Latest::default();
            latest.set("m 1\n".into());
            for input in [raw.clone(), [prefix.as_bytes(), &raw[..], b"\r\n\r\n"].concat()] {
                if let Some(a) = answer_head(&input, &latest, &WebConfig::default(), Ipv4Addr::LOCALHOST.into()) {
                    prop_assert!(a.head.starts_with("HTTP/1.1 "));
                    prop_assert!(a.head.ends_with("Connection: close\r\n\r\n"));
                    if let Some(body) = &a.body {
                        let length = format!("Content-Length: {}\r\n", body.len());
                        prop_assert!(a.head.contains(&length));
                    }
                }
            }
        }
    }
}
