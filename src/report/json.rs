//! One JSON document on stdout, nothing else there.

use crate::bench::result::BenchReport;
use std::io::{self, Write};

pub fn write(report: &BenchReport, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}
