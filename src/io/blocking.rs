//! The blocking engines: `psync` (pread/pwrite) and `sync` (read/write at the file position,
//! seeking only when the next offset is not where the last I/O ended, as etcd's WAL does).
//! Each worker thread has one I/O in flight; a queue depth of N is N such threads.

use super::EngineError;
use super::buffer::AlignedBuf;
use super::meter::Meter;
use super::spec::{EngineKind, JobSpec, SyncKind};
use super::stats::Measured;
use super::worker::{Control, Dir, Picker, retry};
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use std::fs::File;
use std::time::Instant;

pub fn run(
    file: &File,
    spec: &JobSpec,
    stream: u64,
    ctl: &Control,
) -> Result<Measured, EngineError> {
    let mut picker = Picker::new(spec, stream);
    let mut buf = AlignedBuf::random(spec.bs() as usize, picker.rng());
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
            spec.engine(),
            file,
            &mut buf,
            len,
            dir,
            offset,
            &mut position,
        )?;
        meter.completed(dir, len, started, Instant::now());
        if picker.sync_due() {
            let kind = spec.sync().map_or(SyncKind::Fsync, |s| s.kind);
            let sync_start = Instant::now();
            flush(file, kind)?;
            meter.flushed(sync_start, Instant::now());
        }
    }
    Ok(meter.finish())
}

fn transfer(
    engine: EngineKind,
    file: &File,
    buf: &mut AlignedBuf,
    len: u64,
    dir: Dir,
    offset: u64,
    position: &mut Option<u64>,
) -> Result<(), EngineError> {
    let op = dir.op_name();
    let data = buf.first_mut(len, op, offset)?;
    let io_err = |e: Errno| EngineError::io(op, offset, e.into());
    let done = if engine == EngineKind::Sync {
        if *position != Some(offset) {
            retry(|| rustix::fs::seek(file, SeekFrom::Start(offset)))
                .map_err(|e| EngineError::io("seek", offset, e.into()))?;
        }
        let n = match dir {
            Dir::Read => retry(|| rustix::io::read(file, &mut *data)),
            Dir::Write => retry(|| rustix::io::write(file, data)),
        }
        .map_err(io_err)?;
        *position = Some(offset + n as u64);
        n
    } else {
        match dir {
            Dir::Read => retry(|| rustix::io::pread(file, &mut *data, offset)),
            Dir::Write => retry(|| rustix::io::pwrite(file, data, offset)),
        }
        .map_err(io_err)?
    };
    if done as u64 != len {
        return Err(EngineError::Short {
            op,
            offset,
            got: done as u64,
            want: len,
        });
    }
    Ok(())
}

fn flush(file: &File, kind: SyncKind) -> Result<(), EngineError> {
    retry(|| match kind {
        SyncKind::Fsync => rustix::fs::fsync(file),
        SyncKind::Fdatasync => rustix::fs::fdatasync(file),
    })
    .map_err(|e| EngineError::io("flush", 0, e.into()))
}
