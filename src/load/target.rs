//! The URL `tacho load` sends to: `http://` or `https://HOST[:PORT][/PATH]`, the only place
//! requests go.

use std::net::{SocketAddr, ToSocketAddrs};

/// A checked target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// `HOST:PORT` as the `Host` header names it (the port left out when it was).
    pub authority: String,
    /// The host, as given (a name, or an address; IPv6 without brackets).
    pub host: String,
    /// The port, 80 (443 for https) unless given.
    pub port: u16,
    /// `https://`: the connection is TLS.
    pub tls: bool,
    /// The path and query, `/` when the URL has none.
    pub path: String,
}

impl Target {
    /// Reads an `http://` or `https://` URL; any other scheme, or none, is refused on one
    /// line.
    pub fn parse(url: &str) -> Result<Target, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| {
            format!(
                "{:?} is not a URL ({e}); give http://HOST[:PORT]/PATH",
                esc(url)
            )
        })?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(format!(
                    "{:?}: the scheme {:?} is not supported; give an http:// or https:// URL",
                    esc(url),
                    esc(other)
                ));
            }
            None => {
                return Err(format!(
                    "{:?} has no scheme; give an http:// URL, e.g. http://{}",
                    esc(url),
                    esc(url)
                ));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{:?} names no host; give http://HOST[:PORT]/PATH", esc(url)))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{:?} carries a user name or password; tacho load sends none, give the URL \
                 without it (add --header 'Authorization: …' if the service needs one)",
                esc(url)
            ));
        }
        let port = match authority.as_str()[authority.host().len()..].strip_prefix(':') {
            None if tls => 443,
            None => 80,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                format!(
                    "{:?}: the port {:?} is not one from 1 to 65535",
                    esc(url),
                    esc(p)
                )
            })?,
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if host.is_empty() {
            return Err(format!(
                "{:?} names no host; give http://HOST[:PORT]/PATH",
                esc(url)
            ));
        }
        Ok(Target {
            url: url.to_string(),
            authority: authority.as_str().to_string(),
            host,
            port,
            tls,
            path: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
        })
    }

    /// `scheme://authority`, what requests to the same connections share.
    pub fn origin(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.authority
        )
    }

    /// The target's addresses, resolved once (the run connects to the first).
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        let mut addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| {
                format!(
                    "cannot resolve {:?}: {e}; check the host name",
                    esc(&self.host)
                )
            })?;
        addrs.next().ok_or_else(|| {
            format!(
                "{:?} resolves to no address; check the host name",
                esc(&self.host)
            )
        })
    }
}

/// Text from the command line as it may be shown in an error (control characters escaped).
fn esc(s: &str) -> String {
    crate::text::Escaped(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn http_urls_read_with_their_port_and_path() {
        let t = Target::parse("http://127.0.0.1:8080/a?b=1").unwrap();
        assert_eq!(
            (
                t.host.as_str(),
                t.port,
                t.path.as_str(),
                t.authority.as_str()
            ),
            ("127.0.0.1", 8080, "/a?b=1", "127.0.0.1:8080")
        );
        let t = Target::parse("http://example.test").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = Target::parse("http://[::1]:81/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        let t = Target::parse("https://example.test/x").unwrap();
        assert_eq!(
            (t.port, t.tls, t.origin().as_str()),
            (443, true, "https://example.test")
        );
    }

    #[test]
    fn other_schemes_and_shapes_are_refused() {
        for (url, says) in [
            ("ftp://h/x", "scheme \"ftp\""),
            ("h:80/x", "not a URL"),
            ("h:80", "has no scheme"),
            ("/x", "has no scheme"),
            ("http://u:p@h/", "password"),
            ("http://h:99999/", "port \"99999\""),
            ("http://h:0/", "port \"0\""),
            ("", "not a URL"),
        ] {
            let e = Target::parse(url).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    proptest! {
        /// Any text is a target or one line saying why not.
        #[test]
        fn any_text(url in "(http://)?.{0,30}") {
            if let Err(e) = Target::parse(&url) {
                prop_assert!(!e.contains('\n'));
            }
        }
    }
}
