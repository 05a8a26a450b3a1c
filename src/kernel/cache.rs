//! CPU cache levels from `/sys/devices/system/cpu/cpu0/cache/index*/` (level, type, size,
//! shared_cpu_list), to choose memory-benchmark working sets that fit each level.

use super::Malformed;
use super::host::count_cpu_list;
use super::{KernelError, Result, SysRoot, read_optional, read_text};
use serde::Serialize;
use std::path::Path;

/// One data-holding cache level of CPU 0 (instruction caches are left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheLevel {
    /// 1, 2, 3…
    pub level: u8,
    /// Capacity of the cache, in bytes (sysfs `size`, e.g. `32K`, converted).
    pub size_bytes: u64,
    /// How many CPUs share this cache (1 for a private cache); `None` when sysfs does not say.
    pub shared_cpus: Option<u64>,
}

/// Data and unified caches of CPU 0, sorted by level. A machine whose sysfs has no cache
/// directory (some VMs and ARM boards) gives an empty list, not an error.
pub fn read(root: &SysRoot) -> Result<Vec<CacheLevel>> {
    let dir = root.sys.join("devices/system/cpu/cpu0/cache");
    let Some(entries) = super::read_dir_optional(&dir)? else {
        return Ok(Vec::new());
    };
    let mut levels: Vec<CacheLevel> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("index") {
            continue;
        }
        if let Some(level) = read_index(&entry.path())? {
            levels.push(level);
        }
    }
    levels.sort_by_key(|l| l.level);
    // Two entries for one level (split data caches) would double-count; keep the first.
    levels.dedup_by_key(|l| l.level);
    Ok(levels)
}

fn read_index(dir: &Path) -> Result<Option<CacheLevel>> {
    let type_path = dir.join("type");
    let kind = read_text(&type_path)?;
    if kind.trim() == "Instruction" {
        return Ok(None);
    }
    let level_path = dir.join("level");
    let level_text = read_text(&level_path)?;
    let level = level_text.trim().parse::<u8>().map_err(|_| {
        KernelError::parse(
            &level_path,
            None,
            format!("expected a cache level, found {:?}", level_text.trim()),
        )
    })?;
    let size_path = dir.join("size");
    let size_bytes = parse_cache_size(read_text(&size_path)?.trim())
        .map_err(|reason| KernelError::parse(&size_path, None, reason))?;
    let shared_path = dir.join("shared_cpu_list");
    let shared_cpus = match read_optional(&shared_path)? {
        Some(text) => Some(
            count_cpu_list(&text)
                .map_err(|reason| KernelError::parse(&shared_path, None, reason))?,
        ),
        None => None,
    };
    Ok(Some(CacheLevel {
        level,
        size_bytes,
        shared_cpus,
    }))
}

/// sysfs cache sizes: `32K`, `1024K`, `32768K`, occasionally `8M` or plain bytes.
pub fn parse_cache_size(text: &str) -> std::result::Result<u64, Malformed> {
    let (digits, shift) = match text.as_bytes().last() {
        Some(b'K') => (&text[..text.len() - 1], 10),
        Some(b'M') => (&text[..text.len() - 1], 20),
        Some(b'G') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| Malformed(format!("expected a cache size like 32K, found {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture;
    use proptest::prelude::*;

    /// Writes one `indexN` directory the way the kernel does.
    fn index(dir: &Path, n: u8, level: &str, kind: &str, size: &str, shared: &str) {
        let base = format!("sys/devices/system/cpu/cpu0/cache/index{n}");
        fixture::write(dir, &format!("{base}/level"), &format!("{level}\n"));
        fixture::write(dir, &format!("{base}/type"), &format!("{kind}\n"));
        fixture::write(dir, &format!("{base}/size"), &format!("{size}\n"));
        fixture::write(
            dir,
            &format!("{base}/shared_cpu_list"),
            &format!("{shared}\n"),
        );
    }

    #[test]
    fn reads_an_epyc_vm_layout() {
        // Captured from this project's 2-vCPU EPYC VM.
        let t = tempfile::tempdir().unwrap();
        index(t.path(), 0, "1", "Data", "32K", "0");
        index(t.path(), 1, "1", "Instruction", "32K", "0");
        index(t.path(), 2, "2", "Unified", "1024K", "0");
        index(t.path(), 3, "3", "Unified", "32768K", "0-1");
        let levels = read(&SysRoot::under(t.path())).unwrap();
        assert_eq!(
            levels,
            [
                CacheLevel {
                    level: 1,
                    size_bytes: 32 << 10,
                    shared_cpus: Some(1)
                },
                CacheLevel {
                    level: 2,
                    size_bytes: 1 << 20,
                    shared_cpus: Some(1)
                },
                CacheLevel {
                    level: 3,
                    size_bytes: 32 << 20,
                    shared_cpus: Some(2)
                },
            ]
        );
    }

    #[test]
    fn missing_cache_directory_is_empty_and_bad_files_name_themselves() {
        let t = tempfile::tempdir().unwrap();
        fixture::mkdir(t.path(), "sys/devices/system/cpu/cpu0");
        assert!(read(&SysRoot::under(t.path())).unwrap().is_empty());
        index(t.path(), 0, "1", "Data", "lots", "0");
        let err = read(&SysRoot::under(t.path())).unwrap_err().to_string();
        assert!(err.contains("index0/size"), "{err}");
        assert!(err.contains("\"lots\""), "{err}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_cache_size("48K"), Ok(48 << 10));
        assert_eq!(parse_cache_size("8M"), Ok(8 << 20));
        assert_eq!(parse_cache_size("65536"), Ok(65536));
        assert!(parse_cache_size("0K").is_err());
        assert!(parse_cache_size("").is_err());
        assert!(parse_cache_size("99999999999999999999K").is_err());
    }

    proptest! {
        #[test]
        fn size_parser_never_panics(s in "\\PC{0,12}") {
            let _ = parse_cache_size(&s);
        }
    }
}
