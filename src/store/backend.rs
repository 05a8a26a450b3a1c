//! Where results live — a local SQLite file or a shared PostgreSQL server — behind one set of
//! operations, so every command that saves or reads runs works on either with the same meaning.

#[cfg(feature = "pg")]
use super::pg::{self, PgStore};
use super::runs::ListText;
use super::{NewRun, RunKind, RunStatus, RunSummary, Store, StoredRun};
use crate::kernel::SysRoot;
use anyhow::{Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where `--db` (or `TACHO_DB`) says results go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// An SQLite file on this machine.
    File(PathBuf),
    /// A PostgreSQL server, by its URL (which may hold a password: show it through
    /// [`Place::shown`]).
    Server(String),
}

impl Place {
    /// `--db`, else `$TACHO_DB`, else the default local file; a `postgres://` URL names a
    /// server.
    pub fn resolve(explicit: Option<&Path>) -> Result<Place> {
        let path = super::resolve_path(explicit)?;
        let text = path.to_string_lossy();
        Ok(if is_url(&text) {
            Place::Server(text.into_owned())
        } else {
            Place::File(path)
        })
    }

    /// The place for messages: the path, or the URL without its password.
    pub fn shown(&self) -> String {
        match self {
            Place::File(p) => p.display().to_string(),
            Place::Server(url) => redact(url),
        }
    }
}

/// Whether `--db` (or `TACHO_DB`) names a PostgreSQL server rather than an SQLite file.
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// `url` as messages show it: without any password (see `pg::redact`).
#[cfg(feature = "pg")]
pub fn redact(url: &str) -> String {
    pg::redact(url)
}

/// Without the PostgreSQL client the URL cannot be parsed, so nothing of it is shown.
#[cfg(not(feature = "pg"))]
pub fn redact(_url: &str) -> String {
    "the PostgreSQL URL given (not shown: it may hold a password)".to_owned()
}

/// Refuses a PostgreSQL URL where only a local SQLite file works.
pub fn refuse_url(db: &Path) -> Result<()> {
    let text = db.to_string_lossy();
    if is_url(&text) {
        bail!(
            "{} is a PostgreSQL store, and this needs a local results file; pass --db PATH",
            redact(&text)
        );
    }
    Ok(())
}

/// The error of a PostgreSQL store named in a build without the client.
#[cfg(not(feature = "pg"))]
fn no_pg() -> anyhow::Error {
    crate::features::Missing(crate::features::Feature::Pg).into()
}

/// An open results store of either kind.
pub enum Results {
    /// A local SQLite file.
    Local(Store),
    /// A shared PostgreSQL server.
    #[cfg(feature = "pg")]
    Shared(PgStore),
}

impl Results {
    /// Opens for writing: a local file is created if needed, a server's tables migrated.
    /// `root` is where this machine's /proc is: a run being saved is marked with the process
    /// saving it, and a reader here tells one whose process is gone (`abandoned`).
    pub fn open(place: &Place, root: &SysRoot) -> Result<Results> {
        Ok(match place {
            Place::File(p) => Results::Local(Store::open(p)?.with_sys_root(root.clone())),
            #[cfg(feature = "pg")]
            Place::Server(url) => Results::Shared(PgStore::connect(url, root.clone())?),
            #[cfg(not(feature = "pg"))]
            Place::Server(_) => return Err(no_pg()),
        })
    }

    /// Opens for reading what is there: `Ok(None)` when a local file does not exist yet (a
    /// server is always there, or its error says why not). `root` as for [`Results::open`].
    pub fn open_existing(place: &Place, root: &SysRoot) -> Result<Option<Results>> {
        Ok(match place {
            Place::File(p) => {
                Store::open_existing(p)?.map(|s| Results::Local(s.with_sys_root(root.clone())))
            }
            #[cfg(feature = "pg")]
            Place::Server(url) => Some(Results::Shared(PgStore::connect(url, root.clone())?)),
            #[cfg(not(feature = "pg"))]
            Place::Server(_) => return Err(no_pg()),
        })
    }

    /// Where the results are, for messages.
    pub fn shown(&self) -> String {
        match self {
            Results::Local(s) => s.path().display().to_string(),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.shown().to_owned(),
        }
    }

    /// Refuses a write to a store opened for reading only.
    pub fn writable(&self) -> Result<()> {
        match self {
            Results::Local(s) => s.writable(),
            #[cfg(feature = "pg")]
            Results::Shared(_) => Ok(()),
        }
    }

    /// All runs, oldest first, each handed to `each` as it is read (one held at a time), with
    /// label and target read as `text` says.
    pub fn list_each(
        &mut self,
        text: ListText,
        each: impl FnMut(&RunSummary) -> Result<()>,
    ) -> Result<()> {
        match self {
            Results::Local(s) => s.list_each(text, each),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.list_each(text, each),
        }
    }

    /// The latest finished run of `kind` of each machine whose labels hold `labels`, as (host,
    /// id).
    pub fn latest_per_host(
        &mut self,
        kind: RunKind,
        suite: Option<&str>,
        since: Option<&str>,
        labels: &crate::labels::Labels,
    ) -> Result<Vec<(String, i64)>> {
        match self {
            Results::Local(s) => s.latest_per_host(kind, suite, since, labels),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.latest_per_host(kind, suite, since, labels),
        }
    }

    /// The run with `id`, its tests and their figures.
    pub fn load(&mut self, id: i64) -> Result<StoredRun> {
        match self {
            Results::Local(s) => s.load(id),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.load(id),
        }
    }

    /// The run with `id` for comparing, with its first `max_tests` tests (the local store
    /// leaves out per-repeat detail).
    pub fn load_summary(&mut self, id: i64, max_tests: usize) -> Result<StoredRun> {
        match self {
            Results::Local(s) => s.load_summary(id, max_tests),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.load_upto(id, max_tests),
        }
    }

    /// The run with `id` without its tests, each of its first `max_tests` tests handed to
    /// `each` as read: its name, its JSON text and its figures.
    pub fn each_test(
        &mut self,
        id: i64,
        max_tests: usize,
        each: &mut crate::store::EachTest<'_>,
    ) -> Result<StoredRun> {
        match self {
            Results::Local(s) => s.each_test(id, max_tests, each),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.each_test(id, max_tests, each),
        }
    }

    /// Saves a whole run in one transaction; returns its id.
    pub fn insert_run(&mut self, run: &NewRun) -> Result<i64> {
        self.import_run(run).map(|(id, _)| id)
    }

    /// Saves a run unless one with its run id is here: `(id, new)`.
    pub fn import_run(&mut self, run: &NewRun) -> Result<(i64, bool)> {
        match self {
            Results::Local(s) => s.import_run(run),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.import_run(run),
        }
    }

    /// Starts a run whose tests arrive one by one.
    pub fn begin_run(&mut self, run: &NewRun) -> Result<i64> {
        match self {
            Results::Local(s) => s.begin_run(run),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.begin_run(run),
        }
    }

    /// Saves test number `seq` of a run begun with [`Results::begin_run`].
    pub fn add_test(&mut self, run_id: i64, seq: usize, test: &Value) -> Result<()> {
        match self {
            Results::Local(s) => s.add_test(run_id, seq, test),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.add_test(run_id, seq, test),
        }
    }

    /// Records how a run ended and its final document fields.
    pub fn finish_run(&mut self, run_id: i64, run: &NewRun) -> Result<()> {
        match self {
            Results::Local(s) => s.finish_run(run_id, run),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.finish_run(run_id, run),
        }
    }

    /// Sets the status of a run.
    pub fn set_status(&mut self, run_id: i64, status: RunStatus) -> Result<()> {
        match self {
            Results::Local(s) => s.set_status(run_id, status),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.set_status(run_id, status),
        }
    }

    /// The runs waiting at group `name`'s start barrier that began at `since` or later and
    /// marked themselves within `lease` seconds (see [`PgStore::group_waiting`]); only a
    /// shared store holds groups.
    #[cfg_attr(not(feature = "pg"), allow(unused_variables))]
    pub fn group_waiting(
        &mut self,
        name: &str,
        since: &str,
        lease: f64,
    ) -> Result<Vec<(i64, String)>> {
        match self {
            Results::Local(_) => Err(local_group()),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.group_waiting(name, since, lease),
        }
    }

    /// Marks run `id` as still waiting at its group's barrier (see
    /// [`PgStore::group_heartbeat`]).
    #[cfg_attr(not(feature = "pg"), allow(unused_variables))]
    pub fn group_heartbeat(&mut self, id: i64) -> Result<()> {
        match self {
            Results::Local(_) => Err(local_group()),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.group_heartbeat(id),
        }
    }

    /// The run ids of group `name`'s latest finished start (see [`PgStore::group_runs`]).
    #[cfg_attr(not(feature = "pg"), allow(unused_variables))]
    pub fn group_runs(&mut self, name: &str) -> Result<Vec<i64>> {
        match self {
            Results::Local(_) => Err(local_group()),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.group_runs(name),
        }
    }

    /// Removes runs with all their tests; fails without removing anything if one is missing.
    pub fn remove(&mut self, ids: &[i64]) -> Result<()> {
        match self {
            Results::Local(s) => s.remove(ids),
            #[cfg(feature = "pg")]
            Results::Shared(s) => s.remove(ids),
        }
    }
}

/// A group asked of a local store: its hosts meet in a shared one.
fn local_group() -> anyhow::Error {
    anyhow::anyhow!(
        "--group needs a shared store, where the group's hosts meet: give --db \
         postgres://USER@HOST/DATABASE (the same on every host)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `postgres://` place is a server in every build, never taken for a file name, and no
    /// message shows its password.
    #[test]
    fn a_server_url_is_a_server_in_every_build() {
        let url = "postgres://u:secret@db.example/results";
        let place = Place::resolve(Some(Path::new(url))).unwrap();
        assert_eq!(place, Place::Server(url.to_owned()));
        assert!(!place.shown().contains("secret"), "{}", place.shown());
        let e = refuse_url(Path::new(url)).unwrap_err().to_string();
        assert!(
            e.contains("needs a local results file") && !e.contains("secret"),
            "{e}"
        );
    }

    /// Without the client, opening a server fails with the feature to build with.
    #[cfg(not(feature = "pg"))]
    #[test]
    fn without_pg_a_server_names_the_feature() {
        let place = Place::Server("postgres://u:secret@db.example/results".into());
        for e in [
            Results::open(&place, &SysRoot::real()).err(),
            Results::open_existing(&place, &SysRoot::real()).err(),
        ] {
            let e = e.expect("refused").to_string();
            assert!(e.contains("built without the `pg` feature"), "{e}");
        }
    }
}
