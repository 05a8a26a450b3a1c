//! tacho: how fast a Linux server really is, and what is slowing it down.
//!
//! Data flows from `kernel` (readers of /proc and /sys) and `io` (the I/O engine) through `bench`
//! (suites, runs, verdicts) to `report` (terminal table, JSON). `safety` decides what tacho may
//! write to; `cmd` wires a parsed command line to all of it.

pub(crate) mod abandon;
pub(crate) mod bench;
pub(crate) mod bpf;
pub(crate) mod check;
pub(crate) mod choice;
pub mod cli;
pub mod cmd;
pub(crate) mod compare;
pub(crate) mod config;
pub(crate) mod cpubench;
pub(crate) mod diagnose;
pub(crate) mod experiment;
pub(crate) mod features;
pub(crate) mod files;
pub(crate) mod fit;
pub(crate) mod form;
pub(crate) mod history;
pub(crate) mod io;
pub(crate) mod kernel;
pub(crate) mod labels;
pub(crate) mod load;
pub(crate) mod mapping;
pub(crate) mod membench;
pub(crate) mod net;
pub(crate) mod parallel;
#[cfg(feature = "profile")]
pub(crate) mod profile;
pub mod report;
pub(crate) mod safety;
pub(crate) mod snapshot;
pub(crate) mod sqlite;
pub(crate) mod stats;
pub(crate) mod store;
pub(crate) mod stress;
pub mod text;
pub(crate) mod timing;
pub(crate) mod totals;
pub(crate) mod tui;
pub(crate) mod tune;
pub mod units;
pub(crate) mod warning;
pub(crate) mod words;
