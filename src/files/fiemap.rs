//! FIEMAP: where a file's data lies on its device, through the FS_IOC_FIEMAP ioctl.
//!
//! No crate wraps this ioctl, so it is called through libc here; the request and reply live in
//! a `u64` buffer (aligned as the kernel's structs) and are decoded with bounds checks.

use std::io;
use std::os::fd::AsRawFd;

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const HEADER_BYTES: usize = 32;
const EXTENT_BYTES: usize = 56;
/// Extents asked for per call.
const BATCH: usize = 128;

/// This is the file's last extent.
pub const EXTENT_LAST: u32 = 0x1;
/// Physical location not known yet (delayed allocation) or not meaningful.
pub const EXTENT_UNKNOWN: u32 = 0x2;
/// Delayed allocation: the data has no place on disk yet.
pub const EXTENT_DELALLOC: u32 = 0x4;
/// Data stored compressed or otherwise encoded: physical bytes do not map 1:1.
pub const EXTENT_ENCODED: u32 = 0x8;
/// Data stored inside metadata, not in an extent of its own.
pub const EXTENT_DATA_INLINE: u32 = 0x200;
/// The extent is also used by another file (reflink, snapshot).
pub const EXTENT_SHARED: u32 = 0x2000;

/// One extent: `length` bytes at file offset `logical` lie at `physical` (bytes from the start
/// of the filesystem's device; for btrfs, its logical address space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset of the extent in the file.
    pub logical: u64,
    /// Byte offset of the extent on the device (btrfs: in its logical address space).
    pub physical: u64,
    /// Length of the extent, in bytes.
    pub length: u64,
    /// `FIEMAP_EXTENT_*` flags (the `EXTENT_*` constants here).
    pub flags: u32,
}

impl Extent {
    /// Whether `physical` is a real location on the device.
    pub fn is_mapped(&self) -> bool {
        self.flags & (EXTENT_UNKNOWN | EXTENT_DELALLOC | EXTENT_DATA_INLINE) == 0
    }
}

/// Every extent of an open file (without forcing dirty data to disk first: asking must not
/// cause writes).
pub fn extents(file: &std::fs::File) -> io::Result<Vec<Extent>> {
    let words = (HEADER_BYTES + BATCH * EXTENT_BYTES) / 8;
    let mut buf = vec![0u64; words];
    let mut all = Vec::new();
    let mut start = 0u64;
    loop {
        buf.iter_mut().for_each(|w| *w = 0);
        buf[0] = start; // fm_start
        buf[1] = u64::MAX - start; // fm_length: to the end
        // fm_flags = 0, fm_mapped_extents = 0 (word 2); fm_extent_count, fm_reserved (word 3)
        let mut count = [0u8; 8];
        count[..4].copy_from_slice(&(BATCH as u32).to_ne_bytes());
        buf[3] = u64::from_ne_bytes(count);
        // SAFETY: `buf` holds a struct fiemap with room for BATCH extents, as fm_extent_count
        // says; the kernel writes at most that many.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let batch = decode(&bytes);
        let Some(last) = batch.last().copied() else {
            break;
        };
        all.extend_from_slice(&batch);
        if last.flags & EXTENT_LAST != 0 || batch.len() < BATCH {
            break;
        }
        start = last.logical.saturating_add(last.length);
    }
    Ok(all)
}

/// Decodes a FIEMAP reply; never reads past `bytes`.
fn decode(bytes: &[u8]) -> Vec<Extent> {
    let u64_at = |at: usize| -> u64 {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes)
    };
    let u32_at = |at: usize| -> u32 {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_ne_bytes)
    };
    let mapped = u32_at(20) as usize;
    (0..mapped.min(BATCH))
        .map(|i| HEADER_BYTES + i * EXTENT_BYTES)
        .take_while(|at| at + EXTENT_BYTES <= bytes.len())
        .map(|at| Extent {
            logical: u64_at(at),
            physical: u64_at(at + 8),
            length: u64_at(at + 16),
            flags: u32_at(at + 40),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn decode_reads_only_mapped_extents() {
        let mut bytes = vec![0u8; HEADER_BYTES + 2 * EXTENT_BYTES];
        bytes[20..24].copy_from_slice(&1u32.to_ne_bytes());
        let at = HEADER_BYTES;
        bytes[at..at + 8].copy_from_slice(&4096u64.to_ne_bytes());
        bytes[at + 8..at + 16].copy_from_slice(&(1u64 << 20).to_ne_bytes());
        bytes[at + 16..at + 24].copy_from_slice(&8192u64.to_ne_bytes());
        bytes[at + 40..at + 44].copy_from_slice(&EXTENT_LAST.to_ne_bytes());
        let e = decode(&bytes);
        assert_eq!(
            e,
            vec![Extent {
                logical: 4096,
                physical: 1 << 20,
                length: 8192,
                flags: EXTENT_LAST
            }]
        );
        bytes[20..24].copy_from_slice(&999u32.to_ne_bytes());
        assert_eq!(decode(&bytes).len(), 2, "never past the buffer");
        assert!(decode(&[1, 2, 3]).is_empty());
    }

    #[test]
    fn a_synced_file_has_mapped_extents_or_fiemap_is_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&[7u8; 65536]).unwrap();
        f.sync_all().unwrap();
        match extents(&std::fs::File::open(&path).unwrap()) {
            Ok(e) => {
                let total: u64 = e.iter().map(|x| x.length).sum();
                assert!(total >= 65536, "extents cover the file: {e:?}");
            }
            // tmpfs and some others have no FIEMAP.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}"),
        }
    }
}
