//! The few `bpf()` commands tacho makes itself, where aya 0.14 has no call that fits: linking
//! an iterator once and reading it again and again, and emptying a hash map a batch at a
//! time. Pinning, reopening and attaching a kept set are made here too although aya has
//! `pin`, `from_pin` and `attach`: aya's first use of those probes the kernel's features by
//! loading test programs and BTF (seen with strace), the load a kept set exists to skip.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `bpf()` commands and attach types (include/uapi/linux/bpf.h).
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_ITER_CREATE: libc::c_long = 33;
const BPF_TRACE_ITER: u64 = 28;

/// `bpf(cmd, attr)`: `attr` is the start of `union bpf_attr` as 64-bit words, the rest zero
/// (the kernel checks that it is). The command's non-negative result, or the error.
fn bpf(cmd: libc::c_long, attr: &mut [u64; 8]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable buffer of the size passed; the kernel reads and may
    // write only within it, and follows only the pointers the caller put in it (each to a
    // live buffer of the size the command implies).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

/// `bpf(cmd, attr)` for a command that returns a new descriptor.
fn bpf_fd(cmd: libc::c_long, attr: &mut [u64; 8]) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: on success these commands return a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fd_word(fd: BorrowedFd<'_>) -> u64 {
    u64::from(fd.as_raw_fd() as u32)
}

/// A link of the iterator program `prog` over every task of the caller's pid namespace.
pub(super) fn iter_link(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // link_create: prog_fd, target_fd (none), attach_type, flags; no iterator options.
    let mut attr = [fd_word(prog), BPF_TRACE_ITER, 0, 0, 0, 0, 0, 0];
    bpf_fd(BPF_LINK_CREATE, &mut attr)
}

/// A new read of the iterator `link`: each read walks the tasks anew.
pub(super) fn iter_open(link: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut attr = [fd_word(link), 0, 0, 0, 0, 0, 0, 0];
    bpf_fd(BPF_ITER_CREATE, &mut attr)
}

/// Attaches `prog`, a BTF-typed tracepoint program loaded for its tracepoint, until the link
/// returned is closed.
pub(super) fn raw_tracepoint_open(prog: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // raw_tracepoint: name (none: the program's attach type names it), prog_fd.
    let mut attr = [0, fd_word(prog), 0, 0, 0, 0, 0, 0];
    bpf_fd(BPF_RAW_TRACEPOINT_OPEN, &mut attr)
}

/// Pins `object` (a program or map) at `path` on a bpffs.
pub(super) fn obj_pin(path: &CStr, object: BorrowedFd<'_>) -> io::Result<()> {
    // obj: pathname, bpf_fd, file_flags.
    let mut attr = [path.as_ptr() as u64, fd_word(object), 0, 0, 0, 0, 0, 0];
    bpf(BPF_OBJ_PIN, &mut attr).map(drop)
}

/// The object pinned at `path`, opened for reading and writing.
pub(super) fn obj_get(path: &CStr) -> io::Result<OwnedFd> {
    let mut attr = [path.as_ptr() as u64, 0, 0, 0, 0, 0, 0, 0];
    bpf_fd(BPF_OBJ_GET, &mut attr)
}

/// Deletes every entry of the hash map `map` (keys of `key_size`, values of `value_size`
/// bytes, at most `max_entries`) a few thousand a call, where the kernel takes batches (5.6
/// on; a bucket never holds more than a call takes).
pub(super) fn empty_hash(
    map: BorrowedFd<'_>,
    key_size: usize,
    value_size: usize,
    max_entries: usize,
) -> io::Result<()> {
    // Entries a call moves out: a few calls empty a full map, without buffers its size.
    let chunk = max_entries.clamp(1, 4096);
    let mut keys = vec![0u8; key_size * chunk];
    let mut values = vec![0u8; value_size * chunk];
    // A hash map's batch position is a bucket number.
    let (mut from, mut to) = (0u32, 0u32);
    let mut first = true;
    loop {
        // batch: in_batch, out_batch, keys, values, count and map_fd (32 bits each),
        // elem_flags, flags.
        let mut attr = [
            if first { 0 } else { &raw const from as u64 },
            &raw mut to as u64,
            keys.as_mut_ptr() as u64,
            values.as_mut_ptr() as u64,
            chunk as u64 | fd_word(map) << 32,
            0,
            0,
            0,
        ];
        match bpf(BPF_MAP_LOOKUP_AND_DELETE_BATCH, &mut attr) {
            Ok(_) => {}
            // The walk reached the last bucket: every entry is gone.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        }
        first = false;
        from = to;
    }
}
