//! /sys/fs/btrfs: mounted btrfs filesystems, their member devices and data profile. A
//! multi-device btrfs with a striped or mirrored data profile spreads every file over its
//! members as md does, so the members are peers for hot-disk detection.

use serde::Serialize;

use super::blockdev::list_names;
use super::{Result, SysRoot, read_optional};

/// One mounted btrfs filesystem, as /sys/fs/btrfs/UUID describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BtrfsFs {
    /// Filesystem UUID (the directory name under /sys/fs/btrfs).
    pub uuid: String,
    /// The label given at mkfs time; `None` when unset.
    pub label: Option<String>,
    /// Data profiles in use (`raid0`, `raid1`, `single`, …): several while a balance
    /// converts between them.
    pub data_profiles: Vec<String>,
    /// Kernel names of the member devices (`sdb`, `nvme0n1p2`, `loop3`), sorted.
    pub devices: Vec<String>,
}

impl BtrfsFs {
    /// Whether data goes to every member alike (striped or mirrored), which is what makes
    /// the members comparable; `single` and `dup` fill one device at a time.
    pub fn spreads_data(&self) -> bool {
        !self.data_profiles.is_empty() && self.data_profiles.iter().all(|p| p.starts_with("raid"))
    }

    /// The label, else the start of the UUID, as `btrfs filesystem show` identifies it.
    pub fn name(&self) -> String {
        match &self.label {
            Some(l) => l.clone(),
            None => format!("btrfs-{}", self.uuid.get(..8).unwrap_or(&self.uuid)),
        }
    }
}

/// Every mounted btrfs filesystem; empty when btrfs is not loaded. A filesystem unmounted
/// while it is being read is left out rather than failing the sample.
pub fn read(root: &SysRoot) -> Result<Vec<BtrfsFs>> {
    let base = root.sys.join("fs/btrfs");
    let mut out = Vec::new();
    for uuid in list_names(&base)? {
        let dir = base.join(&uuid);
        // Only filesystem directories have `devices/`; `features/` does not.
        let devices = list_names(&dir.join("devices"))?;
        if devices.is_empty() {
            continue;
        }
        let label = read_optional(&dir.join("label"))?
            .map(|l| l.trim_end_matches('\n').to_string())
            .filter(|l| !l.is_empty());
        let data_profiles = list_names(&dir.join("allocation/data"))?
            .into_iter()
            .filter(|n| is_profile(n))
            .collect();
        out.push(BtrfsFs {
            uuid,
            label,
            data_profiles,
            devices,
        });
    }
    Ok(out)
}

/// The profile directories btrfs creates under allocation/data, beside its counters.
fn is_profile(name: &str) -> bool {
    matches!(
        name,
        "single" | "dup" | "raid0" | "raid1" | "raid1c3" | "raid1c4" | "raid10" | "raid5" | "raid6"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::{mkdir, symlink, write};

    #[test]
    fn reads_members_label_and_profile() {
        let t = tempfile::tempdir().unwrap();
        let fs = "sys/fs/btrfs/0788b461-0d17-462d-9c3b-4ed2f9d67e6f";
        mkdir(t.path(), "sys/fs/btrfs/features");
        write(t.path(), &format!("{fs}/label"), "tachohot\n");
        for d in ["loop3", "loop0", "loop1"] {
            symlink(
                t.path(),
                &format!("{fs}/devices/{d}"),
                &format!("../../../../devices/virtual/block/{d}"),
            );
        }
        write(
            t.path(),
            &format!("{fs}/allocation/data/raid0/used_bytes"),
            "0\n",
        );
        write(
            t.path(),
            &format!("{fs}/allocation/data/total_bytes"),
            "0\n",
        );
        let all = read(&SysRoot::under(t.path())).unwrap();
        assert_eq!(all.len(), 1);
        let b = &all[0];
        assert_eq!(b.devices, ["loop0", "loop1", "loop3"]);
        assert_eq!(b.name(), "tachohot");
        assert_eq!(b.data_profiles, ["raid0"]);
        assert!(b.spreads_data());
    }

    #[test]
    fn single_profile_and_missing_label() {
        let t = tempfile::tempdir().unwrap();
        let fs = "sys/fs/btrfs/abcdef0123456789";
        write(t.path(), &format!("{fs}/label"), "\n");
        symlink(t.path(), &format!("{fs}/devices/sdb"), "../x");
        mkdir(t.path(), &format!("{fs}/allocation/data/single"));
        let b = &read(&SysRoot::under(t.path())).unwrap()[0];
        assert_eq!(b.name(), "btrfs-abcdef01");
        assert!(!b.spreads_data());
    }

    #[test]
    fn no_btrfs_is_empty() {
        let t = tempfile::tempdir().unwrap();
        assert!(read(&SysRoot::under(t.path())).unwrap().is_empty());
    }
}
