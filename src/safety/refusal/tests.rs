use super::{DeviceState, Mount, Refusal, write_refusal};
use crate::safety::signatures::{Signature, Usage};

fn device(path: &str) -> DeviceState {
    DeviceState {
        device: path.into(),
        ..DeviceState::default()
    }
}

fn mount(source: &str, mount_point: &str) -> Mount {
    Mount {
        source: source.to_owned(),
        mount_point: mount_point.to_owned(),
    }
}

fn signature(name: &str, usage: Usage, start: u64, offset: u64) -> Signature {
    Signature {
        start,
        offset,
        name: name.to_owned(),
        usage,
    }
}

fn ext4() -> Signature {
    signature("ext4", Usage::Filesystem, 0, 1080)
}

fn message(state: &DeviceState, destroy_data: bool) -> String {
    write_refusal(state, destroy_data)
        .expect("a refusal")
        .to_string()
}

#[test]
fn empty_device_is_allowed() {
    assert_eq!(write_refusal(&device("/dev/sdb"), false), None);
    assert_eq!(write_refusal(&device("/dev/sdb"), true), None);
}

#[test]
fn signature_is_refused_unless_destroy_data() {
    let state = DeviceState {
        signatures: vec![ext4()],
        ..device("/dev/loop3")
    };
    assert_eq!(
        message(&state, false),
        "refusing to write to /dev/loop3: it holds an ext4 filesystem (at byte 1080); \
         pass --destroy-data to overwrite it"
    );
    assert!(matches!(
        write_refusal(&state, false),
        Some(Refusal::HoldsData { .. })
    ));
    assert_eq!(write_refusal(&state, true), None);
}

#[test]
fn several_signatures_are_all_named() {
    let gpt = signature("gpt", Usage::PartitionTable, 0, 512);
    let state = DeviceState {
        signatures: vec![gpt, ext4()],
        ..device("/dev/sdc")
    };
    assert_eq!(
        message(&state, false),
        "refusing to write to /dev/sdc: it holds a GPT partition table (at byte 512) and \
         an ext4 filesystem (at byte 1080); pass --destroy-data to overwrite it"
    );
}

#[test]
fn a_filesystem_without_a_partition_table_is_named_with_where_it_begins() {
    let state = DeviceState {
        signatures: vec![signature(
            "ext4",
            Usage::Filesystem,
            1 << 20,
            (1 << 20) + 1080,
        )],
        ..device("/dev/sdc")
    };
    assert_eq!(
        message(&state, false),
        "refusing to write to /dev/sdc: it holds an ext4 filesystem at offset 1 MiB (magic at \
         byte 1049656); pass --destroy-data to overwrite it"
    );
}

#[test]
fn mounted_partition_is_refused_even_with_destroy_data() {
    let state = DeviceState {
        mounts: vec![mount("/dev/sdb1", "/data")],
        signatures: vec![ext4()],
        ..device("/dev/sdb")
    };
    let expected = "refusing to write to /dev/sdb: partition sdb1 is mounted on /data; \
                    unmount it first (--destroy-data does not override this)";
    assert_eq!(message(&state, false), expected);
    assert_eq!(message(&state, true), expected);
    assert!(matches!(
        write_refusal(&state, true),
        Some(Refusal::InUse { .. })
    ));
}

#[test]
fn mounted_device_itself_and_swap() {
    let state = DeviceState {
        mounts: vec![mount("nvme0n1", "/srv")],
        ..device("/dev/nvme0n1")
    };
    assert_eq!(
        message(&state, true),
        "refusing to write to /dev/nvme0n1: it is mounted on /srv; unmount it first \
         (--destroy-data does not override this)"
    );
    let state = DeviceState {
        mounts: vec![mount("sdb1", "/"), mount("sdb3", "/home")],
        swaps: vec!["/dev/sdb2".to_owned()],
        ..device("/dev/sdb")
    };
    assert_eq!(
        message(&state, true),
        "refusing to write to /dev/sdb: partition sdb1 is mounted on /, partition sdb3 is \
         mounted on /home and partition sdb2 is active swap; unmount and swapoff them first \
         (--destroy-data does not override this)"
    );
    let state = DeviceState {
        swaps: vec!["sdd".to_owned()],
        ..device("/dev/sdd")
    };
    assert_eq!(
        message(&state, true),
        "refusing to write to /dev/sdd: it is active swap; swapoff it first \
         (--destroy-data does not override this)"
    );
}

#[test]
fn held_device_is_refused_unless_destroy_data() {
    let lvm = signature("LVM2_member", Usage::Raid, 0, 536);
    let state = DeviceState {
        holders: vec!["dm-0".to_owned(), "dm-1".to_owned()],
        signatures: vec![lvm],
        ..device("/dev/sde")
    };
    assert_eq!(
        message(&state, false),
        "refusing to write to /dev/sde: it is held by dm-0, dm-1 (LVM, device-mapper or md \
         RAID on top of it) and holds an LVM2 physical volume (at byte 536); pass \
         --destroy-data to overwrite it"
    );
    assert_eq!(write_refusal(&state, true), None);
}

#[test]
fn refusal_is_an_error_for_anyhow() {
    let refusal: Box<dyn std::error::Error> = Box::new(Refusal::HoldsData {
        device: "/dev/sdf".into(),
        holders: vec!["md0".to_owned()],
        signatures: vec![],
    });
    assert_eq!(
        refusal.to_string(),
        "refusing to write to /dev/sdf: it is held by md0 (LVM, device-mapper or md RAID on \
         top of it); pass --destroy-data to overwrite it"
    );
}
