//! Reporters: each writes a finished [`BenchReport`](crate::bench::result::BenchReport) to any
//! `impl Write`, so tests capture them in memory.

pub mod json;
pub mod suites;
pub mod table;
pub mod top;
