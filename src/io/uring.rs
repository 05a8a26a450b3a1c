//! The io_uring engine: one ring per job, `iodepth` I/Os in flight.
//!
//! The file and the buffers are registered with the ring when the kernel allows it (fewer
//! reference counts and page pins per I/O), completions are reaped in batches, and each new
//! I/O is submitted as soon as its slot is free, the last one together with the next wait.

use super::EngineError;
use super::buffer::AlignedBuf;
use super::spec::{JobSpec, SyncKind};
use super::stats::{CpuTime, Measured};
use super::worker::{Control, Dir, Picker, Window};
use io_uring::{IoUring, opcode, squeue, types};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// `user_data` of the flush, which has no slot.
const SYNC_TAG: u64 = u64::MAX;

/// True when this process may create an io_uring (not blocked by seccomp, sysctl or kernel age).
pub fn available() -> bool {
    IoUring::new(2).is_ok()
}

struct Slot {
    buf: AlignedBuf,
    dir: Dir,
    offset: u64,
    len: u64,
    submitted: Instant,
}

pub fn run(
    file: &File,
    spec: &JobSpec,
    stream: u64,
    ctl: &Control,
) -> Result<Measured, EngineError> {
    let depth = spec.iodepth as usize;
    let mut picker = Picker::new(spec, stream);
    let bs = spec.bs as usize;
    let mut slots: Vec<Slot> = (0..depth)
        .map(|_| Slot {
            buf: AlignedBuf::random(bs, picker.rng()),
            dir: Dir::Read,
            offset: 0,
            len: 0,
            submitted: Instant::now(),
        })
        .collect();
    // Declared after the buffers so it is dropped (and the registration released) first.
    let mut ring = new_ring(depth as u32).map_err(EngineError::Setup)?;
    let fd = types::Fixed(0);
    ring.submitter()
        .register_files(&[file.as_raw_fd()])
        .map_err(EngineError::Setup)?;
    let iovecs: Vec<libc::iovec> = slots
        .iter_mut()
        .map(|s| libc::iovec {
            iov_base: s.buf.as_mut_ptr().cast(),
            iov_len: s.buf.len(),
        })
        .collect();
    // SAFETY: each iovec points into a slot buffer that lives in `slots`, which outlives `ring`
    // (declared earlier, dropped later) and is never reallocated.
    // Registration can fail under RLIMIT_MEMLOCK for large buffers as non-root: then plain
    // Read/Write opcodes are used, which is what fio does by default.
    let fixed_buffers = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();

    let window = Window::starting_now(spec.ramp, spec.runtime);
    let mut measured = Measured::default();
    let mut cpu_start: Option<CpuTime> = None;
    let mut last_completion = window.measure_from;
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut in_flight = 0usize;
    let mut sync_pending = false;
    let mut sync_started: Option<Instant> = None;
    let mut stamp = stream << 48;
    let mut stopping = false;

    loop {
        let now = Instant::now();
        if cpu_start.is_none() && now >= window.measure_from {
            cpu_start = Some(CpuTime::of_this_thread());
        }
        stopping = stopping
            || now >= window.end
            || ctl.stopped()
            || measured.reached(spec.io_limit, spec.bs);
        {
            let (submitter, mut sq, _) = ring.split();
            if !stopping && sync_pending && in_flight == 0 {
                // A flush goes out alone, once every write before it has completed, so its
                // latency is the device's flush time and not the queue's.
                let flags = match spec.sync.map(|s| s.kind) {
                    Some(SyncKind::Fdatasync) => types::FsyncFlags::DATASYNC,
                    _ => types::FsyncFlags::empty(),
                };
                let entry = opcode::Fsync::new(fd)
                    .flags(flags)
                    .build()
                    .user_data(SYNC_TAG);
                // SAFETY: the flush references no memory.
                unsafe { sq.push(&entry) }.expect("ring has room: nothing is in flight");
                sync_pending = false;
                sync_started = Some(now);
                in_flight += 1;
            }
            while !stopping
                && !sync_pending
                && sync_started.is_none()
                && !measured.reached(spec.io_limit, spec.bs)
            {
                let Some(index) = free.pop() else { break };
                if !sq.is_empty() {
                    // Each I/O goes to the kernel as soon as its slot is free, as fio does by
                    // default (iodepth_batch_submit=1). Submitting several at once lets the
                    // block layer plug them into one burst, which changes the workload: on a
                    // virtio disk with mq-deadline it cost 12% of 4k random-read IOPS at QD32.
                    // The last I/O of a round goes in with the wait below.
                    sq.sync();
                    submitter
                        .submit()
                        .map_err(|e| EngineError::io("io_uring_enter", 0, e))?;
                }
                let (dir, offset, len) = picker.next_op();
                let slot = &mut slots[index];
                if dir == Dir::Write {
                    stamp += 1;
                    slot.buf.scramble(stamp);
                }
                slot.dir = dir;
                slot.offset = offset;
                slot.len = len;
                slot.submitted = now;
                let entry = prepare(fd, slot, index, fixed_buffers).user_data(index as u64);
                // SAFETY: the slot's buffer stays untouched until its completion is reaped.
                unsafe { sq.push(&entry) }.expect("ring has a place for every slot");
                in_flight += 1;
                measured.issued(dir, len);
                if picker.sync_due() {
                    sync_pending = true;
                }
            }
        }
        if in_flight == 0 {
            break;
        }
        ring.submit_and_wait(1)
            .map_err(|e| EngineError::io("io_uring_enter", 0, e))?;
        let done = Instant::now();
        let second = done
            .saturating_duration_since(window.measure_from)
            .as_secs() as usize;
        let (mut batch_ios, mut batch_bytes) = (0u64, 0u64);
        for cqe in ring.completion() {
            in_flight -= 1;
            let tag = cqe.user_data();
            if tag == SYNC_TAG {
                let started = sync_started.take().expect("a flush was in flight");
                if cqe.result() < 0 {
                    return Err(EngineError::io(
                        "flush",
                        0,
                        std::io::Error::from_raw_os_error(-cqe.result()),
                    ));
                }
                if started >= window.measure_from {
                    measured.sync.record(0, (done - started).as_nanos() as u64);
                }
                continue;
            }
            let index = tag as usize;
            let slot = &slots[index];
            free.push(index);
            check_result(cqe.result(), slot)?;
            batch_ios += 1;
            batch_bytes += slot.len;
            if slot.submitted >= window.measure_from {
                let ns = (done - slot.submitted).as_nanos() as u64;
                measured.completed(slot.dir, slot.len, ns, second);
                last_completion = done;
            }
        }
        ctl.progress(batch_ios, batch_bytes);
    }
    if let Some(start) = cpu_start {
        measured.cpu = CpuTime::of_this_thread().since(start);
    }
    measured.elapsed = last_completion.saturating_duration_since(window.measure_from);
    // Closing a ring tears it down asynchronously, and until then it keeps the registered file
    // open: an admin's `umount` right after tacho exits would fail with EBUSY. Unregistering
    // drops those references now, while every I/O has completed.
    let _ = ring.submitter().unregister_files();
    let _ = ring.submitter().unregister_buffers();
    Ok(measured)
}

fn new_ring(entries: u32) -> std::io::Result<IoUring> {
    // Single-issuer and cooperative task running cut per-I/O overhead on kernels that have
    // them (6.0+); older kernels reject the flags, so retry without.
    IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(entries)
        .or_else(|_| IoUring::new(entries))
}

fn prepare(fd: types::Fixed, slot: &mut Slot, index: usize, fixed: bool) -> squeue::Entry {
    let (ptr, len) = (slot.buf.as_mut_ptr(), slot.len as u32);
    match (slot.dir, fixed) {
        (Dir::Read, true) => opcode::ReadFixed::new(fd, ptr, len, index as u16)
            .offset(slot.offset)
            .build(),
        (Dir::Write, true) => opcode::WriteFixed::new(fd, ptr, len, index as u16)
            .offset(slot.offset)
            .build(),
        (Dir::Read, false) => opcode::Read::new(fd, ptr, len).offset(slot.offset).build(),
        (Dir::Write, false) => opcode::Write::new(fd, ptr, len).offset(slot.offset).build(),
    }
}

fn check_result(result: i32, slot: &Slot) -> Result<(), EngineError> {
    let op = slot.dir.op_name();
    if result < 0 {
        return Err(EngineError::io(
            op,
            slot.offset,
            std::io::Error::from_raw_os_error(-result),
        ));
    }
    if result as u64 != slot.len {
        return Err(EngineError::Short {
            op,
            offset: slot.offset,
            got: result as u64,
            want: slot.len,
        });
    }
    Ok(())
}
