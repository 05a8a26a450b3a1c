//! Kernel parameters under /proc/sys, named as sysctl(8) names them (`vm.swappiness`).
//!
//! Only reads: a file that is write-only (`vm.drop_caches`, `vm.compact_memory`) is skipped by
//! its mode before it is opened, and one the kernel refuses to read is listed, never retried
//! or written.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Result, SysRoot, read_optional};

/// Deepest directory followed under /proc/sys (the real tree is about 7 deep).
const MAX_DEPTH: usize = 12;

/// The file of sysctl `name` (`vm.dirty_ratio` is `<proc>/sys/vm/dirty_ratio`). A `/` inside
/// a name stands for a dot inside one component, as in sysctl(8): `net.ipv4.conf.eth0/100.x`.
pub fn path_of(root: &SysRoot, name: &str) -> PathBuf {
    let mut path = root.proc.join("sys");
    for part in name.split('.') {
        path.push(part.replace('/', "."));
    }
    path
}

/// The value of one sysctl with runs of whitespace (tabs in multi-value files) made one
/// space; `Ok(None)` when this kernel does not have it.
pub fn read(root: &SysRoot, name: &str) -> Result<Option<String>> {
    Ok(read_optional(&path_of(root, name))?.map(|v| normalize(&v)))
}

/// A numeric sysctl; `Ok(None)` when absent, a parse error naming the file when not a number.
pub fn read_u64(root: &SysRoot, name: &str) -> Result<Option<u64>> {
    let path = path_of(root, name);
    read(root, name)?
        .map(|v| super::parse_u64(&v, &path))
        .transpose()
}

fn normalize(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every readable sysctl, by name, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctls {
    /// Parameter name in dotted form (`vm.swappiness`) → value, whitespace collapsed to single
    /// spaces.
    pub values: BTreeMap<String, String>,
    /// Names of write-only parameters (never opened).
    pub write_only: Vec<String>,
    /// Parameters the kernel refused to read, with the error.
    pub unreadable: Vec<String>,
}

/// Walks `<proc>/sys`; never fails as a whole (a missing tree is empty).
pub fn read_all(root: &SysRoot) -> Sysctls {
    let mut out = Sysctls::default();
    walk(&root.proc.join("sys"), "", 0, &mut out);
    out
}

fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Sysctls) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        if !prefix.is_empty() {
            out.unreadable
                .push(format!("{prefix}: directory not readable"));
        }
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let component = entry.file_name().to_string_lossy().replace('.', "/");
        let name = if prefix.is_empty() {
            component
        } else {
            format!("{prefix}.{component}")
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            if depth < MAX_DEPTH {
                walk(&entry.path(), &name, depth + 1, out);
            }
        } else if meta.is_file() {
            if meta.permissions().mode() & 0o444 == 0 {
                out.write_only.push(name);
                continue;
            }
            match std::fs::read(entry.path()) {
                Ok(bytes) => {
                    out.values
                        .insert(name, normalize(&String::from_utf8_lossy(&bytes)));
                }
                Err(e) => out.unreadable.push(format!("{name}: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names_map_to_files_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        write(t, "proc/sys/vm/swappiness", "60\n");
        write(t, "proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
        write(t, "proc/sys/net/ipv4/conf/eth0.100/rp_filter", "2\n");
        write(t, "proc/sys/vm/drop_caches", "");
        let drop = t.join("proc/sys/vm/drop_caches");
        std::fs::set_permissions(&drop, std::fs::Permissions::from_mode(0o200)).unwrap();
        let root = SysRoot::under(t);
        assert_eq!(read_u64(&root, "vm.swappiness").unwrap(), Some(60));
        assert_eq!(read(&root, "vm.nope").unwrap(), None);
        assert_eq!(
            read(&root, "net.ipv4.tcp_rmem").unwrap().as_deref(),
            Some("4096 131072 6291456")
        );
        let all = read_all(&root);
        assert_eq!(all.values["net.ipv4.conf.eth0/100.rp_filter"], "2");
        assert_eq!(
            read(&root, "net.ipv4.conf.eth0/100.rp_filter")
                .unwrap()
                .as_deref(),
            Some("2")
        );
        assert_eq!(all.write_only, vec!["vm.drop_caches".to_string()]);
        assert!(!all.values.contains_key("vm.drop_caches"));
        assert_eq!(all.values.len(), 3);
    }

    #[test]
    fn a_non_number_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "proc/sys/vm/swappiness", "lots\n");
        let err = read_u64(&SysRoot::under(dir.path()), "vm.swappiness").unwrap_err();
        assert!(err.to_string().contains("proc/sys/vm/swappiness"), "{err}");
    }

    #[test]
    fn reads_the_real_tree_without_write_only_files() {
        let all = read_all(&SysRoot::real());
        if all.values.is_empty() {
            return; // no procfs here (a build sandbox)
        }
        assert!(all.values.contains_key("kernel.osrelease"));
        assert!(!all.values.contains_key("vm.drop_caches"));
    }
}
