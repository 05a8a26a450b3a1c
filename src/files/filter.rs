//! Which events are shown: include and exclude rules on process, name, path and operation.
//!
//! Rules of one kind are alternatives (`--pid 1 --pid 2` shows either); rules of different
//! kinds must all hold; excludes win over includes. Checks run cheapest first, so an event
//! dropped by its pid or letters costs no /proc read and no path lookup.

use super::ops::Ops;
use super::procs;
use crate::kernel::SysRoot;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The filter as the command line gave it, pids already mapped to their processes.
#[derive(Debug, Clone, Default)]
pub struct FilterSpec {
    /// `--pid`: processes shown (their threads mapped to the process).
    pub pids: Vec<i32>,
    /// `--children`: the processes that `pids` start are shown too.
    pub children: bool,
    /// `--comm`: command names shown.
    pub comms: Vec<String>,
    /// `--path`: path prefixes shown.
    pub paths: Vec<PathBuf>,
    /// `--ops`: operation letters shown; `None` for all.
    pub ops: Option<Ops>,
    /// `--exclude-pid`: processes hidden.
    pub exclude_pids: Vec<i32>,
    /// `--exclude-comm`: command names hidden.
    pub exclude_comms: Vec<String>,
}

/// The filter while watching: the spec plus what has been learned about processes.
pub struct Filter {
    spec: FilterSpec,
    ops: Ops,
    own_pid: i32,
    lineage: Lineage,
}

impl Filter {
    /// A filter for `spec`, reading process ancestry under `root`.
    pub fn new(spec: FilterSpec, root: SysRoot) -> Filter {
        let lineage = Lineage::new(root, &spec.pids, spec.children);
        Filter {
            ops: spec.ops.unwrap_or(Ops::ALL),
            own_pid: std::process::id() as i32,
            lineage,
            spec,
        }
    }

    /// The letters worth asking the kernel for.
    pub fn ops(&self) -> Ops {
        self.ops
    }

    /// Whether `--children` is in effect (fork notifications are then worth reading).
    pub fn follows_children(&self) -> bool {
        self.lineage.children
    }

    /// A process started `child`: it is selected if `parent` is.
    pub fn note_fork(&mut self, parent: i32, child: i32) {
        if self.lineage.children && self.lineage.is_selected(parent) {
            self.lineage.known.insert(child, true);
        }
    }

    /// Checks needing only the event's pid and letters (tacho's own events always fail).
    pub fn pass_pid_ops(&mut self, pid: i32, ops: Ops) -> bool {
        if pid == self.own_pid || !ops.intersects(self.ops) || self.spec.exclude_pids.contains(&pid)
        {
            return false;
        }
        self.spec.pids.is_empty() || self.lineage.includes(pid)
    }

    /// Whether any check needs the process name.
    pub fn needs_comm(&self) -> bool {
        !self.spec.comms.is_empty() || !self.spec.exclude_comms.is_empty()
    }

    /// Whether a process named `comm` passes the `--comm` and `--exclude-comm` filters.
    pub fn pass_comm(&self, comm: &str) -> bool {
        if self.spec.exclude_comms.iter().any(|c| c == comm) {
            return false;
        }
        self.spec.comms.is_empty() || self.spec.comms.iter().any(|c| c == comm)
    }

    /// Path prefixes match whole components: `/var/log` shows `/var/log/syslog`, not
    /// `/var/logs/x`.
    pub fn pass_path(&self, path: &Path) -> bool {
        self.spec.paths.is_empty() || self.spec.paths.iter().any(|p| path.starts_with(p))
    }
}

/// The processes `--pid` selects: the given ones and, with `--children`, every process that
/// descends from one of them, found through parent links in /proc when it first shows up.
///
/// Descendants alive at start are found by one scan of /proc; later ones from fork
/// notifications ([`super::proc_events`], fed through [`Filter::note_fork`]). Where those are not
/// available, a child that exits before its first event is read cannot be traced back (its
/// /proc entry is gone, and events carry no parent), and its events are not shown.
struct Lineage {
    root: SysRoot,
    roots: HashSet<i32>,
    children: bool,
    known: HashMap<i32, bool>,
}

impl Lineage {
    fn new(root: SysRoot, pids: &[i32], children: bool) -> Lineage {
        let mut lineage = Lineage {
            root,
            roots: pids.iter().copied().collect(),
            children,
            known: HashMap::new(),
        };
        if children {
            lineage.scan_descendants();
        }
        lineage
    }

    fn is_selected(&self, pid: i32) -> bool {
        self.roots.contains(&pid) || self.known.get(&pid) == Some(&true)
    }

    /// Marks every process now running below a root.
    fn scan_descendants(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.root.proc) else {
            return;
        };
        let parents: HashMap<i32, i32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| Some((pid, procs::ppid(&self.root, pid)?)))
            .collect();
        for &pid in parents.keys() {
            let mut current = pid;
            for _ in 0..parents.len().min(128) {
                match parents.get(&current) {
                    Some(parent) if self.roots.contains(parent) => {
                        self.known.insert(pid, true);
                        break;
                    }
                    Some(&parent) if parent > 0 && parent != current => current = parent,
                    _ => break,
                }
            }
        }
    }

    fn includes(&mut self, pid: i32) -> bool {
        if self.roots.contains(&pid) {
            return true;
        }
        if !self.children {
            return false;
        }
        if let Some(&verdict) = self.known.get(&pid) {
            return verdict;
        }
        let roots = &self.roots;
        let known = &self.known;
        let chain = procs::ancestors(&self.root, pid, |p| {
            roots.contains(&p) || known.contains_key(&p)
        });
        let verdict = chain
            .last()
            .is_some_and(|&top| roots.contains(&top) || known.get(&top) == Some(&true));
        // Everything between the event's process and the decisive ancestor shares the verdict;
        // a process whose parent chain could not be read is not remembered (try again later).
        if !chain.is_empty() {
            self.known.insert(pid, verdict);
            for p in &chain[..chain.len() - 1] {
                self.known.insert(*p, verdict);
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn proc_tree(procs: &[(i32, i32)]) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        for (pid, parent) in procs {
            let p = dir.path().join(format!("proc/{pid}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("stat"), format!("{pid} (x) S {parent} 0 0")).unwrap();
        }
        let root = SysRoot::under(dir.path());
        (dir, root)
    }

    #[test]
    fn children_are_followed_only_when_asked() {
        let (_dir, root) = proc_tree(&[(1, 0), (100, 1), (101, 100), (102, 101), (200, 1)]);
        let spec = FilterSpec {
            pids: vec![100],
            ..FilterSpec::default()
        };
        let mut plain = Filter::new(spec.clone(), root.clone());
        assert!(plain.pass_pid_ops(100, Ops::ALL));
        assert!(!plain.pass_pid_ops(102, Ops::ALL));
        let mut family = Filter::new(
            FilterSpec {
                children: true,
                ..spec
            },
            root,
        );
        assert!(family.pass_pid_ops(102, Ops::ALL), "grandchild");
        assert!(
            family.pass_pid_ops(101, Ops::ALL),
            "child, learned on the way"
        );
        assert!(!family.pass_pid_ops(200, Ops::ALL), "sibling");
        assert!(!family.pass_pid_ops(1, Ops::ALL), "parent");
        family.note_fork(102, 300);
        family.note_fork(300, 301);
        family.note_fork(200, 400);
        assert!(
            family.pass_pid_ops(301, Ops::ALL),
            "forked after start, already gone"
        );
        assert!(!family.pass_pid_ops(400, Ops::ALL), "forked by an outsider");
    }

    #[test]
    fn descendants_running_at_start_are_found_by_a_scan() {
        let (_dir, root) = proc_tree(&[(1, 0), (100, 1), (101, 100), (102, 101), (200, 1)]);
        let spec = FilterSpec {
            pids: vec![100],
            children: true,
            ..FilterSpec::default()
        };
        let f = Filter::new(spec, root);
        assert_eq!(f.lineage.known.get(&102), Some(&true));
        assert_eq!(f.lineage.known.get(&200), None);
    }

    #[test]
    fn excludes_win_and_own_events_never_pass() {
        let (_dir, root) = proc_tree(&[]);
        let mut f = Filter::new(
            FilterSpec {
                exclude_pids: vec![7],
                exclude_comms: vec!["cron".into()],
                comms: vec!["cron".into(), "sh".into()],
                ops: Some(Ops::parse("W").unwrap()),
                paths: vec![PathBuf::from("/var/log")],
                ..FilterSpec::default()
            },
            root,
        );
        assert!(!f.pass_pid_ops(7, Ops::ALL));
        assert!(!f.pass_pid_ops(std::process::id() as i32, Ops::ALL));
        assert!(f.pass_pid_ops(8, Ops::parse("CW").unwrap()));
        assert!(!f.pass_pid_ops(8, Ops::parse("R").unwrap()));
        assert!(!f.pass_comm("cron"));
        assert!(f.pass_comm("sh"));
        assert!(!f.pass_comm("bash"));
        assert!(f.pass_path(Path::new("/var/log/syslog")));
        assert!(!f.pass_path(Path::new("/var/logs/x")));
    }
}
