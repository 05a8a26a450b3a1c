//! `tacho time`: repeated command timing with hyperfine's options and export formats.
//!
//! `exec` runs one command and measures it (wall time, CPU time and peak memory per child via
//! `wait4`); `schedule` decides the order of runs (interleaved by default) and how many;
//! `result` turns runs into statistics, relative speeds and warnings; `export` writes
//! hyperfine's JSON, CSV and Markdown. Nothing here prints to the terminal (that is
//! `cmd::time`).

pub mod exec;
pub mod result;
pub mod schedule;
