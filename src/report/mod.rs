//! Reporters: each writes a finished [`BenchReport`](crate::bench::result::BenchReport), or
//! stored runs and their comparison, to any `impl Write`, so tests capture them in memory.

mod grid;
pub mod html;
pub mod json;
pub mod prom;
pub mod prom_time;
pub mod results;
pub mod suites;
pub mod table;
pub mod top;

use std::io::Write;
use std::path::Path;

/// Writes `text` to `path` atomically: a temporary file beside it, flushed, then renamed, so
/// readers (node_exporter's textfile collector, a browser) never see half a file and a
/// failure leaves nothing behind.
pub fn write_file_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // node_exporter's collector only reads `*.prom`; the temporary name must not end in it.
    let mut tmp = tempfile::Builder::new()
        .prefix(".tacho-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    // Readers run as other users (node_exporter); a private 0600 temp file would lock them out.
    use std::os::unix::fs::PermissionsExt;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tacho.prom");
        write_file_atomically(&path, "a 1\n").unwrap();
        write_file_atomically(&path, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
