//! What tacho reads about the processes behind events: names, parents, thread groups and
//! capabilities, from `<proc>/PID/...`.
//!
//! Processes come and go faster than events are read, so every lookup can fail; callers
//! decide what a missing process means. Parsers never panic on any text.

use crate::kernel::SysRoot;
use std::collections::HashMap;

/// CAP_DAC_READ_SEARCH: needed by open_by_handle_at to turn directory handles into paths.
pub const CAP_DAC_READ_SEARCH: u32 = 2;
/// CAP_SYS_ADMIN: needed by fanotify to watch whole filesystems.
pub const CAP_SYS_ADMIN: u32 = 21;

/// Deepest parent chain followed (real process trees are far shallower; more means a loop).
const MAX_ANCESTRY: usize = 128;

/// The command name of `pid` (`<proc>/PID/comm`, at most 15 bytes), if it still exists. Tests
/// check [`Comms`] against it; the watch itself reads names through [`Comms`].
#[cfg(test)]
pub fn comm(root: &SysRoot, pid: i32) -> Option<String> {
    let bytes = std::fs::read(root.proc.join(format!("{pid}/comm"))).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(text.trim_end_matches('\n').to_owned())
}

/// The parent of `pid`, from the fourth field of `<proc>/PID/stat`.
pub fn ppid(root: &SysRoot, pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(root.proc.join(format!("{pid}/stat"))).ok()?;
    parse_stat_ppid(&text)
}

/// The command name sits in parentheses and may itself contain `)` and spaces, so fields are
/// counted after the last `)`.
pub fn parse_stat_ppid(text: &str) -> Option<i32> {
    let after = &text[text.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The thread group (process) a thread id belongs to; the id itself for a process.
pub fn tgid(root: &SysRoot, pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(root.proc.join(format!("{pid}/status"))).ok()?;
    status_field(&text, "Tgid:")?.parse().ok()
}

/// Whether this process holds capability `cap` in its effective set.
pub fn has_capability(root: &SysRoot, cap: u32) -> bool {
    std::fs::read_to_string(root.proc.join("self/status"))
        .ok()
        .and_then(|text| status_field(&text, "CapEff:").map(str::to_owned))
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| cap < 64 && caps & (1 << cap) != 0)
}

fn status_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

/// Process names, read once per batch of events and remembered after the process exits (its
/// last events are usually read after it is gone).
///
/// Each process's `comm` file stays open, so checking a name again costs one `pread` rather
/// than open, read and close. A descriptor of a /proc/PID directory is bound to that process:
/// once it exits, reads fail instead of showing a new process that got the same pid, and the
/// file is opened afresh.
pub struct Comms {
    root: SysRoot,
    names: HashMap<i32, Comm>,
    open_files: usize,
    batch: u64,
}

struct Comm {
    name: String,
    file: Option<std::fs::File>,
    checked: u64,
}

/// Open `comm` files kept before those of processes not seen in this batch are closed.
const MAX_OPEN: usize = 512;
/// Names kept before those of processes not seen lately are dropped.
const MAX_COMMS: usize = 65_536;

impl Comms {
    /// An empty name cache reading `<proc>/PID/comm` under `root`.
    pub fn new(root: SysRoot) -> Comms {
        Comms {
            root,
            names: HashMap::new(),
            open_files: 0,
            batch: 0,
        }
    }

    /// Starts a new batch: names are checked again (a process may have exec'd since).
    pub fn new_batch(&mut self) {
        self.batch += 1;
        if self.open_files > MAX_OPEN {
            let current = self.batch - 1;
            for c in self.names.values_mut() {
                if c.checked < current {
                    c.file = None;
                }
            }
            self.open_files = self.names.values().filter(|c| c.file.is_some()).count();
        }
        if self.names.len() > MAX_COMMS {
            let recent = self.batch.saturating_sub(64);
            self.names.retain(|_, c| c.checked >= recent);
            self.open_files = self.names.values().filter(|c| c.file.is_some()).count();
        }
    }

    /// Records a name from a process event: used when the process is gone before tacho can
    /// read /proc (while it runs, /proc is read as usual).
    pub fn note(&mut self, pid: i32, name: String) {
        let entry = self.names.entry(pid).or_insert_with(|| Comm {
            name: String::new(),
            file: None,
            checked: 0,
        });
        entry.name = name;
        entry.checked = 0;
    }

    /// After exec the old name is wrong and the new one unknown until /proc is read.
    pub fn forget(&mut self, pid: i32) {
        if let Some(entry) = self.names.get_mut(&pid) {
            entry.name = "unknown".to_owned();
            entry.checked = 0;
        }
    }

    /// A forked child starts with its parent's name.
    pub fn note_fork(&mut self, parent: i32, child: i32) {
        if let Some(name) = self.names.get(&parent).map(|c| c.name.clone())
            && name != "unknown"
        {
            self.note(child, name);
        }
    }

    /// The name of `pid`: fresh once per batch, the last one known if it has exited,
    /// `unknown` if tacho never saw it alive.
    pub fn get(&mut self, pid: i32) -> &str {
        let batch = self.batch;
        let entry = self.names.entry(pid).or_insert_with(|| Comm {
            name: "unknown".to_owned(),
            file: None,
            checked: 0,
        });
        if entry.checked != batch {
            entry.checked = batch;
            let mut buf = [0u8; 64];
            let fresh = entry.file.as_ref().map(|f| {
                use std::os::unix::fs::FileExt;
                f.read_at(&mut buf, 0)
            });
            match fresh {
                Some(Ok(n)) if n > 0 => set_name(&mut entry.name, &buf[..n]),
                _ => {
                    // Never opened, or the process it belonged to is gone: (re)open.
                    if entry.file.take().is_some() {
                        self.open_files -= 1;
                    }
                    let path = self.root.proc.join(format!("{pid}/comm"));
                    if let Ok(f) = std::fs::File::open(path) {
                        use std::os::unix::fs::FileExt;
                        if let Ok(n) = f.read_at(&mut buf, 0) {
                            set_name(&mut entry.name, &buf[..n]);
                            entry.file = Some(f);
                            self.open_files += 1;
                        }
                    }
                }
            }
        }
        &entry.name
    }
}

fn set_name(name: &mut String, bytes: &[u8]) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if name.as_bytes() != bytes {
        *name = String::from_utf8_lossy(bytes).into_owned();
    }
}

/// Follows parent links from `pid` upwards; returns the chain (starting with `pid`'s parent)
/// until one of `stop` returns true or the chain ends.
pub fn ancestors(root: &SysRoot, pid: i32, mut stop: impl FnMut(i32) -> bool) -> Vec<i32> {
    let mut chain = Vec::new();
    let mut current = pid;
    while chain.len() < MAX_ANCESTRY {
        match ppid(root, current) {
            Some(parent) if parent > 0 && parent != current => {
                chain.push(parent);
                if stop(parent) {
                    break;
                }
                current = parent;
            }
            _ => break,
        }
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::fs;

    fn fake_proc(procs: &[(i32, &str, i32)]) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        for (pid, name, parent) in procs {
            let p = dir.path().join(format!("proc/{pid}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("comm"), format!("{name}\n")).unwrap();
            fs::write(
                p.join("stat"),
                format!("{pid} ({name}) S {parent} 1 1 0 -1 4194560 0 0"),
            )
            .unwrap();
            fs::write(p.join("status"), format!("Name:\t{name}\nTgid:\t{pid}\n")).unwrap();
        }
        let root = SysRoot::under(dir.path());
        (dir, root)
    }

    #[test]
    fn stat_ppid_survives_odd_command_names() {
        assert_eq!(parse_stat_ppid("12 (a) b) c) S 7 12 12"), Some(7));
        assert_eq!(parse_stat_ppid("12 (x) S"), None);
        assert_eq!(parse_stat_ppid("garbage"), None);
    }

    #[test]
    fn comm_files_stay_open_and_names_refresh_per_batch() {
        let pid = std::process::id() as i32;
        let mut comms = Comms::new(SysRoot::real());
        comms.new_batch();
        let name = comms.get(pid).to_owned();
        assert_eq!(Some(name), comm(&SysRoot::real(), pid));
        assert_eq!(comms.open_files, 1);
        comms.new_batch();
        comms.get(pid);
        assert_eq!(comms.open_files, 1, "reused, not reopened");
    }

    #[test]
    fn names_from_process_events_cover_processes_already_gone() {
        let (_dir, root) = fake_proc(&[(10, "sh", 1)]);
        let mut comms = Comms::new(root);
        comms.new_batch();
        assert_eq!(comms.get(10), "sh");
        comms.note_fork(10, 20);
        comms.note_fork(99, 21);
        comms.note(22, "touch".into());
        assert_eq!(comms.get(20), "sh", "inherited at fork");
        assert_eq!(comms.get(21), "unknown");
        assert_eq!(comms.get(22), "touch");
        comms.note(10, "cat".into());
        comms.new_batch();
        assert_eq!(comms.get(10), "sh", "/proc wins while the process runs");
        comms.forget(20);
        assert_eq!(
            comms.get(20),
            "unknown",
            "exec'd after inheriting, then gone"
        );
    }

    #[test]
    fn comms_are_remembered_after_exit() {
        let (dir, root) = fake_proc(&[(10, "writer", 1)]);
        let mut comms = Comms::new(root);
        comms.new_batch();
        assert_eq!(comms.get(10), "writer");
        fs::remove_dir_all(dir.path().join("proc/10")).unwrap();
        comms.new_batch();
        assert_eq!(comms.get(10), "writer");
        assert_eq!(comms.get(11), "unknown");
    }

    #[test]
    fn ancestry_stops_where_asked() {
        let (_dir, root) = fake_proc(&[(1, "init", 0), (5, "sh", 1), (9, "cat", 5)]);
        assert_eq!(ancestors(&root, 9, |_| false), vec![5, 1]);
        assert_eq!(ancestors(&root, 9, |p| p == 5), vec![5]);
        assert_eq!(tgid(&root, 9), Some(9));
        assert_eq!(ppid(&root, 404), None);
    }

    proptest! {
        #[test]
        fn stat_parser_never_panics(s in "\\PC*") {
            let _ = parse_stat_ppid(&s);
        }
    }
}
