//! What a block device (or image file) holds, found before tacho writes to it.
//!
//! Each format announces itself with a few magic bytes at a fixed offset, so detection is a
//! handful of small reads and comparisons. It is written here on purpose rather than linking
//! libblkid: that C library would break tacho's single static binary, and the dozen formats an
//! admin could lose data on are enough. Offsets follow the formats' own specifications (and
//! libblkid's documentation); the offset reported is that of the magic bytes, as `wipefs`
//! reports it, so an admin can check the finding with `wipefs --no-act`.
//!
//! This module only reads. It never decides whether a write is allowed; see
//! [`super::write_refusal`].

use std::fmt;
use std::fs::File;
use std::io;

use super::probe::Probe;

/// A kind of content that writing would destroy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SignatureKind {
    Mbr,
    Gpt,
    Ext,
    Xfs,
    Btrfs,
    Swap,
    Lvm2,
    MdRaid,
    Luks,
    Fat,
    ExFat,
    Ntfs,
    Iso9660,
    Zfs,
    Bcache,
}

impl SignatureKind {
    /// The kind with its article, to complete "it holds …".
    pub fn noun_phrase(self) -> &'static str {
        match self {
            Self::Mbr => "an MBR partition table",
            Self::Gpt => "a GPT partition table",
            Self::Ext => "an ext2/3/4 filesystem",
            Self::Xfs => "an XFS filesystem",
            Self::Btrfs => "a btrfs filesystem",
            Self::Swap => "a Linux swap area",
            Self::Lvm2 => "an LVM2 physical volume",
            Self::MdRaid => "a Linux md RAID member",
            Self::Luks => "a LUKS encrypted volume",
            Self::Fat => "a FAT filesystem",
            Self::ExFat => "an exFAT filesystem",
            Self::Ntfs => "an NTFS filesystem",
            Self::Iso9660 => "an ISO9660 filesystem",
            Self::Zfs => "a ZFS member",
            Self::Bcache => "a bcache device",
        }
    }
}

impl fmt::Display for SignatureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mbr => "MBR partition table",
            Self::Gpt => "GPT partition table",
            Self::Ext => "ext2/3/4 filesystem",
            Self::Xfs => "XFS filesystem",
            Self::Btrfs => "btrfs filesystem",
            Self::Swap => "Linux swap",
            Self::Lvm2 => "LVM2 physical volume",
            Self::MdRaid => "Linux md RAID member",
            Self::Luks => "LUKS encrypted volume",
            Self::Fat => "FAT filesystem",
            Self::ExFat => "exFAT filesystem",
            Self::Ntfs => "NTFS filesystem",
            Self::Iso9660 => "ISO9660 filesystem",
            Self::Zfs => "ZFS member",
            Self::Bcache => "bcache",
        })
    }
}

/// One finding: what, and the byte offset of the magic that gave it away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signature {
    pub kind: SignatureKind,
    pub offset: u64,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.kind, self.offset)
    }
}

/// Every signature found in the first `size_bytes` of `dev`, ordered by offset; at most one per
/// kind. Regions beyond `size_bytes` are not read, so a small device just skips those checks.
///
/// `dev` should be opened read-only without O_DIRECT. Reads are 4096-aligned in offset, length
/// and memory, so an O_DIRECT descriptor works too on devices with logical blocks of at most
/// 4096 bytes. An error means the device could not be read: the caller must then refuse to
/// write, since nothing was verified.
pub fn detect(dev: &File, size_bytes: u64) -> io::Result<Vec<Signature>> {
    let mut probe = Probe::new(dev, size_bytes);
    let mut found = Vec::new();
    for (kind, check) in CHECKS {
        if let Some(offset) = check(&mut probe)? {
            found.push(Signature {
                kind: *kind,
                offset,
            });
        }
    }
    drop_mbr_lookalikes(&mut found);
    found.sort_by_key(|s| (s.offset, s.kind));
    Ok(found)
}

/// Removes an MBR finding that is really part of something else: FAT, exFAT and NTFS boot
/// sectors end in the same 0x55AA, and a GPT disk carries a protective MBR. Naming the real
/// format is what the admin needs; the write is refused either way.
fn drop_mbr_lookalikes(found: &mut Vec<Signature>) {
    let explained = found.iter().any(|s| {
        matches!(s.kind, SignatureKind::Gpt)
            || (matches!(
                s.kind,
                SignatureKind::Fat | SignatureKind::ExFat | SignatureKind::Ntfs
            ) && s.offset < 512)
    });
    if explained {
        found.retain(|s| s.kind != SignatureKind::Mbr);
    }
}

/// A check returns the offset of the magic it found, if any.
type Check = fn(&mut Probe) -> io::Result<Option<u64>>;

const CHECKS: &[(SignatureKind, Check)] = &[
    (SignatureKind::Mbr, mbr),
    (SignatureKind::Gpt, gpt),
    (SignatureKind::Ext, ext),
    (SignatureKind::Xfs, |p| first_at(p, &[0], b"XFSB")),
    (SignatureKind::Btrfs, btrfs),
    (SignatureKind::Swap, swap),
    (SignatureKind::Lvm2, lvm2),
    (SignatureKind::MdRaid, md_raid),
    (SignatureKind::Luks, luks),
    (SignatureKind::Fat, fat),
    (SignatureKind::ExFat, |p| first_at(p, &[3], b"EXFAT   ")),
    (SignatureKind::Ntfs, |p| first_at(p, &[3], b"NTFS    ")),
    (SignatureKind::Iso9660, |p| first_at(p, &[32769], b"CD001")),
    (SignatureKind::Zfs, zfs),
    (SignatureKind::Bcache, |p| {
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
