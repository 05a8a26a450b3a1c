//! Peer groups of block devices: the members of an md array, the physical volumes of an LVM
//! volume group, the devices under a dm table (striped, linear), the devices of a btrfs
//! filesystem whose data is striped or mirrored. Members of a group carry the
//! same load by design, so one far slower than the others is a hot (often failing) disk.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnose::sample::devices::Devices;
use crate::kernel::blockdev::DeviceKind;
use crate::kernel::btrfs::BtrfsFs;
use crate::words::words;

words! {
    /// What ties a group's members together.
    pub enum Kind {
        /// An md (software RAID) array.
        Md = "md",
        /// The physical volumes of an LVM volume group.
        Lvm = "lvm",
        /// The devices under a device-mapper table (striped, linear).
        Dm = "dm",
        /// The devices of a btrfs filesystem that stripes or mirrors data.
        Btrfs = "btrfs",
    }
}

/// Devices that share work (an md array, a volume group, a dm table, a multi-device btrfs), whose
/// members are compared with one another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// `md0`, the volume group's name, the dm name, or the btrfs label.
    pub name: String,
    /// What ties the members together.
    pub kind: Kind,
    /// Kernel names of the members, sorted.
    pub members: Vec<String>,
}

/// Every group with at least two members. A set of members is reported once, by the most
/// specific name (md array, then volume group, then dm table, then btrfs).
pub fn groups(devices: &Devices, btrfs: &[BtrfsFs]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut push = |g: Group| {
        if g.members.len() >= 2 && !out.iter().any(|o| o.members == g.members) {
            out.push(g);
        }
    };
    let mut sorted: Vec<_> = devices.values().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for d in sorted.iter().filter(|d| d.kind == DeviceKind::Md) {
        push(Group {
            name: d.display_name.clone(),
            kind: Kind::Md,
            members: sorted_members(&d.slaves),
        });
    }
    let mut volume_groups: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for d in &sorted {
        if let Some(vg_uuid) = d.dm_uuid.as_deref().and_then(lvm_vg_uuid) {
            let entry = volume_groups
                .entry(vg_uuid.to_string())
                .or_insert_with(|| (vg_name(&d.display_name), Vec::new()));
            entry.1.extend(d.slaves.iter().cloned());
        }
    }
    for (name, members) in volume_groups.into_values() {
        push(Group {
            name,
            kind: Kind::Lvm,
            members: sorted_members(&members),
        });
    }
    for d in sorted.iter().filter(|d| d.kind == DeviceKind::DeviceMapper) {
        push(Group {
            name: d.display_name.clone(),
            kind: Kind::Dm,
            members: sorted_members(&d.slaves),
        });
    }
    for fs in btrfs.iter().filter(|fs| fs.spreads_data()) {
        push(Group {
            name: fs.name(),
            kind: Kind::Btrfs,
            members: sorted_members(&fs.devices),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn sorted_members(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    v.sort();
    v.dedup();
    v
}

/// The volume group's UUID inside an LVM dm UUID (`LVM-` + 32 characters of VG UUID + 32 of
/// LV UUID, with an optional `-suffix` for internal volumes).
fn lvm_vg_uuid(uuid: &str) -> Option<&str> {
    uuid.strip_prefix("LVM-")?.get(..32)
}

/// The VG part of an LVM dm name: LVM writes `vg-lv` and doubles any '-' inside either name,
/// so the first single '-' separates them.
pub fn vg_name(dm_name: &str) -> String {
    let bytes = dm_name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'-' {
            if bytes.get(i + 1) == Some(&b'-') {
                i += 2;
                continue;
            }
            return dm_name[..i].replace("--", "-");
        }
        i += 1;
    }
    dm_name.replace("--", "-")
}

/// Member name → its group's name, for labelling disks.
pub fn membership(groups: &[Group]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for g in groups {
        for m in &g.members {
            out.entry(m.clone()).or_insert_with(|| g.name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::sample::devices::DeviceInfo;

    fn dev(
        name: &str,
        display: &str,
        kind: DeviceKind,
        slaves: &[&str],
        uuid: Option<&str>,
    ) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            display_name: display.into(),
            kind,
            parent: None,
            rotational: Some(false),
            virtual_disk: false,
            slaves: slaves.iter().map(|s| s.to_string()).collect(),
            dm_uuid: uuid.map(str::to_string),
            backing: None,
        }
    }

    #[test]
    fn md_lvm_dm_and_btrfs_groups() {
        let vg = "A".repeat(32);
        let mut d = Devices::new();
        d.insert(
            (9, 0),
            dev(
                "md0",
                "md0",
                DeviceKind::Md,
                &["sdb1", "sda1", "sdc1"],
                None,
            ),
        );
        let lv1 = format!("LVM-{vg}{}", "B".repeat(32));
        let lv2 = format!("LVM-{vg}{}", "C".repeat(32));
        d.insert(
            (253, 0),
            dev(
                "dm-0",
                "my--vg-root",
                DeviceKind::DeviceMapper,
                &["sdd"],
                Some(&lv1),
            ),
        );
        d.insert(
            (253, 1),
            dev(
                "dm-1",
                "my--vg-data",
                DeviceKind::DeviceMapper,
                &["sde", "sdd"],
                Some(&lv2),
            ),
        );
        d.insert(
            (253, 2),
            dev(
                "dm-2",
                "stripe",
                DeviceKind::DeviceMapper,
                &["loop1", "loop0", "dm-3"],
                None,
            ),
        );
        d.insert(
            (253, 3),
            dev("dm-3", "slow", DeviceKind::DeviceMapper, &["loop2"], None),
        );
        // A dm table over the same members as the md array is not a second group.
        d.insert(
            (253, 4),
            dev(
                "dm-4",
                "crypt",
                DeviceKind::DeviceMapper,
                &["sda1", "sdb1", "sdc1"],
                None,
            ),
        );
        let fs = |label: &str, profile: &str, devices: &[&str]| BtrfsFs {
            uuid: "0788b461-0d17-462d-9c3b-4ed2f9d67e6f".into(),
            label: Some(label.into()),
            data_profiles: vec![profile.into()],
            devices: devices.iter().map(|s| s.to_string()).collect(),
        };
        // Only a btrfs that stripes or mirrors data makes its members peers.
        let btrfs = [
            fs("pool", "raid1", &["loop5", "loop4", "loop6"]),
            fs("jbod", "single", &["loop7", "loop8"]),
        ];
        let g = groups(&d, &btrfs);
        let names: Vec<(&str, &str)> = g
            .iter()
            .map(|g| (g.name.as_str(), g.kind.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("md0", "md"),
                ("my-vg", "lvm"),
                ("pool", "btrfs"),
                ("stripe", "dm")
            ]
        );
        assert_eq!(g[2].members, ["loop4", "loop5", "loop6"]);
        assert_eq!(g[0].members, ["sda1", "sdb1", "sdc1"]);
        assert_eq!(g[1].members, ["sdd", "sde"]);
        assert_eq!(g[3].members, ["dm-3", "loop0", "loop1"]);
        assert_eq!(membership(&g)["dm-3"], "stripe");
    }

    #[test]
    fn kinds_serialize_as_their_words() {
        let words: Vec<String> = Kind::ALL
            .iter()
            .map(|k| serde_json::to_string(k).unwrap())
            .collect();
        assert_eq!(words, [r#""md""#, r#""lvm""#, r#""dm""#, r#""btrfs""#]);
    }

    #[test]
    fn vg_names() {
        assert_eq!(vg_name("vg0-root"), "vg0");
        assert_eq!(vg_name("my--vg-lv--x"), "my-vg");
        assert_eq!(vg_name("novg"), "novg");
        assert_eq!(vg_name("a--"), "a-");
    }
}
