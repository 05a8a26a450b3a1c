//! What a block device (or image file) holds, found before tacho writes to it.
//!
//! Two sources, and every find of either counts. util-linux's libblkid (see `super::blkid`),
//! loaded at run time, knows every format the system's `mount`, `mkfs` and `wipefs` know.
//! tacho's own table below is the fallback where libblkid is missing, and runs always, so a
//! format stays recognised even if a library in the way is old or broken: each format announces
//! itself with a few magic bytes at a fixed offset, so a check is a handful of small reads and
//! comparisons. Offsets follow the formats' own specifications (and libblkid's documentation);
//! the offset reported is that of the magic bytes, as `wipefs` reports it, so an admin can
//! check a finding with `wipefs --no-act`.
//!
//! A filesystem written straight to a disk at a partition boundary, without a partition table
//! in front of it, is found too: after the whole device, each MiB boundary of the first 16 MiB
//! is probed as if the device started there.
//!
//! This module only reads. It never decides whether a write is allowed; see
//! [`super::write_refusal`].

use std::fmt;
use std::fs::File;
use std::io;

use super::blkid;
use super::probe::Probe;

const MIB: u64 = 1 << 20;

/// Filesystems found at these boundaries without a partition table are found too: 1 MiB is
/// where partitioning tools have put the first partition since 2010, and the others cover
/// older alignments and hand-made layouts.
const WINDOWS: std::ops::Range<u64> = 1..16;

/// What a signature says the content is used for; it words the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Usage {
    PartitionTable,
    Filesystem,
    Raid,
    Crypto,
    Other,
}

impl Usage {
    fn from_blkid(usage: &str) -> Usage {
        match usage {
            "partition table" => Usage::PartitionTable,
            "filesystem" => Usage::Filesystem,
            "raid" => Usage::Raid,
            "crypto" => Usage::Crypto,
            _ => Usage::Other,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Usage::PartitionTable => "partition table",
            Usage::Filesystem => "filesystem",
            Usage::Raid => "RAID member",
            Usage::Crypto => "encrypted volume",
            Usage::Other => "signature",
        }
    }
}

/// One finding: what, where it begins, and the byte offset of the magic that gave it away.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signature {
    /// Where the content begins: 0, or the MiB boundary where a filesystem without a partition
    /// table in front of it was found.
    pub start: u64,
    /// Byte offset of the magic from the start of the device, as `wipefs` reports it.
    pub offset: u64,
    /// The format in libblkid's words ("ext4", "f2fs", "dos", "gpt", "LVM2_member"); tacho's
    /// table uses the same names, except "ext2/3/4", which it cannot tell apart.
    pub name: String,
    /// What kind of content it is (partition table, filesystem, RAID member, …), which the refusal
    /// message names.
    pub usage: Usage,
}

impl Signature {
    /// The content with its article, to complete "it holds …".
    pub fn noun_phrase(&self) -> String {
        let known = match self.name.as_str() {
            "dos" => "an MBR partition table",
            "gpt" => "a GPT partition table",
            "PMBR" => "a protective MBR",
            "LVM2_member" => "an LVM2 physical volume",
            "linux_raid_member" => "a Linux md RAID member",
            "crypto_LUKS" => "a LUKS encrypted volume",
            "swap" => "a Linux swap area",
            "zfs_member" => "a ZFS member",
            "bcache" => "a bcache device",
            name => return format!("{} {name} {}", article(name), self.usage.noun()),
        };
        known.to_owned()
    }
}

/// "an" before names read as a vowel sound: ext4, iso9660, and initialisms whose first letter
/// is spoken with one (f2fs, hfsplus, xfs, ntfs).
fn article(name: &str) -> &'static str {
    let first = name.chars().next().unwrap_or('x').to_ascii_lowercase();
    if "aeiofhx".contains(first) || name.starts_with("ntfs") {
        "an"
    } else {
        "a"
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == 0 {
            write!(f, "{} (at byte {})", self.noun_phrase(), self.offset)
        } else {
            write!(
                f,
                "{} at offset {} MiB (magic at byte {})",
                self.noun_phrase(),
                self.start / MIB,
                self.offset
            )
        }
    }
}

/// Every signature found in the first `size_bytes` of `dev`, one per format (the first copy),
/// ordered by where it begins, then by offset. Regions beyond `size_bytes` are not read, so a
/// small device just skips those checks.
///
/// `dev` should be opened read-only without O_DIRECT. tacho's own checks read 4096-aligned
/// blocks, so they work on an O_DIRECT descriptor too (logical blocks up to 4096 bytes); for
/// libblkid, which reads unaligned, such a descriptor is reopened through /proc/self/fd. An
/// error means the device could not be read: the caller must then refuse to write, since
/// nothing was verified.
pub fn detect(dev: &File, size_bytes: u64) -> io::Result<Vec<Signature>> {
    detect_with(dev, size_bytes, true)
}

/// [`detect`], with libblkid or (for tests of the fallback) with tacho's table alone.
fn detect_with(dev: &File, size_bytes: u64, use_blkid: bool) -> io::Result<Vec<Signature>> {
    let buffered = if use_blkid {
        without_o_direct(dev)?
    } else {
        None
    };
    let blkid_dev = buffered.as_ref().unwrap_or(dev);
    let mut found = Vec::new();
    // Window 0 is the whole device, with its partition tables.
    for window in std::iter::once(0).chain(WINDOWS) {
        let start = window * MIB;
        if start >= size_bytes || (start > 0 && size_bytes - start < MIB) {
            break;
        }
        let len = size_bytes - start;
        let finds = use_blkid
            .then(|| blkid::probe(blkid_dev, start, len, start == 0))
            .flatten();
        if let Some(finds) = finds {
            found.extend(finds?.into_iter().map(|f| Signature {
                start,
                offset: f.offset,
                usage: Usage::from_blkid(&f.usage),
                name: f.name,
            }));
        }
        found.extend(table(dev, start, len, start == 0)?);
    }
    Ok(one_per_format(found))
}

/// A descriptor for `dev` without O_DIRECT, when `dev` has it: the same open file, reached
/// through /proc/self/fd (no path another user could swap).
fn without_o_direct(dev: &File) -> io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let flags = rustix::fs::fcntl_getfl(dev)?;
    if !flags.contains(rustix::fs::OFlags::DIRECT) || !blkid::available() {
        return Ok(None);
    }
    File::open(format!("/proc/self/fd/{}", dev.as_raw_fd())).map(Some)
}

/// Keeps the first find of each format: the same format again is a backup copy (a GPT's
/// backup header, a small ext4's backup superblock at 8 MiB), or found by both sources. The
/// table's "ext2/3/4" is the same format as libblkid's ext2, ext3, ext4 and jbd, and GPT's
/// protective MBR (an MBR by the table, "PMBR" by libblkid) is part of the GPT.
fn one_per_format(mut found: Vec<Signature>) -> Vec<Signature> {
    found.sort();
    // Where libblkid named the ext version, the table's guess at the same place adds nothing.
    let named_ext: Vec<u64> = found
        .iter()
        .filter(|s| family(&s.name) == "ext" && s.name != "ext2/3/4")
        .map(|s| s.start)
        .collect();
    found.retain(|s| !(s.name == "ext2/3/4" && named_ext.contains(&s.start)));
    let mut seen: Vec<String> = Vec::new();
    found.retain(|s| {
        let f = family(&s.name).to_owned();
        let first = !seen.contains(&f);
        seen.push(f);
        first
    });
    drop_mbr_lookalikes(&mut found);
    found
}

/// The format's family: libblkid's ext2, ext3, ext4 and jbd are the table's "ext2/3/4".
fn family(name: &str) -> &str {
    match name {
        "ext2" | "ext3" | "ext4" | "ext4dev" | "jbd" | "ext2/3/4" => "ext",
        other => other,
    }
}

/// What tacho's own table finds in `len` bytes of `dev` from `start`; partition tables only
/// when `partitions` (at the start of the device: elsewhere they are a filesystem's boot code).
fn table(dev: &File, start: u64, len: u64, partitions: bool) -> io::Result<Vec<Signature>> {
    let mut probe = Probe::new(dev, start, len);
    let mut found = Vec::new();
    for (kind, check) in CHECKS {
        if !partitions && kind.usage == Usage::PartitionTable {
            continue;
        }
        if let Some(offset) = check(&mut probe)? {
            found.push(Signature {
                start,
                offset: start + offset,
                name: kind.name.to_owned(),
                usage: kind.usage,
            });
        }
    }
    Ok(found)
}

/// Removes an MBR finding that is really part of something else: FAT, exFAT and NTFS boot
/// sectors end in the same 0x55AA (libblkid lists it as "dos" too), and a GPT disk carries a
/// protective MBR ("PMBR"). Naming the real format is what the admin needs; the write is
/// refused either way.
fn drop_mbr_lookalikes(found: &mut Vec<Signature>) {
    let explained = found.iter().any(|s| {
        s.name == "gpt"
            || (s.start == 0
                && matches!(s.name.as_str(), "vfat" | "exfat" | "ntfs")
                && s.offset < 512)
    });
    if explained {
        found.retain(|s| s.name != "dos" && s.name != "PMBR");
    }
}

/// A format of the table, named as libblkid names it.
struct Kind {
    name: &'static str,
    usage: Usage,
}

const fn kind(name: &'static str, usage: Usage) -> Kind {
    Kind { name, usage }
}

/// A check returns the offset of the magic it found, if any.
type Check = fn(&mut Probe) -> io::Result<Option<u64>>;

const CHECKS: &[(Kind, Check)] = &[
    (kind("dos", Usage::PartitionTable), mbr),
    (kind("gpt", Usage::PartitionTable), gpt),
    (kind("ext2/3/4", Usage::Filesystem), ext),
    (kind("xfs", Usage::Filesystem), |p| {
        first_at(p, &[0], b"XFSB")
    }),
    (kind("btrfs", Usage::Filesystem), btrfs),
    (kind("swap", Usage::Other), swap),
    (kind("LVM2_member", Usage::Raid), lvm2),
    (kind("linux_raid_member", Usage::Raid), md_raid),
    (kind("crypto_LUKS", Usage::Crypto), luks),
    (kind("vfat", Usage::Filesystem), fat),
    (kind("exfat", Usage::Filesystem), |p| {
        first_at(p, &[3], b"EXFAT   ")
    }),
    (kind("ntfs", Usage::Filesystem), |p| {
        first_at(p, &[3], b"NTFS    ")
    }),
    (kind("iso9660", Usage::Filesystem), |p| {
        first_at(p, &[32769], b"CD001")
    }),
    (kind("zfs_member", Usage::Raid), zfs),
    (kind("bcache", Usage::Other), |p| {
        first_at(p, &[4096 + 24], BCACHE_MAGIC)
    }),
];

/// The first of `offsets` where `magic` is found.
fn first_at(p: &mut Probe, offsets: &[u64], magic: &[u8]) -> io::Result<Option<u64>> {
    for &offset in offsets {
        if p.has(offset, magic)? {
            return Ok(Some(offset));
        }
    }
    Ok(None)
}

const BOOT_SIGNATURE: &[u8] = &[0x55, 0xAA];

/// 0x55AA alone is in every boot sector; a partition table also has four entries whose status
/// byte is 0x00 or 0x80 and at least one entry with a partition type.
fn mbr(p: &mut Probe) -> io::Result<Option<u64>> {
    let Some(sector) = p.bytes(0, 512)? else {
        return Ok(None);
    };
    if &sector[510..] != BOOT_SIGNATURE {
        return Ok(None);
    }
    let entries = sector[446..510].chunks_exact(16);
    let statuses_valid = entries.clone().all(|e| e[0] == 0x00 || e[0] == 0x80);
    let any_partition = entries.clone().any(|e| e[4] != 0);
    Ok((statuses_valid && any_partition).then_some(510))
}

/// The primary header is in the second logical block (512 or 4096); the backup in the last,
/// which still marks the disk when the primary was wiped.
fn gpt(p: &mut Probe) -> io::Result<Option<u64>> {
    let size = p.size();
    let backups = [
        (size & !511).checked_sub(512),
        (size & !4095).checked_sub(4096),
    ];
    let offsets: Vec<u64> = [Some(512), Some(4096)]
        .into_iter()
        .chain(backups)
        .flatten()
        .collect();
    first_at(p, &offsets, b"EFI PART")
}

/// Magic 0xEF53 in the superblock at 1024. Two bytes match random data too often, so also
/// require a plausible block size (log2(size) - 10 at superblock offset 24, 1 KiB to 64 KiB).
fn ext(p: &mut Probe) -> io::Result<Option<u64>> {
    if !p.has(1080, &[0x53, 0xEF])? {
        return Ok(None);
    }
    Ok(p.u32_le(1024 + 24)?.filter(|&log| log <= 6).map(|_| 1080))
}

/// Primary superblock at 64 KiB, mirrors at 64 MiB and 256 GiB; the magic is 64 bytes in.
fn btrfs(p: &mut Probe) -> io::Result<Option<u64>> {
    first_at(
        p,
        &[65536 + 64, (64 << 20) + 64, (256 << 30) + 64],
        b"_BHRfS_M",
    )
}

/// The magic ends the first page, whose size depends on the machine that ran mkswap. A swap
/// area holding a hibernation image carries a suspend magic instead.
fn swap(p: &mut Probe) -> io::Result<Option<u64>> {
    const MAGICS: &[&[u8]] = &[
        b"SWAPSPACE2",
        b"SWAP-SPACE",
        b"S1SUSPEND",
        b"S2SUSPEND",
        b"ULSUSPEND",
        b"LINHIB0001",
        b"\xed\xc3\x02\xe9\x98\x56\xe5\x0c",
    ];
    for page in [4096, 8192, 16384, 65536] {
        for magic in MAGICS {
            if p.has(page - 10, magic)? {
                return Ok(Some(page - 10));
            }
        }
    }
    Ok(None)
}

/// The label may be in any of the first four sectors: "LABELONE", then the type 24 bytes on.
fn lvm2(p: &mut Probe) -> io::Result<Option<u64>> {
    for sector in 0..4 {
        let label = sector * 512;
        if p.has(label, b"LABELONE")? && p.has(label + 24, b"LVM2 001")? {
            return Ok(Some(label + 24));
        }
    }
    Ok(None)
}

const MD_MAGIC: u32 = 0xa92b_4efc;

/// Superblock versions 1.1 (at 0) and 1.2 (at 4 KiB) sit at the start; 1.0 (8 KiB before the
/// end, 4 KiB aligned) and 0.90 (the last whole 64 KiB block but one) at the end. 0.90 is
/// written in the creating host's byte order, so it is also accepted big-endian.
fn md_raid(p: &mut Probe) -> io::Result<Option<u64>> {
    let size = p.size();
    let v1_0 = size.checked_sub(8192).map(|o| o & !4095);
    let v0_90 = (size & !65535).checked_sub(65536);
    for offset in [Some(0), Some(4096), v1_0].into_iter().flatten() {
        if p.u32_le(offset)? == Some(MD_MAGIC) {
            return Ok(Some(offset));
        }
    }
    if let Some(offset) = v0_90 {
        let magic = p.u32_le(offset)?;
        if magic == Some(MD_MAGIC) || magic == Some(MD_MAGIC.swap_bytes()) {
            return Ok(Some(offset));
        }
    }
    Ok(None)
}

/// The header at 0; LUKS2 also keeps a second header at one of these offsets, which still
/// identifies the volume when the first was damaged.
fn luks(p: &mut Probe) -> io::Result<Option<u64>> {
    if p.has(0, b"LUKS\xba\xbe")? {
        return Ok(Some(0));
    }
    let secondary: Vec<u64> = (14..=22).map(|shift| 1u64 << shift).collect();
    first_at(p, &secondary, b"SKUL\xba\xbe")
}

/// The filesystem type string of a FAT12/16 or FAT32 boot sector, which also ends in 0x55AA.
fn fat(p: &mut Probe) -> io::Result<Option<u64>> {
    if !p.has(510, BOOT_SIGNATURE)? {
        return Ok(None);
    }
    for name in [b"FAT12   ", b"FAT16   ", b"FAT     "] {
        if p.has(54, name)? {
            return Ok(Some(54));
        }
    }
    first_at(p, &[82], b"FAT32   ")
}

/// Each of the four vdev labels (two at the start, two at the end, 256 KiB each, the end ones
/// aligned to 256 KiB) holds an array of uberblocks 128 KiB in, all starting with the magic
/// 0x00bab10c in the pool's byte order. Slots are 1 KiB or larger, so the four 1 KiB positions
/// of the array's first block cover every slot size.
fn zfs(p: &mut Probe) -> io::Result<Option<u64>> {
    const LABEL: u64 = 256 << 10;
    const UBERBLOCK_MAGIC: u64 = 0x00ba_b10c;
    let end = p.size() & !(LABEL - 1);
    let labels = [
        Some(0),
        Some(LABEL),
        end.checked_sub(2 * LABEL),
        end.checked_sub(LABEL),
    ];
    for label in labels.into_iter().flatten() {
        for slot in 0..4 {
            let offset = label + (128 << 10) + slot * 1024;
            if let Some(b) = p.bytes(offset, 8)? {
                let word = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                if word == UBERBLOCK_MAGIC || word == UBERBLOCK_MAGIC.swap_bytes() {
                    return Ok(Some(offset));
                }
            }
        }
    }
    Ok(None)
}

/// The bcache superblock is at 4 KiB; its 16-byte magic follows three 8-byte fields.
const BCACHE_MAGIC: &[u8] = &[
    0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81,
];

#[cfg(test)]
mod tests;
