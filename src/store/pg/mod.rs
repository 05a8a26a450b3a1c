//! A shared PostgreSQL results store that many hosts upload their runs to (`runs push`).
//!
//! Runs keep the columns of the SQLite store, keyed by the UUID the saving host gave them, so
//! an upload that is retried (or run by two processes at once) inserts each run once: the run
//! row goes in with `ON CONFLICT (uuid) DO NOTHING` and its tests in the same transaction.
//! The schema is versioned in `tacho_schema` and migrated in one transaction holding an
//! advisory lock, so hosts that connect to a new database at the same moment migrate it once.
//!
//! The connection URL may carry a password: every message shows it through [`redact`].

mod pgpass;
mod runs;

use super::{RawRun, Store};
use anyhow::{Result, anyhow, bail};
use postgres::config::{Host, SslMode};
use postgres::error::SqlState;
use postgres::{Client, Config};
use std::str::FromStr;

/// Whether `--db` (or `TACHO_DB`) names a PostgreSQL server rather than an SQLite file.
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// The advisory lock key migrations hold ("tachoSCH" in ASCII), so they never run twice at once.
const MIGRATION_LOCK: i64 = 0x7461_6368_6f53_4348;

/// Schema 1 of the shared store: the SQLite store's runs and tests, with the host-made UUID as
/// the identity of a run across hosts.
const PG_SCHEMA_1: &str = "
CREATE TABLE runs (
    id            BIGSERIAL PRIMARY KEY,
    uuid          UUID NOT NULL UNIQUE,
    created_at    TEXT NOT NULL,
    label         TEXT,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    source        TEXT NOT NULL,
    tool_version  TEXT,
    suite_name    TEXT,
    suite_version BIGINT,
    hostname      TEXT,
    target_path   TEXT,
    host_json     TEXT NOT NULL,
    target_json   TEXT NOT NULL,
    extra_json    TEXT NOT NULL
);
CREATE INDEX runs_created ON runs(created_at);
CREATE INDEX runs_hostname ON runs(hostname);
CREATE TABLE tests (
    run_id   BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    name     TEXT NOT NULL,
    rw       TEXT,
    bs_bytes BIGINT,
    iodepth  BIGINT,
    numjobs  BIGINT,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Schema 2: the process saving a `running` run (`boot-id pid start-ticks`), as in the SQLite
/// store, so a reader on that machine can tell a run whose process is gone.
const PG_SCHEMA_2: &str = "ALTER TABLE runs ADD COLUMN owner TEXT;";

/// Schema steps in order; the database records how many it has applied.
const PG_MIGRATIONS: &[&str] = &[PG_SCHEMA_1, PG_SCHEMA_2];

/// An open connection to a shared store, migrated to the latest schema.
pub struct PgStore {
    client: Client,
    /// The URL without its password, for messages.
    shown: String,
}

/// What `runs push` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PushCounts {
    /// Runs the server did not have.
    pub new: usize,
    /// Runs the server already had (an earlier or concurrent push).
    pub present: usize,
    /// Runs still being saved locally, left for a later push.
    pub running: usize,
}

impl PgStore {
    /// Connects to `url` and migrates the schema; errors are one line naming the fix.
    pub fn connect(url: &str) -> Result<PgStore> {
        let shown = redact(url);
        let mut config = Config::from_str(url).map_err(|e| {
            anyhow!(
                "{shown} is not a usable PostgreSQL URL ({e}); write it as \
                 postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]"
            )
        })?;
        fill_from_env(url, &mut config);
        let mut client = config
            .connect(tls()?)
            .map_err(|e| connect_error(&shown, &e))?;
        migrate(&mut client).map_err(|e| {
            anyhow!(
                "cannot set up the tables in {shown} ({}); the user needs CREATE on the database",
                error_chain(&e)
            )
        })?;
        Ok(PgStore { client, shown })
    }

    /// The server's URL without its password, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Uploads every finished run of `local` the server does not have yet, one transaction per
    /// run, so an interrupted push leaves only whole runs and the next one carries on.
    pub fn push(&mut self, local: &Store) -> Result<PushCounts> {
        let mut counts = PushCounts::default();
        for run in local.raw_runs()? {
            if run.status == "running" {
                counts.running += 1;
                continue;
            }
            if uuid::Uuid::parse_str(&run.uuid).is_err() {
                bail!(
                    "local run {} has no valid run id ({:?}); it was edited by hand: export and \
                     re-import it",
                    run.id,
                    run.uuid
                );
            }
            if self
                .insert(&run)
                .map_err(|e| anyhow!("upload to {} failed: {}", self.shown, error_chain(&e)))?
            {
                counts.new += 1;
            } else {
                counts.present += 1;
            }
        }
        Ok(counts)
    }

    /// Inserts one run with its tests; `false` when a run with its UUID is already there.
    fn insert(&mut self, run: &RawRun) -> Result<bool, postgres::Error> {
        let mut tx = self.client.transaction()?;
        let row = tx.query_opt(
            "INSERT INTO runs (uuid, created_at, label, kind, status, source, tool_version,
                suite_name, suite_version, hostname, target_path, host_json, target_json,
                extra_json)
             VALUES ($1::TEXT::UUID, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
             ON CONFLICT (uuid) DO NOTHING RETURNING id",
            &[
                &run.uuid,
                &run.created_at,
                &run.label,
                &run.kind,
                &run.status,
                &run.source,
                &run.tool_version,
                &run.suite_name,
                &run.suite_version,
                &run.hostname,
                &run.target_path,
                &run.host_json,
                &run.target_json,
                &run.extra_json,
            ],
        )?;
        let Some(row) = row else {
            return Ok(false);
        };
        let id: i64 = row.get(0);
        let stmt = tx.prepare(
            "INSERT INTO tests (run_id, seq, name, rw, bs_bytes, iodepth, numjobs, json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )?;
        for t in &run.tests {
            tx.execute(
                &stmt,
                &[
                    &id,
                    &t.seq,
                    &t.name,
                    &t.rw,
                    &t.bs_bytes,
                    &t.iodepth,
                    &t.numjobs,
                    &t.json,
                ],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }
}

/// TLS for `sslmode=prefer|require`, with rustls (no OpenSSL in the binary). Unlike libpq,
/// the server's certificate is always verified against the system's CA store
/// (/etc/ssl/certs): tacho sends results and a password, so an unverified server is no better
/// than none. `sslmode=disable` is the choice for a trusted network without certificates.
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

/// Applies the missing schema steps in one transaction under an advisory lock.
fn migrate(client: &mut Client) -> Result<(), postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS tacho_schema (version BIGINT NOT NULL)")?;
    let version: i64 = tx
        .query_opt("SELECT version FROM tacho_schema", &[])?
        .map_or(0, |r| r.get(0));
    let latest = PG_MIGRATIONS.len() as i64;
    if version > latest {
        // Written by a newer tacho: leave it alone; the columns used here still exist.
        return tx.commit();
    }
    for step in &PG_MIGRATIONS[version as usize..] {
        tx.batch_execute(step)?;
    }
    if version == 0 {
        tx.execute("INSERT INTO tacho_schema (version) VALUES ($1)", &[&latest])?;
    } else if version < latest {
        tx.execute("UPDATE tacho_schema SET version = $1", &[&latest])?;
    }
    tx.commit()
}

/// What libpq takes from the environment and the password file when the URL leaves it out,
/// and the `postgres` crate does not: `PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER` (else the
/// login name), `PGSSLMODE`, then `PGPASSWORD`, then `PGPASSFILE` or `~/.pgpass`.
fn fill_from_env(url: &str, config: &mut Config) {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if config.get_hosts().is_empty() {
        config.host(&var("PGHOST").unwrap_or_else(|| "localhost".into()));
    }
    if config.get_ports().is_empty()
        && let Some(port) = var("PGPORT").and_then(|p| p.parse().ok())
    {
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = var("PGUSER")
            .or_else(|| var("USER"))
            .unwrap_or_else(|| "postgres".into());
        config.user(&user);
    }
    if config.get_dbname().is_none()
        && let Some(db) = var("PGDATABASE")
    {
        config.dbname(&db);
    }
    if !url.contains("sslmode=")
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
            eprintln!("note: {}", crate::text::Escaped(&note));
            None
        }
    }
}

/// A connection failure as one line saying what went wrong and what to do.
fn connect_error(shown: &str, e: &postgres::Error) -> anyhow::Error {
    let code = e.code();
    if code == Some(&SqlState::INVALID_PASSWORD)
        || code == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
    {
        return anyhow!(
            "PostgreSQL at {shown} refused the login ({}); check the user and password in the \
             URL or PGPASSWORD",
            e.as_db_error()
                .map_or("authentication failed", |d| d.message())
        );
    }
    if code == Some(&SqlState::INVALID_CATALOG_NAME) {
        return anyhow!(
            "PostgreSQL at {shown} has no such database; create it (createdb) or fix the URL"
        );
    }
    let text = error_chain(e);
    if text.contains("certificate") || text.contains("TLS") {
        return anyhow!(
            "TLS to PostgreSQL at {shown} failed ({text}); add the server's CA to the system \
             store (/usr/local/share/ca-certificates, update-ca-certificates) or, on a trusted \
             network only, add sslmode=disable to the URL"
        );
    }
    anyhow!(
        "cannot reach PostgreSQL at {shown} ({}); check the host and port and that the server \
         is running",
        error_chain(e)
    )
}

/// The error and its causes on one line (the crate's top level says only "error connecting").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

/// `url` with any password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let mut shown = match rest.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    };
    // A password may also come as a query parameter.
    if let Some(at) = shown.find("password=") {
        let end = shown[at..].find('&').map_or(shown.len(), |e| at + e);
        shown.replace_range(at..end, "password=***");
    }
    shown
}

/// Refuses a PostgreSQL URL where only a local SQLite file works.
pub fn refuse_url(db: &std::path::Path) -> Result<()> {
    let text = db.to_string_lossy();
    if is_url(&text) {
        bail!(
            "{} is a PostgreSQL store, and this needs a local results file; pass --db PATH",
            redact(&text)
        );
    }
    Ok(())
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
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact("postgres://h/db?password=s3cret&sslmode=disable"),
            "postgres://h/db?password=***&sslmode=disable"
        );
        assert!(!redact("postgresql://a:b:c@d@h/x").contains("b:c"));
    }

    proptest::proptest! {
        #[test]
        fn redact_hides_any_password(
            user in "[a-z]{1,8}",
            pw in "[A-Za-z0-9!#$%^*()_+=~.-]{6,20}",
            host in "[a-z0-9.]{1,12}",
            query in proptest::option::of("[a-z]{1,6}=[a-z]{1,6}"),
        ) {
            let q = query.map(|q| format!("?{q}")).unwrap_or_default();
            let shown = redact(&format!("postgres://{user}:{pw}@{host}/db{q}"));
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
            let shown = redact(&format!("postgres://{host}/db?password={pw}"));
            proptest::prop_assert!(!shown.contains(&pw), "{}", shown);
        }
    }
}
