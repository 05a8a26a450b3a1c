//! Reporters: each writes a finished [`BenchReport`](crate::bench::result::BenchReport), or
//! stored runs and their comparison, to any `impl Write`, so tests capture them in memory.

pub mod check;
pub mod cpu;
pub mod diff;
pub mod disk_totals;
pub mod files;
pub mod fix_script;
mod grid;
pub mod history;
pub mod html;
pub mod hyperfine;
pub mod json;
pub mod mem;
pub mod outfile;
pub mod prom;
pub mod results;
mod sheet;
pub mod stress;
pub mod suites;
pub mod table;
pub mod time;
pub mod top;

use std::path::Path;

/// Writes `text` to `path`, replacing a regular file there, through a temporary file and a
/// rename, never through a link planted at the name (see [`outfile`]).
pub fn write_file_atomically(path: &Path, text: &str) -> Result<(), outfile::OutputError> {
    outfile::write_atomically(path, text.as_bytes(), outfile::Existing::Replace)
}
