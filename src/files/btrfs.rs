//! btrfs: from a byte offset on one of its devices to btrfs's logical address, which is what
//! FIEMAP reports on btrfs.
//!
//! btrfs maps logical addresses to devices in chunks; each chunk item lists its stripes (device
//! id and offset on that device). tacho reads the chunk tree with BTRFS_IOC_TREE_SEARCH and
//! finds the chunk whose stripe on this device covers the offset. Profiles that keep a whole
//! copy per stripe (single, DUP, RAID1, RAID1C3/C4) are mapped; striped ones (RAID0, RAID10,
//! RAID5/6) are reported as not supported rather than guessed. No crate offers these ioctls;
//! they are called through libc with the argument structs laid out in aligned `u64` buffers.

// The search header is in host order; item bodies are on-disk (little-endian) structs.
use super::bytes::{le_u16, le_u64, ne_u32, ne_u64};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `_IOWR(0x94, 17, struct btrfs_ioctl_search_args)` (4096 bytes).
const IOC_TREE_SEARCH: libc::c_ulong = 0xD000_9411;
/// `_IOWR(0x94, 30, struct btrfs_ioctl_dev_info_args)` (4096 bytes).
const IOC_DEV_INFO: libc::c_ulong = 0xD000_941E;
/// `_IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)` (1024 bytes).
const IOC_FS_INFO: libc::c_ulong = 0x8400_941F;

const CHUNK_TREE: u64 = 3;
const FIRST_CHUNK_TREE_OBJECTID: u64 = 256;
const CHUNK_ITEM_KEY: u32 = 228;
const SEARCH_KEY_BYTES: usize = 104;
const SEARCH_HEADER_BYTES: usize = 32;
const CHUNK_BYTES: usize = 48;
const STRIPE_BYTES: usize = 32;
const STRIPED: u64 = (1 << 3) | (1 << 6) | (1 << 7) | (1 << 8);

/// One stripe of a chunk: where on which device a copy of it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    /// The btrfs id of the device holding this copy.
    pub devid: u64,
    /// Byte offset of the copy on that device.
    pub offset: u64,
}

/// A chunk: `length` bytes of logical address space from `logical`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Start of the chunk in btrfs's logical address space, in bytes.
    pub logical: u64,
    /// Size of the chunk, in bytes.
    pub length: u64,
    /// The chunk's type and profile flags (`BTRFS_BLOCK_GROUP_*`: data, RAID0, RAID1, …).
    pub profile: u64,
    /// Where its copies lie (several for mirrored profiles).
    pub stripes: Vec<Stripe>,
}

/// Why a device byte has no logical address tacho can give.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MapError {
    /// The byte is in no chunk: unallocated space or a superblock copy.
    #[error("byte {0} of the device lies in no btrfs chunk (unallocated space or superblock)")]
    Unallocated(u64),
    /// The byte is in a striped chunk, whose mapping tacho does not compute.
    #[error(
        "byte {0} of the device lies in a striped chunk (RAID0/10/5/6), which tacho does not map yet"
    )]
    Striped(u64),
}

/// The logical address of byte `physical` of device `devid`.
pub fn physical_to_logical(chunks: &[Chunk], devid: u64, physical: u64) -> Result<u64, MapError> {
    for chunk in chunks {
        for stripe in chunk.stripes.iter().filter(|s| s.devid == devid) {
            if physical >= stripe.offset && physical - stripe.offset < chunk.length {
                if chunk.profile & STRIPED != 0 {
                    return Err(MapError::Striped(physical));
                }
                return Ok(chunk.logical + (physical - stripe.offset));
            }
        }
    }
    Err(MapError::Unallocated(physical))
}

/// Reads every chunk item of the filesystem `mount_dir` is on.
pub fn read_chunks(mount_dir: &std::fs::File) -> io::Result<Vec<Chunk>> {
    let mut chunks = Vec::new();
    let mut min_offset = 0u64;
    loop {
        let mut args = vec![0u64; 4096 / 8];
        // struct btrfs_ioctl_search_key: tree_id, min/max objectid, min/max offset,
        // min/max transid (u64 each), min/max type, nr_items, unused (u32 each).
        args[0] = CHUNK_TREE;
        args[1] = FIRST_CHUNK_TREE_OBJECTID;
        args[2] = FIRST_CHUNK_TREE_OBJECTID;
        args[3] = min_offset;
        args[4] = u64::MAX;
        args[5] = 0;
        args[6] = u64::MAX;
        args[7] = pack_u32(CHUNK_ITEM_KEY, CHUNK_ITEM_KEY);
        args[8] = pack_u32(4096, 0);
        // SAFETY: `args` is a 4096-byte, 8-aligned struct btrfs_ioctl_search_args.
        let rc = unsafe { libc::ioctl(mount_dir.as_raw_fd(), IOC_TREE_SEARCH, args.as_mut_ptr()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: Vec<u8> = args.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let nr_items = ne_u32(&bytes, 64).unwrap_or(0);
        let found = parse_search_items(&bytes[SEARCH_KEY_BYTES..], nr_items);
        let Some(last) = found.last() else { break };
        min_offset = match last.logical.checked_add(1) {
            Some(next) => next,
            None => {
                chunks.extend(found);
                break;
            }
        };
        chunks.extend(found);
    }
    Ok(chunks)
}

fn pack_u32(lo: u32, hi: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&lo.to_ne_bytes());
    b[4..].copy_from_slice(&hi.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// Chunk items from a search result buffer; stops at the first malformed item.
pub fn parse_search_items(buf: &[u8], nr_items: u32) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut at = 0;
    for _ in 0..nr_items {
        let (Some(offset), Some(kind), Some(len)) = (
            ne_u64(buf, at + 16),
            ne_u32(buf, at + 24),
            ne_u32(buf, at + 28),
        ) else {
            break;
        };
        let body_at = at + SEARCH_HEADER_BYTES;
        let Some(body) = buf.get(body_at..body_at + len as usize) else {
            break;
        };
        if kind == CHUNK_ITEM_KEY
            && let Some(chunk) = parse_chunk(offset, body)
        {
            chunks.push(chunk);
        }
        at = body_at + len as usize;
    }
    chunks
}

fn parse_chunk(logical: u64, body: &[u8]) -> Option<Chunk> {
    let length = le_u64(body, 0)?;
    let profile = le_u64(body, 24)?;
    let num_stripes = le_u16(body, 44)? as usize;
    let stripes = (0..num_stripes)
        .map(|i| {
            let at = CHUNK_BYTES + i * STRIPE_BYTES;
            Some(Stripe {
                devid: le_u64(body, at)?,
                offset: le_u64(body, at + 8)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Chunk {
        logical,
        length,
        profile,
        stripes,
    })
}

/// The btrfs device id of the block device `dev` in the filesystem `mount_dir` is on.
pub fn devid_of(mount_dir: &std::fs::File, dev: &Path) -> io::Result<Option<u64>> {
    let mut info = vec![0u64; 1024 / 8];
    // SAFETY: `info` is a 1024-byte, 8-aligned struct btrfs_ioctl_fs_info_args.
    let rc = unsafe { libc::ioctl(mount_dir.as_raw_fd(), IOC_FS_INFO, info.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let max_id = info[0];
    let wanted = std::fs::canonicalize(dev)?;
    for devid in 1..=max_id.min(65_536) {
        let mut args = vec![0u64; 4096 / 8];
        args[0] = devid;
        // SAFETY: `args` is a 4096-byte, 8-aligned struct btrfs_ioctl_dev_info_args.
        let rc = unsafe { libc::ioctl(mount_dir.as_raw_fd(), IOC_DEV_INFO, args.as_mut_ptr()) };
        if rc < 0 {
            continue; // ids can have gaps after a device was removed
        }
        let bytes: Vec<u8> = args.iter().flat_map(|w| w.to_ne_bytes()).collect();
        // path[1024] is the last member of the 4096-byte struct.
        let path = &bytes[4096 - 1024..];
        let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
        let path = Path::new(std::ffi::OsStr::from_bytes(&path[..end]));
        if std::fs::canonicalize(path).is_ok_and(|p| p == wanted) {
            return Ok(Some(devid));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(logical: u64, length: u64, profile: u64, stripes: &[(u64, u64)]) -> Vec<u8> {
        let mut body = vec![0u8; CHUNK_BYTES];
        body[0..8].copy_from_slice(&length.to_le_bytes());
        body[24..32].copy_from_slice(&profile.to_le_bytes());
        body[44..46].copy_from_slice(&(stripes.len() as u16).to_le_bytes());
        for (devid, offset) in stripes {
            let mut s = vec![0u8; STRIPE_BYTES];
            s[0..8].copy_from_slice(&devid.to_le_bytes());
            s[8..16].copy_from_slice(&offset.to_le_bytes());
            body.extend(s);
        }
        let mut b = vec![0u8; SEARCH_HEADER_BYTES];
        b[8..16].copy_from_slice(&FIRST_CHUNK_TREE_OBJECTID.to_ne_bytes());
        b[16..24].copy_from_slice(&logical.to_ne_bytes());
        b[24..28].copy_from_slice(&CHUNK_ITEM_KEY.to_ne_bytes());
        b[28..32].copy_from_slice(&(body.len() as u32).to_ne_bytes());
        b.extend(body);
        b
    }

    #[test]
    fn dup_and_single_chunks_map_back_to_logical() {
        let mut buf = item(1 << 30, 8 << 20, 1 << 0, &[(1, 20 << 20)]);
        buf.extend(item(
            2 << 30,
            4 << 20,
            1 << 5,
            &[(1, 40 << 20), (1, 44 << 20)],
        ));
        buf.extend(item(3 << 30, 4 << 20, 1 << 3, &[(1, 60 << 20), (2, 0)]));
        let chunks = parse_search_items(&buf, 3);
        assert_eq!(chunks.len(), 3);
        assert_eq!(
            physical_to_logical(&chunks, 1, (20 << 20) + 5),
            Ok((1 << 30) + 5)
        );
        assert_eq!(
            physical_to_logical(&chunks, 1, (44 << 20) + 7),
            Ok((2 << 30) + 7)
        );
        assert_eq!(
            physical_to_logical(&chunks, 1, 1000),
            Err(MapError::Unallocated(1000))
        );
        assert_eq!(
            physical_to_logical(&chunks, 2, 10),
            Err(MapError::Striped(10))
        );
        assert_eq!(
            physical_to_logical(&chunks, 9, 20 << 20),
            Err(MapError::Unallocated(20 << 20))
        );
    }

    #[test]
    fn truncated_search_results_are_cut_not_misread() {
        let buf = item(1 << 30, 8 << 20, 0, &[(1, 0)]);
        assert!(parse_search_items(&buf[..40], 1).is_empty());
        assert_eq!(parse_search_items(&buf, 5).len(), 1);
    }
}
