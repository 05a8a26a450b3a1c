//! The integration tests that change kernel-wide settings (transparent huge pages, I/O
//! schedulers, `kernel.io_uring_disabled`, `kernel.perf_event_paranoid`) and restore them, or
//! that need the machine to hold still: a snapshot compared with the live machine, which
//! another test's loop device would change; the kept tracer's exact attribution; and `top`'s
//! verdicts and culprits (`top_culprits`, `top_screen`, `top_waits`), which another test's
//! load outranked in CI (a loop device's kworkers made "system time above user time" the
//! verdict while the screen test waited for its `dd`). A binary of their own, so no test of
//! `tests/it` runs beside one, and each holds [`common::kernel_wide`] so they run one at a
//! time.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "bpf")]
mod bpf_kept;
mod check_live;
mod engine_fallback;
mod experiment;
#[cfg(feature = "profile")]
mod profile;
mod snapshot_diff;
mod top_culprits;
mod top_screen;
mod top_waits;
