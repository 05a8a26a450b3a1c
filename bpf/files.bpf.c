// SPDX-License-Identifier: GPL-2.0
// Bytes per process and file, and sync latency, for tacho files --bytes.
//
// At every read/write-family syscall's entry the fd is remembered per thread; at its exit the
// returned byte count is added to (process, device, inode, generation) of the regular file the
// fd names.
// fsync, fdatasync and sync_file_range are timed entry -> exit into a log2 histogram per
// (process, device, inode), with the sizes of the writes seen on that file (smallest, largest)
// so userspace can say what the application does before it syncs. Syscall numbers are
// x86-64's (the object is built for that target only). Reads and writes submitted through
// io_uring never pass those syscalls: their completions (io_uring_complete) are counted too,
// for the task that submitted them.
//
// The few kernel structs used are declared here with preserve_access_index (CO-RE relocates the
// field offsets against the running kernel's BTF at load), so no vmlinux.h is committed.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <linux/aio_abi.h>
#include <linux/uio.h>
#include "log2.h"

struct pt_regs {
	unsigned long di;
	unsigned long dx;
} __attribute__((preserve_access_index));

struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned short i_mode;
	unsigned long i_ino;
	__u32 i_generation;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct dentry {
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct path {
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
	struct files_struct *files;
	int tgid;
	char comm[16];
} __attribute__((preserve_access_index));

struct io_uring_task {
	struct task_struct *task;
} __attribute__((preserve_access_index));

struct io_kiocb {
	struct file *file;
	__u8 opcode;
	struct io_uring_task *tctx;
} __attribute__((preserve_access_index));

struct io_uring_cqe {
	__s32 res;
} __attribute__((preserve_access_index));

/* io_uring opcodes (uapi, stable). */
#define IORING_OP_READV 1
#define IORING_OP_WRITEV 2
#define IORING_OP_READ_FIXED 4
#define IORING_OP_WRITE_FIXED 5
#define IORING_OP_READ 22
#define IORING_OP_WRITE 23
#define IORING_OP_READ_MULTISHOT 49
#define IORING_OP_READV_FIXED 60
#define IORING_OP_WRITEV_FIXED 61

#define S_IFMT 00170000
#define S_IFREG 0100000

/* x86-64 syscall numbers. */
#define NR_read 0
#define NR_write 1
#define NR_pread64 17
#define NR_pwrite64 18
#define NR_readv 19
#define NR_writev 20
#define NR_fsync 74
#define NR_fdatasync 75
#define NR_sync_file_range 277
#define NR_preadv 295
#define NR_pwritev 296
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_io_submit 209

/* iocbs of one io_submit looked at, and iovecs of one vectored iocb: the verifier walks every
 * turn of a loop, so each is bounded. What lies past a bound is counted in `missed`. */
#define MAX_IOCBS 128
#define MAX_IOVECS 8

enum kind { READ = 1, WRITE = 2, SYNC = 3, AIO = 4 };

/* A syscall in flight on one thread (for io_submit, `arg` is the iocb pointer array and `fd`
 * unused); `id` is the syscall's number. */
struct call {
	__u64 start_ns;
	__u32 fd;
	__u32 kind;
	__u64 arg;
	__u32 id;
	__u32 pad;
};

/* A file is (device, inode, generation): an inode number freed by a deleted file and given to
 * a new one comes with a new generation (ext4, xfs, btrfs and tmpfs draw or count them), so the
 * two files' counts never merge. */
struct file_key {
	__u32 tgid;
	__u32 dev;
	__u64 ino;
	__u32 gen;
	__u32 pad;
};

/* Bytes kept of a file's last path component, NUL included. */
#define NAME_LEN 56

struct file_val {
	__u64 read_bytes;
	__u64 reads;
	__u64 write_bytes;
	__u64 writes;
	__u64 write_min;
	__u64 write_max;
	__u64 syncs;
	__u64 sync_ns;
	__u64 sync_hist[SLOTS];
	char comm[16];
	/* The file's last path component at its first I/O: userspace names the file only with a
	 * path that ends in it (a reused inode's new file never lends its name). */
	char name[NAME_LEN];
	/* Of `syncs`: fsync and fdatasync calls (the rest are sync_file_range). */
	__u64 fsyncs;
	__u64 fdatasyncs;
	/* Time the process's read, write and sync calls on the file took, summed (ns): over the
	 * watched time, the mean number of its calls in flight. */
	__u64 busy_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, struct file_val);
} by_file SEC(".maps");

/* Per process: requests of its io_submit calls that were not counted (past MAX_IOCBS in one
 * call, an iocb that could not be read, or no room left in by_file), and vectored requests
 * whose bytes were counted in part (iovecs past MAX_IOVECS). Userspace says so, per process. */
struct missed_val {
	__u64 requests;
	__u64 partial;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct missed_val);
} missed SEC(".maps");

/* Threads that made a read, write or sync call on a regular file, and their process: userspace
 * counts a process's threads doing file I/O. The least recently used are dropped when full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} io_threads SEC(".maps");

/* A new entry is built here, not on the 512-byte stack (the value alone is 400 bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_val);
} scratch SEC(".maps");

static __always_inline __u32 kind_of(long id)
{
	switch (id) {
	case NR_read: case NR_pread64: case NR_readv: case NR_preadv: case NR_preadv2:
		return READ;
	case NR_write: case NR_pwrite64: case NR_writev: case NR_pwritev: case NR_pwritev2:
		return WRITE;
	case NR_fsync: case NR_fdatasync: case NR_sync_file_range:
		return SYNC;
	case NR_io_submit:
		return AIO;
	}
	return 0;
}

/* A regular file as (device, inode) into key; 0 for anything else. */
static __always_inline int inode_of(struct file *f, struct file_key *key)
{
	if (!f)
		return 0;
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	key->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key->ino = BPF_CORE_READ(inode, i_ino);
	key->gen = BPF_CORE_READ(inode, i_generation);
	return 1;
}

/* The file behind `fd` of the current process; 0 when there is none. */
static __always_inline struct file *file_of(__u32 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return 0;
	return f;
}

/* The totals of key, created (named after `task`'s command and `f`'s last path component)
 * when new. */
static __always_inline struct file_val *totals(struct file_key *key, struct task_struct *task,
					       struct file *f)
{
	struct file_val *val = bpf_map_lookup_elem(&by_file, key);
	if (val)
		return val;
	__u32 zero = 0;
	struct file_val *fresh = bpf_map_lookup_elem(&scratch, &zero);
	if (!fresh)
		return 0;
	__builtin_memset(fresh, 0, sizeof(*fresh));
	BPF_CORE_READ_STR_INTO(&fresh->comm, task, comm);
	const unsigned char *name = BPF_CORE_READ(f, f_path.dentry, d_name.name);
	if (name)
		bpf_probe_read_kernel_str(&fresh->name, sizeof(fresh->name), name);
	bpf_map_update_elem(&by_file, key, fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&by_file, key);
}

static __always_inline void miss(__u32 tgid, __u64 requests, __u64 partial)
{
	struct missed_val *m = bpf_map_lookup_elem(&missed, &tgid);
	if (!m) {
		struct missed_val zero = {};
		bpf_map_update_elem(&missed, &tgid, &zero, BPF_NOEXIST);
		m = bpf_map_lookup_elem(&missed, &tgid);
		if (!m)
			return;
	}
	__sync_fetch_and_add(&m->requests, requests);
	__sync_fetch_and_add(&m->partial, partial);
}

static __always_inline void add_io(struct file_val *val, __u32 kind, __u64 n)
{
	if (kind == READ) {
		__sync_fetch_and_add(&val->read_bytes, n);
		__sync_fetch_and_add(&val->reads, 1);
	} else if (kind == WRITE) {
		__sync_fetch_and_add(&val->write_bytes, n);
		__sync_fetch_and_add(&val->writes, 1);
		/* Racy between threads of one process, which only blurs the range a little. */
		if (n && (!val->write_min || n < val->write_min))
			val->write_min = n;
		if (n > val->write_max)
			val->write_max = n;
	}
}

/* The bytes one iocb asks to move: aio_nbytes, or for a vectored one the sum of its first
 * MAX_IOVECS iovecs (a longer one is counted in `missed` as partial). */
static __always_inline __u64 iocb_bytes(__u32 tgid, struct iocb *cb)
{
	if (cb->aio_lio_opcode == IOCB_CMD_PREAD || cb->aio_lio_opcode == IOCB_CMD_PWRITE)
		return cb->aio_nbytes;
	struct iovec *vec = (struct iovec *)cb->aio_buf;
	__u64 n = 0;
	for (int i = 0; i < MAX_IOVECS && i < cb->aio_nbytes; i++) {
		struct iovec v;
		if (bpf_probe_read_user(&v, sizeof(v), &vec[i]))
			break;
		n += v.iov_len;
	}
	if (cb->aio_nbytes > MAX_IOVECS)
		miss(tgid, 0, 1);
	return n;
}

/* The `submitted` iocbs of an io_submit (libaio: databases, fio's libaio engine): each read or
 * write counts its requested bytes for its file at submission, as AIO completions pass no
 * tracepoint. Those past MAX_IOCBS, unreadable, or with no room left in by_file are counted in
 * `missed`, never dropped silently. No counter is carried from one turn to the next: the
 * verifier could then not prune its walk of the loop. */
static __always_inline int aio_submitted(__u32 tgid, struct iocb **iocbs, long submitted)
{
	if (submitted > MAX_IOCBS)
		miss(tgid, submitted - MAX_IOCBS, 0);
	for (int i = 0; i < MAX_IOCBS && i < submitted; i++) {
		struct iocb *p = 0;
		struct iocb cb;
		if (bpf_probe_read_user(&p, sizeof(p), &iocbs[i]) ||
		    bpf_probe_read_user(&cb, sizeof(cb), p)) {
			miss(tgid, (submitted < MAX_IOCBS ? submitted : MAX_IOCBS) - i, 0);
			return 0;
		}
		__u32 kind;
		switch (cb.aio_lio_opcode) {
		case IOCB_CMD_PREAD: case IOCB_CMD_PREADV:
			kind = READ;
			break;
		case IOCB_CMD_PWRITE: case IOCB_CMD_PWRITEV:
			kind = WRITE;
			break;
		default:
			continue;
		}
		struct file_key key = { .tgid = tgid };
		struct file *f = file_of(cb.aio_fildes);
		if (!inode_of(f, &key))
			continue;
		struct file_val *val = totals(&key, bpf_get_current_task_btf(), f);
		if (val)
			add_io(val, kind, iocb_bytes(tgid, &cb));
		else
			miss(tgid, 1, 0);
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	__u32 kind = kind_of(id);
	if (!kind)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call c = { .start_ns = bpf_ktime_get_ns(), .fd = (__u32)BPF_CORE_READ(regs, di),
			  .kind = kind, .id = (__u32)id };
	if (kind == AIO)
		c.arg = BPF_CORE_READ(regs, dx);
	bpf_map_update_elem(&calls, &tid, &c, BPF_ANY);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call *c = bpf_map_lookup_elem(&calls, &tid);
	if (!c)
		return 0;
	struct call done = *c;
	bpf_map_delete_elem(&calls, &tid);
	if (ret < 0)
		return 0;
	if (done.kind == AIO)
		return aio_submitted(id >> 32, (struct iocb **)done.arg, ret);
	struct file_key key = { .tgid = id >> 32 };
	struct file *f = file_of(done.fd);
	if (!inode_of(f, &key))
		return 0;
	struct file_val *val = totals(&key, bpf_get_current_task_btf(), f);
	if (!val) {
		miss(id >> 32, 1, 0);
		return 0;
	}
	__u64 ns = bpf_ktime_get_ns() - done.start_ns;
	__sync_fetch_and_add(&val->busy_ns, ns);
	__u32 tgid = id >> 32;
	bpf_map_update_elem(&io_threads, &tid, &tgid, BPF_ANY);
	if (done.kind != SYNC) {
		add_io(val, done.kind, (__u64)ret);
	} else {
		__sync_fetch_and_add(&val->syncs, 1);
		if (done.id == NR_fsync)
			__sync_fetch_and_add(&val->fsyncs, 1);
		else if (done.id == NR_fdatasync)
			__sync_fetch_and_add(&val->fdatasyncs, 1);
		__sync_fetch_and_add(&val->sync_ns, ns);
		__u32 slot = log2_slot(ns / 1000);
		if (slot < SLOTS)
			__sync_fetch_and_add(&val->sync_hist[slot], 1);
	}
	return 0;
}

/* An io_uring read or write completed: its bytes count for the task that submitted it (the
 * completion may run in an interrupt or a kernel worker). Requests complete once, except
 * multishot reads, whose every completion carries its own bytes. */
SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, void *ring, struct io_kiocb *req, struct io_uring_cqe *cqe)
{
	__u32 kind;
	switch (BPF_CORE_READ(req, opcode)) {
	case IORING_OP_READV: case IORING_OP_READ_FIXED: case IORING_OP_READ:
	case IORING_OP_READ_MULTISHOT: case IORING_OP_READV_FIXED:
		kind = READ;
		break;
	case IORING_OP_WRITEV: case IORING_OP_WRITE_FIXED: case IORING_OP_WRITE:
	case IORING_OP_WRITEV_FIXED:
		kind = WRITE;
		break;
	default:
		return 0;
	}
	int res = BPF_CORE_READ(cqe, res);
	struct task_struct *task = BPF_CORE_READ(req, tctx, task);
	if (res < 0 || !task)
		return 0;
	struct file_key key = { .tgid = BPF_CORE_READ(task, tgid) };
	struct file *f = BPF_CORE_READ(req, file);
	if (!inode_of(f, &key))
		return 0;
	struct file_val *val = totals(&key, task, f);
	if (val)
		add_io(val, kind, (__u64)res);
	else
		miss(key.tgid, 1, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
