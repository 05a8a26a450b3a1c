"""A pass-through FUSE filesystem that sleeps before every read and write.

A loop device over a file in it is a block device with a known, large latency: the slow
member of a btrfs RAID in tests/top_hot_disk.rs, on kernels without device-mapper's
dm-delay. Run with Debian's python3 and python3-fusepy:

    /usr/bin/python3 slowfs.py BACKING_DIR MOUNT_POINT DELAY_SECONDS

It stays in the foreground until the mount point is unmounted.
"""

import os
import sys
import time

from fusepy import FUSE, Operations


class SlowFs(Operations):
    def __init__(self, root, delay):
        self.root = root
        self.delay = delay

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

    # The loop driver may ask for O_DIRECT; the backing file need not honour it.
    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_DIRECT)

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay)
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        time.sleep(self.delay)
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._path(path), length)

    def unlink(self, path):
        os.unlink(self._path(path))

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)


if __name__ == "__main__":
    backing, mount_point, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    # big_writes and max_write keep a 64 KiB loop request one FUSE write, so each request
    # is delayed once rather than once per page.
    FUSE(SlowFs(backing, delay), mount_point, foreground=True, allow_other=True,
         big_writes=True, max_write=1 << 20)
