//! /proc/meminfo (`Key:   N kB`) and /proc/vmstat (`key N`): every field, as read.
//!
//! Both are kept whole as name → value maps, because which fields exist depends on the kernel
//! version and configuration; callers pick what they need and treat a missing field as
//! unknown. Hand-parsed (procfs-core's `Meminfo` insists on fields that some kernels lack) so
//! that a malformed line is an error naming its line number.
//! `tacho top` reads the whole of both; `tacho stress` reads MemAvailable and THP counters.

use std::collections::BTreeMap;
use std::path::Path;

use super::{KernelError, Result, SysRoot, read_text};

/// /proc/meminfo: values in bytes (`kB` fields multiplied by 1024); the unit-less
/// `HugePages_*` fields are page counts, as printed.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Meminfo(pub BTreeMap<String, u64>);

impl Meminfo {
    /// A field's value; `None` when this kernel does not print it.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }
}

/// Reads `<proc>/meminfo` (values in bytes, see [`Meminfo`]).
pub fn read_meminfo(root: &SysRoot) -> Result<Meminfo> {
    let path = root.proc.join("meminfo");
    parse_meminfo(&read_text(&path)?, &path)
}

/// Parses the text of /proc/meminfo; `path` only names the file in errors.
pub fn parse_meminfo(text: &str, path: &Path) -> Result<Meminfo> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err =
            |reason: &str| KernelError::parse(path, Some(i + 1), format!("{reason}: {line:?}"));
        let (key, rest) = line
            .split_once(':')
            .ok_or_else(|| err("expected 'Key: value'"))?;
        let mut words = rest.split_whitespace();
        let value: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| err("expected a number"))?;
        let value = match words.next() {
            None => value,
            Some("kB") => value
                .checked_mul(1024)
                .ok_or_else(|| err("value too large"))?,
            Some(_) => return Err(err("unknown unit (the kernel prints kB)")),
        };
        if words.next().is_some() {
            return Err(err("unexpected text after the value"));
        }
        map.insert(key.trim().to_string(), value);
    }
    if map.is_empty() {
        return Err(KernelError::parse(path, None, "the file is empty"));
    }
    Ok(Meminfo(map))
}

/// /proc/vmstat: cumulative event counters (`pgmajfault`, `thp_fault_alloc`,
/// `compact_stall`, …) and gauges (`nr_dirty`, …), as printed.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct VmStat(pub BTreeMap<String, u64>);

impl VmStat {
    /// A counter's value; `None` when this kernel does not have it.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.get(key).copied()
    }
}

/// Reads `<proc>/vmstat` (counters and gauges by name, see [`VmStat`]).
pub fn read_vmstat(root: &SysRoot) -> Result<VmStat> {
    let path = root.proc.join("vmstat");
    parse_vmstat(&read_text(&path)?, &path)
}

/// Parses the text of /proc/vmstat; `path` only names the file in errors.
pub fn parse_vmstat(text: &str, path: &Path) -> Result<VmStat> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let Some(key) = words.next() else { continue };
        let value = words.next().and_then(|w| w.parse::<u64>().ok());
        match (value, words.next()) {
            (Some(v), None) => {
                map.insert(key.to_string(), v);
            }
            _ => {
                return Err(KernelError::parse(
                    path,
                    Some(i + 1),
                    format!("expected 'name number': {line:?}"),
                ));
            }
        }
    }
    if map.is_empty() {
        return Err(KernelError::parse(path, None, "the file is empty"));
    }
    Ok(VmStat(map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MEMINFO: &str = include_str!("../../tests/fixtures/top/firecracker/a/proc/meminfo");
    const VMSTAT: &str = include_str!("../../tests/fixtures/top/firecracker/a/proc/vmstat");

    #[test]
    fn reads_real_meminfo() {
        let m = parse_meminfo(MEMINFO, Path::new("/proc/meminfo")).unwrap();
        let total = m.get("MemTotal").unwrap();
        assert_eq!(total % 1024, 0);
        assert!(m.get("MemAvailable").unwrap() <= total);
        // Unit-less fields keep their count.
        assert!(m.get("HugePages_Total").is_some());
        assert_eq!(m.get("Hugepagesize"), Some(2048 * 1024));
        assert_eq!(m.get("NoSuchField"), None);
    }

    #[test]
    fn reads_real_vmstat() {
        let v = parse_vmstat(VMSTAT, Path::new("/proc/vmstat")).unwrap();
        assert!(v.get("pgfault").unwrap() > 0);
        assert!(v.get("thp_fault_alloc").is_some());
        assert!(v.get("compact_stall").is_some());
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let p = Path::new("/proc/meminfo");
        for bad in [
            "MemTotal: 1 kB\nMemFree 2 kB\n",
            "MemTotal: 1 kB\nMemFree: x kB\n",
            "MemTotal: 1 kB\nMemFree: 2 MB\n",
            "MemTotal: 1 kB\nMemFree: 2 kB 3\n",
        ] {
            let err = parse_meminfo(bad, p).unwrap_err().to_string();
            assert!(err.contains("/proc/meminfo line 2"), "{err}");
        }
        assert!(parse_meminfo("", p).is_err());
        assert!(parse_meminfo(&format!("A: {} kB\n", u64::MAX), p).is_err());
        let p = Path::new("/proc/vmstat");
        let err = parse_vmstat("a 1\nb -2\n", p).unwrap_err().to_string();
        assert!(err.contains("/proc/vmstat line 2"), "{err}");
        assert!(parse_vmstat("a 1 2\n", p).is_err());
        assert!(parse_vmstat("\n", p).is_err());
    }

    proptest! {
        #[test]
        fn never_panic(s in "\\PC{0,200}") {
            let _ = parse_meminfo(&s, Path::new("/x"));
            let _ = parse_vmstat(&s, Path::new("/x"));
        }
    }
}
