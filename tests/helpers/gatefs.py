"""A pass-through FUSE filesystem whose writes wait for a gate file, and which has no fallocate.

Lets a test fill the filesystem under a running benchmark at a known moment: the benchmark's
test file is created and sized (sparse: without fallocate nothing is reserved, as on ext2, FAT
or NFS), its first write waits until GATE exists, and meanwhile the test fills the backing
filesystem with a file of its own. Run with Debian's python3 and python3-fusepy:

    /usr/bin/python3 gatefs.py BACKING_DIR MOUNT_POINT GATE

It stays in the foreground until the mount point is unmounted.
"""

import os
import sys
import time

from fusepy import FUSE, Operations


class GateFs(Operations):
    def __init__(self, root, gate):
        self.root = root
        self.gate = gate

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

    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_DIRECT)

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        while not os.path.exists(self.gate):
            time.sleep(0.01)
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
    backing, mount_point, gate = sys.argv[1], sys.argv[2], sys.argv[3]
    FUSE(GateFs(backing, gate), mount_point, foreground=True, allow_other=True,
         big_writes=True, max_write=1 << 20)
