//! Asks util-linux's libblkid, the library `mount`, `mkfs` and `wipefs` use, what a device holds.
//!
//! libblkid knows every filesystem, RAID, LVM and crypto format the system's own tools know,
//! and is updated with them; tacho's hand-kept table (see `super::signatures`) always lags. The
//! library is loaded at run time, so building tacho needs nothing and a system without it still
//! runs (with the table alone). Probing goes through the caller's descriptor, never a path, and
//! lists every signature as `wipefs --all --no-act` does: each find is hidden in libblkid's
//! in-memory copy of the device and the same prober runs again, until nothing more is found.
//!
//! libblkid only reads, but it moves the descriptor's file offset (it seeks and reads); tacho
//! always reads and writes at explicit offsets, so that does not matter.

use std::ffi::{c_char, c_int, c_void};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::OnceLock;

use libloading::Library;

/// What a find is, in libblkid's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    /// TYPE or PTTYPE, e.g. "ext4", "f2fs", "dos", "LVM2_member".
    pub name: String,
    /// USAGE ("filesystem", "raid", "crypto", "other"), or "partition table" for PTTYPE.
    pub usage: String,
    /// Byte offset of the magic, from the start of the device.
    pub offset: u64,
}

/// Flags from blkid.h (stable ABI since util-linux 2.15–2.23).
const SUBLKS_TYPE: c_int = 1 << 5;
const SUBLKS_USAGE: c_int = 1 << 7;
const SUBLKS_MAGIC: c_int = 1 << 9;
/// Report a superblock even when its checksum is wrong: a damaged filesystem is still data.
const SUBLKS_BADCSUM: c_int = 1 << 10;
const PARTS_FORCE_GPT: c_int = 1 << 1;
const PARTS_MAGIC: c_int = 1 << 3;

/// More finds than any real device has; a bound in case a prober keeps matching.
const MAX_FINDS: usize = 64;

type Probe = *mut c_void;

/// The functions tacho uses, resolved once. The library is never unloaded (it lives in a
/// static), so the function pointers stay valid for the life of the process.
struct Api {
    _lib: Library,
    new_probe: unsafe extern "C" fn() -> Probe,
    free_probe: unsafe extern "C" fn(Probe),
    set_device: unsafe extern "C" fn(Probe, c_int, i64, i64) -> c_int,
    enable_superblocks: unsafe extern "C" fn(Probe, c_int) -> c_int,
    set_superblocks_flags: unsafe extern "C" fn(Probe, c_int) -> c_int,
    enable_partitions: unsafe extern "C" fn(Probe, c_int) -> c_int,
    set_partitions_flags: unsafe extern "C" fn(Probe, c_int) -> c_int,
    do_probe: unsafe extern "C" fn(Probe) -> c_int,
    lookup_value:
        unsafe extern "C" fn(Probe, *const c_char, *mut *const c_char, *mut usize) -> c_int,
    hide_range: unsafe extern "C" fn(Probe, u64, u64) -> c_int,
    step_back: unsafe extern "C" fn(Probe) -> c_int,
}

impl Api {
    fn load() -> Option<Api> {
        // SAFETY: libblkid.so.1 is util-linux's library; loading it runs only its (side-effect
        // free) initialisers. Each symbol is resolved with the C signature blkid.h declares.
        unsafe {
            let lib = Library::new("libblkid.so.1").ok()?;
            Some(Api {
                new_probe: *lib.get(b"blkid_new_probe\0").ok()?,
                free_probe: *lib.get(b"blkid_free_probe\0").ok()?,
                set_device: *lib.get(b"blkid_probe_set_device\0").ok()?,
                enable_superblocks: *lib.get(b"blkid_probe_enable_superblocks\0").ok()?,
                set_superblocks_flags: *lib.get(b"blkid_probe_set_superblocks_flags\0").ok()?,
                enable_partitions: *lib.get(b"blkid_probe_enable_partitions\0").ok()?,
                set_partitions_flags: *lib.get(b"blkid_probe_set_partitions_flags\0").ok()?,
                do_probe: *lib.get(b"blkid_do_probe\0").ok()?,
                lookup_value: *lib.get(b"blkid_probe_lookup_value\0").ok()?,
                hide_range: *lib.get(b"blkid_probe_hide_range\0").ok()?,
                step_back: *lib.get(b"blkid_probe_step_back\0").ok()?,
                _lib: lib,
            })
        }
    }
}

/// libblkid, when this system has it (util-linux 2.31 or later, for hide_range).
fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(Api::load).as_ref()
}

/// Whether libblkid could be loaded.
pub(super) fn available() -> bool {
    api().is_some()
}

/// A probe, freed on every path.
struct ProbeGuard {
    api: &'static Api,
    probe: NonNull<c_void>,
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        // SAFETY: the probe came from blkid_new_probe and is freed once, here.
        unsafe { (self.api.free_probe)(self.probe.as_ptr()) }
    }
}

/// Every signature libblkid finds in `len` bytes of `dev` from `start` (partition tables too
/// when `partitions`), or `None` when libblkid is not on this system. An error means the device
/// could not be read (or libblkid failed): the caller must then refuse to write.
pub(super) fn probe(
    dev: &File,
    start: u64,
    len: u64,
    partitions: bool,
) -> Option<io::Result<Vec<Found>>> {
    let api = api()?;
    Some(probe_with(api, dev, start, len, partitions))
}

fn probe_with(
    api: &'static Api,
    dev: &File,
    start: u64,
    len: u64,
    partitions: bool,
) -> io::Result<Vec<Found>> {
    let failed = |what: &str| io::Error::other(format!("libblkid: {what} failed"));
    let (Ok(start_arg), Ok(len_arg)) = (i64::try_from(start), i64::try_from(len)) else {
        return Err(failed("an offset beyond 2^63"));
    };
    // SAFETY: blkid_new_probe takes no arguments; NULL means out of memory.
    let probe = NonNull::new(unsafe { (api.new_probe)() }).ok_or_else(|| failed("new_probe"))?;
    let guard = ProbeGuard { api, probe };
    let pr = guard.probe.as_ptr();
    // SAFETY: `pr` is a live probe; the descriptor stays open for the whole probe (it is
    // borrowed from `dev`), and libblkid does not close a descriptor it was given.
    let set = unsafe { (api.set_device)(pr, dev.as_raw_fd(), start_arg, len_arg) };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pr` is a live probe; these only set flags on it.
    let configured = unsafe {
        (api.enable_superblocks)(pr, 1) == 0
            && (api.set_superblocks_flags)(
                pr,
                SUBLKS_TYPE | SUBLKS_USAGE | SUBLKS_MAGIC | SUBLKS_BADCSUM,
            ) == 0
            && (api.enable_partitions)(pr, c_int::from(partitions)) == 0
            && (api.set_partitions_flags)(pr, PARTS_MAGIC | PARTS_FORCE_GPT) == 0
    };
    if !configured {
        return Err(failed("configuring the probe"));
    }
    let mut found = Vec::new();
    while found.len() < MAX_FINDS {
        // SAFETY: `pr` is a live probe set up above.
        match unsafe { (api.do_probe)(pr) } {
            0 => {}
            1 => break,
            _ => return Err(failed("probing the device")),
        }
        let Some(find) = current(&guard, start) else {
            continue;
        };
        let magic_len = lookup(&guard, find.magic_key).map_or(0, |m| m.len());
        if magic_len > 0 {
            // Hide this magic in libblkid's in-memory copy and run the same prober again, so a
            // second copy (a backup superblock, a GPT's backup header) is found too.
            // SAFETY: `pr` is a live probe; the range is relative to the probed area.
            unsafe {
                (api.hide_range)(pr, find.found.offset - start, magic_len as u64);
                (api.step_back)(pr);
            }
        }
        found.push(find.found);
    }
    Ok(found)
}

struct Current {
    found: Found,
    magic_key: &'static [u8],
}

/// What the last successful blkid_do_probe found.
fn current(guard: &ProbeGuard, start: u64) -> Option<Current> {
    let (name, usage, offset_key, magic_key) = if let Some(name) = lookup(guard, b"TYPE\0") {
        let usage = lookup(guard, b"USAGE\0").unwrap_or_else(|| b"other".to_vec());
        (
            name,
            text(&usage),
            &b"SBMAGIC_OFFSET\0"[..],
            &b"SBMAGIC\0"[..],
        )
    } else {
        let name = lookup(guard, b"PTTYPE\0")?;
        let usage = "partition table".to_owned();
        (name, usage, &b"PTMAGIC_OFFSET\0"[..], &b"PTMAGIC\0"[..])
    };
    // Relative to the probed area; a prober without a magic gives none: the area's start.
    let relative = lookup(guard, offset_key)
        .and_then(|v| text(&v).parse::<u64>().ok())
        .unwrap_or(0);
    Some(Current {
        found: Found {
            name: text(&name),
            usage,
            offset: start.saturating_add(relative),
        },
        magic_key,
    })
}

/// A value of the last find, copied out (libblkid frees it at the next probe), without the
/// terminating NUL of string values.
fn lookup(guard: &ProbeGuard, key: &[u8]) -> Option<Vec<u8>> {
    debug_assert_eq!(key.last(), Some(&0), "keys are NUL-terminated");
    let mut data: *const c_char = std::ptr::null();
    let mut len: usize = 0;
    // SAFETY: the probe is live, the key is NUL-terminated, and both out-pointers point to
    // locals that outlive the call.
    let rc = unsafe {
        (guard.api.lookup_value)(
            guard.probe.as_ptr(),
            key.as_ptr().cast(),
            &mut data,
            &mut len,
        )
    };
    if rc != 0 || data.is_null() {
        return None;
    }
    // SAFETY: on success libblkid points `data` at `len` bytes it owns until the next probe
    // call; they are copied before anything else is called.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    Some(bytes.to_vec())
}

/// A value as text: libblkid's names and numbers are ASCII; anything else (a library bug) is
/// replaced, so it can never reach a terminal as a control character.
fn text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}
