// SPDX-License-Identifier: GPL-2.0
// Block I/O attribution for tacho: who submitted each request, on which device, and how long it
// queued (accounting start -> dispatch) and was served (dispatch -> completion).
//
// Counting: a request is attributed to the task current at block_io_start, which runs when the
// request is created from its first bio, in the submitter's context (not the dispatching
// kworker). Bios merged into an existing request count for that request's submitter; a bio
// split into several requests counts once per request, as /proc/diskstats does. A request
// completed in parts (several block_rq_complete events) adds each part's bytes and counts once.
//
// The few kernel structs used are declared here with preserve_access_index (CO-RE relocates the
// field offsets against the running kernel's BTF at load), so no vmlinux.h is committed.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "log2.h"

struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct address_space;

struct page {
	struct address_space *mapping;
} __attribute__((preserve_access_index));

struct bio_vec {
	struct page *bv_page;
} __attribute__((preserve_access_index));

struct bio {
	struct bio_vec *bi_io_vec;
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	struct bio *bio;
	unsigned int cmd_flags;
	unsigned int __data_len;
} __attribute__((preserve_access_index));

#define REQ_OP_MASK 0xff
#define REQ_OP_WRITE 1
#define PF_KTHREAD 0x00200000

/* What is known of a request in flight. */
struct inflight {
	__u64 start_ns;
	__u64 issue_ns;
	__u64 cgroup;
	__u32 tgid;
	__u32 pad;
	char comm[16];
};

/* Totals per submitting process, device and operation. */
struct io_key {
	__u32 tgid;
	__u32 dev;
	__u32 op;
	__u32 pad;
};

struct io_val {
	__u64 bytes;
	__u64 count;
	__u64 cgroup;
	char comm[16];
};

/* One log2 slot of a device's queue (kind 0) or service (kind 1) time histogram, in µs. */
struct hist_key {
	__u32 dev;
	__u32 kind;
	__u32 slot;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight SEC(".maps");

/* Who last dirtied each file's page cache (keyed by its address_space), so that writeback by a
 * kernel thread is attributed to the writer. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct inflight);
} dirtier SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct io_key);
	__type(value, struct io_val);
} io_by_proc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct hist_key);
	__type(value, __u64);
} latency SEC(".maps");

static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

static __always_inline void hist_add(__u32 dev, __u32 kind, __u64 ns)
{
	struct hist_key key = { .dev = dev, .kind = kind, .slot = log2_slot(ns / 1000) };
	__u64 one = 1, *count = bpf_map_lookup_elem(&latency, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&latency, &key, &one, BPF_NOEXIST);
}

static __always_inline void whoami(struct inflight *info)
{
	info->tgid = bpf_get_current_pid_tgid() >> 32;
	info->cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(info->comm, sizeof(info->comm));
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(dirty_folio, void *folio, struct address_space *mapping)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->flags & PF_KTHREAD)
		return 0;
	__u64 key = (__u64)mapping;
	struct inflight info = {};
	whoami(&info);
	bpf_map_update_elem(&dirtier, &key, &info, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct inflight info = {};
	struct task_struct *task = bpf_get_current_task_btf();
	struct inflight *owner = 0;
	if ((task->flags & PF_KTHREAD) && (rq->cmd_flags & REQ_OP_MASK) == REQ_OP_WRITE) {
		/* Writeback: the first page's file names the process that dirtied it. */
		struct bio *bio = rq->bio;
		if (bio) {
			__u64 mapping = (__u64)bio->bi_io_vec->bv_page->mapping;
			owner = bpf_map_lookup_elem(&dirtier, &mapping);
		}
	}
	if (owner)
		info = *owner;
	else
		whoami(&info);
	info.start_ns = bpf_ktime_get_ns();
	info.issue_ns = 0;
	bpf_map_update_elem(&inflight, &key, &info, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct inflight *info = bpf_map_lookup_elem(&inflight, &key);
	if (info) {
		info->issue_ns = bpf_ktime_get_ns();
	} else {
		/* Not seen at start (tracing began meanwhile, or no accounting): served time only. */
		struct inflight fresh = {};
		fresh.issue_ns = bpf_ktime_get_ns();
		bpf_map_update_elem(&inflight, &key, &fresh, BPF_ANY);
	}
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct inflight *info = bpf_map_lookup_elem(&inflight, &key);
	if (!info)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 dev = rq_dev(rq);
	struct io_key ik = { .tgid = info->tgid, .dev = dev, .op = rq->cmd_flags & REQ_OP_MASK };
	struct io_val *val = bpf_map_lookup_elem(&io_by_proc, &ik);
	if (val) {
		__sync_fetch_and_add(&val->bytes, nr_bytes);
		__sync_fetch_and_add(&val->count, 1);
	} else {
		struct io_val fresh = { .bytes = nr_bytes, .count = 1, .cgroup = info->cgroup };
		__builtin_memcpy(fresh.comm, info->comm, sizeof(fresh.comm));
		bpf_map_update_elem(&io_by_proc, &ik, &fresh, BPF_NOEXIST);
	}
	if (info->start_ns && info->issue_ns >= info->start_ns)
		hist_add(dev, 0, info->issue_ns - info->start_ns);
	if (info->issue_ns && now >= info->issue_ns)
		hist_add(dev, 1, now - info->issue_ns);
	/* A partial completion leaves bytes to come: keep the entry until the request is done. */
	if (rq->__data_len <= nr_bytes)
		bpf_map_delete_elem(&inflight, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
