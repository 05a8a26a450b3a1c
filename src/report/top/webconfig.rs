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
//! tens of milliseconds of CPU by design, so a client could make tacho spend a core: checks run
//! one at a time, and each distinct `Authorization` header's verdict is remembered (a bounded
//! table), so a scraper pays once and a flood of wrong passwords costs at most one core.

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest web configuration file read (a real one is a few hundred bytes).
const FILE_LIMIT: u64 = 1 << 20;
/// Verdicts remembered; the table is emptied when full (a flood of distinct headers).
const REMEMBERED: usize = 256;

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

/// What `/metrics` requires of a client.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// Serve over TLS with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Require one of these users (name → bcrypt hash), when any.
    pub auth: Option<Arc<Auth>>,
}

/// Basic authentication against bcrypt hashes, with the verdicts remembered.
pub struct Auth {
    users: BTreeMap<String, String>,
    verdicts: Mutex<HashMap<Vec<u8>, bool>>,
    /// Held while a hash is checked: one check at a time.
    checking: Mutex<()>,
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
                    verdicts: Mutex::default(),
                    checking: Mutex::default(),
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

fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
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

impl Auth {
    /// Whether an `Authorization` header value names a user with the right password.
    pub fn allows(&self, header: Option<&[u8]>) -> bool {
        let Some(header) = header else {
            return false;
        };
        if let Some(known) = lock(&self.verdicts).get(header) {
            return *known;
        }
        let verdict = {
            let _one = lock(&self.checking);
            // Another connection may have checked the same header meanwhile.
            match lock(&self.verdicts).get(header) {
                Some(known) => *known,
                None => self.check(header),
            }
        };
        let mut verdicts = lock(&self.verdicts);
        if verdicts.len() >= REMEMBERED {
            verdicts.clear();
        }
        verdicts.insert(header.to_vec(), verdict);
        verdict
    }

    fn check(&self, header: &[u8]) -> bool {
        let Some(encoded) = header.strip_prefix(b"Basic ") else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim_ascii())
        else {
            return false;
        };
        let Ok(text) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = text.split_once(':') else {
            return false;
        };
        self.users
            .get(user)
            .is_some_and(|hash| bcrypt::verify(password, hash).unwrap_or(false))
    }
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
            verdicts: Mutex::default(),
            checking: Mutex::default(),
        }
    }

    fn basic(user_pw: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pw);
        format!("Basic {b64}").into_bytes()
    }

    #[test]
    fn the_right_password_passes_and_others_do_not() {
        let a = auth("s3cret");
        assert!(a.allows(Some(&basic("prom:s3cret"))));
        assert!(a.allows(Some(&basic("prom:s3cret"))), "remembered");
        assert!(!a.allows(Some(&basic("prom:wrong"))));
        assert!(!a.allows(Some(&basic("other:s3cret"))));
        assert!(!a.allows(Some(b"Bearer x")));
        assert!(!a.allows(Some(b"Basic !!!")));
        assert!(!a.allows(None));
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
        let e = write("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n");
        assert!(e.contains("missing.crt"), "{e}");
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
            let a = Auth {
                users: BTreeMap::new(),
                verdicts: Mutex::default(),
                checking: Mutex::default(),
            };
            proptest::prop_assert!(!a.allows(Some(&header)));
        }
    }
}
