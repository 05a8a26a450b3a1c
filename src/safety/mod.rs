//! What tacho may write to: signatures on block devices, mounted and held devices.
//!
//! tacho never destroys data without explicit consent. Before a benchmark writes to a block
//! device, the caller gathers the facts into a [`DeviceState`] (mounts and active swap, holders
//! from /sys, and what [`detect`] finds on the device) and asks [`write_refusal`]. A mounted
//! device or active swap is refused always; a held device or one carrying any partition table,
//! filesystem, RAID, LVM, LUKS or swap signature is refused unless `--destroy-data` is given.

mod blkid;
pub mod links;
mod probe;
mod refusal;
mod signatures;

pub use refusal::{DeviceState, Mount, write_refusal};
pub use signatures::{Signature, detect};
