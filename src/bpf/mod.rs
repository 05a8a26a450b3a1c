//! eBPF tracing: programs compiled from `bpf/*.bpf.c` (CO-RE objects committed next to their
//! source and embedded here), loaded with the pure-Rust `aya` loader so the binary needs no
//! libbpf, clang or kernel headers on the server. Every entry point returns a one-line reason
//! when the kernel or the environment refuses, so callers fall back to `/proc` and say so once.

#[cfg(feature = "bpf")]
mod attach_btf;
pub(crate) mod block;
#[cfg(feature = "bpf")]
mod btf_blob;
#[cfg(feature = "bpf")]
mod core_btf;
pub(crate) mod files;
pub(crate) mod hist;
#[cfg(feature = "bpf")]
mod kept;
#[cfg(feature = "bpf")]
mod pin;
pub(crate) mod tasks;
// Only the profiler (`profile --off-cpu`, `--wall`) reads it.
#[cfg(feature = "profile")]
pub(crate) mod offcpu;
#[cfg(feature = "bpf")]
mod shared;
#[cfg(feature = "bpf")]
mod sys;

#[cfg(feature = "bpf")]
use std::path::Path;

/// Why eBPF tracing is not running, in one line for the caller's note (the caller then uses
/// the /proc figures). Classified by the error number the kernel gave, not by its wording.
#[derive(Debug, thiserror::Error)]
// Without the `bpf` feature only `NotBuilt` is made; the type is kept so callers are the same.
#[cfg_attr(not(feature = "bpf"), allow(dead_code))]
pub(crate) enum Refusal {
    /// This tacho was built without the `bpf` feature: no tracer can start.
    #[cfg(not(feature = "bpf"))]
    #[error("{0}")]
    NotBuilt(crate::features::Missing),
    /// Loading programs needs root.
    #[error("eBPF tracing needs root")]
    NotRoot,
    /// CO-RE needs the kernel's own type information.
    #[error("eBPF tracing needs kernel BTF (/sys/kernel/btf/vmlinux is missing)")]
    NoBtf,
    /// The kernel answered EPERM or EACCES (a lockdown, a seccomp filter, a container).
    #[error("eBPF tracing refused ({what}: bpf() not permitted here)")]
    Denied { what: String },
    /// The kernel has no bpf() (ENOSYS).
    #[error("eBPF tracing unavailable ({what}: this kernel has no bpf())")]
    NoBpf { what: String },
    /// Any other failure of `what`, with the whole chain of its causes.
    #[error("eBPF tracing unavailable ({what}: {causes})")]
    Failed { what: String, causes: String },
    /// The embedded object does not hold what this code expects (a build mismatch).
    #[error("eBPF object lacks {0}")]
    Missing(String),
    /// A shared array's values are not the size this code reads.
    #[error("eBPF array {0} has values of an unexpected size")]
    ValueSize(String),
    /// Mapping a shared array failed.
    #[error("eBPF tracing unavailable (mapping {what}: {err})")]
    Mapping { what: String, err: std::io::Error },
}

/// Why every tracer refuses to start in a build without the `bpf` feature (no aya): callers
/// print it as the note they print when the kernel refuses, and fall back the same way.
#[cfg(not(feature = "bpf"))]
pub(crate) fn missing() -> Refusal {
    Refusal::NotBuilt(crate::features::Missing(crate::features::Feature::Bpf))
}

/// Whether `top`'s block tracer may be kept loaded between runs (see `pin`): `TACHO_BPF_PIN`
/// unset, empty (as tacho's other variables) or 1 says yes, 0 says no; anything else is
/// refused rather than guessed at, so a `TACHO_BPF_PIN=off` meant to keep nothing does not
/// keep the tracer.
pub(crate) fn keep_tracer() -> anyhow::Result<bool> {
    match std::env::var_os("TACHO_BPF_PIN").filter(|v| !v.is_empty()) {
        None => Ok(true),
        Some(v) if v == "1" => Ok(true),
        Some(v) if v == "0" => Ok(false),
        Some(v) => anyhow::bail!(
            "TACHO_BPF_PIN={}: set it to 0 (never keep the eBPF tracer loaded between runs) \
             or 1 (keep it, the default)",
            v.to_string_lossy()
        ),
    }
}

/// Why tracing is not available here; `None` when the prerequisites hold (the load itself can
/// still be refused, see [`block::BlockTracer::start`]).
#[cfg(feature = "bpf")]
fn unavailable_reason() -> Option<Refusal> {
    if !rustix::process::geteuid().is_root() {
        return Some(Refusal::NotRoot);
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some(Refusal::NoBtf);
    }
    None
}

/// A refused load or attach of `what`, by the error number among `err`'s causes.
#[cfg(feature = "bpf")]
pub(crate) fn refusal(what: &str, err: &(dyn std::error::Error + 'static)) -> Refusal {
    let what = what.to_string();
    let mut causes = err.to_string();
    let mut errno = os_error(err);
    let mut cause = err.source();
    while let Some(e) = cause {
        causes = format!("{causes}: {e}");
        errno = errno.or(os_error(e));
        cause = e.source();
    }
    match errno {
        Some(libc::EPERM | libc::EACCES) => Refusal::Denied { what },
        Some(libc::ENOSYS) => Refusal::NoBpf { what },
        _ => Refusal::Failed { what, causes },
    }
}

/// The system's error number, when `e` is an I/O error.
#[cfg(feature = "bpf")]
fn os_error(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    e.downcast_ref::<std::io::Error>()?.raw_os_error()
}

/// Loads `object` with its `const volatile` globals set (name, value), and attaches each
/// (program, BTF-typed tracepoint) pair of `programs`, then those of `optional` where the
/// kernel has their tracepoint (io_uring's, say, which a kernel built without io_uring lacks);
/// any refusal of `programs` is the one-line reason callers print as a note. The iterator
/// programs of `iterators` (program, iterator: `task` for `iter/task`) are loaded where the
/// kernel takes them, not attached ([`tasks::TaskIter::new`] links one); one refused leaves
/// the tracer running without it.
#[cfg(feature = "bpf")]
pub(crate) fn load(
    object: &[u8],
    globals: &[(&str, u32)],
    programs: &[(&str, &str)],
    optional: &[(&str, &str)],
    iterators: &[(&str, &str)],
) -> Result<aya::Ebpf, Refusal> {
    if let Some(reason) = unavailable_reason() {
        return Err(reason);
    }
    // aya's loader parses the kernel's BTF for itself and keeps it; attaching needs only the
    // tracepoints' ids, found without a second whole parse (see `attach_btf`).
    let tracepoints: Vec<&str> = programs.iter().chain(optional).map(|&(_, t)| t).collect();
    let kinds: Vec<&str> = iterators.iter().map(|&(_, i)| i).collect();
    // aya's loader relocates against a whole parse of the kernel's BTF unless given another:
    // a stand-in of just the types the object's relocations match (see `core_btf`) spares it
    // a search of every kernel type per struct. Where the kernel's BTF cannot be walked, aya
    // relocates against its own parse, as before. aya 0.14 makes that parse when the loader
    // is made, given another or not: made on a thread of its own, it overlaps the walks here
    // instead of adding to them.
    let (loader, btf, core) = std::thread::scope(|scope| {
        let loader = std::thread::Builder::new().spawn_scoped(scope, aya::EbpfLoader::new);
        // One mapping of the kernel's BTF serves both stand-ins.
        let walked = attach_btf::kernel_btf(|kernel| {
            Some((
                attach_btf::for_attach(Some(kernel), &tracepoints, &kinds),
                core_btf::stand_in(kernel, object),
            ))
        });
        let (btf, core) =
            walked.unwrap_or_else(|| (attach_btf::for_attach(None, &tracepoints, &kinds), None));
        let core = core.and_then(|blob| aya::Btf::parse(&blob, aya::Endianness::default()).ok());
        let loader = loader.ok().and_then(|l| l.join().ok());
        (loader.unwrap_or_default(), btf, core)
    });
    let btf = btf.map_err(|e| refusal("reading kernel BTF", &e))?;
    let mut loader = loader;
    if let Some(core) = &core {
        loader.btf(Some(core));
    }
    for (name, value) in globals {
        loader.override_global(name, value, true);
    }
    let mut ebpf = loader
        .load(object)
        .map_err(|e| refusal("loading maps", &e))?;
    for &(name, tracepoint) in programs {
        attach(&mut ebpf, &btf, name, tracepoint)?;
    }
    for &(name, tracepoint) in optional {
        // Without it the tracer still runs; what it misses is said by the caller.
        let _ = attach(&mut ebpf, &btf, name, tracepoint);
    }
    for &(name, iterator) in iterators {
        // Without it the caller reads /proc; asking for its descriptor gives the reason.
        if let Some(program) = ebpf.program_mut(name)
            && let Ok(program) = <&mut aya::programs::Iter>::try_from(program)
        {
            let _ = program.load(iterator, &btf);
        }
    }
    Ok(ebpf)
}

#[cfg(feature = "bpf")]
fn attach(
    ebpf: &mut aya::Ebpf,
    btf: &aya::Btf,
    name: &str,
    tracepoint: &str,
) -> Result<(), Refusal> {
    let program: &mut aya::programs::BtfTracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| Refusal::Missing(format!("program {name}")))?
        .try_into()
        .map_err(|e| refusal(name, &e))?;
    program
        .load(tracepoint, btf)
        .map_err(|e| refusal(tracepoint, &e))?;
    program.attach().map_err(|e| refusal(tracepoint, &e))?;
    Ok(())
}

#[cfg(all(test, feature = "bpf"))]
mod tests {
    use super::{Refusal, refusal};
    use std::io;

    /// An error that wraps the system's, as aya's do (`SyscallError { call, io_error }`).
    #[derive(Debug, thiserror::Error)]
    #[error("`bpf_prog_load` failed")]
    struct Wrapped(#[source] io::Error);

    #[test]
    fn refusals_are_told_apart_by_their_error_number() {
        let of = |errno| {
            refusal(
                "block_io_start",
                &Wrapped(io::Error::from_raw_os_error(errno)),
            )
        };
        for errno in [libc::EPERM, libc::EACCES] {
            let r = of(errno);
            assert!(matches!(r, Refusal::Denied { .. }), "{r:?}");
            assert_eq!(
                r.to_string(),
                "eBPF tracing refused (block_io_start: bpf() not permitted here)"
            );
        }
        let r = of(libc::ENOSYS);
        assert!(matches!(r, Refusal::NoBpf { .. }), "{r:?}");
        assert_eq!(
            r.to_string(),
            "eBPF tracing unavailable (block_io_start: this kernel has no bpf())"
        );
        // Anything else keeps every cause, so the note says what the kernel said.
        let r = of(libc::E2BIG);
        assert!(matches!(r, Refusal::Failed { .. }), "{r:?}");
        assert_eq!(
            r.to_string(),
            format!(
                "eBPF tracing unavailable (block_io_start: `bpf_prog_load` failed: {})",
                io::Error::from_raw_os_error(libc::E2BIG)
            )
        );
    }
}

#[cfg(all(test, not(feature = "bpf")))]
mod without_bpf {
    #[test]
    fn the_tracers_never_start_and_say_which_feature_is_missing() {
        let block = super::block::BlockTracer::start(true)
            .map(|_| ())
            .unwrap_err();
        let files = super::files::FileTracer::start().map(|_| ()).unwrap_err();
        #[cfg(feature = "profile")]
        let offcpu = Some(
            super::offcpu::OffCpuTracer::start(super::offcpu::Target::default())
                .map(|_| ())
                .unwrap_err()
                .to_string(),
        );
        #[cfg(not(feature = "profile"))]
        let offcpu = None;
        for reason in [block.to_string(), files.to_string()]
            .into_iter()
            .chain(offcpu)
        {
            assert!(
                reason.contains("built without the `bpf` feature"),
                "{reason}"
            );
        }
    }
}
