//! The io_uring engine: one ring per job, `iodepth` I/Os in flight.
//!
//! The file and the buffers are registered with the ring when the kernel allows it (fewer
//! reference counts and page pins per I/O). After each wait, every completion already in the
//! completion queue is reaped and stamped with one clock read; the freed slots are refilled
//! and their I/Os go to the kernel two per `io_uring_enter`, the last one or two together with
//! the next wait.
//!
//! The kernel writes into a read's buffer whenever the read completes, which can be after an
//! error made `run` return. [`Engine`] owns the ring and the buffers together, and its Drop
//! waits for every I/O still in flight before either is released, on every exit path (errors,
//! `?`, panics).

use super::EngineError;
use super::buffer::AlignedBuf;
use super::meter::Meter;
use super::spec::{JobSpec, SyncKind};
use super::stats::Measured;
use super::worker::{Control, Dir, Picker};
use io_uring::{IoUring, opcode, squeue, types};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// `user_data` of the flush, which has no slot.
const SYNC_TAG: u64 = u64::MAX;
/// `user_data` of the cancellation sent when a run ends with I/Os in flight.
const CANCEL_TAG: u64 = u64::MAX - 1;

/// I/Os handed to the kernel per `io_uring_enter`. Two halve the system calls of submitting
/// each I/O alone, and the block layer still sees each I/O on its own: io_uring plugs a
/// submission of three or more into one burst, which changes the workload (on this VM's
/// virtio disk with mq-deadline, 4 a call cost 7% and whole rounds 12-16% of 4k random-read
/// IOPS at QD32). `--print-fio` says `--iodepth_batch_submit=2`, fio's nearest option; fio
/// still submits about one I/O per call with it, as it commits whatever it has queued each
/// time it waits for a completion (docs/benchmarks.md, issue 38, session 22).
pub const SUBMIT_BATCH: usize = 2;

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

/// The ring and the buffers its I/Os point into, torn down in the only safe order.
///
/// Drop waits until the kernel has completed (or cancelled) every I/O it was given: until then
/// it may still write into a buffer (a late O_DIRECT read), and freeing the buffer first would
/// let that write land in memory reused for something else. Fields are dropped in declaration
/// order, so `ring` is closed before `slots` is freed: the buffers outlive every use the
/// kernel can make of them, including their registration. If the wait itself fails, the
/// buffers are leaked rather than freed.
struct Engine {
    ring: IoUring,
    slots: Slots,
    /// I/Os and flushes pushed to the ring and not yet reaped.
    in_flight: usize,
    fixed_buffers: bool,
}

impl Engine {
    /// A ring for `slots.len()` I/Os at a time, with `file` and (when allowed) the buffers
    /// registered.
    fn new(file: &File, slots: Vec<Slot>) -> Result<Engine, EngineError> {
        let ring = new_ring(slots.len() as u32).map_err(EngineError::Setup)?;
        let mut engine = Engine {
            ring,
            slots: Slots::new(slots),
            in_flight: 0,
            fixed_buffers: false,
        };
        engine
            .ring
            .submitter()
            .register_files(&[file.as_raw_fd()])
            .map_err(EngineError::Setup)?;
        let iovecs: Vec<libc::iovec> = engine
            .slots
            .all
            .iter_mut()
            .map(|s| libc::iovec {
                iov_base: s.buf.as_mut_ptr().cast(),
                iov_len: s.buf.len(),
            })
            .collect();
        // SAFETY: each iovec points into a slot buffer owned by `engine.slots`, which is
        // never reallocated and is freed only after the ring is closed (see [`Engine`]).
        // Registration can fail under RLIMIT_MEMLOCK for large buffers as non-root: then plain
        // Read/Write opcodes are used, which is what fio does by default.
        engine.fixed_buffers = unsafe { engine.ring.submitter().register_buffers(&iovecs) }.is_ok();
        Ok(engine)
    }

    /// Cancels what can be cancelled and reaps every completion still due. False when the
    /// ring cannot be waited on: the kernel may then still write into the buffers.
    fn drain(&mut self) -> bool {
        if self.in_flight == 0 {
            return true;
        }
        // Reads queued in the kernel's workers (a FUSE or network file) end sooner; I/O
        // already at the device cannot be cancelled and is waited for. Kernels before 5.19
        // reject the "any" flag, which only costs the wait.
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_TAG);
        // SAFETY: the cancellation references no memory.
        let cancel_sent = unsafe { self.ring.submission().push(&cancel) }.is_ok();
        let mut cancel_due = usize::from(cancel_sent);
        while self.in_flight > 0 || cancel_due > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                // A signal (Ctrl-C) interrupts the wait, not the I/O: wait again.
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return false,
            }
            for cqe in self.ring.completion() {
                if cqe.user_data() == CANCEL_TAG {
                    cancel_due -= 1;
                } else {
                    self.in_flight = self.in_flight.saturating_sub(1);
                }
            }
        }
        true
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let cut_short = self.in_flight > 0;
        let drained = self.drain();
        // Closing a ring tears it down asynchronously, and until then it keeps the registered
        // file open: an admin's `umount` right after tacho exits would fail with EBUSY.
        // Unregistering drops those references now.
        let _ = self.ring.submitter().unregister_files();
        let _ = self.ring.submitter().unregister_buffers();
        if !drained {
            // Never free memory the kernel may still write to.
            std::mem::forget(std::mem::take(&mut self.slots.all));
        } else if cut_short && cfg!(debug_assertions) {
            self.slots.paint_canary();
        }
    }
}

/// The slots, with their buffers.
///
/// In debug builds, when a run ended with I/Os in flight (the case the drain exists for), a
/// canary is painted over every buffer once the drain is done, and checked just before the
/// buffers are freed, after the ring is closed and a moment longer than a slow I/O takes: a
/// read that lands after the drain (a bug in it) is then caught, instead of corrupting freed
/// memory silently. A memory checker would not see this: the kernel's writes bypass it.
struct Slots {
    all: Vec<Slot>,
    painted: bool,
}

/// The canary byte: neither zero nor a likely byte of random data written to a test file.
const CANARY: u8 = 0xA5;

/// How long painted buffers are kept before the check: longer than the slow reads of the
/// tests that fail a run mid-way (tests/it/engine_errors.rs).
const LATE_WRITE_WINDOW: std::time::Duration = std::time::Duration::from_millis(200);

impl Slots {
    fn new(all: Vec<Slot>) -> Slots {
        Slots {
            all,
            painted: false,
        }
    }

    fn paint_canary(&mut self) {
        for slot in &mut self.all {
            slot.buf.as_mut_slice().fill(CANARY);
        }
        self.painted = true;
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if !self.painted {
            return;
        }
        std::thread::sleep(LATE_WRITE_WINDOW);
        for (index, slot) in self.all.iter().enumerate() {
            let intact = slot.buf.as_slice().iter().all(|&b| b == CANARY);
            assert!(
                intact,
                "io_uring buffer {index} was written after the ring was drained"
            );
        }
    }
}

pub fn run(
    file: &File,
    spec: &JobSpec,
    stream: u64,
    ctl: &Control,
) -> Result<Measured, EngineError> {
    let depth = spec.iodepth() as usize;
    let mut picker = Picker::new(spec, stream);
    let bs = spec.bs() as usize;
    let slots: Vec<Slot> = (0..depth)
        .map(|_| Slot {
            buf: AlignedBuf::random(bs, picker.rng()),
            dir: Dir::Read,
            offset: 0,
            len: 0,
            submitted: Instant::now(),
        })
        .collect();
    let mut engine = Engine::new(file, slots)?;
    let fd = types::Fixed(0);
    let fixed_buffers = engine.fixed_buffers;

    let mut meter = Meter::start(spec, stream, ctl);
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut sync_pending = false;
    let mut sync_started: Option<Instant> = None;
    let mut stopping = false;

    loop {
        let now = Instant::now();
        stopping = meter.over(now) || stopping;
        {
            let Engine {
                ring,
                slots,
                in_flight,
                ..
            } = &mut engine;
            let (submitter, mut sq, _) = ring.split();
            if !stopping && sync_pending && *in_flight == 0 {
                // A flush goes out alone, once every write before it has completed, so its
                // latency is the device's flush time and not the queue's.
                let flags = match spec.sync().map(|s| s.kind) {
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
                *in_flight += 1;
            }
            // I/Os pushed to the queue and not yet handed to the kernel.
            let mut unsubmitted = 0;
            while !stopping && !sync_pending && sync_started.is_none() && !meter.limit_reached() {
                let Some(index) = free.pop() else { break };
                if unsubmitted == SUBMIT_BATCH {
                    sq.sync();
                    submitter
                        .submit()
                        .map_err(|e| EngineError::io("io_uring_enter", 0, e))?;
                    unsubmitted = 0;
                }
                let (dir, offset, len) = picker.next_op();
                let slot = &mut slots.all[index];
                meter.issue(dir, len, &mut slot.buf);
                slot.dir = dir;
                slot.offset = offset;
                slot.len = len;
                slot.submitted = now;
                let entry = prepare(fd, slot, index, fixed_buffers)?.user_data(index as u64);
                // SAFETY: the slot's buffer stays untouched until its completion is reaped,
                // and is not freed before then (see [`Engine`]).
                unsafe { sq.push(&entry) }.expect("ring has a place for every slot");
                unsubmitted += 1;
                *in_flight += 1;
                if picker.sync_due() {
                    sync_pending = true;
                }
            }
        }
        if engine.in_flight == 0 {
            break;
        }
        engine
            .ring
            .submit_and_wait(1)
            .map_err(|e| EngineError::io("io_uring_enter", 0, e))?;
        let done = Instant::now();
        let Engine {
            ring,
            slots,
            in_flight,
            ..
        } = &mut engine;
        for cqe in ring.completion() {
            *in_flight -= 1;
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
                meter.flushed(started, done);
                continue;
            }
            let index = tag as usize;
            let slot = &slots.all[index];
            free.push(index);
            check_result(cqe.result(), slot)?;
            meter.completed(slot.dir, slot.len, slot.submitted, done);
        }
    }
    Ok(meter.finish())
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

/// The submission of the slot's I/O: at most its buffer's bytes (checked here, not only by
/// the plan), which io_uring addresses by pointer.
fn prepare(
    fd: types::Fixed,
    slot: &mut Slot,
    index: usize,
    fixed: bool,
) -> Result<squeue::Entry, EngineError> {
    let (op, offset) = (slot.dir.op_name(), slot.offset);
    let data = slot.buf.first_mut(slot.len, op, offset)?;
    let len = u32::try_from(data.len()).map_err(|_| {
        EngineError::io(
            op,
            offset,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "an I/O over 4 GiB"),
        )
    })?;
    let ptr = data.as_mut_ptr();
    Ok(match (slot.dir, fixed) {
        (Dir::Read, true) => opcode::ReadFixed::new(fd, ptr, len, index as u16)
            .offset(slot.offset)
            .build(),
        (Dir::Write, true) => opcode::WriteFixed::new(fd, ptr, len, index as u16)
            .offset(slot.offset)
            .build(),
        (Dir::Read, false) => opcode::Read::new(fd, ptr, len).offset(slot.offset).build(),
        (Dir::Write, false) => opcode::Write::new(fd, ptr, len).offset(slot.offset).build(),
    })
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
