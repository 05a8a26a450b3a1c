//! `tacho load`: against servers in this test whose behaviour is known — a capacity from a
//! fixed service time one request at a time, a single stall, error statuses, silence — the
//! knee, the stall (coordinated omission), the errors by kind, and bad input.

use crate::common::{assert_error, free_port, json_ok, run, stdout};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the test server answers.
#[derive(Clone, Copy)]
enum Behaviour {
    /// One request per slot of this length, in turn: a request is answered at the end of the
    /// first free slot after it arrived, so the server serves at most 1/service requests a
    /// second (and exactly that while requests wait), whatever its threads cost.
    Serial(Duration),
    /// As `Serial`, but request number `at` takes `stall` more, once.
    StallOnce {
        service: Duration,
        at: u64,
        stall: Duration,
    },
    /// Every request answered at once with this status.
    Status(u16),
    /// Requests read and never answered.
    Silent,
    /// Every request answered in another protocol (an SSH server's greeting).
    NotHttp,
}

/// A loopback HTTP/1.1 server (a thread per connection, keep-alive) that counts what it
/// served; it lives as long as the test process.
struct Server {
    port: u16,
    served: Arc<AtomicU64>,
}

/// When the next slot of a `Serial` server is free.
type Slots = Mutex<Option<Instant>>;

impl Server {
    fn start(behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::new(AtomicU64::new(0));
        let slots: Arc<Slots> = Arc::new(Mutex::new(None));
        let s = Arc::clone(&served);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, slots) = (Arc::clone(&s), Arc::clone(&slots));
                std::thread::spawn(move || connection(conn, behaviour, &s, &slots));
            }
        });
        Server { port, served }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

/// Takes the first free slot of `length` from now and sleeps to its end.
fn serve_in_turn(slots: &Slots, length: Duration) {
    let end = {
        let mut next = slots.lock().unwrap();
        let now = Instant::now();
        let start = next.map_or(now, |n| n.max(now));
        *next = Some(start + length);
        start + length
    };
    std::thread::sleep(end.saturating_duration_since(Instant::now()));
}

/// Reads a request's head up to its empty line; false when the client closed or failed first.
fn request_head(reader: &mut impl BufRead) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => return true,
            Ok(_) => {}
        }
    }
}

fn connection(conn: TcpStream, behaviour: Behaviour, served: &AtomicU64, slots: &Slots) {
    conn.set_nodelay(true).unwrap();
    let mut out = conn.try_clone().unwrap();
    let mut reader = BufReader::new(conn);
    loop {
        // The request head (tacho load sends no body here).
        if !request_head(&mut reader) {
            return;
        }
        let status = match behaviour {
            Behaviour::NotHttp => {
                served.fetch_add(1, Ordering::Relaxed);
                let _ = out.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
                continue;
            }
            Behaviour::Silent => {
                std::thread::sleep(Duration::from_secs(3600));
                return;
            }
            Behaviour::Status(s) => {
                served.fetch_add(1, Ordering::Relaxed);
                s
            }
            Behaviour::Serial(service) => {
                serve_in_turn(slots, service);
                served.fetch_add(1, Ordering::Relaxed);
                200
            }
            Behaviour::StallOnce { service, at, stall } => {
                let n = served.fetch_add(1, Ordering::Relaxed);
                serve_in_turn(slots, if n == at { service + stall } else { service });
                200
            }
        };
        let reason = if status == 200 { "OK" } else { "Nope" };
        // One write: pieces would wait on Nagle and the client's delayed ACK.
        let response = format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 2\r\n\r\nok");
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn load(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["load", url, "--json", "--no-save"];
    all.extend_from_slice(args);
    json_ok(&run(&all))
}

/// `tacho load ARGS --json --no-save`, URLs among the arguments.
fn load_with(args: &[&str]) -> Value {
    let mut all = vec!["load", "--json", "--no-save"];
    all.extend_from_slice(args);
    json_ok(&run(&all))
}

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap() / 1e6
}

#[test]
fn the_knee_of_a_server_of_known_capacity_is_found_within_ten_percent() {
    // One request per 20 ms slot: 50 requests a second (slots long beside a busy machine's
    // scheduling delays, which would otherwise eat into the capacity).
    let server = Server::start(Behaviour::Serial(Duration::from_millis(20)));
    let capacity = 50.0;
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("curve.html");
    let doc = load(
        &server.url(),
        &[
            "--ramp",
            "30..80",
            "--steps",
            "11",
            "--step",
            "1s",
            "-c",
            "4",
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["schema"], "tacho.load.v1");
    assert_eq!(doc["mode"], "ramp");
    let knee = &doc["knee"];
    let steps = doc["steps"].as_array().unwrap();
    let bent = knee["bent"].as_u64().expect("the ramp bent") as usize;
    assert_eq!(
        bent,
        steps.len() - 1,
        "the ramp stops at the first bent step"
    );
    let rps = knee["rps"].as_f64().unwrap();
    assert!(
        (rps - capacity).abs() <= 0.1 * capacity,
        "knee {rps:.0} rps, capacity {capacity:.0} rps: {doc:#}"
    );
    // The bent step was offered more than the server could serve, and said so.
    assert!(steps[bent]["offered_rps"].as_f64().unwrap() > capacity);
    let why = steps[bent]["bent"].to_string();
    assert!(why.contains("of the offered rate"), "{why}");
    let held = knee["held"].as_u64().unwrap() as usize;
    assert!(steps[held]["bent"].as_array().unwrap().is_empty());
    // The latency-vs-throughput curve: past the knee the queue shows in p99.
    let p99 = |i: usize| ms(&steps[i]["latency_ns"]["p99"]);
    assert!(p99(bent) > p99(0), "{doc:#}");
    // The server is this host: each step carries its findings.
    assert_eq!(doc["target"]["local"], true);
    assert!(steps.iter().all(|s| s["server"].is_array()), "{doc:#}");
    assert!(knee["what_bent"].is_array());
    assert_curve_page(&page, &doc);
}

/// The page of `--html`: its embedded curve is the document's steps by achieved rate, the
/// knee marked; drawn by a browser (when there is one) without a request to anywhere.
fn assert_curve_page(page: &std::path::Path, doc: &Value) {
    let html = std::fs::read_to_string(page).unwrap();
    let data = html
        .split("<script type=\"application/json\" id=\"tacho-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .unwrap();
    let curve: Value = serde_json::from_str(data).expect("the embedded JSON is whole");
    let steps = doc["steps"].as_array().unwrap();
    let x: Vec<f64> = curve["achieved_rps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(x.len(), steps.len());
    assert!(x.windows(2).all(|w| w[0] <= w[1]), "{x:?}");
    assert_eq!(curve["knee_rps"], doc["knee"]["rps"]);
    let p99 = curve["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "p99")
        .unwrap();
    assert_eq!(p99["ms"].as_array().unwrap().len(), steps.len());
    let Some(chromium) = crate::common::chromium() else {
        return;
    };
    let mut b = crate::common::browser::Browser::open(chromium, 1000, 800);
    let url = format!("file://{}", page.display());
    b.navigate(&url);
    b.wait_for(
        "(e => e !== null && e.dataset.drawn === '1' && e.querySelector('canvas') !== null)\
         (document.getElementById('curve'))",
        Duration::from_secs(20),
    );
    for r in b.requests() {
        assert_eq!(r, url, "the page requested {r}");
    }
}

#[test]
fn a_single_stall_shows_in_the_tail_as_the_requests_due_during_it_waited() {
    // 200 requests a second for 3 s; request 200 stalls the server for 500 ms, during which
    // about 100 more fall due. Counted from when each was due, the requests that waited for
    // it are well over 1% of all; a closed-loop tool would have sent only the 4 on the
    // connections and seen one slow request in 600 (under the p99).
    let server = Server::start(Behaviour::StallOnce {
        service: Duration::from_millis(1),
        at: 200,
        stall: Duration::from_millis(500),
    });
    let doc = load(
        &server.url(),
        &[
            "--rate",
            "200",
            "--duration",
            "3s",
            "-c",
            "4",
            "--timeout",
            "5s",
        ],
    );
    let step = &doc["steps"][0];
    let lat = &step["latency_ns"];
    assert!(ms(&lat["p99_9"]) >= 400.0, "{doc:#}");
    assert!(ms(&lat["max"]) >= 450.0, "{doc:#}");
    assert!(ms(&lat["p99"]) >= 250.0, "{doc:#}");
    assert!(ms(&lat["p50"]) < 100.0, "{doc:#}");
    assert_eq!(step["errors"]["timeout"], 0);
    assert_eq!(server.served(), step["sent"].as_u64().unwrap());
}

#[test]
fn errors_are_counted_by_kind() {
    let unavailable = Server::start(Behaviour::Status(503));
    let doc = load(&unavailable.url(), &["--rate", "50", "--duration", "1s"]);
    let step = &doc["steps"][0];
    assert_eq!(step["ok"], 0, "{doc:#}");
    assert_eq!(step["errors"]["status_5xx"], step["sent"], "{doc:#}");
    assert!(
        step["errors"]["status_5xx"].as_u64().unwrap() >= 40,
        "{doc:#}"
    );
    assert!(step["latency_ns"].is_null());
    let why = step["bent"].to_string();
    assert!(
        why.contains("100.0% of the requests failed (status_5xx "),
        "{why}"
    );

    let missing = Server::start(Behaviour::Status(404));
    let doc = load(&missing.url(), &["--rate", "20", "--duration", "500ms"]);
    assert!(doc["steps"][0]["errors"]["status_4xx"].as_u64().unwrap() >= 8);

    let silent = Server::start(Behaviour::Silent);
    let o = run(&[
        "load",
        &silent.url(),
        "--rate",
        "20",
        "--duration",
        "1s",
        "--timeout",
        "200ms",
        "-c",
        "2",
        "--no-save",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.contains("errors: 20 rps: timeout "), "{text}");
    assert!(text.contains("the service did not keep up"), "{text}");
}

/// An HTTP/1.1 server (keep-alive, a thread per connection) that burns 2 ms of CPU per
/// request; prints its port when it listens.
const BURNING_SERVER: &str = r#"
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        t = time.thread_time()
        while time.thread_time() - t < 0.002:
            pass
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// The Python server above in a new cgroup with a tenth of a CPU (under 50 requests a second:
/// Python's own work per request counts against the quota too, well below what a busy host
/// leaves it): the cgroup's name, the server (killed on drop, the cgroup after it) and its URL;
/// `None` without cgroups to make.
fn throttled_server(
    tag: &str,
) -> Option<(
    String,
    crate::common::Killed,
    crate::common::cgroup::Cgroup,
    String,
)> {
    use crate::common::cgroup::Cgroup;
    use crate::common::{Killed, PYTHON};
    let name = format!("tacho-itest-load-{tag}-{}", std::process::id());
    let cg = Cgroup::new("cpu", &name)?;
    cg.set("cpu.cfs_period_us", "100000");
    cg.set("cpu.cfs_quota_us", "10000");
    let mut server = Killed(
        cg.command(&[PYTHON, "-c", BURNING_SERVER])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut port = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let url = format!("http://127.0.0.1:{}/", port.trim());
    Some((name, server, cg, url))
}

/// The throttling of cgroup `name` among the findings at the knee of `doc`.
fn assert_throttled_at_the_knee(doc: &Value, name: &str) -> Value {
    let knee = &doc["knee"];
    let bent = knee["bent"].as_u64().expect("the ramp bent") as usize;
    assert!(bent > 0, "the first step bent already: {doc:#}");
    let subject = format!("/{name}");
    knee["what_bent"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "cpu_throttled" && f["subject"] == subject.as_str())
        .unwrap_or_else(|| panic!("no throttling at the knee: {doc:#}"))
        .clone()
}

#[test]
fn at_the_knee_of_a_server_under_a_cpu_quota_the_throttling_is_reported() {
    let Some((name, server, _cg, url)) = throttled_server("local") else {
        return;
    };
    let doc = load(
        &url,
        &[
            "--ramp", "5..95", "--steps", "10", "--step", "1s", "-c", "4",
        ],
    );
    let throttled = assert_throttled_at_the_knee(&doc, &name);
    assert!(
        throttled["message"]
            .as_str()
            .unwrap()
            .contains("CPUQuota=10%"),
        "{throttled}"
    );
    drop(server);
}

#[test]
fn watch_reads_what_bent_from_a_remote_tacho_top() {
    // Bad --watch targets first: nothing listening, a server that is not tacho top.
    let nobody = format!("http://127.0.0.1:{}/metrics", free_port());
    let other = Server::start(Behaviour::Status(200));
    let line = assert_error(&run(&[
        "load",
        &other.url(),
        "--watch",
        &nobody,
        "--no-save",
    ]));
    assert!(
        line.contains("--watch") && line.contains("cannot connect"),
        "{line}"
    );
    let line = assert_error(&run(&[
        "load",
        &other.url(),
        "--watch",
        &other.url(),
        "--no-save",
    ]));
    assert!(line.contains("no tacho figures"), "{line}");
    assert_eq!(other.served(), 1, "only the one look at the page");

    let Some((name, server, _cg, url)) = throttled_server("watch") else {
        return;
    };
    let port = free_port();
    let top = crate::common::Killed(
        crate::common::tacho()
            .args(["top", "--interval", "500ms", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !std::panic::catch_unwind(|| crate::common::http_get(port, "/metrics"))
        .is_ok_and(|page| page.contains("# TYPE tacho_"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "tacho top --listen did not serve"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let watch = format!("http://127.0.0.1:{port}/metrics");
    let doc = load(
        &url,
        &[
            "--ramp", "5..95", "--steps", "10", "--step", "1s", "-c", "4", "--watch", &watch,
        ],
    );
    // Every step was read from /metrics (its findings carry the severity for a sentence).
    let steps = doc["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["server"].is_array()), "{doc:#}");
    let throttled = assert_throttled_at_the_knee(&doc, &name);
    assert!(
        !throttled["message"].as_str().unwrap().is_empty(),
        "{throttled}"
    );
    drop((top, server));
}

#[test]
fn load_runs_are_stored_and_compared_step_by_step() {
    let server = Server::start(Behaviour::Serial(Duration::from_millis(1)));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let db = db.to_str().unwrap();
    for label in ["before", "after"] {
        let o = run(&[
            "load",
            &server.url(),
            "--ramp",
            "50..100",
            "--steps",
            "2",
            "--step",
            "300ms",
            "--db",
            db,
            "--label",
            label,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("offered  achieved"), "{text}");
    }
    let o = run(&["compare", "--db", db, "1", "2"]);
    let text = stdout(&o);
    assert!(
        text.contains("offered 50 rps") && text.contains("offered 100 rps"),
        "{text}"
    );
    assert!(text.contains("knee"), "{text}");
    // A step's rate is requests a second, not IOPS, in compare and in runs show.
    assert!(text.contains("req/s") && !text.contains("IOPS"), "{text}");
    let shown = stdout(&run(&["runs", "show", "--db", db, "1"]));
    assert!(
        shown.contains("req/s") && !shown.contains("IOPS"),
        "{shown}"
    );
    // Headroom: a peak against the stored knee, by the 40–50% rule; nothing is sent.
    let served = server.served();
    let headroom = |peak: &str| {
        json_ok(&run(&[
            "load",
            "--knee-from",
            "2",
            "--peak",
            peak,
            "--db",
            db,
            "--json",
        ]))
    };
    let low = headroom("1");
    let knee = low["knee_rps"].as_f64().unwrap();
    assert!(knee > 0.0, "{low:#}");
    assert!((low["share_pct"].as_f64().unwrap() - 100.0 / knee).abs() < 1e-9);
    assert!(
        low["verdict"].as_str().unwrap().starts_with("below 40%"),
        "{low:#}"
    );
    let inside = headroom(&format!("{}", knee * 0.45));
    assert_eq!(inside["verdict"], "inside the 40–50% rule", "{inside:#}");
    let over = headroom(&format!("{}", knee * 0.8));
    assert_eq!(over["within_rule"], false, "{over:#}");
    assert!(
        over["verdict"]
            .as_str()
            .unwrap()
            .starts_with("above the 40–50% rule")
    );
    assert_eq!(server.served(), served);
    let line = assert_error(&run(&[
        "load",
        "--knee-from",
        "9",
        "--peak",
        "5",
        "--db",
        db,
    ]));
    assert!(line.contains("no run 9"), "{line}");
    let line = assert_error(&run(&[
        "load",
        "--knee-from",
        "1",
        "--peak",
        "-5",
        "--db",
        db,
    ]));
    assert!(line.contains("--peak"), "{line}");
    let list = stdout(&run(&["runs", "list", "--db", db]));
    let loads = list.lines().filter(|l| l.contains("  load  "));
    assert!(loads.clone().all(|l| l.ends_with(&server.url())), "{list}");
    assert_eq!(loads.count(), 2, "{list}");
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    use crate::common::{SpawnPiped, tacho, wait_output};
    let server = Server::start(Behaviour::Serial(Duration::from_millis(1)));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let child = tacho()
        .args([
            "load",
            &server.url(),
            "--rate",
            "50",
            "--duration",
            "60s",
            "--json",
        ])
        .arg("--db")
        .arg(&db)
        .spawn_piped();
    // Once requests have been served, stop it as Ctrl-C would.
    let start = Instant::now();
    while server.served() < 20 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals a child this test started and has not waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = wait_output(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", crate::common::stderr(&o));
    let doc = crate::common::parse_json(&o);
    assert_eq!(doc["interrupted"], true);
    let step = &doc["steps"][0];
    assert!(step["ok"].as_u64().unwrap() >= 20, "{doc:#}");
    assert!(step["duration_s"].as_f64().unwrap() < 30.0, "{doc:#}");
    // Requests due by the stop, not the minute planned.
    assert!(step["due"].as_u64().unwrap() < 1500, "{doc:#}");
    let list = stdout(&run(&["runs", "list", "--db", db.to_str().unwrap()]));
    assert!(list.contains("interrupted"), "{list}");
}

#[test]
fn bad_input_exits_2_in_one_line() {
    let nobody = format!("http://127.0.0.1:{}/", free_port());
    let line = assert_error(&run(&["load", &nobody, "--no-save"]));
    assert!(line.contains("cannot connect to"), "{line}");
    let line = assert_error(&run(&["load", "ftp://127.0.0.1/x"]));
    assert!(line.contains("scheme \"ftp\""), "{line}");
    let url = "http://127.0.0.1:1/";
    let line = assert_error(&run(&["load", url, "--ramp", "5000..100"]));
    assert!(line.contains("goes down"), "{line}");
    let line = assert_error(&run(&["load", url, "--ramp", "abc"]));
    assert!(line.contains("not a range"), "{line}");
    let line = assert_error(&run(&["load", url, "--rate", "0"]));
    assert!(line.contains("--rate"), "{line}");
    let line = assert_error(&run(&["load", url, "-H", "no colon"]));
    assert!(line.contains("'Name: value'"), "{line}");
}

/// An HTTP/2 server over TLS on loopback (ALPN h2 only, a self-signed certificate for
/// 127.0.0.1 in `dir`) answering every request `delay` after it came; counts the requests
/// that came over HTTP/2, and the most streams open at once on one connection (the second
/// value).
fn h2_tls_server(dir: &std::path::Path, delay: Duration) -> (Server, Arc<AtomicU64>) {
    use http_body_util::Full;
    use hyper::body::{Bytes, Incoming};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    crate::common::self_signed_certificate(dir);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("tacho.crt"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("tacho.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&served);
    let most = Arc::new(AtomicU64::new(0));
    let most_at_once = Arc::clone(&most);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_io()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, counted) = (acceptor.clone(), Arc::clone(&counted));
                let most = Arc::clone(&most_at_once);
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    // Streams open now on this connection.
                    let open = Arc::new(AtomicU64::new(0));
                    let service =
                        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                            if req.version() == hyper::Version::HTTP_2 {
                                counted.fetch_add(1, Ordering::Relaxed);
                            }
                            let now = open.fetch_add(1, Ordering::Relaxed) + 1;
                            most.fetch_max(now, Ordering::Relaxed);
                            let open = Arc::clone(&open);
                            async move {
                                tokio::time::sleep(delay).await;
                                open.fetch_sub(1, Ordering::Relaxed);
                                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                    Bytes::from_static(b"ok"),
                                )))
                            }
                        });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    (Server { port, served }, most)
}

#[test]
fn https_over_http2_is_verified_unless_insecure_and_reports_its_protocol() {
    let dir = tempfile::tempdir().unwrap();
    // Each answer 20 ms after its request, while one is due every 10 ms: one connection
    // carries several streams at once, up to --streams (4 at once serve 200 a second).
    let (server, most_at_once) = h2_tls_server(dir.path(), Duration::from_millis(20));
    let url = format!("https://127.0.0.1:{}/", server.port);
    // A self-signed certificate does not verify: one line, nothing sent.
    let line = assert_error(&run(&[
        "load",
        &url,
        "--rate",
        "20",
        "--duration",
        "1s",
        "--no-save",
    ]));
    assert!(
        line.contains("certificate") && line.contains("--insecure"),
        "{line}"
    );
    assert_eq!(server.served(), 0);
    let o = run(&[
        "load",
        &url,
        "--rate",
        "100",
        "--duration",
        "1s",
        "-c",
        "1",
        "--streams",
        "4",
        "--insecure",
        "--json",
        "--no-save",
    ]);
    let doc = json_ok(&o);
    let most = most_at_once.load(Ordering::Relaxed);
    assert!((2..=4).contains(&most), "{most} streams at once: {doc:#}");
    assert!(crate::common::stderr(&o).contains("NOT checked"));
    let origin = &doc["target"]["origins"][0];
    assert_eq!(origin["protocol"], "HTTP/2", "{doc:#}");
    assert_eq!(origin["verified"], false);
    assert!(
        origin["tls_version"]
            .as_str()
            .unwrap()
            .starts_with("TLSv1_"),
        "{origin}"
    );
    let step = &doc["steps"][0];
    assert_eq!(step["errors"]["other"], 0, "{doc:#}");
    assert!(step["ok"].as_u64().unwrap() >= 90, "{doc:#}");
    // Every request the server saw came over HTTP/2.
    assert_eq!(server.served(), step["sent"].as_u64().unwrap());
    assert_eq!(doc["target"]["streams"], 4);
    // The text says the certificate was not checked.
    let o = run(&[
        "load",
        &url,
        "--rate",
        "20",
        "--duration",
        "200ms",
        "--insecure",
        "--http2",
        "--no-save",
    ]);
    let text = stdout(&o);
    assert!(
        text.contains("HTTP/2, TLSv1_3, certificate NOT checked (--insecure)"),
        "{text}"
    );
    assert!(text.contains("(up to 10 HTTP/2 streams each)"), "{text}");
}

#[test]
fn a_server_refusing_http2_or_not_speaking_http_exits_2_but_a_silent_one_is_loaded() {
    let http1 = Server::start(Behaviour::Status(200));
    let line = assert_error(&run(&["load", &http1.url(), "--http2", "--no-save"]));
    assert!(
        line.contains("does not speak HTTP/2 over cleartext (h2c)")
            && line.contains("drop --http2 or use https://"),
        "{line}"
    );
    // Answered in another protocol at the first request: one line, the run ends there.
    let other = Server::start(Behaviour::NotHttp);
    let line = assert_error(&run(&[
        "load",
        &other.url(),
        "--rate",
        "50",
        "--duration",
        "10s",
        "--no-save",
    ]));
    assert!(
        line.contains("the first answer was not HTTP") && line.contains("https://"),
        "{line}"
    );
    // Not the ten seconds' 500 requests: it stopped at the first answer.
    assert!(other.served() < 100, "{} served", other.served());
    // A server that says nothing may be slow: the run goes on, and counts the timeouts.
    let silent = Server::start(Behaviour::Silent);
    let doc = load(
        &silent.url(),
        &[
            "--http2",
            "--rate",
            "20",
            "--duration",
            "200ms",
            "--timeout",
            "200ms",
        ],
    );
    let step = &doc["steps"][0];
    assert_eq!(step["ok"], 0, "{doc:#}");
    assert!(step["errors"]["timeout"].as_u64().unwrap() > 0, "{doc:#}");
}

#[test]
fn a_weighted_mix_goes_to_each_url_by_its_weight_and_each_origin_over_its_own_connections() {
    let a = Server::start(Behaviour::Status(200));
    let b = Server::start(Behaviour::Status(200));
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("mix.txt");
    std::fs::write(
        &list,
        format!(
            "# three to a, one POST to b\n3 {}x\n\n1 POST {}y\n",
            a.url(),
            b.url()
        ),
    )
    .unwrap();
    let doc = load_with(&[
        "--urls",
        list.to_str().unwrap(),
        "--rate",
        "100",
        "--duration",
        "1s",
        "-c",
        "2",
    ]);
    let urls = doc["target"]["urls"].as_array().unwrap();
    assert_eq!(
        (urls[0]["weight"].as_u64(), urls[1]["method"].as_str()),
        (Some(3), Some("POST"))
    );
    assert_eq!(
        doc["target"]["origins"].as_array().unwrap().len(),
        2,
        "{doc:#}"
    );
    let step = &doc["steps"][0];
    let by = step["by_url"].as_array().unwrap();
    let sent = |i: usize| by[i]["sent"].as_u64().unwrap();
    assert_eq!(sent(0) + sent(1), step["sent"].as_u64().unwrap());
    // Taken in a fixed order: three to a for each one to b.
    assert!(sent(0).abs_diff(3 * sent(1)) <= 3, "{doc:#}");
    assert_eq!((a.served(), b.served()), (sent(0), sent(1)));
    assert_eq!(by[1]["ok"], by[1]["sent"]);

    // Several URLs on the command line: each in turn.
    let doc = load_with(&[
        &a.url(),
        &format!("{}z", b.url()),
        "--rate",
        "40",
        "--duration",
        "500ms",
    ]);
    let by = doc["steps"][0]["by_url"].as_array().unwrap();
    assert_eq!(by[0]["sent"], by[1]["sent"], "{doc:#}");

    // A bad line stops it, naming the line; nothing is sent.
    let before = a.served();
    std::fs::write(&list, format!("{}\nGET 2 {}\n", a.url(), a.url())).unwrap();
    let line = assert_error(&run(&[
        "load",
        "--urls",
        list.to_str().unwrap(),
        "--no-save",
    ]));
    assert!(
        line.contains("mix.txt: line 2: the weight must come before"),
        "{line}"
    );
    assert_eq!(a.served(), before);
}

/// The answers of a connection of [`answering_server`] for the framings test: a 103 before a
/// chunked 200 (an extension, a trailer), a redirect with no body, a 204 that gives a length
/// (no body all the same), then an HTTP/1.0 body that runs to the close, larger than a read.
fn framings() -> Vec<Vec<u8>> {
    let mut until_close = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
    until_close.resize(until_close.len() + 40_000, b'x');
    vec![
        b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\n\
          Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nx-sum: 1\r\n\r\n"
            .to_vec(),
        b"HTTP/1.1 301 Moved\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n".to_vec(),
        b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n".to_vec(),
        until_close,
    ]
}

/// A loopback server answering the requests of each connection with `answers` in turn, then
/// closing it: its port, the requests it read and the connections it took.
fn answering_server(answers: Vec<Vec<u8>>) -> (u16, Arc<AtomicU64>, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (requests, conns) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (r, c) = (Arc::clone(&requests), Arc::clone(&conns));
    let answers = Arc::new(answers);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            c.fetch_add(1, Ordering::Relaxed);
            let (r, answers) = (Arc::clone(&r), Arc::clone(&answers));
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                let mut reader = BufReader::new(conn);
                for answer in answers.iter() {
                    if !request_head(&mut reader) {
                        return;
                    }
                    r.fetch_add(1, Ordering::Relaxed);
                    if out.write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, requests, conns)
}

#[test]
fn every_body_framing_is_read_to_its_end_and_a_broken_one_counts_as_an_error() {
    let (port, requests, conns) = answering_server(framings());
    let url = format!("http://127.0.0.1:{port}/");
    let doc = load(&url, &["--rate", "40", "--duration", "1s", "-c", "1"]);
    let step = &doc["steps"][0];
    let sent = step["sent"].as_u64().unwrap();
    assert!(sent >= 30, "{doc:#}");
    // Four answers a connection, each whole (the 103 skipped, the 301 not followed), then a
    // new connection for the next request: none lost, none sent twice.
    assert_eq!(step["ok"], sent, "{doc:#}");
    assert_eq!(requests.load(Ordering::Relaxed), sent);
    assert_eq!(conns.load(Ordering::Relaxed), sent.div_ceil(4), "{doc:#}");

    // A good answer, then a chunk whose size is not hex: an error of its own kind, and the
    // connection given up for a new one.
    let (port, requests, conns) = answering_server(vec![
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
    ]);
    let url = format!("http://127.0.0.1:{port}/");
    let doc = load(&url, &["--rate", "40", "--duration", "500ms", "-c", "1"]);
    let step = &doc["steps"][0];
    let sent = step["sent"].as_u64().unwrap();
    assert_eq!(step["ok"].as_u64(), Some(sent.div_ceil(2)), "{doc:#}");
    assert_eq!(step["errors"]["other"].as_u64(), Some(sent / 2), "{doc:#}");
    assert_eq!(requests.load(Ordering::Relaxed), sent);
    assert_eq!(conns.load(Ordering::Relaxed), sent.div_ceil(2), "{doc:#}");
}
