//! tacho: how fast a Linux server really is, and what is slowing it down.
//!
//! Data flows from `kernel` (readers of /proc and /sys) and `io` (the I/O engine) through `bench`
//! (suites, runs, verdicts) to `report` (terminal table, JSON). `safety` decides what tacho may
//! write to; `cmd` wires a parsed command line to all of it.

pub mod bench;
pub mod check;
pub mod choice;
pub mod cli;
pub mod cmd;
pub mod compare;
pub mod cpubench;
pub mod diagnose;
pub mod files;
pub mod history;
pub mod io;
pub mod kernel;
pub mod membench;
pub mod parallel;
pub mod report;
pub mod safety;
pub mod snapshot;
pub mod stats;
pub mod store;
pub mod stress;
pub mod text;
pub mod timing;
pub mod totals;
pub mod tui;
pub mod units;
