//! Addresses to function names with `blazesym`: the kernel's from /proc/kallsyms (modules
//! included), a process's from its ELF symbol tables and debug information and from its JIT
//! perf map (`/tmp/perf-PID.map`, as PHP, Node and the JVM write them; read by
//! [`super::perfmap`]). An address without a symbol is named by its file and offset
//! (`app+0x1139`) and marked unknown, so a stripped binary is said to be one, never hidden.
//!
//! Naming opens other users' files (binaries, debug info, /proc/PID/maps), and a user can make
//! such an open or read wait forever (a FUSE file that never answers), so it runs on a thread
//! of its own ([`Namer`]): the caller waits only while its stop flag is down and for at most
//! [`NAMING_LIMIT`], so Ctrl-C or SIGTERM still ends tacho and `top --profile` goes on.

use super::perfmap::{self, PerfMap};
use super::sampler::Stacks;
use crate::kernel::SysRoot;
use blazesym::MaybeDefault;
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Kernel text lives in the upper half of the address space on every 64-bit architecture
/// tacho builds for.
pub fn is_kernel(addr: u64) -> bool {
    addr >= 0xffff_8000_0000_0000
}

/// A named frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// The function, or `file+0xoffset` where no symbol covers the address.
    pub name: String,
    /// The binary or library (its file name), `[kernel]`, or `[jit]` for a perf map.
    pub module: String,
    /// A kernel frame.
    pub kernel: bool,
    /// False when no symbol was found.
    pub known: bool,
}

/// Frames by (pid, address); kernel addresses under pid 0.
pub type Frames = HashMap<(u32, u64), Frame>;

/// Kernel addresses, and user addresses by process, to be named.
type Request = (Vec<u64>, HashMap<u32, BTreeSet<u64>>);

/// How often a wait for names looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// The longest wait for one round of names (parsing a large binary's debug information the
/// first time takes seconds; a file that never answers takes forever).
pub const NAMING_LIMIT: Duration = Duration::from_secs(30);

/// How a round of naming ended.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Naming {
    /// Every address asked for has a frame.
    Done,
    /// The stop flag was raised first.
    Stopped,
    /// [`NAMING_LIMIT`] passed first (now, or in an earlier round): frames not named are
    /// left out.
    GaveUp,
}

/// A thread that owns the symbolizer (and the perf maps read so far) and names addresses.
pub struct Namer {
    requests: Sender<Request>,
    answers: Receiver<Frames>,
    /// A request was given up on: its answer may still come, so no other is sent.
    abandoned: bool,
}

impl Namer {
    /// Starts the naming thread, which finds the kernel's symbols and processes' mappings and
    /// perf maps under `root`.
    pub fn start(root: SysRoot) -> Namer {
        let (requests, inbox) = mpsc::channel::<Request>();
        let (outbox, answers) = mpsc::channel();
        std::thread::spawn(move || {
            let symbolizer = Symbolizer::new();
            let mut perf_maps: HashMap<u32, Option<PerfMap>> = HashMap::new();
            for (kernel, user) in inbox {
                let mut out = Frames::new();
                if !kernel.is_empty() {
                    name_kernel(&symbolizer, &root, &kernel, &mut out);
                }
                name_user(&symbolizer, &root, &mut perf_maps, user, &mut out);
                if outbox.send(out).is_err() {
                    break;
                }
            }
        });
        Namer {
            requests,
            answers,
            abandoned: false,
        }
    }

    /// Names the addresses of `stacks` that `out` does not have yet (a live view names each
    /// address once; the symbolizer keeps the files it has parsed), unless `stop` is raised or
    /// [`NAMING_LIMIT`] passes first.
    pub fn name_new(&mut self, stacks: &Stacks, out: &mut Frames, stop: &AtomicBool) -> Naming {
        if self.abandoned {
            return Naming::GaveUp;
        }
        let mut kernel: BTreeSet<u64> = BTreeSet::new();
        let mut user: HashMap<u32, BTreeSet<u64>> = HashMap::new();
        for (pid, stack) in stacks.keys() {
            for &addr in stack {
                if is_kernel(addr) {
                    if !out.contains_key(&(0, addr)) {
                        kernel.insert(addr);
                    }
                } else if *pid != 0 && !out.contains_key(&(*pid, addr)) {
                    user.entry(*pid).or_default().insert(addr);
                }
            }
        }
        if kernel.is_empty() && user.is_empty() {
            return Naming::Done;
        }
        if self
            .requests
            .send((kernel.into_iter().collect(), user))
            .is_err()
        {
            return Naming::Done; // the thread is gone (it panicked): the frames stay unnamed
        }
        let start = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                self.abandoned = true;
                return Naming::Stopped;
            }
            if start.elapsed() >= NAMING_LIMIT {
                self.abandoned = true;
                return Naming::GaveUp;
            }
            match self.answers.recv_timeout(POLL) {
                Ok(frames) => {
                    out.extend(frames);
                    return Naming::Done;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Naming::Done,
            }
        }
    }
}

fn name_kernel(symbolizer: &Symbolizer, root: &SysRoot, kernel: &[u64], out: &mut Frames) {
    // Named only when it opens: blazesym fails the whole lookup on a kallsyms it was given
    // and cannot read, where it would try a vmlinux file instead had it found none.
    let kallsyms = root.proc.join("kallsyms");
    let source = Source::Kernel(Kernel {
        kallsyms: match std::fs::File::open(&kallsyms) {
            Ok(_) => MaybeDefault::Some(kallsyms),
            Err(_) => MaybeDefault::None,
        },
        ..Kernel::default()
    });
    let names = symbolizer
        .symbolize(&source, Input::AbsAddr(kernel))
        .unwrap_or_default();
    for (i, &addr) in kernel.iter().enumerate() {
        let frame = match names.get(i) {
            Some(Symbolized::Sym(sym)) => Frame {
                name: sym.name.to_string(),
                module: "[kernel]".into(),
                kernel: true,
                known: true,
            },
            _ => Frame {
                name: format!("{addr:#x}"),
                module: "[kernel]".into(),
                kernel: true,
                known: false,
            },
        };
        out.insert((0, addr), frame);
    }
}

fn name_user(
    symbolizer: &Symbolizer,
    root: &SysRoot,
    perf_maps: &mut HashMap<u32, Option<PerfMap>>,
    user: HashMap<u32, BTreeSet<u64>>,
    out: &mut Frames,
) {
    for (pid, addrs) in user {
        let addrs: Vec<u64> = addrs.into_iter().collect();
        let mut process = Process::new(pid.into());
        // blazesym would open the perf map by name and map it into memory: see perfmap.
        process.perf_map = false;
        let names = symbolizer
            .symbolize(&Source::Process(process), Input::AbsAddr(&addrs))
            .unwrap_or_default();
        let maps = read_maps(root, pid);
        for (i, &addr) in addrs.iter().enumerate() {
            let mapping = maps.iter().find(|m| m.start <= addr && addr < m.end);
            // A perf map's functions lie in anonymous JIT memory.
            let jit = match mapping {
                None | Some(Mapping { path: None, .. }) => perf_maps
                    .entry(pid)
                    .or_insert_with(|| perfmap::load(root, pid))
                    .as_ref()
                    .and_then(|m| m.find(addr)),
                Some(_) => None,
            };
            let frame = match (names.get(i), jit) {
                (Some(Symbolized::Sym(sym)), _) => Frame {
                    name: sym.name.to_string(),
                    module: match (&sym.module, mapping) {
                        (Some(m), _) => file_name(&m.to_string_lossy()),
                        (None, m) => file_name(m.and_then(|m| m.path.as_deref()).unwrap_or("?")),
                    },
                    kernel: false,
                    known: true,
                },
                (_, Some(name)) => Frame {
                    name: name.to_owned(),
                    module: "[jit]".into(),
                    kernel: false,
                    known: true,
                },
                _ => match mapping {
                    Some(m) => {
                        let file = file_name(m.path.as_deref().unwrap_or("[anon]"));
                        Frame {
                            name: format!("{file}+{:#x}", addr - m.start + m.offset),
                            module: file,
                            kernel: false,
                            known: false,
                        }
                    }
                    None => Frame {
                        name: format!("{addr:#x}"),
                        module: "?".into(),
                        kernel: false,
                        known: false,
                    },
                },
            };
            out.insert((pid, addr), frame);
        }
    }
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// One line of /proc/PID/maps.
#[derive(Debug, PartialEq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The file, when the mapping has one.
    pub path: Option<String>,
}

fn read_maps(root: &SysRoot, pid: u32) -> Vec<Mapping> {
    std::fs::read_to_string(root.proc.join(format!("{pid}/maps")))
        .map(|t| parse_maps(&t))
        .unwrap_or_default()
}

/// Parses /proc/PID/maps text; malformed lines are left out.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(6, ' ');
            let (range, _perms, offset) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.next().map(str::trim).filter(|p| p.starts_with('/'));
            let (start, end) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: path.map(str::to_owned),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_ranges_offsets_and_files() {
        let text = "55d0c0a00000-55d0c0a01000 r-xp 00001000 fd:00 1234   /tmp/app\n\
                    7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]\nnot a line\n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].offset, 0x1000);
        assert_eq!(maps[0].path.as_deref(), Some("/tmp/app"));
        assert_eq!(maps[1].path, None);
    }

    #[test]
    fn mappings_come_from_the_roots_proc() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        crate::kernel::fixture::write(
            dir.path(),
            "proc/42/maps",
            "1000-2000 r-xp 00000000 fd:00 1 /usr/bin/app\n",
        );
        assert_eq!(
            read_maps(&root, 42)[0].path.as_deref(),
            Some("/usr/bin/app")
        );
        assert!(read_maps(&root, 43).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn any_maps_text_parses_without_panic(text in "\\PC{0,300}") {
            let _ = parse_maps(&text);
        }
    }
}
