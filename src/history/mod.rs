//! The history store of `tacho record`: raw samples (`crate::diagnose::sample::Sample`) kept in
//! an SQLite file, one row per sample, so any past window can be judged again by the same
//! model and findings as `tacho top` live.
//!
//! Crash safety comes from SQLite: WAL mode, one transaction per sample, `synchronous=FULL`,
//! so a `kill -9` or a power cut loses at most the sample being written, never one already
//! committed, and a reader sees only whole samples while the recorder writes.

pub mod days;
#[cfg(feature = "pg")]
pub mod fleet;
pub mod interval;
pub mod settings;
#[cfg(feature = "pg")]
pub mod ship;
pub mod store;
pub mod summary;
pub mod timeline;
pub mod when;

pub use store::{History, Make, Record};
