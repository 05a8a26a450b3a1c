//! `--web-config FILE`: TLS and basic authentication for `/metrics`, in the YAML format of the
//! Prometheus exporter toolkit that node_exporter reads, so a fleet's scrape configuration
//! carries over:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: tacho.crt      # PEM; relative paths are relative to this file
//!   key_file: tacho.key
//! basic_auth_users:
//!   prometheus: $2y$10$…      # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Options of that format tacho does not carry out (client certificates, cipher and version
//! choices, HTTP headers) are refused by name rather than ignored. Checking a bcrypt hash costs
//! tens of milliseconds of CPU by design, so a client could make tacho spend a core, or queue
//! so many checks that the scraper waits behind them. So: a credential that passed is
//! remembered by its SHA-256 digest in a table of its own, which wrong ones never evict (a
//! scraper pays bcrypt once, then a hash); wrong ones are remembered in another, bounded
//! table; checks run one at a time, and at most [`WAITING`] may be under way or waiting, at
//! most one per client address: any other request that would need one is answered at once
//! with 429. A flood of wrong passwords costs at most one core and never delays a scraper
//! whose credential has passed before.

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
#[cfg(feature = "tls")]
use rustls::pki_types::pem::PemObject;
#[cfg(feature = "tls")]
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest web configuration file read (a real one is a few hundred bytes).
const FILE_LIMIT: u64 = 1 << 20;
/// Wrong credentials remembered; the table is emptied when full (a flood of distinct headers).
const REMEMBERED: usize = 256;
/// Credentials that passed, remembered; only a client that knows a password can add one, so
/// beyond this a new one is checked each time rather than another forgotten.
const REMEMBERED_GOOD: usize = 64;
/// bcrypt checks under way or waiting for their turn, at most (one per client address).
pub(crate) const WAITING: usize = 4;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// A server's TLS configuration.
#[cfg(feature = "tls")]
pub type Tls = Arc<rustls::ServerConfig>;
/// None can be made in a build without the `tls` feature.
#[cfg(not(feature = "tls"))]
#[derive(Clone)]
pub enum Tls {}

/// What `/metrics` requires of a client.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// Serve over TLS with this configuration.
    pub tls: Option<Tls>,
    /// Require one of these users (name → bcrypt hash), when any.
    pub auth: Option<Arc<Auth>>,
}

/// Basic authentication against bcrypt hashes, with the verdicts remembered.
#[derive(Default)]
pub struct Auth {
    users: BTreeMap<String, String>,
    /// SHA-256 of `Authorization` headers that passed.
    good: Mutex<HashSet<[u8; 32]>>,
    /// SHA-256 of headers that did not.
    bad: Mutex<HashSet<[u8; 32]>>,
    /// Addresses of clients whose check is under way or waiting.
    waiting: Mutex<HashSet<IpAddr>>,
    /// Held while a hash is checked: one check at a time.
    checking: Mutex<()>,
}

/// What a request's credentials earn it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Verdict {
    /// A user with the right password.
    Allowed,
    /// No credentials, or wrong ones.
    Denied,
    /// Not checked: a check of this address's is under way, or [`WAITING`] are.
    Busy,
}

impl WebConfig {
    /// Reads and checks `path`; every problem is one line naming the option and the fix.
    pub fn load(path: &Path) -> Result<WebConfig> {
        use std::io::Read;
        let shown = path.display();
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(FILE_LIMIT).read_to_string(&mut text))
            .with_context(|| format!("cannot read --web-config {shown}"))?;
        let file: File = serde_yaml_ng::from_str(&text).map_err(|e| {
            anyhow!(
                "--web-config {shown}: {e}; tacho takes tls_server_config (cert_file, key_file) \
                 and basic_auth_users"
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file
            .tls_server_config
            .map(|t| tls_config(&dir.join(t.cert_file), &dir.join(t.key_file)))
            .transpose()
            .with_context(|| format!("--web-config {shown}"))?;
        let auth = match file.basic_auth_users {
            Some(users) if !users.is_empty() => {
                for (user, hash) in &users {
                    if !is_bcrypt(hash) {
                        bail!(
                            "--web-config {shown}: the password of {:?} is not a bcrypt hash; \
                             make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'",
                            crate::text::Escaped(user).to_string()
                        );
                    }
                }
                Some(Arc::new(Auth {
                    users,
                    ..Auth::default()
                }))
            }
            _ => None,
        };
        if tls.is_none() && auth.is_some() {
            eprintln!(
                "warning: --web-config asks for passwords without TLS: they cross the network \
                 in the clear; add tls_server_config"
            );
        }
        Ok(WebConfig { tls, auth })
    }
}

/// `$2a$`, `$2b$` or `$2y$`, a cost and 53 characters of salt and hash: 60 in all.
fn is_bcrypt(hash: &str) -> bool {
    hash.len() == 60 && ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p))
}

#[cfg(feature = "tls")]
fn tls_config(cert: &Path, key: &Path) -> Result<Tls> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|e| anyhow!("cert_file {}: {e}", cert.display()))?;
    if certs.is_empty() {
        bail!("cert_file {} holds no PEM certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow!("key_file {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("cannot set up TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| anyhow!("the certificate and key do not make a TLS identity: {e}"))?;
    Ok(Arc::new(config))
}

#[cfg(not(feature = "tls"))]
fn tls_config(_: &Path, _: &Path) -> Result<Tls> {
    Err(crate::features::Missing(crate::features::Feature::Tls).into())
}

impl Auth {
    /// What an `Authorization` header value from a client at `peer` earns.
    pub fn verdict(&self, header: Option<&[u8]>, peer: IpAddr) -> Verdict {
        let Some(header) = header else {
            return Verdict::Denied;
        };
        let digest: [u8; 32] = Sha256::digest(header).into();
        if lock(&self.good).contains(&digest) {
            return Verdict::Allowed;
        }
        if lock(&self.bad).contains(&digest) {
            return Verdict::Denied;
        }
        let Some((user, password)) = credentials(header) else {
            return Verdict::Denied;
        };
        let Some(hash) = self.users.get(&user) else {
            return Verdict::Denied;
        };
        let Some(_turn) = Turn::take(&self.waiting, peer) else {
            return Verdict::Busy;
        };
        let right = {
            let _one = lock(&self.checking);
            // Another connection may have checked the same header meanwhile.
            if lock(&self.good).contains(&digest) {
                return Verdict::Allowed;
            }
            if lock(&self.bad).contains(&digest) {
                return Verdict::Denied;
            }
            bcrypt::verify(password, hash).unwrap_or(false)
        };
        let (table, limit) = if right {
            (&self.good, REMEMBERED_GOOD)
        } else {
            (&self.bad, REMEMBERED)
        };
        let mut table = lock(table);
        if table.len() >= limit && !right {
            table.clear();
        }
        if table.len() < limit {
            table.insert(digest);
        }
        if right {
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}

/// A place among the checks under way or waiting, given back on drop.
struct Turn<'a> {
    waiting: &'a Mutex<HashSet<IpAddr>>,
    peer: IpAddr,
}

impl<'a> Turn<'a> {
    /// A place for `peer`, unless it holds one already or [`WAITING`] are taken. An IPv6
    /// client counts by its /64, which one host is usually given whole.
    fn take(waiting: &'a Mutex<HashSet<IpAddr>>, peer: IpAddr) -> Option<Turn<'a>> {
        let peer = match peer {
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
            v4 => v4,
        };
        let mut w = lock(waiting);
        if w.len() >= WAITING || !w.insert(peer) {
            return None;
        }
        Some(Turn { waiting, peer })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        lock(self.waiting).remove(&self.peer);
    }
}

/// The user and password of a `Basic` header.
fn credentials(header: &[u8]) -> Option<(String, String)> {
    let encoded = header.strip_prefix(b"Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim_ascii())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(password: &str) -> Auth {
        Auth {
            users: [("prom".to_string(), bcrypt::hash(password, 4).unwrap())].into(),
            ..Auth::default()
        }
    }

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn basic(user_pw: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pw);
        format!("Basic {b64}").into_bytes()
    }

    #[test]
    fn the_right_password_passes_and_others_do_not() {
        let a = auth("s3cret");
        let v = |h: &[u8]| a.verdict(Some(h), HERE);
        assert_eq!(v(&basic("prom:s3cret")), Verdict::Allowed);
        assert_eq!(v(&basic("prom:s3cret")), Verdict::Allowed, "remembered");
        assert_eq!(v(&basic("prom:wrong")), Verdict::Denied);
        assert_eq!(v(&basic("other:s3cret")), Verdict::Denied);
        assert_eq!(v(b"Bearer x"), Verdict::Denied);
        assert_eq!(v(b"Basic !!!"), Verdict::Denied);
        assert_eq!(a.verdict(None, HERE), Verdict::Denied);
    }

    #[test]
    fn checks_are_limited_per_address_and_in_all_and_a_known_credential_skips_them() {
        let a = auth("s3cret");
        assert_eq!(
            a.verdict(Some(&basic("prom:s3cret")), HERE),
            Verdict::Allowed
        );
        // A check of this address's is under way: another waits for nothing.
        let turn = Turn::take(&a.waiting, HERE).unwrap();
        assert_eq!(a.verdict(Some(&basic("prom:guess")), HERE), Verdict::Busy);
        // WAITING checks of other addresses: a new address waits for nothing either.
        let others: Vec<Turn> = (1..WAITING as u8)
            .map(|i| Turn::take(&a.waiting, IpAddr::from([10, 0, 0, i])).unwrap())
            .collect();
        let stranger = IpAddr::from([10, 0, 1, 1]);
        assert_eq!(
            a.verdict(Some(&basic("prom:guess")), stranger),
            Verdict::Busy
        );
        // Neither waits a credential that passed before.
        assert_eq!(
            a.verdict(Some(&basic("prom:s3cret")), HERE),
            Verdict::Allowed
        );
        drop((turn, others));
        // One /64 is one client.
        let net = |i: u16| IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, i]);
        let first = Turn::take(&a.waiting, net(1));
        assert!(first.is_some() && Turn::take(&a.waiting, net(2)).is_none());
        drop(first);
        assert_eq!(
            a.verdict(Some(&basic("prom:guess")), stranger),
            Verdict::Denied
        );
        // Wrong ones by the thousand do not evict the right one.
        for i in 0..(2 * REMEMBERED) {
            lock(&a.bad).clear();
            let _ = a.verdict(Some(&basic(&format!("prom:{i}"))), HERE);
        }
        assert!(lock(&a.good).len() == 1);
    }

    /// A build without TLS refuses a file that asks for it rather than serving in the clear.
    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_is_refused_without_the_tls_feature() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(
            &p,
            "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n",
        )
        .unwrap();
        let e = format!("{:#}", WebConfig::load(&p).map(|_| ()).unwrap_err());
        assert!(e.starts_with("--web-config "), "{e}");
        assert!(e.contains("built without the `tls` feature"), "{e}");
    }

    #[test]
    fn bad_files_are_one_line_naming_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let p = dir.path().join("web.yml");
            std::fs::write(&p, text).unwrap();
            format!("{:#}", WebConfig::load(&p).map(|_| ()).unwrap_err())
        };
        let e = write("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n");
        assert!(e.contains("client_ca_file"), "{e}");
        let e = write("basic_auth_users:\n  prom: plaintext\n");
        assert!(
            e.contains("not a bcrypt hash") && !e.contains("plaintext"),
            "{e}"
        );
        #[cfg(feature = "tls")]
        {
            let e =
                write("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n");
            assert!(e.contains("missing.crt"), "{e}");
        }
        assert!(write("[1, 2").contains("--web-config"));
        for e in [
            write("tls_server_config:\n  cert_file: a\n"),
            write("basic_auth_users:\n  prom: plaintext\n"),
        ] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_header_is_answered_without_panic(header in proptest::collection::vec(0u8.., 0..80)) {
            let a = Auth::default();
            let here = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
            proptest::prop_assert_eq!(a.verdict(Some(&header), here), Verdict::Denied);
        }
    }
}
