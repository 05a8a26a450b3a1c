//! Synthetic images: each magic written at its offset into a sparse file, everything else zero.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use proptest::prelude::*;

use super::{Signature, Usage, detect, detect_with};

mod lvm;
mod mkfs;

const MIB: u64 = 1 << 20;

/// A sparse temporary file of `len` bytes with `writes` applied.
fn image(len: u64, writes: &[(u64, &[u8])]) -> File {
    let file = tempfile::tempfile().expect("create temp file");
    file.set_len(len).expect("size temp file");
    for (offset, bytes) in writes {
        file.write_all_at(bytes, *offset).expect("write temp file");
    }
    file
}

/// What tacho's own table finds (these images test the table; libblkid is tested by the
/// images real tools make, in `mkfs.rs`), as (name, offset) pairs.
fn found(len: u64, writes: &[(u64, &[u8])]) -> Vec<(String, u64)> {
    table_alone(&image(len, writes), len)
}

fn table_alone(file: &File, len: u64) -> Vec<(String, u64)> {
    let found = detect_with(file, len, false).expect("detect");
    found.into_iter().map(|s| (s.name, s.offset)).collect()
}

fn sig(name: &str, offset: u64) -> (String, u64) {
    (name.to_owned(), offset)
}

/// A valid-looking MBR: boot signature and one bootable Linux partition.
const MBR_ENTRY: (u64, &[u8]) = (446, &[0x80, 0, 0, 0, 0x83, 0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0]);
const BOOT_SIG: (u64, &[u8]) = (510, &[0x55, 0xAA]);

#[test]
fn blank_images_hold_nothing() {
    for len in [
        0,
        1,
        2,
        511,
        512,
        513,
        1081,
        4095,
        4096,
        4097,
        65536,
        65610,
        MIB,
        7 * MIB + 3,
    ] {
        assert_eq!(found(len, &[]), vec![], "blank image of {len} bytes");
    }
}

#[test]
fn random_image_holds_nothing() {
    let mut rng = fastrand::Rng::with_seed(0x7ac0);
    let mut data = vec![0u8; 4 * MIB as usize];
    rng.fill(&mut data);
    assert_eq!(found(4 * MIB, &[(0, &data)]), vec![]);
}

#[test]
fn mbr_needs_a_partition_with_valid_status() {
    assert_eq!(found(MIB, &[MBR_ENTRY, BOOT_SIG]), vec![sig("dos", 510)]);
    // A boot signature alone, or entries with garbage status bytes, is not a partition table.
    assert_eq!(found(MIB, &[BOOT_SIG]), vec![]);
    assert_eq!(found(MIB, &[MBR_ENTRY, (462, &[0x12]), BOOT_SIG]), vec![]);
}

#[test]
fn gpt_primary_at_512_or_4096_and_backup_at_end() {
    let protective: (u64, &[u8]) = (446, &[0, 0, 2, 0, 0xEE, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0]);
    let gpt = |offset| found(MIB, &[protective, BOOT_SIG, (offset, b"EFI PART")]);
    // The protective MBR is part of GPT, so only GPT is reported.
    assert_eq!(gpt(512), vec![sig("gpt", 512)]);
    assert_eq!(gpt(4096), vec![sig("gpt", 4096)]);
    assert_eq!(gpt(MIB - 512), vec![sig("gpt", MIB - 512)]);
    assert_eq!(gpt(MIB - 4096), vec![sig("gpt", MIB - 4096)]);
}

#[test]
fn ext_needs_a_plausible_block_size() {
    let magic = (1080, &[0x53, 0xEF][..]);
    assert_eq!(found(MIB, &[magic]), vec![sig("ext2/3/4", 1080)]);
    assert_eq!(
        found(MIB, &[magic, (1048, &[2, 0, 0, 0])]),
        vec![sig("ext2/3/4", 1080)]
    );
    assert_eq!(found(MIB, &[magic, (1048, &[99, 0, 0, 0])]), vec![]);
}

#[test]
fn single_magic_formats() {
    let bcache = super::BCACHE_MAGIC;
    let cases: &[(&str, u64, &[u8])] = &[
        ("xfs", 0, b"XFSB"),
        ("btrfs", 65536 + 64, b"_BHRfS_M"),
        ("btrfs", (64 << 20) + 64, b"_BHRfS_M"),
        ("crypto_LUKS", 0, b"LUKS\xba\xbe"),
        ("crypto_LUKS", 16384, b"SKUL\xba\xbe"),
        ("crypto_LUKS", 4 << 20, b"SKUL\xba\xbe"),
        ("exfat", 3, b"EXFAT   "),
        ("iso9660", 32769, b"CD001"),
        ("bcache", 4096 + 24, bcache),
    ];
    for &(kind, offset, magic) in cases {
        assert_eq!(
            found(128 * MIB, &[(offset, magic)]),
            vec![sig(kind, offset)],
            "{kind} at {offset}"
        );
    }
}

#[test]
fn swap_for_every_page_size() {
    for page in [4096, 8192, 16384, 65536] {
        for magic in [&b"SWAPSPACE2"[..], b"SWAP-SPACE", b"S1SUSPEND"] {
            assert_eq!(
                found(MIB, &[(page - 10, magic)]),
                vec![sig("swap", page - 10)]
            );
        }
    }
}

#[test]
fn lvm2_label_in_any_of_the_first_four_sectors() {
    for sector in 0..4 {
        let label = sector * 512;
        let writes = [(label, &b"LABELONE"[..]), (label + 24, b"LVM2 001")];
        assert_eq!(found(MIB, &writes), vec![sig("LVM2_member", label + 24)]);
    }
    // The label without the LVM2 type is some other label.
    assert_eq!(found(MIB, &[(512, b"LABELONE")]), vec![]);
    assert_eq!(
        found(MIB, &[(2048, b"LABELONE"), (2072, b"LVM2 001")]),
        vec![]
    );
}

#[test]
fn md_superblocks_at_start_and_end() {
    let le = 0xa92b_4efcu32.to_le_bytes();
    let be = 0xa92b_4efcu32.to_be_bytes();
    // A size that is not a multiple of anything puts the end superblocks at rounded offsets.
    let len = 10 * MIB + 1234;
    let v1_0 = (len - 8192) & !4095;
    let v0_90 = (len & !65535) - 65536;
    for offset in [0, 4096, v1_0] {
        assert_eq!(
            found(len, &[(offset, &le)]),
            vec![sig("linux_raid_member", offset)]
        );
    }
    assert_eq!(
        found(len, &[(v0_90, &le)]),
        vec![sig("linux_raid_member", v0_90)]
    );
    assert_eq!(
        found(len, &[(v0_90, &be)]),
        vec![sig("linux_raid_member", v0_90)]
    );
}

#[test]
fn boot_sector_filesystems_are_not_reported_as_mbr() {
    // Boot code where the partition table would be can look like valid entries.
    let fat16 = [MBR_ENTRY, BOOT_SIG, (54, &b"FAT16   "[..])];
    assert_eq!(found(MIB, &fat16), vec![sig("vfat", 54)]);
    let fat12 = [BOOT_SIG, (54, &b"FAT12   "[..])];
    assert_eq!(found(MIB, &fat12), vec![sig("vfat", 54)]);
    let fat32 = [MBR_ENTRY, BOOT_SIG, (82, &b"FAT32   "[..])];
    assert_eq!(found(MIB, &fat32), vec![sig("vfat", 82)]);
    let ntfs = [MBR_ENTRY, BOOT_SIG, (3, &b"NTFS    "[..])];
    assert_eq!(found(MIB, &ntfs), vec![sig("ntfs", 3)]);
    // FAT without the boot signature is not trusted.
    assert_eq!(found(MIB, &[(54, b"FAT16   ")]), vec![]);
}

#[test]
fn zfs_uberblock_in_start_and_end_labels() {
    let magic = 0x00ba_b10cu64.to_le_bytes();
    let len = 64 * MIB + 5000;
    let end = len & !(256 * 1024 - 1);
    for label in [0, 256 << 10, end - (512 << 10), end - (256 << 10)] {
        let offset = label + (128 << 10) + 2048;
        assert_eq!(
            found(len, &[(offset, &magic)]),
            vec![sig("zfs_member", offset)]
        );
    }
    let big_endian = 0x00ba_b10cu64.to_be_bytes();
    assert_eq!(
        found(len, &[(128 << 10, &big_endian)]),
        vec![sig("zfs_member", 128 << 10)]
    );
}

#[test]
fn several_signatures_are_ordered_by_offset() {
    // An ISO9660 hybrid image carries an MBR so it boots from a USB stick.
    let writes = [(32769, &b"CD001"[..]), MBR_ENTRY, BOOT_SIG];
    assert_eq!(
        found(MIB, &writes),
        vec![sig("dos", 510), sig("iso9660", 32769)]
    );
}

#[test]
fn magic_beyond_the_given_size_is_not_read() {
    let file = image(MIB, &[(32769, b"CD001"), (65600, b"_BHRfS_M")]);
    assert_eq!(table_alone(&file, 32773), vec![]);
    assert_eq!(table_alone(&file, 32774), vec![sig("iso9660", 32769)]);
}

fn signature(name: &str, usage: Usage, start: u64, offset: u64) -> Signature {
    let name = name.to_owned();
    Signature {
        start,
        offset,
        name,
        usage,
    }
}

#[test]
fn display_uses_admin_words_and_says_where() {
    let gpt = signature("gpt", Usage::PartitionTable, 0, 512);
    assert_eq!(gpt.to_string(), "a GPT partition table (at byte 512)");
    let f2fs = signature("f2fs", Usage::Filesystem, 0, 1024);
    assert_eq!(f2fs.to_string(), "an f2fs filesystem (at byte 1024)");
    let minix = signature("minix", Usage::Filesystem, 0, 1040);
    assert_eq!(minix.to_string(), "a minix filesystem (at byte 1040)");
    let ext4 = signature("ext4", Usage::Filesystem, MIB, MIB + 1080);
    assert_eq!(
        ext4.to_string(),
        "an ext4 filesystem at offset 1 MiB (magic at byte 1049656)"
    );
    let raid = signature("isw_raid_member", Usage::Raid, 0, 0);
    assert_eq!(raid.noun_phrase(), "an isw_raid_member RAID member");
    let lvm = signature("LVM2_member", Usage::Raid, 0, 536);
    assert_eq!(lvm.noun_phrase(), "an LVM2 physical volume");
}

#[test]
fn ext4_at_a_mib_boundary_without_a_partition_table() {
    // What the table alone finds: libblkid is checked on a real ext4 in mkfs.rs.
    let magic = (MIB + 1080, &[0x53, 0xEF][..]);
    let file = image(4 * MIB, &[magic]);
    let table = detect_with(&file, 4 * MIB, false).expect("detect");
    assert_eq!(
        table,
        vec![signature("ext2/3/4", Usage::Filesystem, MIB, MIB + 1080)]
    );
    // Not at 16 MiB and beyond, nor between boundaries.
    assert_eq!(found(32 * MIB, &[(16 * MIB + 1080, &[0x53, 0xEF])]), vec![]);
    assert_eq!(
        found(4 * MIB, &[(MIB + 4096 + 1080, &[0x53, 0xEF])]),
        vec![]
    );
}

#[test]
fn a_backup_copy_of_the_same_format_is_reported_once() {
    let ext = &[0x53, 0xEF][..];
    let writes = [(1080, ext), (8 * MIB + 1080, ext)];
    assert_eq!(found(16 * MIB, &writes), vec![sig("ext2/3/4", 1080)]);
}

/// Magics that the proptest scatters, so checks get past their first comparison.
const MAGICS: &[&[u8]] = &[
    b"EFI PART",
    b"LABELONE",
    b"LVM2 001",
    b"\xfc\x4e\x2b\xa9",
    b"\x55\xaa",
    b"\x53\xef",
    b"SWAPSPACE2",
    b"\x0c\xb1\xba\x00\x00\x00\x00\x00",
    b"FAT32   ",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn never_panics_on_any_content_or_size(
        data in proptest::collection::vec(any::<u8>(), 0..70_000),
        size in prop_oneof![0u64..200_000, any::<u64>(), (u64::MAX - 300_000)..=u64::MAX],
        scattered in proptest::collection::vec((0u64..140_000, 0..MAGICS.len()), 0..8),
    ) {
        let file = image(data.len() as u64, &[(0, &data)]);
        for (offset, magic) in scattered {
            file.write_all_at(MAGICS[magic], offset).expect("write temp file");
        }
        // Sizes beyond the file read as zeros or fail to read; either way, no panic.
        let _ = detect(&file, size);
    }
}

#[test]
fn works_on_an_o_direct_descriptor() {
    use std::os::unix::fs::OpenOptionsExt;
    // tmpfs refuses O_DIRECT, so the image lives beside the crate's build output instead.
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("create temp dir");
    let path = dir.path().join("direct.img");
    let len = MIB + 512;
    std::fs::File::create(&path)
        .and_then(|f| {
            f.set_len(len)?;
            f.write_all_at(&[0x53, 0xEF], 1080)?;
            f.write_all_at(b"EFI PART", len - 512)
        })
        .expect("write image");
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    let Ok(direct) = direct else {
        let _ = writeln!(
            std::io::stderr(),
            "skipping works_on_an_o_direct_descriptor: this filesystem refuses O_DIRECT"
        );
        return;
    };
    // With libblkid too, which reads unaligned and so gets a descriptor without O_DIRECT.
    let found = detect(&direct, len).expect("detect with O_DIRECT");
    let found: Vec<(String, u64)> = found.into_iter().map(|s| (s.name, s.offset)).collect();
    // libblkid takes the bare magic for ext2; the table cannot tell.
    let ext = if super::blkid::available() {
        "ext2"
    } else {
        "ext2/3/4"
    };
    assert_eq!(found, vec![sig(ext, 1080), sig("gpt", len - 512)]);
}
