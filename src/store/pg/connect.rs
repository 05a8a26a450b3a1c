//! From a `postgres://` URL to a connection: the URL parsed by the `postgres` crate, what it
//! leaves out taken from libpq's variables and password file, the form of it shown in
//! messages, and which transport may carry the password.
//!
//! - **Shown URL.** Messages never show the URL as typed: they show one rebuilt from the
//!   parsed configuration, with `***` for a password. A password the parser found, however it
//!   was written (repeated, percent-encoded key), is never in that text, because the text
//!   never held it.
//! - **Password only encrypted.** libpq's default `sslmode=prefer` falls back to plain TCP
//!   when the server says it has no TLS, and then sends the password (or a SCRAM exchange an
//!   eavesdropper can attack) in the open. Here a password over TCP needs TLS unless the URL
//!   says `sslmode=disable`; a Unix socket is local and never uses TLS (as libpq).
//! - **Unix sockets.** A directory as the host (`?host=/var/run/postgresql`, a `%2F`-encoded
//!   host, `PGHOST=/dir`) connects to the socket in it without TLS, so peer authentication
//!   works on the database host.

use super::pgpass;
use anyhow::{Result, anyhow, bail};
use postgres::config::{Host, SslMode};
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use std::fmt::Write as _;
use std::str::FromStr;

/// A URL parsed and completed from the environment, ready to connect.
pub(super) struct Target {
    config: Config,
    /// The configuration as a URL without its password, for messages.
    pub(super) shown: String,
}

impl Target {
    /// Parses `url` and fills in what libpq would take from the environment.
    pub(super) fn parse(url: &str) -> Result<Target> {
        // Not echoed: a URL that does not parse cannot be shown without its password.
        let mut config = Config::from_str(url).map_err(|e| {
            anyhow!(
                "the URL given is not a usable PostgreSQL URL ({e}); write it as \
                 postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require] \
                 or, for a Unix socket, postgres:///DATABASE?host=/var/run/postgresql"
            )
        })?;
        fill_from_env(url, &mut config);
        let shown = shown(&config);
        Ok(Target { config, shown })
    }

    /// Connects over the transport the hosts name: a Unix socket without TLS; TCP with TLS
    /// as `sslmode` says, and always with TLS when a password is to be sent, unless
    /// `sslmode=disable`.
    pub(super) fn connect(mut self) -> Result<(Client, String)> {
        let shown = self.shown;
        let config = &mut self.config;
        // A server that does not answer (a dropped route) is an error, not a hang: a recorder
        // keeps sampling into its backlog meanwhile. A URL's connect_timeout wins.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        // A `hostaddr` makes every connection TCP, whatever the host says.
        let tcp = !config.get_hostaddrs().is_empty()
            || config.get_hosts().iter().any(|h| matches!(h, Host::Tcp(_)));
        let socket = config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .any(|h| matches!(h, Host::Unix(_)));
        if tcp && socket {
            bail!(
                "{shown} names both a Unix socket directory and TCP hosts; they need different \
                 security (TLS for TCP only): name one kind"
            );
        }
        let client = if socket {
            config.ssl_mode(SslMode::Disable);
            config.connect(NoTls)
        } else {
            if config.get_password().is_some() && config.get_ssl_mode() == SslMode::Prefer {
                config.ssl_mode(SslMode::Require);
            }
            config.connect(tls()?)
        };
        let client = client.map_err(|e| connect_error(&shown, config, &e))?;
        Ok((client, shown))
    }
}

/// `url` as messages show it: rebuilt from its parsed configuration with `***` for any
/// password, so no spelling of the password in the text can reach the message. A URL that
/// does not parse is not shown at all.
pub fn redact(url: &str) -> String {
    match Config::from_str(url) {
        Ok(config) => shown(&config),
        Err(_) => "the PostgreSQL URL given (not shown: it does not parse and may hold a password)"
            .to_owned(),
    }
}

/// `postgres://USER[:***]@HOST[:PORT],…/DATABASE[?host=/SOCKET/DIR][&sslmode=…]`.
fn shown(config: &Config) -> String {
    let mut out = String::from("postgres://");
    if let Some(user) = config.get_user() {
        out.push_str(user);
    }
    if config.get_password().is_some() {
        out.push_str(":***");
    }
    if config.get_user().is_some() || config.get_password().is_some() {
        out.push('@');
    }
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied();
    let mut sockets = Vec::new();
    let mut tcp = Vec::new();
    for (i, host) in config.get_hosts().iter().enumerate() {
        match host {
            Host::Tcp(name) => tcp.push(match port(i) {
                Some(p) => format!("{name}:{p}"),
                None => name.clone(),
            }),
            Host::Unix(dir) => sockets.push(dir.display().to_string()),
        }
    }
    out.push_str(&tcp.join(","));
    out.push('/');
    out.push_str(config.get_dbname().unwrap_or_default());
    let mut query = Vec::new();
    for dir in sockets {
        query.push(format!("host={dir}"));
    }
    if let (Some(p), true) = (port(0), tcp.is_empty()) {
        query.push(format!("port={p}"));
    }
    match config.get_ssl_mode() {
        SslMode::Disable => query.push("sslmode=disable".into()),
        SslMode::Require => query.push("sslmode=require".into()),
        _ => {}
    }
    if !query.is_empty() {
        let _ = write!(out, "?{}", query.join("&"));
    }
    out
}

/// TLS for TCP connections, with rustls (no OpenSSL in the binary). Unlike libpq, the
/// server's certificate is always verified against the system's CA store (/etc/ssl/certs):
/// tacho sends results and a password, so an unverified server is no better than none.
/// `sslmode=disable` is the choice for a trusted network without certificates.
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable or malformed system certificates are left out; the rest still verify.
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// What libpq takes from the environment and the password file when the URL leaves it out,
/// and the `postgres` crate does not: `PGHOST` (a directory: a Unix socket; without it the local
/// server's socket, as libpq, else localhost), `PGPORT`,
/// `PGDATABASE`, `PGUSER` (else the name of the effective user), `PGSSLMODE`, then `PGPASSWORD`, then
/// `PGPASSFILE` or `~/.pgpass`.
fn fill_from_env(url: &str, config: &mut Config) {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if config.get_ports().is_empty()
        && let Some(port) = var("PGPORT").and_then(|p| p.parse().ok())
    {
        config.port(port);
    }
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        let port = config.get_ports().first().copied().unwrap_or(5432);
        // `Config::host` takes a name starting with `/` as a socket directory.
        let host = var("PGHOST")
            .or_else(|| local_socket_dir(port))
            .unwrap_or_else(|| "localhost".into());
        config.host(&host);
    }
    if config.get_user().is_none() {
        let user = var("PGUSER")
            .or_else(login_name)
            .unwrap_or_else(|| "postgres".into());
        config.user(&user);
    }
    if config.get_dbname().is_none()
        && let Some(db) = var("PGDATABASE")
    {
        config.dbname(&db);
    }
    // Only where the URL chose nothing (the crate's default is `prefer`).
    if !url.contains("sslmode=")
        && config.get_ssl_mode() == SslMode::Prefer
        && let Some(mode) = var("PGSSLMODE").and_then(|m| ssl_mode(&m))
    {
        config.ssl_mode(mode);
    }
    if config.get_password().is_some() {
        return;
    }
    if let Some(pw) = var("PGPASSWORD") {
        config.password(pw);
    } else if let Some(pw) = password_file(config) {
        config.password(pw);
    }
}

/// The local server's socket directory when no host is named, as libpq on Debian, if the
/// socket for `port` is there; else the caller uses TCP to localhost, as before sockets were
/// supported. Not `/tmp` (libpq's upstream default): any user can put a socket there and be
/// sent the password.
fn local_socket_dir(port: u16) -> Option<String> {
    let dir = "/var/run/postgresql";
    let socket = std::fs::symlink_metadata(format!("{dir}/.s.PGSQL.{port}")).ok()?;
    std::os::unix::fs::FileTypeExt::is_socket(&socket.file_type()).then(|| dir.to_owned())
}

/// The name of the user tacho runs as, which libpq logs in as by default (and peer
/// authentication over a socket checks): from the password database, not `$USER`, which
/// `sudo` and `su` may leave as the caller's.
fn login_name() -> Option<String> {
    let mut entry = std::mem::MaybeUninit::<libc::passwd>::uninit();
    let mut found = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: every pointer is valid for the call: `entry` for one passwd, `buf` for its
    // length, `found` for one pointer; the strings it fills point into `buf`, read below while
    // `buf` lives.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            entry.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded and set `found` to `entry`, so it is initialised and
    // `pw_name` is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr((*found).pw_name) };
    name.to_str().ok().map(str::to_owned)
}

/// libpq's sslmode words that the `postgres` crate has; `verify-*` are `require` here, as
/// this store always verifies the server's certificate.
fn ssl_mode(word: &str) -> Option<SslMode> {
    match word {
        "disable" => Some(SslMode::Disable),
        "allow" | "prefer" => Some(SslMode::Prefer),
        "require" | "verify-ca" | "verify-full" => Some(SslMode::Require),
        _ => None,
    }
}

/// The password for this connection from the password file; a file that is not used is
/// said once on stderr (libpq warns the same way).
fn password_file(config: &Config) -> Option<String> {
    let path = pgpass::path()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default();
    let want = pgpass::Want {
        host: &host,
        port: &port,
        database: config.get_dbname().unwrap_or(user),
        user,
    };
    match pgpass::lookup(&path, &want) {
        Ok(found) => found,
        Err(note) => {
            eprintln!("note: {}", crate::text::Escaped(&note.to_string()));
            None
        }
    }
}

/// A connection failure as one line saying what went wrong and what to do.
fn connect_error(shown: &str, config: &Config, e: &postgres::Error) -> anyhow::Error {
    let code = e.code();
    if code == Some(&SqlState::INVALID_PASSWORD)
        || code == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
    {
        return anyhow!(
            "PostgreSQL at {shown} refused the login ({}); check the user and password in the \
             URL or PGPASSWORD (over a Unix socket, peer authentication needs a role named as \
             the system user)",
            e.as_db_error()
                .map_or("authentication failed", |d| d.message())
        );
    }
    if code == Some(&SqlState::INVALID_CATALOG_NAME) {
        return anyhow!(
            "PostgreSQL at {shown} has no such database; create it (createdb) or fix the URL"
        );
    }
    let text = super::error_chain(e);
    if text.contains("server does not support TLS") {
        let why = if config.get_password().is_some() {
            "tacho sends a password only over TLS"
        } else {
            "the URL asks for TLS"
        };
        return anyhow!(
            "PostgreSQL at {shown} offers no TLS, and {why}; turn on ssl in the server's \
             postgresql.conf, connect through its Unix socket (?host=/var/run/postgresql), or, \
             on a trusted network only, add sslmode=disable to the URL"
        );
    }
    if text.contains("certificate") || text.contains("TLS") {
        return anyhow!(
            "TLS to PostgreSQL at {shown} failed ({text}); add the server's CA to the system \
             store (/usr/local/share/ca-certificates, update-ca-certificates) or, on a trusted \
             network only, add sslmode=disable to the URL"
        );
    }
    anyhow!(
        "cannot reach PostgreSQL at {shown} ({text}); check the host and port and that the \
         server is running"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://u:s3cret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h:5432/db");
        assert_eq!(
            redact("postgres://h/db?password=s3cret&sslmode=disable"),
            "postgres://:***@h:5432/db?sslmode=disable"
        );
        for url in [
            "postgres://u@h/db?password=a&password=s3cret",
            "postgres://u@h/db?sslmode=disable&%70assword=s3cret",
            "postgresql://a:b:c@d@h/x",
            "postgres://u:s3cret@h:notaport/x",
        ] {
            let shown = redact(url);
            assert!(
                !shown.contains("s3cret") && !shown.contains("b:c"),
                "{shown}"
            );
        }
    }

    #[test]
    fn sockets_show_as_a_host_parameter() {
        assert_eq!(
            redact("postgres:///db?host=/var/run/postgresql"),
            "postgres:///db?host=/var/run/postgresql"
        );
        assert_eq!(
            redact("postgres://%2Ftmp%2Fpg/db"),
            "postgres:///db?host=/tmp/pg&port=5432"
        );
    }

    proptest::proptest! {
        #[test]
        fn redact_hides_any_password(
            user in "[a-z]{1,8}",
            pw in "[A-Za-z0-9!#$%^*()_+=~.-]{6,20}",
            host in "[a-z0-9.]{1,12}",
            query in proptest::option::of("[a-z]{1,6}=[a-z]{1,6}"),
            key in "(password|%70assword|pass%77ord|%70%61%73%73%77%6f%72%64)",
        ) {
            let q = query.map(|q| format!("?{q}")).unwrap_or_default();
            let shown = redact(&format!("postgres://{user}:{pw}@{host}/db{q}"));
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
            let shown = redact(&format!("postgres://{host}/db?{key}={pw}"));
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
            let shown = redact(&format!("postgres://{host}/db?password=x&{key}={pw}"));
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
        }
    }
}
