//! The blocking engines: `psync` (pread/pwrite) and `sync` (read/write at the file position,
//! seeking only when the next offset is not where the last I/O ended, as etcd's WAL does).
//! Each worker thread has one I/O in flight; a queue depth of N is N such threads.

use super::EngineError;
use super::buffer::AlignedBuf;
use super::meter::Meter;
use super::spec::{EngineKind, JobSpec, SyncKind};
use super::stats::Measured;
use super::worker::{Control, Dir, Picker, retry_eintr};
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
    let mut meter = Meter::start(spec, stream, ctl);
    let mut position: Option<u64> = None;

    loop {
        let started = Instant::now();
        if meter.over(started) {
            break;
        }
        let (dir, offset, len) = picker.next_op();
        meter.issue(dir, len, &mut buf);
        transfer(
            spec.engine,
            fd,
            &mut buf,
            len as usize,
            dir,
            offset,
            &mut position,
        )?;
        meter.completed(dir, len, started, Instant::now());
        if picker.sync_due() {
            let kind = spec.sync.map_or(SyncKind::Fsync, |s| s.kind);
            let sync_start = Instant::now();
            flush(fd, kind)?;
            meter.flushed(sync_start, Instant::now());
        }
    }
    Ok(meter.finish())
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
