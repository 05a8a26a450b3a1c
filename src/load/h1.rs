//! HTTP/1.1 in the clear, by hand: the request serialized once, written with one `write`, the
//! response's head parsed with httparse and its body read and dropped by its framing
//! (`Content-Length`, chunked, or up to the close), all in the worker's own task.
//!
//! Why not hyper here: hyper's client hands every request over a channel to the connection's
//! own task and back, and builds a `Request` (its header map cloned) and a `Response` for
//! each. At full speed against nginx on loopback that cost 4.5 µs of user CPU per request;
//! this path takes 2.3 µs (wrk 1.6 µs; medians of 4 runs, docs/benchmarks.md, "tacho load vs
//! wrk", session 18). hyper still carries HTTP/2 and https, where a hand-written client
//! would be a protocol (or a TLS session) of its own.
//!
//! Nothing of a response is kept: its head is parsed in place in the connection's buffer, its
//! body read into the same buffer and dropped, whatever its size. A response that is not
//! HTTP, or whose framing is broken, ends the exchange as such (the caller counts it by kind);
//! nothing here panics on what a server sends.

use hyper::Method;
use hyper::header::{HeaderMap, TRANSFER_ENCODING};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The connection's buffer at first; it grows for a longer response head, up to [`MAX_HEAD`].
const BUFFER: usize = 16 * 1024;

/// Longest response head read (status line and headers): a longer one is not taken for HTTP.
const MAX_HEAD: usize = 256 * 1024;

/// Most headers a response head may have (as hyper's default).
const MAX_HEADERS: usize = 100;

/// Whether requests with these headers can go this way: a `Transfer-Encoding` given by the
/// user asks for a body framing this path does not write (hyper's path does).
pub fn fits(headers: &HeaderMap) -> bool {
    !headers.contains_key(TRANSFER_ENCODING)
}

/// A request as it goes on the wire: its line, the headers (as given, `Host` among them),
/// `content-length` when there is a body and the headers do not say it, then the body.
pub fn request(method: &Method, path: &str, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() && !headers.contains_key(hyper::header::CONTENT_LENGTH) {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A response's head was not HTTP, or its body's framing was broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// A response head, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its length in bytes, up to and with the empty line.
    pub len: usize,
    pub status: u16,
    /// How its body ends.
    pub body: Body,
    /// The server closes the connection after it (`Connection: close`, HTTP/1.0 without
    /// keep-alive, or a body that ends with the connection).
    pub close: bool,
}

/// Parses the response head at the start of `buf` (`None`: not all of it yet), for a request
/// that was a `HEAD` or not (a `HEAD`'s answer has no body, whatever its headers say).
pub fn head(buf: &[u8], to_head: bool) -> Result<Option<Head>, Malformed> {
    // Left uninitialized: httparse fills what it uses (no 100 headers' worth of zeroes per
    // response, which showed in the profile).
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let len = match config.parse_response_with_uninit_headers(&mut response, buf, &mut headers) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Malformed),
    };
    let status = response.code.ok_or(Malformed)?;
    let http10 = response.version == Some(0);
    let (mut length, mut chunked, mut encoded) = (None, false, false);
    let (mut close, mut keep_alive) = (false, false);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(h.value).map_err(|_| Malformed)?;
            // A list of one value repeated is that value; two values are no length.
            for v in value.split(',') {
                let n: u64 = v.trim().parse().map_err(|_| Malformed)?;
                if length.is_some_and(|l| l != n) || !v.trim().bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Malformed);
                }
                length = Some(n);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Chunked only when it is the last coding applied.
            chunked = tokens(h.value)
                .last()
                .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for t in tokens(h.value) {
                close |= t.eq_ignore_ascii_case(b"close");
                keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let body = if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Length(0)
    } else if encoded {
        // A transfer coding overrides any length; one that does not end in chunked runs to
        // the close.
        if chunked {
            Body::Chunked(Chunked::Size {
                value: 0,
                digits: 0,
            })
        } else {
            Body::UntilClose
        }
    } else if let Some(n) = length {
        Body::Length(n)
    } else {
        Body::UntilClose
    };
    let close = close || (http10 && !keep_alive) || body == Body::UntilClose;
    Ok(Some(Head {
        len,
        status,
        body,
        close,
    }))
}

/// The comma-separated tokens of a header's value, trimmed, empty ones left out.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|b| *b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// How much of a response's body is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// This many bytes.
    Length(u64),
    /// Chunks, up to the last one and the trailers.
    Chunked(Chunked),
    /// Everything up to the server's close.
    UntilClose,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunked {
    /// In a chunk's size (hex digits so far).
    Size { value: u64, digits: u8 },
    /// After the size: spaces, or an extension, up to the CR.
    Extension { value: u64 },
    /// The LF after a chunk's size line.
    SizeLf { value: u64 },
    /// In a chunk's data, this many bytes left.
    Data(u64),
    /// The CR after a chunk's data.
    DataCr,
    /// The LF after a chunk's data.
    DataLf,
    /// At the start of a trailer line (or of the empty line that ends the body).
    TrailerStart,
    /// In a trailer line, up to its CR.
    Trailer,
    /// The LF after a trailer line's CR.
    TrailerLf,
    /// The LF after the empty line that ends the body.
    EndLf,
    /// The whole body has been read.
    Done,
}

impl Body {
    /// Takes what of `data` belongs to the body: how many bytes, and whether the body has
    /// ended with them (the rest of `data` is the next response's).
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, bool), Malformed> {
        match self {
            Body::Length(left) => {
                let n = usize::try_from(*left).map_or(data.len(), |l| l.min(data.len()));
                *left -= n as u64;
                Ok((n, *left == 0))
            }
            Body::UntilClose => Ok((data.len(), false)),
            Body::Chunked(state) => {
                let mut used = 0;
                while used < data.len() && *state != Chunked::Done {
                    used += state.step(&data[used..])?;
                }
                Ok((used, *state == Chunked::Done))
            }
        }
    }

    /// Whether the body is whole when the connection ends here.
    pub fn whole_at_close(&self) -> bool {
        matches!(self, Body::UntilClose | Body::Length(0)) || *self == Body::Chunked(Chunked::Done)
    }
}

impl Chunked {
    /// Takes one byte (or, in a chunk's data, as much of it as `data` holds): how many.
    fn step(&mut self, data: &[u8]) -> Result<usize, Malformed> {
        let b = data[0];
        *self = match *self {
            Chunked::Size { value, digits } => match (b as char).to_digit(16) {
                // Sixteen hex digits fill a u64; more would not fit.
                Some(d) if digits < 16 => Chunked::Size {
                    value: (value << 4) | u64::from(d),
                    digits: digits + 1,
                },
                Some(_) => return Err(Malformed),
                None if digits == 0 => return Err(Malformed),
                None if b == b'\r' => Chunked::SizeLf { value },
                None if b == b';' || b == b' ' || b == b'\t' => Chunked::Extension { value },
                None => return Err(Malformed),
            },
            Chunked::Extension { value } => match b {
                b'\r' => Chunked::SizeLf { value },
                b'\n' => return Err(Malformed),
                _ => Chunked::Extension { value },
            },
            Chunked::SizeLf { value } => match (b, value) {
                (b'\n', 0) => Chunked::TrailerStart,
                (b'\n', n) => Chunked::Data(n),
                _ => return Err(Malformed),
            },
            Chunked::Data(left) => {
                let n = usize::try_from(left).map_or(data.len(), |l| l.min(data.len()));
                let left = left - n as u64;
                *self = if left == 0 {
                    Chunked::DataCr
                } else {
                    Chunked::Data(left)
                };
                return Ok(n);
            }
            Chunked::DataCr if b == b'\r' => Chunked::DataLf,
            Chunked::DataLf if b == b'\n' => Chunked::Size {
                value: 0,
                digits: 0,
            },
            Chunked::DataCr | Chunked::DataLf => return Err(Malformed),
            Chunked::TrailerStart => match b {
                b'\r' => Chunked::EndLf,
                b'\n' => return Err(Malformed),
                _ => Chunked::Trailer,
            },
            Chunked::Trailer => match b {
                b'\r' => Chunked::TrailerLf,
                b'\n' => return Err(Malformed),
                _ => Chunked::Trailer,
            },
            Chunked::TrailerLf if b == b'\n' => Chunked::TrailerStart,
            Chunked::EndLf if b == b'\n' => Chunked::Done,
            Chunked::TrailerLf | Chunked::EndLf => return Err(Malformed),
            Chunked::Done => return Ok(0),
        };
        Ok(1)
    }
}

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The whole response was read: its status.
    Status(u16),
    /// What came back was not an HTTP response.
    NotHttp,
    /// The connection closed or broke, the response's framing was broken, or the server
    /// switched protocols unasked.
    Broken,
}

/// A keep-alive connection in the clear and what has been read from it and not yet used.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// `buf[start..end]` was read and is not used yet.
    start: usize,
    end: usize,
    /// The server said it closes, or the connection broke: it takes no more requests.
    done: bool,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
            done: false,
        }
    }

    /// Whether the connection takes no more requests: the server said it closes, it broke,
    /// or the server closed it while it was idle. The last is seen without a system call when
    /// the runtime has seen nothing arrive (what does arrive unasked is kept, for the next
    /// response to show as not HTTP).
    pub fn is_closed(&mut self) -> bool {
        if self.done {
            return true;
        }
        if self.end == self.buf.len() {
            return false;
        }
        match self.stream.try_read(&mut self.buf[self.end..]) {
            Ok(0) => self.done = true,
            Ok(n) => self.end += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => self.done = true,
        }
        self.done
    }

    /// Sends `request` (all its bytes, one write as a rule) and reads the whole response:
    /// its informational (1xx) heads skipped, its body dropped as it comes. Not to be used
    /// again after a cancelled exchange (a timeout): a response may be half read.
    pub async fn exchange(&mut self, request: &[u8], to_head: bool) -> Ended {
        if self.stream.write_all(request).await.is_err() {
            self.done = true;
            return Ended::Broken;
        }
        let ended = self.response(to_head).await;
        if !matches!(ended, Ended::Status(_)) {
            self.done = true;
        }
        ended
    }

    async fn response(&mut self, to_head: bool) -> Ended {
        let head = loop {
            match head(&self.buf[self.start..self.end], to_head) {
                Err(Malformed) => return Ended::NotHttp,
                Ok(None) => match self.fill().await {
                    Fill::Read => {}
                    Fill::Full => return Ended::NotHttp,
                    Fill::Closed => return Ended::Broken,
                },
                // Switching protocols, not asked for: nothing more here is HTTP/1.1.
                Ok(Some(h)) if h.status == 101 => return Ended::Broken,
                Ok(Some(h)) if (100..200).contains(&h.status) => self.start += h.len,
                Ok(Some(h)) => break h,
            }
        };
        self.start += head.len;
        let mut body = head.body;
        loop {
            let Ok((used, whole)) = body.feed(&self.buf[self.start..self.end]) else {
                return Ended::Broken;
            };
            self.start += used;
            if whole {
                break;
            }
            match self.fill().await {
                Fill::Read => {}
                Fill::Full => return Ended::Broken,
                Fill::Closed if body.whole_at_close() => break,
                Fill::Closed => return Ended::Broken,
            }
        }
        if head.close {
            self.done = true;
        }
        Ended::Status(head.status)
    }

    /// Reads more after what is buffered and not used (moved to the buffer's start, the
    /// buffer grown up to [`MAX_HEAD`] when that fills it).
    async fn fill(&mut self) -> Fill {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
            if self.end == self.buf.len() {
                if self.buf.len() >= MAX_HEAD {
                    return Fill::Full;
                }
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        match self.stream.read(&mut self.buf[self.end..]).await {
            Ok(0) | Err(_) => Fill::Closed,
            Ok(n) => {
                self.end += n;
                Fill::Read
            }
        }
    }
}

/// What a read brought.
enum Fill {
    Read,
    /// The buffer is full of one response head, longer than [`MAX_HEAD`].
    Full,
    /// The connection ended (closed or broken).
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parsed(text: &str) -> Head {
        head(text.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn a_head_says_its_status_and_how_its_body_ends() {
        let h = parsed("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nhello, world\n");
        assert_eq!(
            (h.len, h.status, h.body, h.close),
            (39, 200, Body::Length(13), false)
        );
        let h = parsed(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
        );
        assert!(matches!(h.body, Body::Chunked(_)));
        let h = parsed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!((h.body, h.close), (Body::UntilClose, true));
        let h =
            parsed("HTTP/1.1 503 No\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n");
        assert_eq!((h.status, h.close), (503, true));
        let h = parsed("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
        assert!(h.close);
        let h = parsed("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n");
        assert!(!h.close);
        for no_body in [
            "HTTP/1.1 204 No\r\nContent-Length: 9\r\n\r\n",
            "HTTP/1.1 304 No\r\n\r\n",
        ] {
            assert_eq!(parsed(no_body).body, Body::Length(0));
        }
        let to_head = head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true);
        assert_eq!(to_head.unwrap().unwrap().body, Body::Length(0));
        assert_eq!(
            parsed("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n").body,
            Body::Length(7)
        );
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 7, 8\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +7\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n",
            "SSH-2.0-OpenSSH_9.2\r\n",
        ] {
            assert_eq!(head(bad.as_bytes(), false), Err(Malformed), "{bad}");
        }
        assert_eq!(head(b"HTTP/1.1 200 OK\r\nContent-Le", false), Ok(None));
    }

    #[test]
    fn a_request_is_its_line_headers_length_and_body() {
        let mut headers = HeaderMap::new();
        headers.insert(hyper::header::HOST, "example.com:8080".parse().unwrap());
        let get = request(&Method::GET, "/a?b=1", &headers, b"");
        assert_eq!(
            get,
            b"GET /a?b=1 HTTP/1.1\r\nhost: example.com:8080\r\n\r\n"
        );
        let post = request(&Method::POST, "/", &headers, b"{}");
        assert_eq!(
            post,
            b"POST / HTTP/1.1\r\nhost: example.com:8080\r\ncontent-length: 2\r\n\r\n{}"
        );
    }

    /// `body` in chunks of the given sizes (cycled), with extensions and a trailer when asked.
    fn chunked(body: &[u8], sizes: &[usize], extras: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].clamp(1, rest.len());
            i += 1;
            let ext = if extras { ";name=\"v\"" } else { "" };
            out.extend_from_slice(format!("{n:X}{ext}\r\n").as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        out.extend_from_slice(if extras {
            b"0\r\nx-sum: 1\r\n\r\n"
        } else {
            b"0\r\n\r\n"
        });
        out
    }

    /// Feeds `wire` to a fresh chunked body in pieces cut at `cuts`: the bytes taken and
    /// whether it ended, or the error.
    fn feed_in_pieces(wire: &[u8], cuts: &[usize]) -> Result<(usize, bool), Malformed> {
        let mut body = Body::Chunked(Chunked::Size {
            value: 0,
            digits: 0,
        });
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
        bounds.push(wire.len());
        bounds.sort_unstable();
        let mut taken = 0;
        for to in bounds {
            // Bytes not taken stay for the next read, as in the connection's buffer.
            let (used, whole) = body.feed(&wire[taken..to])?;
            taken += used;
            if whole {
                return Ok((taken, true));
            }
        }
        Ok((taken, false))
    }

    proptest! {
        #[test]
        fn a_chunked_body_ends_exactly_where_it_ends_however_it_arrives(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            sizes in proptest::collection::vec(1usize..300, 1..5),
            extras in any::<bool>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
            next in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let wire = chunked(&body, &sizes, extras);
            let mut with_next = wire.clone();
            with_next.extend_from_slice(&next);
            // The next response's bytes after it are left alone.
            prop_assert_eq!(feed_in_pieces(&with_next, &cuts), Ok((wire.len(), true)));
            // Cut short, it is not whole, and not whole at a close either.
            if let Some(short) = wire.len().checked_sub(1) {
                prop_assert_eq!(feed_in_pieces(&wire[..short], &cuts), Ok((short, false)));
            }
        }

        #[test]
        fn any_bytes_as_a_body_or_a_head_end_in_an_answer_not_a_panic(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            text in concat!(
                "(HTTP/1\\.[01] [0-9]{3} [A-Za-z ]{0,8}\r\n",
                "([A-Za-z-]{1,16}: [ -~]{0,12}\r\n){0,4}\r?\n?)?[ -~\r\n]{0,40}"
            ),
            length in any::<u64>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            if let Ok((taken, _)) = feed_in_pieces(&data, &cuts) {
                prop_assert!(taken <= data.len());
            }
            let mut body = Body::Length(length);
            let (taken, whole) = body.feed(&data).unwrap();
            prop_assert_eq!(taken as u64, length.min(data.len() as u64));
            prop_assert_eq!(whole, length <= data.len() as u64);
            for to_head in [false, true] {
                if let Ok(Some(h)) = head(text.as_bytes(), to_head) {
                    prop_assert!(h.len <= text.len());
                }
                let _ = head(&data, to_head);
            }
        }
    }
}
