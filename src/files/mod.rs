//! `tacho files`: which process reads and writes which file, live, through fanotify; and which
//! file owns a sector of a block device.
//!
//! Flow: [`watch`] sets up fanotify groups ([`fanotify`]) on whole filesystems, reads batches
//! of events, keeps those the [`filter`] lets through (process names from [`procs`], paths
//! from [`resolve`], forks and names of processes already gone from [`proc_events`]) and hands them to a renderer (`report::files`) or counts them ([`summary`]). [`sector`]
//! answers the other question, sector to file, with FIEMAP.
//!
//! This module reads the kernel's view; it never changes a watched file and never blocks the
//! processes it watches (notification groups only, no permission events).

pub mod btrfs;
mod bytes;
pub mod fanotify;
pub mod fiemap;
pub mod filter;
pub mod inode_paths;
pub mod ops;
pub mod proc_events;
pub mod procs;
pub mod resolve;
pub mod sector;
pub mod summary;
pub mod watch;

use ops::Ops;
use std::path::Path;
use std::time::SystemTime;

/// One event that passed the filters.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    /// When tacho read it (the kernel does not timestamp fanotify events).
    pub time: SystemTime,
    /// The process (thread group) that acted.
    pub pid: i32,
    /// Its command name, as the kernel keeps it (15 bytes at most).
    pub comm: &'a str,
    /// What it did (merged letters when the kernel merged events).
    pub ops: Ops,
    /// The file it acted on.
    pub path: &'a Path,
}
