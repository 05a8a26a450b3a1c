//! The blocking engines: `psync` (pread/pwrite) and `sync` (read/write at the file position,
//! seeking only when the next offset is not where the last I/O ended, as etcd's WAL does).
//! Each worker thread has one I/O in flight; a queue depth of N is N such threads.

use super::EngineError;
use super::buffer::AlignedBuf;
use super::spec::{EngineKind, JobSpec, SyncKind};
use super::stats::{CpuTime, Measured};
use super::worker::{Control, Dir, Picker, Window, retry_eintr};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Instant;

pub fn run(
    file: &File,
    spec: &JobSpec,
    stream: u64,
    ctl: &Control,
) -> Result<Measured, EngineError> {
    let fd = file.as_raw_fd();
    let mut picker = Picker::new(spec, stream);
    let mut buf = AlignedBuf::random(spec.bs as usize, picker.rng());
    let window = Window::starting_now(spec.ramp, spec.runtime);
    let mut measured = Measured::default();
    let mut cpu_start: Option<CpuTime> = None;
    let mut last_completion = window.measure_from;
    let mut position: Option<u64> = None;
    let mut stamp = stream << 48;
    let (mut pending_ios, mut pending_bytes) = (0u64, 0u64);

    loop {
        let started = Instant::now();
        if started >= window.end || ctl.stopped() || measured.reached(spec.io_limit, spec.bs) {
            break;
        }
        if cpu_start.is_none() && started >= window.measure_from {
            cpu_start = Some(CpuTime::of_this_thread());
        }
        let (dir, offset, len) = picker.next_op();
        if dir == Dir::Write {
            stamp += 1;
            buf.scramble(stamp);
        }
        transfer(
            spec.engine,
            fd,
            &mut buf,
            len as usize,
            dir,
            offset,
            &mut position,
        )?;
        let done = Instant::now();
        measured.issued(dir, len);
        if started >= window.measure_from {
            let second = (done - window.measure_from).as_secs() as usize;
            measured.completed(dir, len, (done - started).as_nanos() as u64, second);
            last_completion = done;
        }
        if picker.sync_due() {
            let kind = spec.sync.map_or(SyncKind::Fsync, |s| s.kind);
            let sync_start = Instant::now();
            flush(fd, kind)?;
            let sync_done = Instant::now();
            if sync_start >= window.measure_from {
                measured
                    .sync
                    .record(0, (sync_done - sync_start).as_nanos() as u64);
                last_completion = sync_done;
            }
        }
        // Progress is published in small batches: an atomic add per I/O would cost more than
        // the I/O bookkeeping itself at hundreds of thousands of IOPS.
        pending_ios += 1;
        pending_bytes += len;
        if pending_ios == 64 {
            ctl.progress(pending_ios, pending_bytes);
            (pending_ios, pending_bytes) = (0, 0);
        }
    }
    ctl.progress(pending_ios, pending_bytes);
    if let Some(start) = cpu_start {
        measured.cpu = CpuTime::of_this_thread().since(start);
    }
    measured.elapsed = last_completion.saturating_duration_since(window.measure_from);
    Ok(measured)
}

fn transfer(
    engine: EngineKind,
    fd: i32,
    buf: &mut AlignedBuf,
    len: usize,
    dir: Dir,
    offset: u64,
    position: &mut Option<u64>,
) -> Result<(), EngineError> {
    let op = dir.op_name();
    let io_err = |e| EngineError::io(op, offset, e);
    let done = if engine == EngineKind::Sync {
        if *position != Some(offset) {
            retry_eintr(|| {
                // SAFETY: lseek on a descriptor we own; no memory involved.
                unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_SET) as isize }
            })
            .map_err(|e| EngineError::io("seek", offset, e))?;
        }
        // SAFETY: the buffer is valid for `len` bytes for the duration of the call.
        let n = retry_eintr(|| unsafe {
            match dir {
                Dir::Read => libc::read(fd, buf.as_mut_ptr().cast(), len),
                Dir::Write => libc::write(fd, buf.as_ptr().cast(), len),
            }
        })
        .map_err(io_err)?;
        *position = Some(offset + n as u64);
        n
    } else {
        // SAFETY: the buffer is valid for `len` bytes for the duration of the call.
        retry_eintr(|| unsafe {
            match dir {
                Dir::Read => libc::pread(fd, buf.as_mut_ptr().cast(), len, offset as libc::off_t),
                Dir::Write => libc::pwrite(fd, buf.as_ptr().cast(), len, offset as libc::off_t),
            }
        })
        .map_err(io_err)?
    };
    if done != len {
        return Err(EngineError::Short {
            op,
            offset,
            got: done as u64,
            want: len as u64,
        });
    }
    Ok(())
}

fn flush(fd: i32, kind: SyncKind) -> Result<(), EngineError> {
    // SAFETY: fsync/fdatasync on a descriptor we own.
    retry_eintr(|| unsafe {
        (match kind {
            SyncKind::Fsync => libc::fsync(fd),
            SyncKind::Fdatasync => libc::fdatasync(fd),
        }) as isize
    })
    .map(drop)
    .map_err(|e| EngineError::io("flush", 0, e))
}
