//! `tacho stress`: check the request against the machine (memory, free space), run the
//! workers, print a line per second, then the summary.

use super::interrupt::{self, EXIT_INTERRUPTED};
use crate::cli::{StressArgs, VmBytes};
use crate::kernel::SysRoot;
use crate::kernel::meminfo::read_meminfo;
use crate::report::stress as report;
use crate::stress::{self, Plan, Second};
use crate::units::{format_bytes_approx, format_size};
use anyhow::{Context, Result, anyhow, bail};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Runs `tacho stress` until its time-out or a signal (exit status 130 then).
pub fn run(args: &StressArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    let plan = resolve(args, &root)?;
    let stop = interrupt::stop_flag()?;
    let json = args.json;
    // JSON stays whole: a wrapped string would no longer parse.
    let width = crate::fit::stdout_width().filter(|_| !json);
    let mut out = crate::fit::Fit::new(std::io::stdout().lock(), width);
    if !json {
        writeln!(out, "{}", report::describe(&plan))?;
        writeln!(out, "{}", report::header(width))?;
    }
    let mut print_error = None;
    let report = stress::run(&plan, &root, &stop, &mut |s: &Second| {
        if !json && print_error.is_none() {
            let line = report::line(s, width);
            if let Err(e) = writeln!(out, "{line}").and_then(|_| out.flush()) {
                print_error = Some(e);
            }
        }
    })
    .map_err(|e| anyhow!(e))?;
    if let Some(e) = print_error {
        return Err(e.into());
    }
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", report::summary(&report))?;
    }
    Ok(if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Validates the request before anything starts: something to run, memory that exists, disk
/// space that exists.
fn resolve(args: &StressArgs, root: &SysRoot) -> Result<Plan> {
    if args.cpu + args.vm + args.io + args.hdd == 0 {
        bail!("no workers asked for; give at least one of --cpu N, --vm N, --io N, --hdd N");
    }
    let mut vm_bytes = match args.vm_bytes {
        VmBytes::Bytes(b) => b,
        VmBytes::PercentAvailable(_) => 0,
    };
    if args.vm > 0 {
        let avail = read_meminfo(root)?.get("MemAvailable");
        if let VmBytes::PercentAvailable(pct) = args.vm_bytes {
            let avail = avail.context(
                "a percentage needs MemAvailable, which this kernel's /proc/meminfo lacks; give \
                 --vm-bytes as a size",
            )?;
            vm_bytes = (avail as f64 * pct / 100.0 / f64::from(args.vm)) as u64;
        }
        vm_bytes = vm_bytes.next_multiple_of(4096).max(4096);
        let total = vm_bytes.saturating_mul(u64::from(args.vm));
        if !args.force {
            let avail = avail.context(
                "cannot check --vm-bytes: this kernel's /proc/meminfo has no MemAvailable; add \
                 --force to run unchecked",
            )?;
            if total > avail {
                bail!(
                    "--vm {} --vm-bytes {} needs {} but only {} is available (MemAvailable); \
                     lower --vm-bytes or --vm, or add --force to risk the OOM killer",
                    args.vm,
                    format_size(vm_bytes),
                    format_bytes_approx(total),
                    format_bytes_approx(avail)
                );
            }
        }
    }
    if args.hdd > 0 {
        check_space(
            &args.hdd_dir,
            args.hdd_bytes.saturating_mul(u64::from(args.hdd)),
        )?;
    }
    Ok(Plan {
        cpu: args.cpu,
        cpu_load_pct: args.cpu_load,
        vm: args.vm,
        vm_bytes,
        vm_keep: args.vm_keep,
        vm_passes: args.vm_passes,
        io: args.io,
        hdd: args.hdd,
        hdd_bytes: args.hdd_bytes,
        hdd_dir: args.hdd_dir.clone(),
        timeout: args.timeout,
    })
}

/// The hdd files must leave 5% of the filesystem free, as `bench disk` does.
fn check_space(dir: &Path, needed: u64) -> Result<()> {
    if !dir.is_dir() {
        bail!(
            "--hdd-dir {} is not a directory; give an existing directory",
            dir.display()
        );
    }
    // Read-only before full: a full filesystem mounted read-only says "0 free".
    match rustix::fs::access(dir, rustix::fs::Access::WRITE_OK) {
        Err(rustix::io::Errno::ROFS) => bail!(
            "--hdd-dir {} is on a read-only filesystem; choose a writable directory",
            dir.display()
        ),
        Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => bail!(
            "no permission to write in --hdd-dir {}; choose a directory you can write to",
            dir.display()
        ),
        _ => {}
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .context("the --hdd-dir path contains a NUL byte")?;
    let st = rustix::fs::statvfs(c.as_c_str())
        .map_err(std::io::Error::from)
        .with_context(|| format!("cannot check free space in {}", dir.display()))?;
    let frsize = st.f_frsize;
    let free = st.f_bavail.saturating_mul(frsize);
    let reserve = st.f_blocks.saturating_mul(frsize) / 20;
    if needed > free.saturating_sub(reserve) {
        bail!(
            "the hdd workers need {} in {}, which has {} free (5% is kept free); lower \
             --hdd-bytes or --hdd, or choose another --hdd-dir",
            format_size(needed),
            dir.display(),
            format_bytes_approx(free)
        );
    }
    Ok(())
}
