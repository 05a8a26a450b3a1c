//! The off-CPU profile (`profile --off-cpu`), and the wall-clock one (`--wall`: on-CPU samples
//! as time beside the off-CPU time): time by reason ([`super::why`]), by process and by
//! thread, the heaviest waits with what they waited on ([`super::waiton`]), folded stacks in
//! microseconds, and a one-line verdict.

use super::symbols::{Frame, Frames, is_kernel};
use super::waiton::Target;
use super::why::{self, FdKind, Why};
use crate::bpf::offcpu::Wait;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Waits listed, at most.
const WAITS_SHOWN: usize = 50;
/// A second reason is named in the verdict from this share of the time up.
const SECOND_REASON_PCT: f64 = 10.0;

/// Time for one reason.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReasonTime {
    /// Which.
    pub why: Why,
    /// Time, ms.
    pub ms: f64,
    /// Share of the time counted (the whole profile's, or the row's), percent.
    pub pct: f64,
}

/// A process's or a thread's time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskTime {
    /// Process id.
    pub pid: u32,
    /// Thread id (a process's row: its pid).
    pub tid: u32,
    /// The thread's name (a process's row: the process's), raw: escape before display.
    pub name: String,
    /// The process's name, raw.
    pub process: String,
    /// Threads seen (1 for a thread).
    pub threads: u64,
    /// Time on the CPU (`--wall`; 0 otherwise), ms.
    pub on_cpu_ms: f64,
    /// Time off the CPU, ms.
    pub off_cpu_ms: f64,
    /// Off-CPU time as a share of its threads' time: with `--wall` of their time seen on and
    /// off the CPU, otherwise of the profile's length for each thread, percent.
    pub off_cpu_pct: f64,
    /// Time by reason, largest first, with shares of the same base as `off_cpu_pct`.
    pub reasons: Vec<ReasonTime>,
    /// What the largest off-CPU reason waited on most ("recv from 10.0.0.5:3306"), when
    /// known.
    pub waiting_on: Option<String>,
}

/// One kind of wait: a process's time for one reason, on one target, under one function.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WaitRow {
    /// Why.
    pub why: Why,
    /// Time, ms.
    pub ms: f64,
    /// Share of all the time counted, percent.
    pub pct: f64,
    /// Intervals off the CPU.
    pub count: u64,
    /// Process id.
    pub pid: u32,
    /// Process name, raw.
    pub process: String,
    /// Threads that waited so.
    pub threads: u64,
    /// What it waited on ("recv from 10.0.0.5:3306", "fsync on vda"), when known.
    pub on: Option<String>,
    /// The user function that waited (the innermost one outside the C library), or `?`.
    pub function: String,
    /// The kernel function that decided the reason, or the innermost below the scheduler.
    pub kernel_function: Option<String>,
    /// The heaviest stack of this kind, leaf first (kernel frames marked `[k]`).
    pub stack: Vec<String>,
}

/// A whole off-CPU or wall-clock profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WaitProfile {
    /// `tacho.profile.offcpu.v1`.
    pub schema: &'static str,
    /// `off-cpu` or `wall`.
    pub mode: &'static str,
    /// How long it traced.
    pub seconds: f64,
    /// On-CPU samples per second per CPU (`--wall`).
    pub frequency_hz: Option<u64>,
    /// The answer in one line.
    pub verdict: String,
    /// Time off the CPU, all threads, ms.
    pub off_cpu_ms: f64,
    /// Time on the CPU (`--wall`), ms.
    pub on_cpu_ms: f64,
    /// Time by reason, shares of all the time counted.
    pub reasons: Vec<ReasonTime>,
    /// Processes by time off the CPU (wall: by time).
    pub processes: Vec<TaskTime>,
    /// Threads, likewise.
    pub threads: Vec<TaskTime>,
    /// The heaviest kinds of wait.
    pub waits: Vec<WaitRow>,
    /// Intervals not counted (the kernel's table was full).
    pub lost_waits: u64,
    /// Waits whose stacks were not kept.
    pub lost_stacks: u64,
    /// What could not be measured or named.
    pub notes: Vec<String>,
    /// Folded stacks (`process;root;…;leaf;[why]`) with microseconds.
    #[serde(skip)]
    pub folded: Vec<(String, u64)>,
}

/// On-CPU samples per (process, thread, stack).
pub type OnCpu = HashMap<(u32, u32, Vec<u64>), u64>;

/// What [`build`] is given.
pub struct Input<'a> {
    /// The tracer's sums.
    pub waits: &'a [Wait],
    /// `--wall`: on-CPU samples per (pid, tid, stack), and their rate.
    pub on_cpu: Option<(&'a OnCpu, u64)>,
    /// Names of the addresses.
    pub frames: &'a Frames,
    /// Names read from /proc: processes by pid, threads by tid.
    pub names: &'a HashMap<u32, String>,
    /// How long it traced.
    pub seconds: f64,
    /// Intervals and stacks the kernel could not keep.
    pub lost: (u64, u64),
}

/// Per task and reason: ms, and per (target) ms.
#[derive(Default)]
struct Acc {
    on_ms: f64,
    by_why: BTreeMap<Why, f64>,
    on_target: HashMap<(Why, String), f64>,
    threads: HashSet<u32>,
    name: String,
    process: String,
}

impl Acc {
    fn off_ms(&self) -> f64 {
        // An empty f64 sum is -0.0, which would print as "-0ns".
        self.by_why
            .iter()
            .filter(|(w, _)| **w != Why::Cpu)
            .map(|(_, ms)| ms)
            .sum::<f64>()
            + 0.0
    }
}

/// A kind of wait being summed.
struct Kind {
    ms: f64,
    count: u64,
    threads: HashSet<u32>,
    process: String,
    kernel_function: Option<String>,
    heaviest: (f64, Vec<String>),
}

/// Builds the profile; `target` says what a process's descriptor is.
pub fn build(input: &Input, target: &mut dyn FnMut(u32, u32) -> Target) -> WaitProfile {
    let unknown = Frame {
        name: "?".into(),
        module: "?".into(),
        kernel: false,
        known: false,
    };
    let frame = |pid: u32, addr: u64| -> &Frame {
        let key = if is_kernel(addr) { 0 } else { pid };
        input.frames.get(&(key, addr)).unwrap_or(&unknown)
    };
    // Names the kernel kept with the waits, for the threads only sampled on the CPU.
    let mut kept: [HashMap<u32, &str>; 2] = [HashMap::new(), HashMap::new()];
    for w in input.waits {
        for (i, id, name) in [(0, w.tgid, &w.process), (1, w.tid, &w.thread)] {
            if let Some(n) = name.as_deref().filter(|n| !n.is_empty()) {
                kept[i].insert(id, n);
            }
        }
    }
    // A process's name (`thread` false) or a thread's.
    let name_of = |id: u32, given: &Option<String>, thread: bool| -> String {
        given
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| input.names.get(&id).cloned())
            .or_else(|| kept[usize::from(thread)].get(&id).map(|n| n.to_string()))
            .unwrap_or_else(|| format!("pid {id}"))
    };
    let mut procs: HashMap<u32, Acc> = HashMap::new();
    let mut threads: HashMap<u32, Acc> = HashMap::new();
    let mut kinds: HashMap<(u32, Why, Option<String>, String), Kind> = HashMap::new();
    let mut folded: HashMap<String, u64> = HashMap::new();
    let mut total_by_why: BTreeMap<Why, f64> = BTreeMap::new();
    for w in input.waits {
        let ms = w.ns as f64 / 1e6;
        // The tracer's own frames (the BPF program and the tracepoint's caller) lead the
        // kernel stack: the wait starts below them.
        let kernel: Vec<&Frame> = w
            .kernel
            .iter()
            .map(|&a| frame(0, a))
            .skip_while(|f| is_tracer(&f.name))
            .collect();
        let user: Vec<&Frame> = w.user.iter().map(|&a| frame(w.tgid, a)).collect();
        let found = w.fd.map(|fd| target(w.tgid, fd));
        let kind = found.as_ref().map_or(FdKind::Unknown, |t| t.kind);
        let names: Vec<&str> = kernel.iter().map(|f| f.name.as_str()).collect();
        let why = why::classify(&names, w.state, w.syscall, kind);
        let on = found
            .and_then(|t| t.name)
            .filter(|_| matches!(why, Why::Network | Why::Disk))
            .map(|name| format!("{} {name}", verb(why, w.syscall)));
        let process = name_of(w.tgid, &w.process, false);
        let thread = name_of(w.tid, &w.thread, true);
        *total_by_why.entry(why).or_default() += ms;
        for (acc, id, name) in [
            (procs.entry(w.tgid).or_default(), w.tgid, process.clone()),
            (threads.entry(w.tid).or_default(), w.tid, thread.clone()),
        ] {
            *acc.by_why.entry(why).or_default() += ms;
            if let Some(on) = &on {
                *acc.on_target.entry((why, on.clone())).or_default() += ms;
            }
            acc.threads.insert(w.tid);
            if acc.name.is_empty() || id == w.tid {
                acc.name = name;
            }
            acc.process = process.clone();
        }
        let function = user_function(&user);
        let decisive = decisive_kernel_function(&names);
        let k = kinds
            .entry((w.tgid, why, on.clone(), function))
            .or_insert_with(|| Kind {
                ms: 0.0,
                count: 0,
                threads: HashSet::new(),
                process: process.clone(),
                kernel_function: decisive.clone(),
                heaviest: (0.0, Vec::new()),
            });
        k.ms += ms;
        k.count += w.count;
        k.threads.insert(w.tid);
        if ms > k.heaviest.0 {
            k.heaviest = (ms, stack_names(&kernel, &user));
            k.kernel_function = decisive;
        }
        let mut line = fold_start(&process, &user, &kernel);
        line.push_str(&format!(";[{}]", why.words()));
        *folded.entry(line).or_default() += w.ns / 1000;
    }
    let mut on_cpu_ms = 0.0;
    if let Some((samples, hz)) = input.on_cpu {
        let each_ms = 1000.0 / hz.max(1) as f64;
        for ((pid, tid, stack), &n) in samples {
            let ms = n as f64 * each_ms;
            on_cpu_ms += ms;
            *total_by_why.entry(Why::Cpu).or_default() += ms;
            let process = name_of(*pid, &None, false);
            let thread = name_of(*tid, &None, true);
            for (acc, id, name) in [
                (procs.entry(*pid).or_default(), *pid, process.clone()),
                (threads.entry(*tid).or_default(), *tid, thread.clone()),
            ] {
                acc.on_ms += ms;
                *acc.by_why.entry(Why::Cpu).or_default() += ms;
                acc.threads.insert(*tid);
                if acc.name.is_empty() || id == *tid {
                    acc.name = name;
                }
                acc.process = process.clone();
            }
            let frames: Vec<&Frame> = stack.iter().map(|&a| frame(*pid, a)).collect();
            let (kernel, user): (Vec<&Frame>, Vec<&Frame>) =
                frames.into_iter().partition(|f| f.kernel);
            let line = fold_start(&process, &user, &kernel);
            *folded.entry(line).or_default() += (ms * 1000.0) as u64;
        }
    }
    let wall = input.on_cpu.is_some();
    let off_cpu_ms: f64 = total_by_why
        .iter()
        .filter(|(w, _)| **w != Why::Cpu)
        .map(|(_, ms)| ms)
        .sum::<f64>()
        + 0.0;
    let all_ms = off_cpu_ms + on_cpu_ms;
    let share = |ms: f64, of: f64| if of > 0.0 { 100.0 * ms / of } else { 0.0 };
    let by_reason = reasons(&total_by_why, all_ms);
    let rows = |map: HashMap<u32, Acc>, by_thread: bool| -> Vec<TaskTime> {
        let mut rows: Vec<TaskTime> = map
            .into_iter()
            .map(|(id, acc)| {
                let off = acc.off_ms();
                // Each thread's own life, as well as the trace tells it.
                let base = if wall {
                    acc.on_ms + off
                } else {
                    input.seconds * 1000.0 * acc.threads.len() as f64
                };
                let base = base.max(off + acc.on_ms);
                let reasons = reasons(&acc.by_why, base);
                let waiting_on = reasons.iter().find(|r| r.why != Why::Cpu).and_then(|r| {
                    acc.on_target
                        .iter()
                        .filter(|((w, _), _)| *w == r.why)
                        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.1.cmp(&a.0.1)))
                        .map(|((_, on), _)| on.clone())
                });
                TaskTime {
                    pid: if by_thread { 0 } else { id },
                    tid: id,
                    name: acc.name.clone(),
                    process: acc.process.clone(),
                    threads: acc.threads.len() as u64,
                    on_cpu_ms: acc.on_ms,
                    off_cpu_ms: off,
                    off_cpu_pct: share(off, base),
                    reasons,
                    waiting_on,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.off_cpu_ms + b.on_cpu_ms)
                .total_cmp(&(a.off_cpu_ms + a.on_cpu_ms))
                .then(a.tid.cmp(&b.tid))
        });
        rows
    };
    let tgid_of: HashMap<u32, u32> = input
        .waits
        .iter()
        .map(|w| (w.tid, w.tgid))
        .chain(
            input
                .on_cpu
                .iter()
                .flat_map(|(s, _)| s.keys().map(|(p, t, _)| (*t, *p))),
        )
        .collect();
    let processes = rows(procs, false);
    let mut threads = rows(threads, true);
    for t in &mut threads {
        t.pid = tgid_of.get(&t.tid).copied().unwrap_or(t.tid);
    }
    let mut waits: Vec<WaitRow> = kinds
        .into_iter()
        .map(|((pid, why, on, function), k)| WaitRow {
            why,
            ms: k.ms,
            pct: share(k.ms, all_ms),
            count: k.count,
            pid,
            process: k.process,
            threads: k.threads.len() as u64,
            on,
            function,
            kernel_function: k.kernel_function,
            stack: k.heaviest.1,
        })
        .collect();
    waits.sort_by(|a, b| {
        b.ms.total_cmp(&a.ms)
            .then(a.pid.cmp(&b.pid))
            .then(a.function.cmp(&b.function))
    });
    waits.truncate(WAITS_SHOWN);
    let mut notes = Vec::new();
    let (lost_waits, lost_stacks) = input.lost;
    if lost_waits > 0 {
        notes.push(format!(
            "{} not counted: the kernel's table of waits was full; trace one process (--pid) or \
             unit (--unit)",
            crate::units::plural(lost_waits, "interval")
        ));
    }
    if lost_stacks > 0 {
        notes.push(format!(
            "{} kept no stack (the stack table was full); their reasons come from the system \
             call alone",
            crate::units::plural(lost_stacks, "wait")
        ));
    }
    let verdict = verdict(&processes, wall);
    let mut folded: Vec<(String, u64)> = folded.into_iter().filter(|(_, n)| *n > 0).collect();
    folded.sort();
    WaitProfile {
        schema: "tacho.profile.offcpu.v1",
        mode: if wall { "wall" } else { "off-cpu" },
        seconds: input.seconds,
        frequency_hz: input.on_cpu.map(|(_, hz)| hz),
        verdict,
        off_cpu_ms,
        on_cpu_ms,
        reasons: by_reason,
        processes,
        threads,
        waits,
        lost_waits,
        lost_stacks,
        notes,
        folded,
    }
}

fn reasons(by_why: &BTreeMap<Why, f64>, base: f64) -> Vec<ReasonTime> {
    let mut out: Vec<ReasonTime> = by_why
        .iter()
        .filter(|(_, ms)| **ms > 0.0)
        .map(|(why, ms)| ReasonTime {
            why: *why,
            ms: *ms,
            pct: if base > 0.0 { 100.0 * ms / base } else { 0.0 },
        })
        .collect();
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms).then(a.why.cmp(&b.why)));
    out
}

/// What a thread did with what it waited on: "recv from", "send to", "fsync on".
fn verb(why: Why, syscall: Option<u32>) -> &'static str {
    match (why, syscall) {
        (Why::Network, Some(1 | 18 | 20 | 44 | 46 | 296 | 307)) => "send to",
        (Why::Network, Some(42)) => "connect to",
        (Why::Network, Some(43 | 288)) => "accept on",
        (Why::Network, Some(7 | 271 | 232 | 281 | 441)) => "poll on",
        (Why::Network, _) => "recv from",
        (Why::Disk, Some(74 | 75 | 277)) => "fsync on",
        (Why::Disk, Some(1 | 18 | 20 | 296)) => "write on",
        (Why::Disk, Some(0 | 17 | 19 | 295)) => "read on",
        (_, _) => "on",
    }
}

/// Modules whose functions are the C library's own waiting (the caller is the story).
fn is_libc(module: &str) -> bool {
    ["libc.so", "libc-", "libpthread", "ld-linux", "libstdc++"]
        .iter()
        .any(|p| module.starts_with(p))
}

/// The innermost user function outside the C library (else the innermost), or `?`.
fn user_function(user: &[&Frame]) -> String {
    user.iter()
        .find(|f| f.known && !is_libc(&f.module))
        .or(user.first())
        .map_or_else(|| "?".into(), |f| f.name.clone())
}

/// Frames of the tracer itself at the top of a kernel stack taken at sched_switch.
fn is_tracer(name: &str) -> bool {
    name.starts_with("bpf_prog_")
        || name.starts_with("bpf_trace_run")
        || name.starts_with("__bpf_trace_")
        || name.starts_with("__traceiter_")
}

/// Scheduler functions every sleep passes: not a reason.
fn is_scheduler(name: &str) -> bool {
    name.starts_with("__schedule")
        || name.starts_with("schedule")
        || name.starts_with("preempt_schedule")
        || name.starts_with("__traceiter")
        || name == "__cond_resched"
}

/// The kernel function that said the reason, else the innermost that is not the
/// scheduler's.
fn decisive_kernel_function(kernel: &[&str]) -> Option<String> {
    why::deciding(kernel)
        .map(|(_, f)| f)
        .or_else(|| kernel.iter().find(|n| !is_scheduler(n)).copied())
        .map(str::to_string)
}

fn stack_names(kernel: &[&Frame], user: &[&Frame]) -> Vec<String> {
    kernel
        .iter()
        .map(|f| format!("{} [k]", f.name))
        .chain(user.iter().map(|f| f.name.clone()))
        .collect()
}

/// `process;user root…;kernel…;leaf` (as the on-CPU profile folds: `;` in names replaced,
/// kernel frames marked `_[k]`).
fn fold_start(process: &str, user: &[&Frame], kernel: &[&Frame]) -> String {
    let mut line = process.replace([';', ' '], "_");
    for f in user.iter().rev().chain(kernel.iter().rev()) {
        line.push(';');
        line.push_str(&f.name.replace(';', ":"));
        if f.kernel {
            line.push_str("_[k]");
        }
    }
    line
}

/// The process with the most time, and what it spent it on.
fn verdict(processes: &[TaskTime], wall: bool) -> String {
    let Some(p) = processes.iter().find(|p| p.off_cpu_ms > 0.0) else {
        return if wall {
            "no thread was seen on or off the CPU".into()
        } else {
            "no thread left the CPU while traced".into()
        };
    };
    let threads = if p.threads == 1 {
        String::new()
    } else {
        format!(", {} threads", p.threads)
    };
    let whose = if p.threads == 1 { "its" } else { "their" };
    let waits: Vec<&ReasonTime> = p.reasons.iter().filter(|r| r.why != Why::Cpu).collect();
    let Some(first) = waits.first() else {
        return format!("{} (pid {}{threads}): never off the CPU", p.process, p.pid);
    };
    let on = p
        .waiting_on
        .as_ref()
        .map(|o| format!(" ({o})"))
        .unwrap_or_default();
    let second = waits
        .get(1)
        .filter(|r| r.pct >= SECOND_REASON_PCT)
        .map(|r| format!(", {:.0}% {}", r.pct, reason_phrase(r.why)))
        .unwrap_or_default();
    let on_cpu = p
        .reasons
        .iter()
        .find(|r| r.why == Why::Cpu)
        .map(|r| format!("; {:.0}% on the CPU", r.pct))
        .unwrap_or_default();
    format!(
        "{} (pid {}{threads}): {:.0}% of {whose} time {}{on}{second}{on_cpu}",
        p.process,
        p.pid,
        first.pct,
        reason_phrase(first.why)
    )
}

/// A reason as the verdict says it.
fn reason_phrase(why: Why) -> &'static str {
    match why {
        Why::Cpu => "on the CPU",
        Why::Lock => "waiting on a lock",
        Why::Disk => "waiting on the disk",
        Why::Network => "waiting on the network",
        Why::Pipe => "waiting on a pipe",
        Why::Sleep => "asleep",
        Why::Memory => "in page faults or reclaim",
        Why::Preempted => "waiting for a CPU",
        Why::Poll => "in poll/epoll",
        Why::Other => "waiting (other)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 0xffff_ffff_8100_0000;

    fn frames() -> Frames {
        let mut f = Frames::new();
        let mut add = |pid: u32, addr: u64, name: &str, module: &str| {
            f.insert(
                (pid, addr),
                Frame {
                    name: name.into(),
                    module: module.into(),
                    kernel: pid == 0,
                    known: true,
                },
            );
        };
        add(0, K, "__schedule", "[kernel]");
        add(0, K + 1, "futex_wait_queue", "[kernel]");
        add(0, K + 2, "sk_wait_data", "[kernel]");
        add(7, 0x10, "__lll_lock_wait", "libc.so.6");
        add(7, 0x20, "hold_lock", "app");
        add(7, 0x30, "main", "app");
        add(7, 0x40, "query_db", "app");
        f
    }

    fn wait(
        tid: u32,
        kernel: Vec<u64>,
        user: Vec<u64>,
        syscall: u32,
        fd: Option<u32>,
        ms: u64,
    ) -> Wait {
        Wait {
            tgid: 7,
            tid,
            thread: Some(format!("app-{tid}")),
            process: Some("app".into()),
            kernel,
            user,
            state: 1,
            syscall: Some(syscall),
            fd,
            ns: ms * 1_000_000,
            count: 10,
        }
    }

    #[test]
    fn waits_are_summed_by_reason_process_thread_and_function() {
        let waits = vec![
            wait(7, vec![K, K + 1], vec![0x10, 0x20, 0x30], 202, None, 600),
            wait(8, vec![K, K + 2], vec![0x40, 0x30], 45, Some(3), 300),
        ];
        let f = frames();
        let names = HashMap::new();
        let input = Input {
            waits: &waits,
            on_cpu: None,
            frames: &f,
            names: &names,
            seconds: 1.0,
            lost: (0, 0),
        };
        let p = build(&input, &mut |_, _| Target {
            kind: FdKind::Socket,
            name: Some("10.0.0.5:3306".into()),
            accepted: false,
        });
        assert_eq!(p.off_cpu_ms, 900.0);
        assert_eq!(p.processes.len(), 1);
        assert_eq!(p.threads.len(), 2);
        let proc = &p.processes[0];
        // Two threads over 1 s: 900 ms off the CPU is 45% of their time.
        assert_eq!((proc.threads, proc.off_cpu_pct), (2, 45.0));
        assert_eq!(proc.reasons[0].why, Why::Lock);
        let lock = &p.waits[0];
        assert_eq!((lock.why, lock.function.as_str()), (Why::Lock, "hold_lock"));
        assert_eq!(lock.kernel_function.as_deref(), Some("futex_wait_queue"));
        let net = &p.waits[1];
        assert_eq!(net.on.as_deref(), Some("recv from 10.0.0.5:3306"));
        assert_eq!(
            p.verdict,
            "app (pid 7, 2 threads): 30% of their time waiting on a lock, 15% waiting on the \
             network"
        );
        assert!(
            p.folded.contains(&(
                "app;main;hold_lock;__lll_lock_wait;futex_wait_queue_[k];__schedule_[k];[lock]"
                    .into(),
                600_000
            )),
            "{:?}",
            p.folded
        );
        assert_eq!(p.threads[0].pid, 7);
    }

    #[test]
    fn wall_time_puts_cpu_samples_beside_the_waits() {
        let waits = vec![wait(7, vec![K, K + 2], vec![0x40], 45, Some(3), 500)];
        let f = frames();
        let names = HashMap::new();
        let on: OnCpu = [((7, 7, vec![0x30]), 50)].into_iter().collect();
        let input = Input {
            waits: &waits,
            on_cpu: Some((&on, 100)),
            frames: &f,
            names: &names,
            seconds: 1.0,
            lost: (0, 0),
        };
        let p = build(&input, &mut |_, _| Target {
            kind: FdKind::Socket,
            name: Some("10.0.0.5:3306".into()),
            accepted: false,
        });
        assert_eq!((p.mode, p.on_cpu_ms, p.off_cpu_ms), ("wall", 500.0, 500.0));
        assert_eq!(
            p.verdict,
            "app (pid 7): 50% of its time waiting on the network (recv from 10.0.0.5:3306); 50% on \
             the CPU"
        );
        assert!(
            p.folded.contains(&("app;main".into(), 500_000)),
            "{:?}",
            p.folded
        );
    }

    #[test]
    fn nothing_traced_says_so() {
        let f = Frames::new();
        let names = HashMap::new();
        let input = Input {
            waits: &[],
            on_cpu: None,
            frames: &f,
            names: &names,
            seconds: 1.0,
            lost: (3, 0),
        };
        let p = build(&input, &mut |_, _| unreachable!());
        assert_eq!(p.verdict, "no thread left the CPU while traced");
        assert!(
            p.notes[0].starts_with("3 intervals not counted"),
            "{:?}",
            p.notes
        );
    }
}
