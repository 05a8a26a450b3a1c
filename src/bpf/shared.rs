//! Array maps the BPF programs share with tacho through mmap (`BPF_F_MMAPABLE`): read every
//! interval without a system call per entry, as 64-bit words the programs update atomically.

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use aya::Ebpf;
use aya::maps::Map;

/// One mapped array: `entries` values of `value_words` 64-bit words each.
pub(crate) struct SharedArray {
    base: NonNull<u8>,
    len: usize,
    value_words: usize,
    entries: usize,
}

// SAFETY: the mapping is only read and written through atomics.
unsafe impl Send for SharedArray {}

impl Drop for SharedArray {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

impl SharedArray {
    /// Maps the array `name` of the loaded object; its values must be `value_words` words.
    pub(crate) fn map(ebpf: &Ebpf, name: &str, value_words: usize) -> Result<Self, String> {
        let Some(Map::Array(data)) = ebpf.map(name) else {
            return Err(format!("eBPF object lacks array {name}"));
        };
        let info = data.info().map_err(|e| super::refusal(name, &e))?;
        if info.value_size() as usize != value_words * 8 {
            return Err(format!(
                "eBPF array {name} has values of an unexpected size"
            ));
        }
        let entries = info.max_entries() as usize;
        // SAFETY: sysconf reads a constant of the running system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = (entries * value_words * 8).div_ceil(page) * page;
        // SAFETY: a shared mapping of the array's values, of the length the kernel allocated
        // for them (rounded to pages); checked for MAP_FAILED below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                data.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "eBPF tracing unavailable (mapping {name}: {})",
                std::io::Error::last_os_error()
            ));
        }
        let base = NonNull::new(base.cast()).ok_or("eBPF array mapped at null")?;
        Ok(SharedArray {
            base,
            len,
            value_words,
            entries,
        })
    }

    /// How many values the array holds.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// The words of value `index` (empty past the end).
    pub(crate) fn value(&self, index: usize) -> &[AtomicU64] {
        if index >= self.entries {
            return &[];
        }
        // SAFETY: the mapping holds entries * value_words aligned u64 words (page-aligned
        // base); AtomicU64 has u64's layout, and the kernel only changes them atomically or
        // with aligned 8-byte stores, so viewing them as atomics is sound.
        unsafe {
            let words = self.base.as_ptr().cast::<AtomicU64>();
            std::slice::from_raw_parts(words.add(index * self.value_words), self.value_words)
        }
    }
}
