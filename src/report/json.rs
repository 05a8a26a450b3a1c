//! One JSON document on stdout, nothing else there.

use crate::bench::result::BenchReport;
use std::io::{self, Write};

/// Writes the report as one pretty-printed `tacho.bench.v1` JSON document and a newline.
pub fn write(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}
