//! The decision whether tacho may write to a block device, and the one-line reason when not.
//!
//! Pure: the caller gathers the facts (mounts, active swap, holders from /sys, signatures from
//! [`super::detect`]) and this module only judges them, so every rule is tested without root.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Signature;

/// A filesystem mounted from the device or one of its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Kernel name of what is mounted, e.g. "sdb1" or "/dev/sdb1".
    pub source: String,
    /// Where it is mounted, e.g. "/data".
    pub mount_point: String,
}

/// What is known about a device before writing to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// The device as the admin named it, e.g. "/dev/sdb".
    pub device: PathBuf,
    /// Mounts of the device itself or of any of its partitions.
    pub mounts: Vec<Mount>,
    /// Active swap areas (from /proc/swaps) on the device or its partitions, by name.
    pub swaps: Vec<String>,
    /// Devices built on top of it (its and its partitions' /sys/class/block/*/holders), e.g.
    /// "dm-0", "md0".
    pub holders: Vec<String>,
    /// What [`super::detect`] found on it.
    pub signatures: Vec<Signature>,
}

/// Why tacho will not write to a device; Display gives the whole one-line message with its fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Mounted or active swap: overwriting it would corrupt a live system, so no flag allows it.
    InUse {
        device: PathBuf,
        mounts: Vec<Mount>,
        swaps: Vec<String>,
    },
    /// Held by another device or carrying data: allowed only with `--destroy-data`.
    HoldsData {
        device: PathBuf,
        holders: Vec<String>,
        signatures: Vec<Signature>,
    },
}

impl std::error::Error for Refusal {}

/// Whether writing to `state.device` must be refused. Mounted filesystems and active swap are
/// refused always; holders and signatures unless `destroy_data`. Only the refusal that blocks
/// first is reported, so its fix is the next thing to do.
pub fn write_refusal(state: &DeviceState, destroy_data: bool) -> Option<Refusal> {
    if !state.mounts.is_empty() || !state.swaps.is_empty() {
        return Some(Refusal::InUse {
            device: state.device.clone(),
            mounts: state.mounts.clone(),
            swaps: state.swaps.clone(),
        });
    }
    if destroy_data || (state.holders.is_empty() && state.signatures.is_empty()) {
        return None;
    }
    Some(Refusal::HoldsData {
        device: state.device.clone(),
        holders: state.holders.clone(),
        signatures: state.signatures.clone(),
    })
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::InUse {
                device,
                mounts,
                swaps,
            } => {
                let mut uses: Vec<String> = mounts
                    .iter()
                    .map(|m| {
                        let what = subject(device, &m.source);
                        format!("{what} is mounted on {}", m.mount_point)
                    })
                    .collect();
                uses.extend(
                    swaps
                        .iter()
                        .map(|s| format!("{} is active swap", subject(device, s))),
                );
                let them = if uses.len() == 1 { "it" } else { "them" };
                let fix = match (mounts.is_empty(), swaps.is_empty()) {
                    (false, true) => format!("unmount {them} first"),
                    (true, false) => format!("swapoff {them} first"),
                    _ => format!("unmount and swapoff {them} first"),
                };
                write!(
                    f,
                    "refusing to write to {}: {}; {fix} (--destroy-data does not override this)",
                    device.display(),
                    join_and(&uses)
                )
            }
            Refusal::HoldsData {
                device,
                holders,
                signatures,
            } => {
                let mut facts = Vec::new();
                if !holders.is_empty() {
                    facts.push(format!(
                        "it is held by {} (LVM, device-mapper or md RAID on top of it)",
                        holders.join(", ")
                    ));
                }
                if !signatures.is_empty() {
                    let held: Vec<String> = signatures.iter().map(Signature::to_string).collect();
                    let verb = if holders.is_empty() {
                        "it holds"
                    } else {
                        "holds"
                    };
                    facts.push(format!("{verb} {}", join_and(&held)));
                }
                write!(
                    f,
                    "refusing to write to {}: {}; pass --destroy-data to overwrite it",
                    device.display(),
                    facts.join(" and ")
                )
            }
        }
    }
}

/// How to name `source` in a message about `device`: "it" for the device itself, "partition
/// sdb1" for one of its partitions, else the name as given (e.g. a device-mapper volume).
fn subject(device: &Path, source: &str) -> String {
    let dev = base_name(&device.to_string_lossy()).to_owned();
    let src = base_name(source);
    if src == dev {
        "it".to_owned()
    } else if src.starts_with(&dev) {
        format!("partition {src}")
    } else {
        source.to_owned()
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// "a", "a and b", "a, b and c".
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests;
