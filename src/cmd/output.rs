//! The output format chosen for `runs show` and `compare`, and the HTML file they write.

use crate::cli::FormatArgs;
use crate::compare::Comparison;
use crate::report::html;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
    Html(PathBuf),
}

impl From<&FormatArgs> for Format {
    fn from(f: &FormatArgs) -> Format {
        if f.json {
            Format::Json
        } else if f.csv {
            Format::Csv
        } else if f.markdown {
            Format::Markdown
        } else if let Some(path) = &f.html {
            Format::Html(path.clone())
        } else {
            Format::Table
        }
    }
}

/// Writes the HTML report to `path` (atomically) and says so on stderr.
pub fn html(path: &Path, c: &Comparison, title: &str, run_warnings: &[String]) -> Result<()> {
    let mut page = Vec::new();
    html::write(c, title, run_warnings, &mut page)?;
    write_page(path, &page)
}

/// Writes a page to `--html FILE` (atomically) and says so on stderr.
pub fn write_page(path: &Path, page: &[u8]) -> Result<()> {
    crate::report::write_file_atomically(path, &String::from_utf8_lossy(page)).with_context(
        || {
            format!(
                "cannot write {}; pass a writable --html FILE",
                path.display()
            )
        },
    )?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
