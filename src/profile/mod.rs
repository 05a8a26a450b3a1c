//! `tacho profile`: where the CPU time goes, by function — sampled on every CPU with the CPU
//! clock ([`sampler`]), named with blazesym ([`symbols`]), and summed here into functions by
//! self and total share, processes, the user/kernel split with the kernel's subsystems in
//! words ([`subsystem`]), folded stacks for flame graphs, and a one-line verdict. Time off
//! the CPU (`--off-cpu`, `--wall`) is traced in the kernel ([`offcpu`]), classed by reason
//! ([`why`]) and summed in [`waits`].

pub mod offcpu;
pub mod perfmap;
pub mod quick;
pub mod sampler;
pub mod subsystem;
pub mod symbols;
pub mod waiton;
pub mod waits;
pub mod why;

use sampler::Stacks;
use std::collections::HashMap;
use subsystem::Subsystem;
use symbols::{Frame, Frames};

/// A function's share.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Function {
    /// Its name (or `file+0xoffset` where unknown).
    pub name: String,
    /// Binary, library, `[kernel]` or `[jit]`.
    pub module: String,
    /// The process that spent most samples in it (or below it).
    pub process: String,
    /// A kernel function.
    pub kernel: bool,
    /// False when no symbol covered the address.
    pub known: bool,
    /// Samples where it was running (the leaf).
    pub self_samples: u64,
    /// Samples where it was on the stack.
    pub total_samples: u64,
    /// Its self share of the busy samples, percent.
    pub self_pct: f64,
    /// Its total share of the busy samples, percent.
    pub total_pct: f64,
    /// For a kernel function, its subsystem.
    pub subsystem: Option<Subsystem>,
}

/// A process's share.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcessShare {
    /// Process id.
    pub pid: u32,
    /// Command name (raw: escape before display).
    pub comm: String,
    /// Busy samples in it.
    pub samples: u64,
    /// Share of the busy samples, percent.
    pub pct: f64,
}

/// A kernel subsystem's share of the busy samples.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SubsystemShare {
    /// Which.
    pub subsystem: Subsystem,
    /// Samples whose running function belongs to it.
    pub samples: u64,
    /// Share of the busy samples, percent.
    pub pct: f64,
}

/// A whole profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Profile {
    /// Always `tacho.profile.v1`.
    pub schema: &'static str,
    /// How long it sampled.
    pub seconds: f64,
    /// Samples per second per CPU asked for.
    pub frequency_hz: u64,
    /// Every sample taken (idle included).
    pub samples: u64,
    /// Samples of idle CPUs.
    pub idle_samples: u64,
    /// Samples of busy CPUs: the 100% shares are of.
    pub busy_samples: u64,
    /// Busy samples running kernel code, percent.
    pub kernel_pct: f64,
    /// Busy samples running user code, percent.
    pub user_pct: f64,
    /// Samples the kernel dropped (rings full).
    pub lost_samples: u64,
    /// The answer in one line.
    pub verdict: String,
    /// Functions by self share, largest first.
    pub functions: Vec<Function>,
    /// Processes by share.
    pub processes: Vec<ProcessShare>,
    /// Kernel subsystems by share of the running function.
    pub subsystems: Vec<SubsystemShare>,
    /// What could not be named or followed ("app: no symbols; …").
    pub notes: Vec<String>,
    /// Stacks in the folded format (`comm;root;…;leaf`) with their counts.
    #[serde(skip)]
    pub folded: Vec<(String, u64)>,
}

/// Only this process's samples, when given.
pub struct Filter {
    /// A process id.
    pub pid: Option<u32>,
}

/// Builds the profile from counted stacks, their frames and the processes' names.
pub fn build(
    stacks: &Stacks,
    frames: &Frames,
    comms: &HashMap<u32, String>,
    filter: &Filter,
    seconds: f64,
    hz: u64,
    lost: u64,
) -> Profile {
    let unknown = Frame {
        name: "?".into(),
        module: "?".into(),
        kernel: false,
        known: false,
    };
    let frame = |pid: u32, addr: u64| -> &Frame {
        let key = if symbols::is_kernel(addr) { 0 } else { pid };
        frames.get(&(key, addr)).unwrap_or(&unknown)
    };
    let comm = |pid: u32| -> String {
        if pid == 0 {
            return "swapper".into();
        }
        comms
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| format!("pid {pid}"))
    };
    let (mut samples, mut idle, mut kernel) = (0u64, 0u64, 0u64);
    // Per function: self samples, total samples, and per process its total samples there.
    let mut by_fn: HashMap<&Frame, (u64, u64, HashMap<u32, u64>)> = HashMap::new();
    let mut by_pid: HashMap<u32, u64> = HashMap::new();
    let mut by_sub: HashMap<Subsystem, u64> = HashMap::new();
    // The running kernel functions of each subsystem's samples, for the verdict.
    let mut by_sub_fn: HashMap<(Subsystem, &Frame), u64> = HashMap::new();
    let mut folded: HashMap<String, u64> = HashMap::new();
    // Per process: samples, samples whose user leaf has no symbol, samples with one user frame.
    let mut user_quality: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    for ((pid, stack), &n) in stacks {
        if filter.pid.is_some_and(|p| p != *pid) {
            continue;
        }
        samples += n;
        let Some(&leaf) = stack.first() else { continue };
        let leaf_frame = frame(*pid, leaf);
        let sub = leaf_frame
            .kernel
            .then(|| sample_subsystem(stack.iter().map(|&a| frame(*pid, a))));
        if *pid == 0 || sub == Some(Subsystem::Idle) {
            idle += n;
            continue;
        }
        if let Some(sub) = sub {
            kernel += n;
            *by_sub.entry(sub).or_default() += n;
            *by_sub_fn.entry((sub, leaf_frame)).or_default() += n;
        }
        *by_pid.entry(*pid).or_default() += n;
        by_fn.entry(leaf_frame).or_default().0 += n;
        let mut seen: Vec<&Frame> = Vec::new();
        for &addr in stack {
            let f = frame(*pid, addr);
            if !seen.contains(&f) {
                seen.push(f);
                let entry = by_fn.entry(f).or_default();
                entry.1 += n;
                *entry.2.entry(*pid).or_default() += n;
            }
        }
        let user: Vec<&Frame> = stack
            .iter()
            .map(|&a| frame(*pid, a))
            .filter(|f| !f.kernel)
            .collect();
        if let Some(first) = user.first() {
            let q = user_quality.entry(*pid).or_default();
            q.0 += n;
            if !first.known {
                q.1 += n;
            }
            if user.len() == 1 {
                q.2 += n;
            }
        }
        let mut line = comm(*pid).replace([';', ' '], "_");
        for &addr in stack.iter().rev() {
            let f = frame(*pid, addr);
            line.push(';');
            line.push_str(&f.name.replace(';', ":"));
            if f.kernel {
                line.push_str("_[k]");
            }
        }
        *folded.entry(line).or_default() += n;
    }
    let busy = samples - idle;
    let pct = |n: u64| {
        if busy == 0 {
            0.0
        } else {
            100.0 * n as f64 / busy as f64
        }
    };
    let mut functions: Vec<Function> = by_fn
        .into_iter()
        .map(|(f, (own, total, pids))| {
            let top = pids.iter().max_by_key(|(p, n)| (**n, u32::MAX - **p));
            Function {
                name: f.name.clone(),
                module: f.module.clone(),
                process: top.map_or_else(|| "-".into(), |(p, _)| comm(*p)),
                kernel: f.kernel,
                known: f.known,
                self_samples: own,
                total_samples: total,
                self_pct: pct(own),
                total_pct: pct(total),
                subsystem: f.kernel.then(|| subsystem::of(&f.name)),
            }
        })
        .collect();
    functions.sort_by(|a, b| {
        b.self_samples
            .cmp(&a.self_samples)
            .then(b.total_samples.cmp(&a.total_samples))
            .then(a.name.cmp(&b.name))
    });
    let mut processes: Vec<ProcessShare> = by_pid
        .into_iter()
        .map(|(pid, n)| ProcessShare {
            pid,
            comm: comm(pid),
            samples: n,
            pct: pct(n),
        })
        .collect();
    processes.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
    let mut subsystems: Vec<SubsystemShare> = by_sub
        .into_iter()
        .map(|(subsystem, n)| SubsystemShare {
            subsystem,
            samples: n,
            pct: pct(n),
        })
        .collect();
    subsystems.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.subsystem.cmp(&b.subsystem))
    });
    let mut notes = Vec::new();
    let mut quality: Vec<(u32, (u64, u64, u64))> = user_quality.into_iter().collect();
    quality.sort_by_key(|(pid, q)| (u64::MAX - q.0, *pid));
    for (pid, (n, unknown_leaf, flat)) in quality {
        if pct(n) < 5.0 {
            continue;
        }
        let name = comm(pid);
        if unknown_leaf * 2 > n {
            notes.push(format!(
                "{name}: no symbols for most of its samples (shown as file+offset); install \
                 {name}-dbgsym or rebuild it with symbols"
            ));
        } else if flat * 2 > n {
            notes.push(format!(
                "{name}: call chains stop at the running function (built without frame \
                 pointers): self shares are right, totals undercount callers"
            ));
        }
    }
    if lost > 0 {
        notes.push(format!(
            "{} {} lost (the kernel's rings filled); lower --frequency",
            crate::units::plural(lost, "sample"),
            if lost == 1 { "was" } else { "were" }
        ));
    }
    let kernel_pct = pct(kernel);
    let user_pct = if busy == 0 { 0.0 } else { 100.0 - kernel_pct };
    let top_of = |s: Subsystem| {
        by_sub_fn
            .iter()
            .filter(|((sub, _), _)| *sub == s)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.1.name.cmp(&a.0.1.name)))
            .map(|((_, f), _)| f.name.clone())
    };
    let window = Window {
        pid: filter.pid,
        samples,
        seconds,
        hz,
    };
    let verdict = verdict(busy, &window, kernel_pct, &subsystems, &functions, top_of);
    let mut folded: Vec<(String, u64)> = folded.into_iter().collect();
    folded.sort();
    Profile {
        schema: "tacho.profile.v1",
        seconds,
        frequency_hz: hz,
        samples,
        idle_samples: idle,
        busy_samples: busy,
        kernel_pct,
        user_pct,
        lost_samples: lost,
        verdict,
        functions,
        processes,
        subsystems,
        notes,
        folded,
    }
}

/// Kernel time this large is the story …
const KERNEL_STORY_PCT: f64 = 30.0;
/// Fewer busy samples than this make no verdict: one busy sample of a hundred is "100% in the
/// kernel", which says nothing.
pub const MIN_VERDICT_SAMPLES: u64 = 20;
/// Below this share of busy samples the verdict says how busy the CPUs were.
const SAY_BUSY_BELOW_PCT: f64 = 90.0;
/// Below this share of busy samples the CPUs were "nearly idle".
const NEARLY_IDLE_PCT: f64 = 10.0;
/// … as is one user function this large.
const ONE_FUNCTION_PCT: f64 = 30.0;

/// The subsystem a kernel sample counts for: transparent-huge-page work if any kernel frame
/// on its stack is (clearing a huge page runs `clear_page_*` under `folio_zero_user`), else the
/// first frame from the leaf up that belongs to a named subsystem.
fn sample_subsystem<'a>(frames: impl Iterator<Item = &'a Frame>) -> Subsystem {
    let kernel: Vec<Subsystem> = frames
        .filter(|f| f.kernel)
        .map(|f| subsystem::of(&f.name))
        .collect();
    if kernel.contains(&Subsystem::Thp) {
        return Subsystem::Thp;
    }
    kernel
        .into_iter()
        .find(|s| *s != Subsystem::Other)
        .unwrap_or(Subsystem::Other)
}

/// What the busy samples are counted against: every sample of the window, or with `--pid` the
/// CPU time the window offered one thread (all of the target's samples are busy ones, so a
/// share of its own samples would always read 100%).
struct Window {
    pid: Option<u32>,
    samples: u64,
    seconds: f64,
    hz: u64,
}

impl Window {
    /// How busy the target was, in words, from `busy` samples: "nearly idle" only when it
    /// was (a short window can hold few samples of a busy machine).
    fn busy_words(&self, busy: u64) -> String {
        match self.pid {
            None => {
                let pct = 100.0 * busy as f64 / self.samples.max(1) as f64;
                let state = if pct < NEARLY_IDLE_PCT {
                    "nearly idle".to_string()
                } else {
                    format!("{pct:.0}% busy")
                };
                format!(
                    "the CPUs were {state}: {busy} of {} samples ({pct:.0}%) found work running",
                    self.samples
                )
            }
            Some(pid) => format!(
                "pid {pid} was on a CPU in {} (about {:.2} s of CPU in {:.1} s)",
                crate::units::plural(busy, "sample"),
                busy as f64 / self.hz.max(1) as f64,
                self.seconds
            ),
        }
    }
}

fn verdict(
    busy: u64,
    window: &Window,
    kernel_pct: f64,
    subsystems: &[SubsystemShare],
    functions: &[Function],
    top_of: impl Fn(Subsystem) -> Option<String>,
) -> String {
    if busy == 0 {
        return match window.pid {
            None => format!(
                "the CPUs were idle: none of {} samples found work running",
                window.samples
            ),
            Some(pid) => format!(
                "pid {pid} was idle: no sample in {:.1} s found it on a CPU",
                window.seconds
            ),
        };
    }
    if busy < MIN_VERDICT_SAMPLES {
        return format!(
            "{}, too few for a verdict (fewer than {MIN_VERDICT_SAMPLES}); profile longer \
             (--duration) or while the load runs",
            window.busy_words(busy)
        );
    }
    let story = story(kernel_pct, subsystems, functions, top_of);
    // With --pid every sample is the target's: how busy the CPUs were is not known here.
    let busy_pct = 100.0 * busy as f64 / window.samples.max(1) as f64;
    if window.pid.is_none() && busy_pct < SAY_BUSY_BELOW_PCT {
        format!("{story} (the CPUs were {busy_pct:.0}% busy)")
    } else {
        story
    }
}

/// What the busy samples say, in one line.
fn story(
    kernel_pct: f64,
    subsystems: &[SubsystemShare],
    functions: &[Function],
    top_of: impl Fn(Subsystem) -> Option<String>,
) -> String {
    let top_user = functions.iter().find(|f| !f.kernel);
    if kernel_pct >= KERNEL_STORY_PCT
        && let Some(sub) = subsystems.first()
    {
        let top = top_of(sub.subsystem)
            .map(|f| format!(" ({f})"))
            .unwrap_or_default();
        return format!(
            "{kernel_pct:.0}% of CPU in the kernel: {:.0}% in {}{top}",
            sub.pct,
            sub.subsystem.words()
        );
    }
    if let Some(f) = top_user.filter(|f| f.self_pct >= ONE_FUNCTION_PCT) {
        return format!(
            "{:.0}% in one user function: {} in {}",
            f.self_pct, f.name, f.process
        );
    }
    match functions.first() {
        Some(f) => format!(
            "no single hot spot: the busiest function is {} in {} ({:.0}%); {kernel_pct:.0}% \
             kernel, {:.0}% user",
            f.name,
            f.process,
            f.self_pct,
            100.0 - kernel_pct
        ),
        None => "no samples".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(list: &[(u32, u64, &str, bool, bool)]) -> Frames {
        list.iter()
            .map(|&(pid, addr, name, kernel, known)| {
                (
                    (pid, addr),
                    Frame {
                        name: name.into(),
                        module: if kernel { "[kernel]" } else { "app" }.into(),
                        kernel,
                        known,
                    },
                )
            })
            .collect()
    }

    const K: u64 = 0xffff_ffff_8100_0000;

    #[test]
    fn a_hot_user_function_is_the_verdict_with_self_and_total_shares() {
        let stacks: Stacks = [
            ((7, vec![0x10, 0x20]), 80),
            ((7, vec![0x30, 0x20]), 20),
            ((0, vec![K + 1]), 50),
        ]
        .into_iter()
        .collect();
        let f = frames(&[
            (7, 0x10, "spin", false, true),
            (7, 0x20, "main", false, true),
            (7, 0x30, "other", false, true),
            (0, K + 1, "pv_native_safe_halt", true, true),
        ]);
        let comms = [(7, "app".to_string())].into_iter().collect();
        let p = build(&stacks, &f, &comms, &Filter { pid: None }, 1.0, 99, 0);
        assert_eq!((p.samples, p.idle_samples, p.busy_samples), (150, 50, 100));
        assert_eq!(p.functions[0].name, "spin");
        assert_eq!(p.functions[0].self_pct, 80.0);
        let main = p.functions.iter().find(|f| f.name == "main").unwrap();
        assert_eq!((main.self_samples, main.total_pct), (0, 100.0));
        // 100 of 150 samples busy: the verdict says how busy the CPUs were.
        assert_eq!(
            p.verdict,
            "80% in one user function: spin in app (the CPUs were 67% busy)"
        );
        assert!(p.folded.contains(&("app;main;spin".to_string(), 80)));
    }

    #[test]
    fn too_few_busy_samples_make_no_verdict() {
        let stacks = [((7, vec![K + 2]), 1), ((0, vec![K + 1]), 99)]
            .into_iter()
            .collect();
        let f = frames(&[
            (7, K + 2, "do_syscall_64", true, true),
            (0, K + 1, "pv_native_safe_halt", true, true),
        ]);
        let comms = [(7, "app".to_string())].into_iter().collect();
        let p = build(&stacks, &f, &comms, &Filter { pid: None }, 1.0, 99, 0);
        assert_eq!((p.samples, p.busy_samples), (100, 1));
        assert!(
            p.verdict.starts_with("the CPUs were nearly idle: 1 of 100"),
            "{}",
            p.verdict
        );
        assert!(!p.verdict.contains("in the kernel"), "{}", p.verdict);
    }

    /// With --pid every sample counted is the target's: its busy-ness is its samples against
    /// the window's time, not a share of its own samples (which would always be 100%).
    #[test]
    fn too_few_samples_of_a_pid_say_its_cpu_time_not_a_share_of_itself() {
        let stacks = [((7, vec![K + 2]), 12), ((0, vec![K + 1]), 186)]
            .into_iter()
            .collect();
        let f = frames(&[
            (7, K + 2, "do_syscall_64", true, true),
            (0, K + 1, "pv_native_safe_halt", true, true),
        ]);
        let comms = [(7, "app".to_string())].into_iter().collect();
        let p = build(&stacks, &f, &comms, &Filter { pid: Some(7) }, 1.0, 100, 0);
        assert_eq!((p.samples, p.busy_samples), (12, 12));
        assert_eq!(
            p.verdict,
            "pid 7 was on a CPU in 12 samples (about 0.12 s of CPU in 1.0 s), too few for a \
             verdict (fewer than 20); profile longer (--duration) or while the load runs"
        );
        let idle = build(&stacks, &f, &comms, &Filter { pid: Some(8) }, 2.0, 100, 0);
        assert_eq!(
            idle.verdict,
            "pid 8 was idle: no sample in 2.0 s found it on a CPU"
        );
    }

    /// A short window on busy CPUs holds few samples: they are too few, not "nearly idle".
    #[test]
    fn too_few_samples_of_busy_cpus_are_not_called_idle() {
        let stacks = [((7, vec![K + 2]), 15), ((0, vec![K + 1]), 3)]
            .into_iter()
            .collect();
        let f = frames(&[
            (7, K + 2, "do_syscall_64", true, true),
            (0, K + 1, "pv_native_safe_halt", true, true),
        ]);
        let comms = [(7, "app".to_string())].into_iter().collect();
        let p = build(&stacks, &f, &comms, &Filter { pid: None }, 0.1, 99, 0);
        assert!(
            p.verdict.starts_with(
                "the CPUs were 83% busy: 15 of 18 samples (83%) found work running, too few"
            ),
            "{}",
            p.verdict
        );
    }

    #[test]
    fn kernel_thp_work_is_said_in_words_and_missing_symbols_are_noted() {
        let stacks: Stacks = [((9, vec![K + 1, K + 2, 0x10]), 60), ((9, vec![0x10]), 40)]
            .into_iter()
            .collect();
        let f = frames(&[
            (0, K + 1, "clear_page_erms", true, true),
            (0, K + 2, "do_huge_pmd_anonymous_page", true, true),
            (9, 0x10, "app+0x1139", false, false),
        ]);
        let comms = [(9, "stress".to_string())].into_iter().collect();
        let p = build(&stacks, &f, &comms, &Filter { pid: None }, 1.0, 99, 0);
        assert!(
            p.verdict
                .starts_with("60% of CPU in the kernel: 60% in page clearing and compaction"),
            "{}",
            p.verdict
        );
        // clear_page_erms alone is page allocation; under a huge-page fault it is THP work.
        assert!(p.verdict.contains("thp_enabled") && p.verdict.ends_with("(clear_page_erms)"));
        assert!(
            p.notes[0].starts_with("stress: no symbols"),
            "{:?}",
            p.notes
        );
    }
}
