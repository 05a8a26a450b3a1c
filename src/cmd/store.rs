//! `tacho store init|prune`: the shared store's administration.

use crate::cli::StoreCommand;
use crate::store::{self, pg::PgStore};
use crate::text::Escaped;
use anyhow::{Result, anyhow, bail};
use std::io::Write;
use std::process::ExitCode;

pub fn run(command: StoreCommand) -> Result<ExitCode> {
    match command {
        StoreCommand::Init { db, role } => init(db.as_deref(), &role),
        StoreCommand::Prune { db, older_than } => prune(db.as_deref(), older_than),
    }?;
    Ok(ExitCode::SUCCESS)
}

/// The shared store's URL: `--db`, else `$TACHO_DB` or the config file's `db_url` when it is
/// one; `what` names the command for the error.
pub(crate) fn shared_url(db: Option<&str>, what: &str) -> Result<String> {
    let env = store::server_url_from_env_or_config();
    let url = db.map(str::to_owned).or(env).ok_or_else(|| {
        anyhow!("{what} needs the shared store: pass --db postgres://USER@HOST/DATABASE")
    })?;
    if !store::is_url(&url) {
        bail!("--db is not a PostgreSQL URL; {what} needs postgres://USER@HOST/DATABASE");
    }
    Ok(url)
}

fn init(db: Option<&str>, role: &str) -> Result<()> {
    if role.is_empty() || role.len() > 63 || role.contains('\0') {
        bail!("--role must be a PostgreSQL role name of 1 to 63 characters (got {role:?})");
    }
    let url = shared_url(db, "store init")?;
    let (done, schema, shown) = PgStore::init(&url)?;
    let mut err = std::io::stderr().lock();
    let shown = Escaped(&shown);
    match done.was {
        0 => writeln!(
            err,
            "created the tacho schema (version {}) in {shown}",
            done.now
        )?,
        v if v < done.now => writeln!(
            err,
            "migrated the tacho schema in {shown} from version {v} to {}",
            done.now
        )?,
        v => writeln!(
            err,
            "the tacho schema in {shown} is at version {v}: nothing to do"
        )?,
    }
    write!(
        std::io::stdout().lock(),
        "{}",
        store::pg::schema::grants(role, &schema)
    )?;
    Ok(())
}

fn prune(db: Option<&str>, older_than: std::time::Duration) -> Result<()> {
    let url = shared_url(db, "store prune")?;
    let mut server = PgStore::connect(&url, crate::kernel::SysRoot::real())?;
    let cutoff = chrono::Utc::now()
        - chrono::Duration::from_std(older_than)
            .map_err(|_| anyhow!("--older-than is too long"))?;
    let dropped = server.prune_history(cutoff)?;
    let mut out = std::io::stdout().lock();
    match (dropped.first(), dropped.last()) {
        (Some(first), Some(last)) => writeln!(
            out,
            "dropped {} day(s) of history from {}: {first} to {last}",
            dropped.len(),
            Escaped(server.shown())
        )?,
        _ => writeln!(
            out,
            "no day of history in {} ended before {}; nothing dropped",
            Escaped(server.shown()),
            cutoff.format("%Y-%m-%d %H:%M UTC")
        )?,
    }
    Ok(())
}
