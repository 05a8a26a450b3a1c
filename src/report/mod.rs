//! Reporters: each writes a finished `bench::result::BenchReport`, or stored runs and their
//! comparison, to any `impl Write`, so tests capture them in memory.

pub(crate) mod charts;
pub(crate) mod check;
pub(crate) mod cpu;
pub(crate) mod derived_job;
pub(crate) mod diff;
pub(crate) mod disk_totals;
pub(crate) mod drift;
pub(crate) mod files;
pub(crate) mod files_bytes;
pub(crate) mod fix_script;
pub(crate) mod fleet;
mod grid;
pub(crate) mod group;
pub mod history;
pub mod html;
pub(crate) mod hyperfine;
pub(crate) mod incident;
#[cfg(feature = "pg")]
pub(crate) mod incident_fleet;
pub(crate) mod json;
pub(crate) mod load;
pub(crate) mod load_html;
pub(crate) mod mem;
pub(crate) mod outfile;
pub(crate) mod ping;
#[cfg(feature = "profile")]
pub(crate) mod profile;
#[cfg(feature = "profile")]
pub(crate) mod profile_waits;
pub(crate) mod prom;
pub(crate) mod results;
mod sheet;
pub(crate) mod stress;
pub(crate) mod suites;
pub(crate) mod table;
pub(crate) mod time;
pub(crate) mod top;

use std::path::Path;

/// Writes `text` to `path`, replacing a regular file there, through a temporary file and a
/// rename, never through a link planted at the name (see [`outfile`]).
pub(crate) fn write_file_atomically(path: &Path, text: &str) -> Result<(), outfile::OutputError> {
    outfile::write_atomically(path, text.as_bytes(), outfile::Existing::Replace)
}
