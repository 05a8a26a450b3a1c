//! eBPF tracing: programs compiled from `bpf/*.bpf.c` (CO-RE objects committed next to their
//! source and embedded here), loaded with the pure-Rust `aya` loader so the binary needs no
//! libbpf, clang or kernel headers on the server. Every entry point returns a one-line reason
//! when the kernel or the environment refuses, so callers fall back to `/proc` and say so once.

pub(crate) mod block;
pub(crate) mod files;
pub(crate) mod hist;
#[cfg(feature = "bpf")]
mod shared;

#[cfg(feature = "bpf")]
use std::path::Path;

/// Why every tracer refuses to start in a build without the `bpf` feature (no aya): callers
/// print it as the note they print when the kernel refuses, and fall back the same way.
#[cfg(not(feature = "bpf"))]
fn missing() -> String {
    crate::features::Missing(crate::features::Feature::Bpf).to_string()
}

/// Why tracing is not available here, in one line (for the caller's note); `None` when the
/// prerequisites hold (the load itself can still be refused, see [`block::BlockTracer::start`]).
#[cfg(feature = "bpf")]
pub(crate) fn unavailable_reason() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("eBPF tracing needs root".into());
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("eBPF tracing needs kernel BTF (/sys/kernel/btf/vmlinux is missing)".into());
    }
    None
}

/// The one-line reason for a refused load or attach: the bpf() syscall's error, named plainly.
#[cfg(feature = "bpf")]
pub(crate) fn refusal(what: &str, err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text = format!("{text}: {inner}");
        source = inner.source();
    }
    let denied = text.contains("Operation not permitted") || text.contains("Permission denied");
    let missing = text.contains("Function not implemented");
    if denied {
        format!("eBPF tracing refused ({what}: bpf() not permitted here)")
    } else if missing {
        format!("eBPF tracing unavailable ({what}: this kernel has no bpf())")
    } else {
        format!("eBPF tracing unavailable ({what}: {text})")
    }
}

/// Loads `object` with its `const volatile` globals set (name, value), and attaches each
/// (program, BTF-typed tracepoint) pair; any refusal is the one-line reason callers print as a
/// note.
#[cfg(feature = "bpf")]
pub(crate) fn load(
    object: &[u8],
    globals: &[(&str, u32)],
    programs: &[(&str, &str)],
) -> Result<aya::Ebpf, String> {
    if let Some(reason) = unavailable_reason() {
        return Err(reason);
    }
    let btf = aya::Btf::from_sys_fs().map_err(|e| refusal("reading kernel BTF", &e))?;
    let mut loader = aya::EbpfLoader::new();
    for (name, value) in globals {
        loader.set_global(name, value, true);
    }
    let mut ebpf = loader
        .load(object)
        .map_err(|e| refusal("loading maps", &e))?;
    for &(name, tracepoint) in programs {
        attach(&mut ebpf, &btf, name, tracepoint)?;
    }
    Ok(ebpf)
}

/// Attaches one more program of a loaded object where the kernel has its tracepoint (io_uring's,
/// say, which a kernel built without io_uring lacks); false when it could not.
#[cfg(feature = "bpf")]
pub(crate) fn attach_if_possible(ebpf: &mut aya::Ebpf, name: &str, tracepoint: &str) -> bool {
    aya::Btf::from_sys_fs().is_ok_and(|btf| attach(ebpf, &btf, name, tracepoint).is_ok())
}

#[cfg(feature = "bpf")]
fn attach(
    ebpf: &mut aya::Ebpf,
    btf: &aya::Btf,
    name: &str,
    tracepoint: &str,
) -> Result<(), String> {
    let program: &mut aya::programs::BtfTracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("eBPF object lacks program {name}"))?
        .try_into()
        .map_err(|e| refusal(name, &e))?;
    program
        .load(tracepoint, btf)
        .map_err(|e| refusal(tracepoint, &e))?;
    program.attach().map_err(|e| refusal(tracepoint, &e))?;
    Ok(())
}

#[cfg(all(test, not(feature = "bpf")))]
mod tests {
    #[test]
    fn the_tracers_never_start_and_say_which_feature_is_missing() {
        let block = super::block::BlockTracer::start().map(|_| ()).unwrap_err();
        let files = super::files::FileTracer::start().map(|_| ()).unwrap_err();
        for reason in [block, files] {
            assert!(
                reason.contains("built without the `bpf` feature"),
                "{reason}"
            );
        }
    }
}
