//! I/O buffers: aligned for O_DIRECT and full of incompressible data.
//!
//! Zeros (what `dd if=/dev/zero` writes) are compressed or deduplicated away by many SSDs,
//! storage arrays and filesystems, which then report speeds no disk has. Every buffer starts as
//! random bytes, and each write stamps a fresh sequence number into every 512-byte sector so no
//! two written blocks are identical (defeating deduplication as fio's `scramble_buffers` does).

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;

/// Alignment that satisfies O_DIRECT on every device and filesystem (page size on x86-64/arm64).
pub const ALIGN: usize = 4096;

/// A heap buffer aligned to [`ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation exclusively; moving it to another thread is like
// moving a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` random bytes (`len` ≥ 1).
    pub fn random(len: usize, rng: &mut fastrand::Rng) -> Self {
        let layout = Layout::from_size_align(len.max(1), ALIGN).expect("alignment is a power of 2");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let mut buf = AlignedBuf { ptr, layout };
        rng.fill(buf.as_mut_slice());
        buf
    }

    /// Size of the buffer in bytes (at least 1).
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Start of the buffer, for the kernel to write into (reads).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes, initialised by `random`, and borrowed immutably.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and borrowed mutably through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }

    /// The first `len` bytes, which one I/O moves; an error beyond the buffer, so no plan or
    /// job file can make an engine hand the kernel more than was allocated, whatever
    /// validation ran before.
    pub fn first_mut(
        &mut self,
        len: u64,
        op: &'static str,
        offset: u64,
    ) -> Result<&mut [u8], super::EngineError> {
        let have = self.len();
        usize::try_from(len)
            .ok()
            .and_then(|n| self.as_mut_slice().get_mut(..n))
            .ok_or_else(|| {
                super::EngineError::io(
                    op,
                    offset,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("an I/O of {len} bytes does not fit its {have}-byte buffer"),
                    ),
                )
            })
    }

    /// Makes this buffer's content unique before it is written again.
    pub fn scramble(&mut self, stamp: u64) {
        for sector in self.as_mut_slice().chunks_mut(512) {
            let n = sector.len().min(8);
            sector[..n].copy_from_slice(&stamp.to_le_bytes()[..n]);
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `random` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_beyond_the_buffer_is_an_error_not_a_wild_write() {
        let mut buf = AlignedBuf::random(4096, &mut fastrand::Rng::with_seed(1));
        assert_eq!(buf.first_mut(512, "read", 0).unwrap().len(), 512);
        assert_eq!(buf.first_mut(4096, "read", 0).unwrap().len(), 4096);
        let e = buf.first_mut(8192, "write", 4096).unwrap_err();
        assert_eq!(e.raw_os_error(), None);
        assert!(
            e.to_string()
                .contains("an I/O of 8192 bytes does not fit its 4096-byte buffer"),
            "{e}"
        );
        assert!(buf.first_mut(u64::MAX, "read", 0).is_err());
    }

    #[test]
    fn aligned_and_random() {
        let mut rng = fastrand::Rng::with_seed(1);
        let buf = AlignedBuf::random(8192, &mut rng);
        assert_eq!(buf.as_slice().as_ptr() as usize % ALIGN, 0);
        assert_eq!(buf.len(), 8192);
        let zeros = buf.as_slice().iter().filter(|&&b| b == 0).count();
        assert!(zeros < 200, "{zeros} zero bytes in 8 KiB of random data");
    }

    #[test]
    fn scramble_changes_every_sector() {
        let mut rng = fastrand::Rng::with_seed(2);
        let mut buf = AlignedBuf::random(2300, &mut rng);
        let before = buf.as_slice().to_vec();
        buf.scramble(0x0102_0304_0506_0708);
        for (i, (a, b)) in before
            .chunks(512)
            .zip(buf.as_slice().chunks(512))
            .enumerate()
        {
            assert_ne!(a, b, "sector {i} unchanged");
            assert_eq!(b[0], 0x08);
        }
    }
}
