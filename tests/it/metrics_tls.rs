//! `tacho top --listen --web-config FILE`: /metrics over TLS with basic authentication, as
//! node_exporter's web configuration. A real TLS client (curl) with the right password gets
//! the figures; a wrong password, no password and plain HTTP get none; bad files stop tacho
//! with one line (exit 2).

use crate::common::*;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A running `tacho top --listen`, killed on drop.
struct Top(Child);

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// curl's HTTP status for /metrics with these extra arguments (`000` when it could not talk).
fn curl(port: u16, scheme: &str, extra: &[&str], dir: &Path) -> (String, String) {
    let body = dir.join(format!("body-{}", extra.len()));
    let o = Command::new("curl")
        .args([
            "-s",
            "-m",
            "10",
            "-o",
            body.to_str().unwrap(),
            "-w",
            "%{http_code}",
        ])
        .args(extra)
        .arg(format!("{scheme}://127.0.0.1:{port}/metrics"))
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&body).unwrap_or_default();
    (String::from_utf8_lossy(&o.stdout).into_owned(), text)
}

#[test]
fn metrics_over_tls_need_the_right_password() {
    let dir = tempfile::tempdir().unwrap();
    self_signed_certificate(dir.path());
    let hash = bcrypt::hash("s3cret-Pw", 6).unwrap();
    let config = dir.path().join("web.yml");
    // Relative paths are relative to the configuration file, as in the exporter toolkit.
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: tacho.crt\n  key_file: tacho.key\n\
             basic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let _top = Top(tacho()
        .args(["top", "--listen", &addr, "--interval", "200ms", "--no-ebpf"])
        .arg("--web-config")
        .arg(&config)
        .spawn_piped());
    let ca = dir.path().join("tacho.crt");
    let ca = ca.to_str().unwrap();
    let right = ["--cacert", ca, "-u", "prometheus:s3cret-Pw"];
    // Wait for the server and its first sample.
    let start = Instant::now();
    let (mut status, mut body) = curl(port, "https", &right, dir.path());
    while status != "200" && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        (status, body) = curl(port, "https", &right, dir.path());
    }
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("# TYPE tacho_cpu_user_ratio gauge"), "{body}");
    for wrong in [
        vec!["--cacert", ca, "-u", "prometheus:wrong"],
        vec!["--cacert", ca, "-u", "nobody:s3cret-Pw"],
        vec!["--cacert", ca],
    ] {
        let (status, body) = curl(port, "https", &wrong, dir.path());
        assert_eq!(status, "401", "{wrong:?}: {body}");
        assert!(!body.contains("tacho_"), "{body}");
    }
    // A client that does not trust the certificate, and plain HTTP, get nothing.
    let (status, _) = curl(port, "https", &["-u", "prometheus:s3cret-Pw"], dir.path());
    assert_eq!(status, "000");
    let (status, body) = curl(port, "http", &["-u", "prometheus:s3cret-Pw"], dir.path());
    assert_ne!(status, "200", "{body}");
    assert!(!body.contains("tacho_"), "{body}");
}

#[test]
fn bad_web_configs_stop_tacho_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    for (text, says) in [
        (
            "basic_auth_users:\n  prometheus: hunter2\n",
            "not a bcrypt hash",
        ),
        (
            "tls_server_config:\n  cert_file: none.crt\n  key_file: none.key\n",
            "none.crt",
        ),
        (
            "http_server_config:\n  http2: false\n",
            "http_server_config",
        ),
    ] {
        let config = dir.path().join("web.yml");
        std::fs::write(&config, text).unwrap();
        let o = tacho()
            .args([
                "top",
                "--listen",
                &addr,
                "--web-config",
                config.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let line = assert_error(&o);
        assert!(line.contains(says), "{line}");
        assert!(!line.contains("hunter2"), "{line}");
    }
    let line = assert_error(&run(&["top", "--web-config", "x.yml", "--batch"]));
    assert!(line.contains("--listen"), "{line}");
}

/// One plain-HTTP GET of /metrics with `user:password`: the status code, or None when no
/// answer came within `limit`.
fn get_status(port: u16, user_pw: &str, limit: Duration) -> Option<u16> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let s = std::net::TcpStream::connect_timeout(&addr, limit).ok()?;
    status_over(s, user_pw, limit)
}

/// As [`get_status`], from the loopback address `from` (bound before connecting), so the
/// server sees a client of its own.
fn get_status_from(
    from: std::net::Ipv4Addr,
    port: u16,
    user_pw: &str,
    limit: Duration,
) -> Option<u16> {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).ok()?;
    rustix::net::bind(&fd, &std::net::SocketAddrV4::new(from, 0)).ok()?;
    // Loopback: connected or refused at once.
    rustix::net::connect(
        &fd,
        &std::net::SocketAddrV4::new([127, 0, 0, 1].into(), port),
    )
    .ok()?;
    status_over(std::net::TcpStream::from(fd), user_pw, limit)
}

/// The status of `GET /metrics` as `user_pw` over `s`, answered within `limit`.
fn status_over(mut s: std::net::TcpStream, user_pw: &str, limit: Duration) -> Option<u16> {
    use base64::Engine;
    use std::io::{Read, Write};
    let start = Instant::now();
    let auth = base64::engine::general_purpose::STANDARD.encode(user_pw);
    s.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n")
            .as_bytes(),
    )
    .ok()?;
    let mut head = [0u8; 12];
    let mut got = 0;
    while got < head.len() {
        let left = limit.checked_sub(start.elapsed())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match s.read(&mut head[got..]) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got += n,
        }
    }
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn a_flood_of_wrong_passwords_does_not_lock_out_the_scraper() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("s3cret-Pw", 8).unwrap();
    let config = dir.path().join("web.yml");
    std::fs::write(
        &config,
        format!("basic_auth_users:\n  prometheus: '{hash}'\n"),
    )
    .unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let _top = Top(tacho()
        .args(["top", "--listen", &addr, "--interval", "200ms", "--no-ebpf"])
        .arg("--web-config")
        .arg(&config)
        .spawn_piped());
    let right = "prometheus:s3cret-Pw";
    // The scraper's first scrape: its password is checked (and remembered).
    let start = Instant::now();
    while get_status(port, right, Duration::from_secs(5)) != Some(200) {
        assert!(start.elapsed() < Duration::from_secs(30), "no first scrape");
        std::thread::sleep(Duration::from_millis(200));
    }
    // 64 clients guessing passwords, each from an address of its own (127.0.0.2 to
    // 127.0.0.65: the limit of one check per address does not hold them back, only the 4
    // checks under way or waiting do), each asking again as soon as it is answered (a short
    // pause keeps the flood from being only a CPU hog on a small machine).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..64u8)
        .map(|t| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u64;
                // Answers by status: 401 (checked and wrong), 429 (no check free).
                let mut answers = std::collections::BTreeMap::<u16, u64>::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let status = get_status_from(
                        [127, 0, 0, 2 + t].into(),
                        port,
                        &format!("prometheus:guess-{t}-{n}"),
                        Duration::from_secs(6),
                    );
                    if let Some(status) = status {
                        *answers.entry(status).or_default() += 1;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let scrape = |n: usize| -> usize {
        (0..n)
            .filter(|_| {
                let answered = get_status(port, right, Duration::from_secs(1)) == Some(200);
                std::thread::sleep(Duration::from_millis(150));
                answered
            })
            .count()
    };
    // Each scrape must be answered within 1 s.
    let during = scrape(40);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = std::collections::BTreeMap::<u16, u64>::new();
    for f in flood {
        for (status, n) in f.join().unwrap() {
            *answers.entry(status).or_default() += n;
        }
    }
    // The flood was real: guesses were checked and refused, and others turned away at once
    // although each came from an address with no check of its own under way.
    assert!(
        answers.get(&401).is_some_and(|&n| n > 0) && answers.get(&429).is_some_and(|&n| n > 0),
        "the flood's answers: {answers:?}"
    );
    let after = scrape(8);
    assert!(
        during >= 36,
        "{during} of 40 scrapes answered during the flood"
    );
    assert_eq!(after, 8, "{after} of 8 scrapes answered after the flood");
}
