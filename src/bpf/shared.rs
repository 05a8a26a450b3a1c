//! Array maps the BPF programs share with tacho through mmap (`BPF_F_MMAPABLE`): read every
//! interval without a system call per entry, as 64-bit words the programs update atomically.

use std::os::fd::AsFd;
use std::sync::atomic::AtomicU64;

use aya::maps::MapData;

use super::Refusal;
use crate::mapping::Mapping;

/// One mapped array: `entries` values of `value_words` 64-bit words each.
pub(crate) struct SharedArray {
    map: Mapping,
    value_words: usize,
    entries: usize,
}

impl SharedArray {
    /// Maps the array `data` (named `name` in its object); its values must be `value_words`
    /// words.
    pub(crate) fn map(data: &MapData, name: &str, value_words: usize) -> Result<Self, Refusal> {
        let info = data.info().map_err(|e| super::refusal(name, &e))?;
        if info.value_size() as usize != value_words * 8 {
            return Err(Refusal::ValueSize(name.to_string()));
        }
        if !matches!(info.map_type(), Ok(aya::maps::MapType::Array)) {
            return Err(Refusal::Missing(format!("array {name}")));
        }
        let entries = info.max_entries() as usize;
        let page = Mapping::page_size();
        let len = (entries * value_words * 8).div_ceil(page) * page;
        // The kernel allocated the values page-aligned and page-rounded, so this length fits.
        let map = Mapping::shared(data.fd().as_fd(), len).map_err(|err| Refusal::Mapping {
            what: name.to_string(),
            err,
        })?;
        Ok(SharedArray {
            map,
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
            let words = self.map.as_ptr().cast::<AtomicU64>();
            std::slice::from_raw_parts(words.add(index * self.value_words), self.value_words)
        }
    }

    /// Zeroes every value: for a kept set, before its programs are attached again (nothing
    /// writes meanwhile).
    pub(crate) fn clear(&self) {
        for index in 0..self.entries {
            for w in self.value(index) {
                w.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}
