//! `--watch http://HOST:PORT/metrics`: the findings a remote `tacho top --listen` exports, read
//! at the end of each step. `/metrics` carries each finding of top's latest interval as
//! `tacho_finding{code="…",subject="…",severity="…"} 1` (its sentence is not exported, so the
//! severity stands in for it).

use super::ServerFinding;
use super::target::Target;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Most bytes of a `/metrics` page read.
const PAGE_LIMIT: u64 = 32 << 20;

/// A remote `tacho top --listen` to read findings from.
#[derive(Debug)]
pub struct Remote {
    target: Target,
    addr: SocketAddr,
    timeout: Duration,
}

impl Remote {
    /// Checks the URL (http:// only) and resolves it; one line naming the problem.
    pub fn new(url: &str, timeout: Duration) -> Result<Remote, String> {
        let target = Target::parse(url).map_err(|e| format!("--watch {e}"))?;
        if target.tls {
            return Err(format!(
                "--watch {:?}: only http:// is read (tacho top --listen without TLS); give \
                 http://HOST:PORT/metrics",
                crate::text::Escaped(url).to_string()
            ));
        }
        let addr = target.resolve().map_err(|e| format!("--watch: {e}"))?;
        Ok(Remote {
            target,
            addr,
            timeout,
        })
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// The findings `/metrics` carries now.
    pub fn findings(&self) -> Result<Vec<ServerFinding>, String> {
        let page = self.get()?;
        if !page.contains("# TYPE tacho_") {
            return Err(
                "the page has no tacho figures: is it tacho top --listen's /metrics?".into(),
            );
        }
        Ok(findings(&page))
    }

    /// The page at the URL, over one HTTP/1.1 connection closed after it.
    fn get(&self) -> Result<String, String> {
        let mut s = TcpStream::connect_timeout(&self.addr, self.timeout)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        let io = |e: std::io::Error| format!("{}: {e}", self.addr);
        s.set_read_timeout(Some(self.timeout)).map_err(io)?;
        s.set_write_timeout(Some(self.timeout)).map_err(io)?;
        write!(
            s,
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: tacho/{}\r\nConnection: close\r\n\r\n",
            self.target.path,
            self.target.authority,
            env!("CARGO_PKG_VERSION")
        )
        .map_err(io)?;
        // The head, then the body: Content-Length's bytes, or up to the end of the
        // connection without one.
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 64 << 10];
        let (head, code, length) = loop {
            let n = s.read(&mut chunk).map_err(io)?;
            if n == 0 {
                return Err("the answer is not an HTTP response".into());
            }
            bytes.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&bytes) {
                Ok(httparse::Status::Complete(head)) => {
                    let length = response
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
                    break (head, response.code, length);
                }
                Ok(httparse::Status::Partial) if bytes.len() < 64 << 10 => {}
                _ => return Err("the answer is not an HTTP response".into()),
            }
        };
        let want = length.unwrap_or(PAGE_LIMIT).min(PAGE_LIMIT);
        let have = (bytes.len() - head) as u64;
        if have < want {
            s.take(want - have).read_to_end(&mut bytes).map_err(io)?;
        }
        match code {
            Some(200) => {}
            Some(401) => {
                return Err(
                    "it asks for a password; --watch sends none (serve /metrics without \
                     basic_auth_users to this client)"
                        .into(),
                );
            }
            code => {
                return Err(format!(
                    "answered status {}",
                    code.map_or_else(|| "-".into(), |c| c.to_string())
                ));
            }
        }
        Ok(String::from_utf8_lossy(&bytes[head..]).into_owned())
    }
}

/// The `tacho_finding` samples of a Prometheus text page.
pub fn findings(page: &str) -> Vec<ServerFinding> {
    let mut found: Vec<ServerFinding> = Vec::new();
    for line in page.lines() {
        let Some(rest) = line.strip_prefix("tacho_finding{") else {
            continue;
        };
        let Some(labels) = labels(rest) else {
            continue;
        };
        let get = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (Some(code), Some(subject)) = (get("code"), get("subject")) else {
            continue;
        };
        let f = ServerFinding {
            code,
            subject,
            message: get("severity").unwrap_or_default(),
        };
        if !found.contains(&f) {
            found.push(f);
        }
    }
    found
}

/// `name="value",…}` read up to the closing brace, values unescaped (`\\`, `\"`, `\n`);
/// `None` when malformed.
fn labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        match chars.peek()? {
            '}' => return Some(out),
            ',' => {
                chars.next();
                continue;
            }
            _ => {}
        }
        let mut name = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            name.push(c);
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        }
        out.push((name.trim().to_string(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn findings_are_read_with_their_labels_unescaped() {
        let page = "# HELP tacho_finding A finding\n# TYPE tacho_finding gauge\n\
tacho_finding{code=\"cpu_throttled\",subject=\"/web \\\"a\\\"\",severity=\"warning\"} 1\n\
tacho_finding{code=\"cpu_saturated\",subject=\"cpu\",severity=\"critical\"} 1\n\
tacho_finding_culprit_share_ratio{code=\"x\",subject=\"y\"} 0.5\n\
tacho_finding{code=\"broken\n";
        let f = findings(page);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(
            (
                f[0].code.as_str(),
                f[0].subject.as_str(),
                f[0].message.as_str()
            ),
            ("cpu_throttled", "/web \"a\"", "warning")
        );
        assert_eq!(f[1].code, "cpu_saturated");
    }

    #[test]
    fn only_http_is_watched() {
        let e = Remote::new("https://127.0.0.1:9101/metrics", Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("only http://"), "{e}");
        let e = Remote::new("ftp://h/", Duration::from_secs(1)).unwrap_err();
        assert!(e.starts_with("--watch "), "{e}");
    }

    proptest! {
        /// Any page is read without a panic.
        #[test]
        fn any_page(page in "(tacho_finding\\{([a-z]{0,5}=?\"?[^\n]{0,12}\"?,?){0,3}\\}? ?1?\n|.{0,30}\n){0,5}") {
            let lines = page.lines().filter(|l| l.starts_with("tacho_finding{")).count();
            prop_assert!(findings(&page).len() <= lines);
        }
    }
}
