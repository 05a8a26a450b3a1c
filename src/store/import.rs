//! `runs import` into a store: the runs of every file given are stored in one transaction,
//! each test of a `tacho.bench.v1` document as soon as it is read and checked, so a run of
//! 200,000 tests is never held (it imports in little more memory than its file), and a file
//! that fails at its last test, or the last of several files, leaves the store as it was.
//!
//! A database that does not exist yet is written under a temporary name beside it and renamed
//! into place once the transaction commits: a failed import leaves no file behind. Alone with
//! that file, the import writes it with a rollback journal (synchronous `FULL`, as durable as
//! WAL) rather than through the WAL, which would write every page twice; it is switched to WAL
//! before it is renamed. A PostgreSQL store takes the runs once every file is read, as before.

use super::Store;
use super::backend::Place;
use super::document::{self, Parsed, TestSink};
use super::run::{NewRun, RunSource};
use super::runs::{import_in, insert_test, run_with_uuid, write_run_row};
use super::test_text::{Walked, Walker};
use crate::kernel::SysRoot;
use anyhow::{Context, Result, bail};
use rusqlite::OptionalExtension;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A run `runs import` stored (or found already there).
#[derive(Debug, Clone)]
pub struct Imported {
    /// The index of its file among those given.
    pub file: usize,
    /// Its id in the store.
    pub id: i64,
    /// False when a run with its run id was already there (then nothing was stored).
    pub new: bool,
    pub source: RunSource,
    pub label: Option<String>,
    /// How many tests it has.
    pub tests: usize,
}

/// Stores every run of `files` in the store at `place` (`root` as for
/// [`super::Results::open`]), each after `adjust` has seen it (its label); all or nothing.
pub fn import_files(
    place: &Place,
    root: &SysRoot,
    files: &[PathBuf],
    mut adjust: impl FnMut(&Path, &mut NewRun),
) -> Result<Vec<Imported>> {
    // A new database renamed into place finds one there only when another process made it
    // meanwhile: the runs then go into that one, read again.
    for _ in 0..3 {
        let mut import = Import::new(place.clone(), root);
        let mut read = Vec::new();
        for (i, file) in files.iter().enumerate() {
            for mut pending in import.read(file)? {
                let run = &mut pending.0.run;
                adjust(file, run);
                read.push(Imported {
                    file: i,
                    id: 0,
                    new: true,
                    source: run.source,
                    label: run.label.clone(),
                    tests: pending.tests(),
                });
                import.save(pending)?;
            }
        }
        if read.is_empty() {
            bail!("no runs found in the given files");
        }
        let Some(saved) = import.commit()? else {
            continue;
        };
        for (r, (id, new)) in read.iter_mut().zip(saved) {
            (r.id, r.new) = (id, new);
        }
        return Ok(read);
    }
    bail!("the results database kept appearing and vanishing while runs were imported into it")
}

/// An import under way: nothing is visible to others until [`Import::commit`].
struct Import {
    place: Place,
    root: SysRoot,
    /// The local store, opened when the first test or run is stored.
    local: Option<Local>,
    /// Runs for a server, stored at commit.
    held: Vec<NewRun>,
    /// What each run saved so far came to: its id and whether it is new.
    saved: Vec<(i64, bool)>,
}

/// A run read from a file, not stored yet: its tests may be in the store already (see the
/// module docs).
struct Pending(Parsed);

impl Pending {
    /// How many tests the run has.
    fn tests(&self) -> usize {
        self.0.sent.unwrap_or(self.0.run.tests.len())
    }
}

impl Import {
    fn new(place: Place, root: &SysRoot) -> Import {
        Import {
            place,
            root: root.clone(),
            local: None,
            held: Vec::new(),
            saved: Vec::new(),
        }
    }

    /// Every run in `path`, read and checked (see [`super::parse_documents`]); the tests of
    /// its bench documents are stored as they are read.
    fn read(&mut self, path: &Path) -> Result<Vec<Pending>> {
        let runs = document::read_into(path, self)?;
        Ok(runs.into_iter().map(Pending).collect())
    }

    /// Stores a run read by [`Import::read`], in the order they were read.
    fn save(&mut self, pending: Pending) -> Result<()> {
        let Parsed { run, sent } = pending.0;
        if matches!(self.place, Place::Server(_)) {
            self.held.push(run);
            return Ok(());
        }
        let local = self.local()?;
        let saved = match sent {
            Some(_) => local.finish(&run)?,
            None => {
                let Local { store, walker, .. } = local;
                import_in(&store.conn, walker, &run).map_err(|e| store.err(e))?
            }
        };
        self.saved.push(saved);
        Ok(())
    }

    /// Makes every run saved visible, and says what each came to (its id, and whether it is
    /// new rather than one with its run id already there), in the order they were saved;
    /// `None` when a new database found one made at its path meanwhile (nothing is stored).
    fn commit(mut self) -> Result<Option<Vec<(i64, bool)>>> {
        if let Some(local) = self.local.take()
            && !local.commit()?
        {
            return Ok(None);
        }
        if !self.held.is_empty() {
            let mut store = super::Results::open(&self.place, &self.root)?;
            for run in &self.held {
                self.saved.push(store.import_run(run)?);
            }
        }
        Ok(Some(self.saved))
    }

    fn local(&mut self) -> Result<&mut Local> {
        let local = match self.local.take() {
            Some(local) => local,
            None => {
                let Place::File(path) = &self.place else {
                    bail!("a server's runs are stored at commit");
                };
                Local::open(path, &self.root)?
            }
        };
        Ok(self.local.insert(local))
    }
}

impl TestSink for Import {
    fn begin(&mut self, fields: &Map<String, Value>) -> Result<bool> {
        if matches!(self.place, Place::Server(_)) {
            return Ok(false);
        }
        self.local()?.begin(fields)?;
        Ok(true)
    }

    fn test(&mut self, seq: usize, text: &str, found: Option<Walked>) -> Result<()> {
        self.local()?.test(seq, text, found)
    }

    fn discard(&mut self) -> Result<()> {
        self.local()?.discard()
    }
}

/// A local store with the import's transaction open.
struct Local {
    store: Store,
    /// The database this import makes, written under a temporary name (dropped after
    /// `store`, which closes the file first).
    fresh: Option<Fresh>,
    walker: Walker,
    /// Each document whose tests went to the store, in the order read, not yet finished.
    began: std::collections::VecDeque<Began>,
    /// The last run id given before the import.
    last_id: i64,
}

/// A database that did not exist: its temporary file, removed unless renamed to `path`.
struct Fresh {
    temp: tempfile::TempPath,
    path: PathBuf,
}

/// Where a document's tests went as they were read.
enum Began {
    /// Under the run row made for them (its fields written when the document is finished).
    Stored(i64),
    /// Nowhere: run `.0` is already here with the document's run id, `.1`.
    There(i64, String),
}

impl Local {
    fn open(path: &Path, root: &SysRoot) -> Result<Local> {
        let fresh = if std::fs::symlink_metadata(path).is_ok() {
            None
        } else {
            super::make_directory(path)?;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let name = path.file_name().unwrap_or(path.as_os_str());
            let temp = tempfile::Builder::new()
                .prefix(&format!(".{}.", name.to_string_lossy()))
                .suffix(".import")
                // What SQLite gives a database it creates (before the umask).
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .tempfile_in(dir)
                .with_context(|| {
                    format!(
                        "cannot create the results database {} (a temporary file in {}); pass \
                         --db PATH",
                        path.display(),
                        dir.display()
                    )
                })?
                .into_temp_path();
            Some(Fresh {
                temp,
                path: path.to_path_buf(),
            })
        };
        // The temporary file is opened by name (SQLite has no other way): not through a link
        // someone put in its place since it was made.
        let store = match &fresh {
            Some(f) => Store::open_with(
                &f.temp,
                rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
            )?,
            None => Store::open(path)?,
        };
        let store = store.with_sys_root(root.clone());
        store.writable()?;
        let fail = |e| store.err(e);
        if fresh.is_some() {
            store
                .conn
                .pragma_update(None, "journal_mode", "DELETE")
                .map_err(fail)?;
            store
                .conn
                .pragma_update(None, "synchronous", "FULL")
                .map_err(fail)?;
        }
        store.conn.execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
        let last_id = store
            .conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'runs'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(fail)?;
        Ok(Local {
            store,
            fresh,
            walker: Walker::default(),
            began: Default::default(),
            last_id: last_id.unwrap_or(0),
        })
    }

    /// A document's tests begin: they go under a new run row, unless its run id (when given
    /// before them, as exports do) is one already here.
    fn begin(&mut self, fields: &Map<String, Value>) -> Result<()> {
        let conn = &self.store.conn;
        let fail = |e| self.store.err(e);
        let uuid = fields
            .get("run")
            .and_then(|r| r.get("uuid"))
            .and_then(Value::as_str)
            .filter(|u| uuid::Uuid::parse_str(u).is_ok());
        if let Some(id) = run_with_uuid(conn, uuid).map_err(fail)? {
            let uuid = uuid.unwrap_or_default().to_owned();
            self.began.push_back(Began::There(id, uuid));
            return Ok(());
        }
        conn.execute(
            "INSERT INTO runs (created_at, kind, status, source, host_json, target_json,
                extra_json, uuid)
             VALUES ('', 'disk', 'running', 'import', '{}', '{}', '{}', ?1)",
            [uuid],
        )
        .map_err(fail)?;
        self.began
            .push_back(Began::Stored(conn.last_insert_rowid()));
        Ok(())
    }

    fn test(&mut self, seq: usize, text: &str, found: Option<Walked>) -> Result<()> {
        let Some(Began::Stored(id)) = self.began.back() else {
            return Ok(());
        };
        insert_test(
            &self.store.conn,
            &mut self.walker,
            *id,
            seq as i64,
            text,
            found,
        )
        .map_err(|e| self.store.err(e))
    }

    fn discard(&mut self) -> Result<()> {
        if let Some(Began::Stored(id)) = self.began.pop_back() {
            self.remove(id)?;
        }
        Ok(())
    }

    /// Removes run row `id` made for a document's tests, with its tests; the id is given
    /// again when it was the last one given.
    fn remove(&self, id: i64) -> Result<()> {
        self.store
            .conn
            .execute_batch(&format!(
                "DELETE FROM runs WHERE id = {id};
                 UPDATE sqlite_sequence SET seq = {id} - 1 WHERE name = 'runs' AND seq = {id};"
            ))
            .map_err(|e| self.store.err(e))
    }

    /// The run of the first document begun and not finished, its tests stored: its row gets
    /// its fields, unless a run with its run id is here (then its tests are removed).
    fn finish(&mut self, run: &NewRun) -> Result<(i64, bool)> {
        let fail = |e| self.store.err(e);
        match self.began.pop_front() {
            Some(Began::Stored(id)) => {
                let conn = &self.store.conn;
                let other = run_with_uuid(conn, run.uuid.as_deref())
                    .map_err(fail)?
                    .filter(|other| *other != id);
                if let Some(other) = other {
                    self.remove(id)?;
                    return Ok((other, false));
                }
                write_run_row(conn, run, Some(id)).map_err(fail)?;
                Ok((id, true))
            }
            Some(Began::There(id, uuid)) if run.uuid.as_deref() == Some(uuid.as_str()) => {
                Ok((id, false))
            }
            Some(Began::There(..)) => bail!(
                "a document gives its run id (\"run\") twice, the first already in {}; give it once",
                self.store.path().display()
            ),
            None => bail!("a run whose tests were not stored was finished"),
        }
    }

    /// Commits; a new database is then switched to WAL, closed and renamed into place,
    /// unless a database appeared there meanwhile (`false`: the new one is removed).
    fn commit(self) -> Result<bool> {
        let Local {
            store,
            fresh,
            last_id,
            ..
        } = self;
        let fail = |e| store.err(e);
        // Run rows made for tests and removed (their run was already here) gave up their ids;
        // the next run gets the id it would have had without them.
        store
            .conn
            .execute(
                "UPDATE sqlite_sequence SET seq = max(?1, (SELECT coalesce(max(id), 0) FROM runs))
                 WHERE name = 'runs'",
                [last_id],
            )
            .map_err(fail)?;
        store.conn.execute_batch("COMMIT").map_err(fail)?;
        let Some(fresh) = fresh else {
            return Ok(true);
        };
        store
            .conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        drop(store);
        let Fresh { temp, path } = fresh;
        match temp.persist_noclobber(&path) {
            Ok(()) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => bail!(
                "cannot put the imported runs at {}: {}; nothing was imported",
                path.display(),
                e.error
            ),
        }
        // The rename is durable once the directory is flushed.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(true)
    }
}
