//! `tacho top --listen`: the attacks that froze or exhausted the metrics endpoint (pipelined
//! requests never read, endless header lines, hundreds of idle sockets) run while a
//! well-behaved client polls /metrics; every poll must be answered, memory stays bounded and
//! tacho stays alive.

use crate::common;
use crate::common::tacho;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A poll not answered within this is blocked: the server's own limit for a connection is a
/// few seconds, and today's tiny_http server never answers at all under these attacks.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);
/// How long each attack runs while the good client polls: longer than the server's idle
/// timeout, so its timeouts and reuse of slots are exercised.
const ATTACK_TIME: Duration = Duration::from_secs(8);
const RSS_LIMIT_KIB: u64 = 64 * 1024;

/// A running `tacho top --listen`; killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts tacho serving on a free loopback port, with its open-file limit lowered to
/// `nofile` (so file-descriptor exhaustion is reached quickly), and waits for the first sample.
fn start(nofile: u64) -> Server {
    for _ in 0..5 {
        let port = common::free_port();
        let mut cmd = tacho();
        cmd.args(["top", "--interval", "200ms", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe and touches only the child's limits.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: nofile,
                    rlim_max: nofile,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut server = Server {
            child: cmd.spawn().expect("cannot start tacho"),
            port,
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Some(status) = server.child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = server.child.stderr.take().unwrap().read_to_string(&mut err);
                if err.contains("cannot listen") {
                    break; // the port was taken meanwhile: try another
                }
                panic!("tacho exited ({status}) before serving: {err}");
            }
            if poll(port).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("tacho never served /metrics");
}

/// One well-behaved scrape: the whole answer within [`ANSWER_LIMIT`], status 200, a
/// Content-Length matching the body, and Prometheus text in it.
fn poll(port: u16) -> Result<(), String> {
    let start = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, ANSWER_LIMIT).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(ANSWER_LIMIT)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 16384];
    // Read until the head and Content-Length bytes of body are in: a keep-alive server does
    // not hang up, so the end of the answer is known from its length.
    let mut expected: Option<usize> = None;
    while expected.is_none_or(|total| answer.len() < total) {
        let left = ANSWER_LIMIT
            .checked_sub(start.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or("not answered in time")?;
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("after {:?}: {e}", start.elapsed())),
        }
        if expected.is_none() {
            expected = head_and_length(&answer)?;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no header end")?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("status: {head}"));
    }
    if expected != Some(answer.len()) {
        return Err(format!("{} bytes, {expected:?} announced", answer.len()));
    }
    if !body.contains("# TYPE tacho_cpu_user_ratio gauge") || !body.ends_with('\n') {
        return Err(format!("not the metrics text: {body:.200}"));
    }
    Ok(())
}

/// An attacker's connection: past the listen backlog a connect waits for a slot, so it gives
/// up soon (the attack goes on with the connections it has).
fn connect(port: u16) -> std::io::Result<TcpStream> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300))
}

/// Once the head is complete: the length of head plus body it announces.
fn head_and_length(answer: &[u8]) -> Result<Option<usize>, String> {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .ok_or_else(|| format!("no Content-Length: {head}"))?;
    let length: usize = length
        .trim()
        .parse()
        .map_err(|_| format!("bad length: {head}"))?;
    Ok(Some(end + 4 + length))
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs `attack` (which must return when the flag is set) for [`ATTACK_TIME`] while polling
/// /metrics and tacho's memory; asserts every poll succeeded and memory stayed bounded.
fn under_attack(server: &mut Server, attack: impl FnOnce(u16, Arc<AtomicBool>) + Send + 'static) {
    let stop = Arc::new(AtomicBool::new(false));
    let port = server.port;
    let attacker: JoinHandle<()> = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || attack(port, stop))
    };
    let pid = server.child.id();
    let mut peak = 0;
    let mut polls = 0;
    let mut failures = Vec::new();
    let start = Instant::now();
    while start.elapsed() < ATTACK_TIME {
        // Memory sampled often, between polls, so a burst is seen.
        for _ in 0..5 {
            peak = peak.max(rss_kib(pid).unwrap_or(0));
            std::thread::sleep(Duration::from_millis(20));
        }
        polls += 1;
        if let Err(e) = poll(port) {
            failures.push(e);
        }
    }
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "tacho died under the attack"
    );
    assert!(
        failures.is_empty(),
        "{} of {polls} polls failed: {failures:?}",
        failures.len()
    );
    assert!(polls >= 3, "only {polls} polls");
    assert!(peak > 0, "cannot read tacho's memory");
    assert!(peak < RSS_LIMIT_KIB, "tacho's memory reached {peak} KiB");
    poll(port).expect("no answer after the attack");
}

#[test]
fn pipelined_requests_never_read_do_not_block_other_clients() {
    let mut server = start(1024);
    under_attack(&mut server, |port, stop| {
        let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(500);
        let mut held = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            // 500 requests at once, answers never read; new connections keep coming and the
            // old ones are held open (the last 100).
            if let Ok(mut s) = connect(port) {
                s.set_write_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let _ = s.write_all(&request);
                held.push(s);
            }
            if held.len() > 100 {
                held.remove(0);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}

#[test]
fn endless_header_lines_keep_memory_bounded() {
    let mut server = start(1024);
    under_attack(&mut server, |port, stop| {
        let line = format!("X-Filler: {}\r\n", "a".repeat(1000));
        let flooders: Vec<_> = (0..4)
            .map(|_| {
                let stop = Arc::clone(&stop);
                let line = line.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut s) = connect(port) else {
                            continue;
                        };
                        s.set_write_timeout(Some(Duration::from_millis(200)))
                            .unwrap();
                        if s.write_all(b"GET /metrics HTTP/1.1\r\n").is_err() {
                            continue;
                        }
                        // Header lines without end, until the server hangs up.
                        while !stop.load(Ordering::Relaxed) {
                            match s.write_all(line.as_bytes()) {
                                Ok(()) => {}
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                                Err(_) => break,
                            }
                        }
                    }
                })
            })
            .collect();
        for f in flooders {
            f.join().unwrap();
        }
    });
}

#[test]
fn hundreds_of_idle_sockets_neither_kill_nor_block() {
    // 128 open files for tacho, 600 idle sockets: far beyond its limit.
    let mut server = start(128);
    under_attack(&mut server, |port, stop| {
        let mut held = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if held.len() < 600 {
                if let Ok(s) = connect(port) {
                    held.push(s);
                }
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        assert!(held.len() >= 128, "only {} idle sockets opened", held.len());
    });
}

#[test]
fn serving_beyond_loopback_warns_that_the_figures_are_visible() {
    let args = |addr: String| {
        let args = [
            "top",
            "--json",
            "--count",
            "1",
            "--interval",
            "100ms",
            "--listen",
        ];
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push(addr);
        all
    };
    let wide = common::run(&args(format!("0.0.0.0:{}", common::free_port())));
    let err = common::stderr(&wide);
    assert!(
        err.contains("warning") && err.contains("process names"),
        "{err}"
    );
    let local = common::run(&args(format!("127.0.0.1:{}", common::free_port())));
    assert!(
        !common::stderr(&local).contains("warning"),
        "{}",
        common::stderr(&local)
    );
}

/// node_exporter's forms of the address, `:PORT` and `localhost:PORT`, are taken; `:PORT`
/// serves this machine only (the figures name processes and paths: reaching the network is
/// asked for with 0.0.0.0:PORT). tacho says where it serves, and `/` links to /metrics.
#[test]
fn node_exporters_listen_forms_serve_locally_say_where_and_link_from_the_root() {
    for form in [":", "localhost:"] {
        let port = common::free_port();
        let mut child = tacho()
            .args(["top", "--interval", "200ms", "--listen"])
            .arg(format!("{form}{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start tacho");
        let start = Instant::now();
        while poll(port).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("--listen {form}{port}: tacho exited ({status}): {err}");
            }
            assert!(start.elapsed() < Duration::from_secs(30), "never served");
            std::thread::sleep(Duration::from_millis(100));
        }
        let root = common::http_get(port, "/");
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            err.contains(&format!("serving http://127.0.0.1:{port}/metrics")),
            "--listen {form}{port}: {err}"
        );
        assert!(!err.contains("warning"), "{err}");
        let (head, body) = root.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        assert!(head.contains("Content-Type: text/html"), "{head}");
        assert!(body.contains("<a href=\"/metrics\">"), "{body}");
    }
    let line = common::assert_error(&common::run(&["top", "--listen", "nowhere:x"]));
    assert!(line.contains(":9101"), "{line}");
}
