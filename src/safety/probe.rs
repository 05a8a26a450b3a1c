//! Reads the few small regions of a device that signature detection looks at.
//!
//! Every read is one 4096-byte block at a 4096-aligned offset into a 4096-aligned buffer, so
//! the same descriptor may be opened with O_DIRECT on any device whose logical block size is at
//! most 4096 bytes. Blocks are cached: most signatures live in the first block, which is read
//! once instead of a dozen times.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size and alignment of every read.
pub(super) const BLOCK: u64 = 4096;

/// One block of device data, aligned in memory as O_DIRECT requires.
#[repr(C, align(4096))]
struct Block([u8; BLOCK as usize]);

/// Cached, bounds-checked access to `size` bytes of a device from `base`, as if the device
/// began there (offsets passed in are relative to `base`).
pub(super) struct Probe<'a> {
    dev: &'a File,
    base: u64,
    size: u64,
    blocks: BTreeMap<u64, Box<Block>>,
}

impl<'a> Probe<'a> {
    pub(super) fn new(dev: &'a File, base: u64, size: u64) -> Self {
        Probe {
            dev,
            base,
            size,
            blocks: BTreeMap::new(),
        }
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// The `len` bytes at `offset`, or `None` when they do not all lie inside the device (or
    /// the window): a device too small for a signature simply does not carry it.
    pub(super) fn bytes(&mut self, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
        let Some(end) = offset.checked_add(len as u64).filter(|&e| e <= self.size) else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        while pos < end {
            let index = pos / BLOCK;
            let block = self.block(index)?;
            let start = (pos % BLOCK) as usize;
            let stop = (end - index * BLOCK).min(BLOCK) as usize;
            out.extend_from_slice(&block.0[start..stop]);
            // Not (index + 1) * BLOCK: that overflows for the last block below u64::MAX.
            pos = index * BLOCK + stop as u64;
        }
        Ok(Some(out))
    }

    /// True when `magic` is found at `offset`.
    pub(super) fn has(&mut self, offset: u64, magic: &[u8]) -> io::Result<bool> {
        Ok(self.bytes(offset, magic.len())?.is_some_and(|b| b == magic))
    }

    /// The little-endian u32 at `offset`, if inside the device.
    pub(super) fn u32_le(&mut self, offset: u64) -> io::Result<Option<u32>> {
        Ok(self
            .bytes(offset, 4)?
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// Block `index` of the window. Windows start at 4096-aligned offsets (MiB boundaries), so
    /// reads stay aligned for O_DIRECT.
    fn block(&mut self, index: u64) -> io::Result<&Block> {
        if !self.blocks.contains_key(&index) {
            let at = self
                .base
                .checked_add(index * BLOCK)
                .ok_or_else(|| io::Error::other("offset beyond 2^64"))?;
            let block = read_block(self.dev, at)?;
            self.blocks.insert(index, block);
        }
        Ok(&self.blocks[&index])
    }
}

/// Reads one block; bytes past the end of the file stay zero. The caller has already checked
/// that the region it wants lies inside the size it was given, so a file shorter than that
/// size (a caller's mistake) reads as zeros rather than failing or panicking.
fn read_block(dev: &File, offset: u64) -> io::Result<Box<Block>> {
    let mut block = Box::new(Block([0; BLOCK as usize]));
    // Regular files and block devices return a short count only at their end, so one read is
    // enough. Not continuing after a short read also matters for O_DIRECT: the continuation
    // would be misaligned and fail with EINVAL.
    loop {
        match dev.read_at(&mut block.0, offset) {
            Ok(_) => return Ok(block),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
