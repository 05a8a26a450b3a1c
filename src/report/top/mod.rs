//! Reporters of `tacho top` samples: plain text (`--batch`), JSON lines (`--json`) and the
//! `/metrics` server with the live page (`--listen`, whose text is `report::prom::top`, page `live`). Each writes one [`TopSample`](crate::diagnose::model::TopSample) to any
//! `impl Write` (or returns a string), so tests capture them in memory.

pub(crate) mod conns;
pub(crate) mod dns;
pub(crate) mod latency;
pub(crate) mod live;
pub mod server;
pub mod text;
pub mod webconfig;

use std::io::Write;

use crate::diagnose::model::TopSample;

/// One sample as one line of JSON (schema `tacho.top.v3`).
pub fn write_json_line(out: &mut impl Write, sample: &TopSample) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, sample)?;
    writeln!(out)
}
