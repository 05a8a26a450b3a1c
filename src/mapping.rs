//! Memory mappings unmapped when dropped: shared ones of a kernel object's descriptor (the
//! profiler's perf rings, the block tracer's BPF arrays) and anonymous ones (the memory stress
//! worker's blocks). The one owner of the `unsafe` mmap/munmap pair.

#[cfg(any(feature = "bpf", feature = "profile"))]
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// `len` bytes mapped readable, and writable unless made by `Mapping::read_only`.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    /// Whether anything (this process or the kernel) may change the bytes.
    #[cfg(feature = "bpf")]
    writable: bool,
}

// SAFETY: the mapping is plain memory owned by this value; what its users do with it
// concurrently is theirs to make sound (the ring is read through &mut self, BPF arrays through
// atomics).
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from its start, `MAP_SHARED`; the error is mmap's.
    #[cfg(any(feature = "bpf", feature = "profile"))]
    pub(crate) fn shared(fd: BorrowedFd<'_>, len: usize) -> std::io::Result<Mapping> {
        Self::map(len, libc::MAP_SHARED, fd.as_raw_fd())
    }

    /// `len` bytes of `fd` from its start, `MAP_PRIVATE` and read-only (the kernel's BTF,
    /// which the kernel lets be mapped only so); read through [`Mapping::bytes`].
    #[cfg(feature = "bpf")]
    pub(crate) fn read_only(fd: BorrowedFd<'_>, len: usize) -> std::io::Result<Mapping> {
        Self::map_with(len, libc::PROT_READ, libc::MAP_PRIVATE, fd.as_raw_fd())
    }

    /// `len` bytes of fresh private memory, returned to the kernel at once on drop (as a large
    /// `malloc`/`free` pair is); the error is mmap's.
    pub(crate) fn anonymous(len: usize) -> std::io::Result<Mapping> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
    }

    fn map(len: usize, flags: libc::c_int, fd: libc::c_int) -> std::io::Result<Mapping> {
        Self::map_with(len, libc::PROT_READ | libc::PROT_WRITE, flags, fd)
    }

    fn map_with(
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: libc::c_int,
    ) -> std::io::Result<Mapping> {
        // SAFETY: a new mapping placed by the kernel (no fixed address, so nothing existing
        // is replaced), checked for MAP_FAILED below.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast())
            .ok_or_else(|| std::io::Error::other("mmap returned a null address"))?;
        Ok(Mapping {
            base,
            len,
            #[cfg(feature = "bpf")]
            writable: prot & libc::PROT_WRITE != 0,
        })
    }

    /// The first mapped byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The bytes of a read-only mapping; empty for a writable one, whose bytes may change
    /// under a shared reference.
    #[cfg(feature = "bpf")]
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.writable {
            return &[];
        }
        // SAFETY: a private read-only mapping of `len` bytes, which nothing writes, alive as
        // long as `self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    /// How many bytes are mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The system's page size (what mapping lengths are rounded to).
    #[cfg(any(feature = "bpf", feature = "profile"))]
    pub(crate) fn page_size() -> usize {
        // SAFETY: sysconf reads a constant of the running system.
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned, and nothing borrows the mapping
        // past its owner's life.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
