"""A pass-through FUSE filesystem where one read fails, after a number of them succeeded.

A file in it is a target that fails in the middle of a run, with reads still in flight: each
read sleeps first, and the filesystem serves many at once, so when the failure reaches tacho
the reads after it are still being served, and return their data late, into the buffers they
were given (tests/engine_errors.rs). Files are opened with direct_io,
so O_DIRECT reads reach this server instead of the page cache. Run with Debian's python3 and
python3-fusepy:

    /usr/bin/python3 eiofs.py BACKING_DIR MOUNT_POINT GOOD_READS DELAY_SECONDS [eio|short]

The failing read returns EIO; with "short", it and every read after it return half the bytes
asked for (the kernel retries a short read, so a single one would not be seen).

It stays in the foreground until the mount point is unmounted.
"""

import errno
import os
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class EioFs(Operations):
    def __init__(self, root, good_reads, delay, mode):
        self.root = root
        self.good_reads = good_reads
        self.delay = delay
        self.mode = mode
        self.reads = 0
        self.lock = threading.Lock()

    def _path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
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

    # The backing file lives on tmpfs, which need not honour O_DIRECT.
    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_DIRECT)

    def read(self, path, size, offset, fh):
        with self.lock:
            self.reads += 1
            if self.mode == "short":
                failing = self.reads > self.good_reads
            else:
                failing = self.reads == self.good_reads + 1
        time.sleep(self.delay)
        if failing and self.mode == "short":
            return os.pread(fh, size // 2, offset)
        if failing:
            raise FuseOSError(errno.EIO)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)


if __name__ == "__main__":
    backing, mount_point = sys.argv[1], sys.argv[2]
    good_reads, delay = int(sys.argv[3]), float(sys.argv[4])
    mode = sys.argv[5] if len(sys.argv) > 5 else "eio"
    # direct_io: every read of the file is a request to this server, O_DIRECT or not.
    FUSE(EioFs(backing, good_reads, delay, mode), mount_point, foreground=True,
         allow_other=True, direct_io=True)
