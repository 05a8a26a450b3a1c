//! /proc/mdstat: md software RAID arrays and any resync, recovery, check or reshape running
//! on them (which shares the member disks with every other I/O until it ends).

use std::path::Path;

use serde::Serialize;

use super::{Result, SysRoot, read_optional};

/// One md array from /proc/mdstat.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdArray {
    /// `md0`.
    pub name: String,
    /// `raid1`, `raid5`, …; `None` for an inactive array.
    pub level: Option<String>,
    /// Member devices (`sda1`), without the `[n]` role suffix.
    pub members: Vec<String>,
    /// The background operation running, if any.
    pub sync: Option<MdSync>,
}

/// The resync, recovery, check, repair or reshape running on an array.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MdSync {
    /// `resync`, `recovery`, `check`, `repair` or `reshape`.
    pub action: String,
    /// Done so far; `None` when the kernel says `DELAYED` or `PENDING`.
    pub done_pct: Option<f64>,
    /// Current speed in KiB/s as the kernel prints it (`speed=12345K/sec`).
    pub speed_kib_per_s: Option<u64>,
    /// The kernel's estimate of the time left, in minutes.
    pub finish_min: Option<f64>,
}

/// The arrays in `<proc>/mdstat`; empty when md is not loaded.
pub fn read(root: &SysRoot) -> Result<Vec<MdArray>> {
    let path = root.proc.join("mdstat");
    Ok(read_optional(&path)?
        .map(|t| parse(&t, &path))
        .unwrap_or_default())
}

/// Parses mdstat text. Lines it does not know are skipped: the format has grown over the
/// years (bitmap lines, `unused devices`), and a line tacho misreads must not hide the rest.
pub fn parse(text: &str, _path: &Path) -> Vec<MdArray> {
    let mut arrays: Vec<MdArray> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some((name, rest)) = trimmed.split_once(" : ")
            && name.starts_with("md")
            && !name.contains(' ')
        {
            let mut words = rest.split_whitespace();
            let _state = words.next();
            let words: Vec<&str> = words.collect();
            let level = words
                .iter()
                .find(|w| w.starts_with("raid") || **w == "linear" || **w == "multipath")
                .map(|w| (*w).to_string());
            let members = words
                .iter()
                .filter(|w| w.contains('['))
                .map(|w| w.split('[').next().unwrap_or(w).to_string())
                .collect();
            arrays.push(MdArray {
                name: name.to_string(),
                level,
                members,
                sync: None,
            });
            continue;
        }
        if let Some(array) = arrays.last_mut()
            && array.sync.is_none()
        {
            array.sync = parse_sync(trimmed);
        }
    }
    arrays
}

/// `[==>....]  recovery = 12.6% (1234/5678) finish=1.2min speed=12345K/sec`, or
/// `resync=DELAYED`.
fn parse_sync(line: &str) -> Option<MdSync> {
    const ACTIONS: [&str; 5] = ["resync", "recovery", "check", "repair", "reshape"];
    // The progress bar, when there is one, ends at the first ']'.
    let body = match line.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or("", |(_, after)| after).trim(),
        None => line.trim(),
    };
    let action = ACTIONS.iter().find(|a| {
        body.strip_prefix(**a)
            .is_some_and(|r| r.trim_start().starts_with('='))
    })?;
    let after = body[action.len()..].trim_start().strip_prefix('=')?.trim();
    let done_pct = after
        .split_whitespace()
        .next()
        .and_then(|w| w.strip_suffix('%'))
        .and_then(|p| p.parse().ok());
    let field = |key: &str| {
        after
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    Some(MdSync {
        action: (*action).to_string(),
        done_pct,
        speed_kib_per_s: field("speed=")
            .and_then(|s| s.strip_suffix("K/sec").and_then(|n| n.parse().ok())),
        finish_min: field("finish=")
            .and_then(|s| s.strip_suffix("min").and_then(|n| n.parse().ok())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RESYNC: &str = "Personalities : [raid1] [raid6] [raid5] [raid4]\n\
md1 : active raid5 sdd1[3] sdc1[1] sdb1[0]\n      \
2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      \
[=>...................]  recovery =  8.3% (87424/1046528) finish=0.9min speed=17484K/sec\n\n\
md0 : active raid1 sdb2[1] sda2[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n      \
\tresync=DELAYED\n\n\
md2 : active raid1 sde[1] sdf[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n      \
bitmap: 0/1 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n";

    #[test]
    fn reads_arrays_and_their_sync() {
        let a = parse(RESYNC, Path::new("/proc/mdstat"));
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].name, "md1");
        assert_eq!(a[0].level.as_deref(), Some("raid5"));
        assert_eq!(a[0].members, ["sdd1", "sdc1", "sdb1"]);
        let s = a[0].sync.as_ref().unwrap();
        assert_eq!(s.action, "recovery");
        assert_eq!(s.done_pct, Some(8.3));
        assert_eq!(s.speed_kib_per_s, Some(17484));
        assert_eq!(s.finish_min, Some(0.9));
        let delayed = a[1].sync.as_ref().unwrap();
        assert_eq!(
            (delayed.action.as_str(), delayed.done_pct),
            ("resync", None)
        );
        assert_eq!(a[2].sync, None);
    }

    #[test]
    fn no_md_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&SysRoot::under(dir.path())).unwrap().is_empty());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse(&s, Path::new("/x"));
        }
    }
}
