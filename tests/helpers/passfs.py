"""A pass-through FUSE filesystem over BACKING_DIR that tests bend to their needs.

    /usr/bin/python3 passfs.py BACKING_DIR MOUNT_POINT [--delay S] [--gate FILE]
        [--fail-after N [--fail-mode eio|short]] [--direct-io] [--stall-getattr FILE]
        [--write-rate BPS [--slow-after N --slow-rate BPS]]

  --delay S        sleep S seconds before every read and write: a loop device over a file in
                   it is a block device with a known, large latency (the slow member of a
                   btrfs RAID in tests/it/top_hot_disk.rs, on kernels without dm-delay).
  --gate FILE      writes wait until FILE exists: a test fills the backing filesystem under a
                   running benchmark at a known moment (tests/it/hostile_paths.rs). There is no
                   fallocate, as on ext2, FAT or NFS, so nothing is reserved up front.
  --fail-after N   after N good reads one fails (EIO), or with --fail-mode short every later
                   read returns half the bytes asked for (the kernel retries one short read,
                   so a single one would not be seen) (tests/it/engine_errors.rs).
  --direct-io      every read and write of a file is a request to this server, O_DIRECT or
                   not, so reads are in flight while others fail.
  --stall-getattr FILE
                   stat of anything waits while FILE exists: a hostile user's filesystem
                   that a reader of /proc/PID/fd must never stat through
                   (tests/it/top_culprits.rs).
  --write-rate BPS writes are paced to BPS bytes a second (each waits for its slot); with
  --slow-after N --slow-rate BPS, at the slow rate once N bytes were written: an SSD
                   whose cache fills (tests/it/sustained.rs).

Run with Debian's python3 and python3-fusepy; it stays in the foreground until the mount
point is unmounted.
"""

import argparse
import errno
import os
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class PassFs(Operations):
    def __init__(self, root, opts):
        self.root = root
        self.opts = opts
        self.reads = 0
        # Not "lock": fusepy would take it for the file-locking operation and call it.
        self.reads_lock = threading.Lock()
        self.written = 0
        self.free_at = 0.0
        self.write_turn = threading.Lock()

    def _path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        while self.opts.stall_getattr and os.path.exists(self.opts.stall_getattr):
            time.sleep(0.05)
        st = os.lstat(self._path(path))
        keys = ("st_mode", "st_size", "st_uid", "st_gid", "st_nlink",
                "st_atime", "st_mtime", "st_ctime")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def statfs(self, path):
        st = os.statvfs(self._path(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}

    # The loop driver or tacho may ask for O_DIRECT; the backing file (tmpfs) need not honour it.
    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_DIRECT)

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        fail = self.opts.fail_after
        failing = False
        if fail is not None:
            with self.reads_lock:
                self.reads += 1
                if self.opts.fail_mode == "short":
                    failing = self.reads > fail
                else:
                    failing = self.reads == fail + 1
        time.sleep(self.opts.delay)
        if failing and self.opts.fail_mode == "short":
            return os.pread(fh, size // 2, offset)
        if failing:
            raise FuseOSError(errno.EIO)
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        while self.opts.gate and not os.path.exists(self.opts.gate):
            time.sleep(0.01)
        time.sleep(self.opts.delay)
        if self.opts.write_rate:
            # Paced against the clock, not slept per write: each write gets the next slot of
            # the rate, so the server's own time (longer on a loaded machine) is not added.
            with self.write_turn:
                slow = self.opts.slow_after is not None and self.written >= self.opts.slow_after
                rate = self.opts.slow_rate if slow else self.opts.write_rate
                now = time.monotonic()
                self.free_at = max(self.free_at, now) + len(data) / rate
                wait = self.free_at - now
                self.written += len(data)
            time.sleep(wait)
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._path(path), length)

    def unlink(self, path):
        os.unlink(self._path(path))

    # libfuse renames a file removed while open to .fuse_hidden*, and removes that on release.
    def rename(self, old, new):
        os.rename(self._path(old), self._path(new))

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return os.fsync(fh)

    def release(self, path, fh):
        os.close(fh)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("backing")
    p.add_argument("mount_point")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--gate")
    p.add_argument("--fail-after", type=int)
    p.add_argument("--fail-mode", choices=["eio", "short"], default="eio")
    p.add_argument("--direct-io", action="store_true")
    p.add_argument("--stall-getattr")
    p.add_argument("--write-rate", type=float)
    p.add_argument("--slow-after", type=int)
    p.add_argument("--slow-rate", type=float)
    opts = p.parse_args()
    # big_writes and max_write keep a 64 KiB loop request one FUSE write, so each request is
    # delayed once rather than once per page.
    FUSE(PassFs(opts.backing, opts), opts.mount_point, foreground=True, allow_other=True,
         big_writes=True, max_write=1 << 20, direct_io=opts.direct_io)
