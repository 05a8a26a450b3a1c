// SPDX-License-Identifier: GPL-2.0
// Block I/O attribution for tacho: who submitted each request, on which device, and how long it
// queued (accounting start -> dispatch), was served (dispatch -> completion) and took in all.
//
// Counting: a request is attributed to the task current at block_io_start, which runs when the
// request is created from its first bio, in the submitter's context (not the dispatching
// kworker). Bios merged into an existing request count for that request's submitter; a bio
// split into several requests counts once per request, as /proc/diskstats does. A request
// completed in parts (several block_rq_complete events) adds each part's bytes and counts once.
//
// Cost: these programs run for every request, on the I/O's own CPU, and on this VM merely
// calling an empty one costs ~1.5% of a 290k-IOPS workload, so there are as few as possible:
// the kernel's own timestamps (request creation, and dispatch where the queue keeps statistics,
// as writeback throttling makes it) are read at completion, and rq_issue is attached only for
// queues without them. The hot path uses no hash map. A request in flight lives in an array slot chosen by a hash of its address (a
// hash map only takes the rare request whose slot is held by another); the per-process totals
// and per-device histograms live in arrays found by hashing their key, probing a few slots,
// claimed with compare-and-swap, and read by tacho through mmap without a system call.
//
// The few kernel structs used are declared here with preserve_access_index (CO-RE relocates the
// field offsets against the running kernel's BTF at load), so no vmlinux.h is committed.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hist.h"

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
	int tgid;
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	struct bio *bio;
	unsigned int cmd_flags;
	unsigned int __data_len;
	__u64 start_time_ns;
	__u64 io_start_time_ns;
} __attribute__((preserve_access_index));

#define REQ_OP_MASK 0xff
#define REQ_OP_WRITE 1
#define PF_KTHREAD 0x00200000

#define INFLIGHT_SLOTS 16384 /* power of two */
#define PROC_SLOTS 8192      /* power of two */
#define DEV_SLOTS 64         /* power of two */
#define PROBES 8
#define NONE 0xFFFFFFFF

/* A request in flight: its key (addr_of; 0 when the slot is free), times, and where it counts. */
struct inflight {
	__u64 rq;
	__u64 start_ns;
	__u64 issue_ns;
	__u32 proc;
	__u32 dev;
};

/* Totals of one (process, device, operation); key 0 is a free slot (see proc_key). The key,
 * read at creation on the submitter's CPU, and the counters, written at completion often on
 * another, sit in separate cache lines so the two do not bounce one line between CPUs.
 * Per completed request whose creation time is known: its whole time (creation ->
 * completion) and queued part (creation -> dispatch) summed, and the whole time counted in a
 * coarse histogram (hist.h's proc_hist_bucket; 32-bit counts, read as deltas that wrap), so
 * tacho gives each process its p50/p99 per interval. 512 bytes a slot, 4 MiB in all. */
struct proc_slot {
	__u64 key;
	__u64 cgroup;
	char comm[16];
	__u64 pad[4];
	__u64 bytes;
	__u64 count;
	__u64 total_ns;
	__u64 queue_ns;
	__u64 pad2[4];
	__u32 hist[PROC_HIST_BUCKETS];
};

/* One device's histograms: queue, service and total time (hist.h buckets); dev 0 is free.
 * The key has its cache line to itself, as above. */
struct dev_slot {
	__u64 dev;
	__u64 pad[7];
	__u64 hist[3][HIST_BUCKETS];
};

/* Requests not counted per process or device because their table was full. */
struct dropped {
	__u64 proc_full;
	__u64 dev_full;
};

/* The process that dirtied a file's pages, keyed by its address_space: writeback by a kernel
 * thread is attributed to it. */
struct owner {
	__u64 cgroup;
	__u32 tgid;
	__u32 pad;
	char comm[16];
};

/* Mappable, as the tables below, so that a set kept loaded between runs (src/bpf/pin.rs) can
 * be cleared with one memset before its programs are attached again: a request left in flight
 * when the last run stopped would otherwise be matched by a later request at that address. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, INFLIGHT_SLOTS);
	__type(key, __u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

/* Not preallocated: it takes only the rare request whose array slot is held, and 65,536
 * entries made up front were 6.8 MB for the kernel to allocate and clear at every start (a
 * tenth of a short `tacho top`'s CPU went to creating maps). An entry the kernel cannot
 * allocate (memory pressure) loses that one request's attribution, as a full map did. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight_spill SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, PROC_SLOTS);
	__type(key, __u32);
	__type(value, struct proc_slot);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, DEV_SLOTS);
	__type(key, __u32);
	__type(value, struct dev_slot);
} devs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dropped);
} dropped SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct owner);
} dirtier SEC(".maps");

static __always_inline __u32 slot_of(__u64 key, __u32 bits)
{
	return (key * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
}

/* Set by tacho at load: some queue keeps no I/O statistics, so the kernel may not stamp its
 * requests' creation and io_start must (a clock read per request, skipped otherwise). */
const volatile __u32 own_start = 0;

/* A request as a plain number to hash and compare: its distance from own_start. The verifier
 * refuses arithmetic on a typed pointer but lets a privileged program subtract two pointers,
 * which gives a number; any fixed address would do, and this one costs no map lookup. */
static __always_inline __u64 addr_of(void *p)
{
	return (__u64)p - (__u64)&own_start;
}

static __always_inline __u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

static __always_inline void count_dropped(int proc)
{
	__u32 zero = 0;
	struct dropped *d = bpf_map_lookup_elem(&dropped, &zero);
	if (!d)
		return;
	if (proc)
		__sync_fetch_and_add(&d->proc_full, 1);
	else
		__sync_fetch_and_add(&d->dev_full, 1);
}

/* Bit 63 keeps the key of pid 0 on device 0 apart from a free slot; pids fit in 22 bits. */
static __always_inline __u64 proc_key(__u32 tgid, __u32 dev, __u32 op)
{
	return (1ULL << 63) | ((__u64)tgid << 34) | ((__u64)(op & 3) << 32) | dev;
}

/* The slot of (tgid, dev, op), claimed for it if new (with who's name and cgroup); NONE when
 * the probed slots all belong to others. */
static __always_inline __u32 proc_slot(__u32 tgid, __u32 dev, __u32 op, struct owner *who)
{
	__u64 key = proc_key(tgid, dev, op);
	__u32 first = slot_of(key, 13);
	for (__u32 i = 0; i < PROBES; i++) {
		__u32 idx = (first + i) & (PROC_SLOTS - 1);
		struct proc_slot *p = bpf_map_lookup_elem(&procs, &idx);
		if (!p)
			return NONE;
		__u64 held = p->key;
		if (held == key)
			return idx;
		if (held == 0 && __sync_val_compare_and_swap(&p->key, 0, key) == 0) {
			if (who) {
				p->cgroup = who->cgroup;
				__builtin_memcpy(p->comm, who->comm, sizeof(p->comm));
			} else if (tgid) {
				p->cgroup = bpf_get_current_cgroup_id();
				bpf_get_current_comm(p->comm, sizeof(p->comm));
			}
			return idx;
		}
	}
	count_dropped(1);
	return NONE;
}

static __always_inline __u32 dev_slot(__u32 dev)
{
	__u64 key = (1ULL << 63) | dev;
	__u32 first = slot_of(key, 6);
	for (__u32 i = 0; i < PROBES; i++) {
		__u32 idx = (first + i) & (DEV_SLOTS - 1);
		struct dev_slot *d = bpf_map_lookup_elem(&devs, &idx);
		if (!d)
			return NONE;
		__u64 held = d->dev;
		if (held == key || (held == 0 && __sync_val_compare_and_swap(&d->dev, 0, key) == 0))
			return idx;
	}
	count_dropped(0);
	return NONE;
}

/* The in-flight record of rq: its array slot when it holds rq, else the spill map's entry
 * (*spilled says which). */
static __always_inline struct inflight *find(__u64 rq, int *spilled)
{
	__u32 idx = slot_of(rq, 14);
	struct inflight *e = bpf_map_lookup_elem(&inflight, &idx);
	*spilled = 0;
	if (e && e->rq == rq)
		return e;
	*spilled = 1;
	return bpf_map_lookup_elem(&inflight_spill, &rq);
}

/* Records rq in flight: in its array slot when free (or left by rq's previous use), else in
 * the spill map. */
static __always_inline void track(struct inflight *info)
{
	__u32 idx = slot_of(info->rq, 14);
	struct inflight *e = bpf_map_lookup_elem(&inflight, &idx);
	if (e) {
		__u64 held = e->rq;
		if ((held == 0 || held == info->rq) &&
		    __sync_val_compare_and_swap(&e->rq, held, info->rq) == held) {
			e->start_ns = info->start_ns;
			e->issue_ns = info->issue_ns;
			e->proc = info->proc;
			e->dev = info->dev;
			return;
		}
	}
	bpf_map_update_elem(&inflight_spill, &info->rq, info, BPF_ANY);
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(dirty_folio, void *folio, struct address_space *mapping)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->flags & PF_KTHREAD)
		return 0;
	__u64 key = (__u64)mapping;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	/* Pages are dirtied one by one: rewrite the owner only when it changes. */
	struct owner *known = bpf_map_lookup_elem(&dirtier, &key);
	if (known && known->tgid == tgid)
		return 0;
	struct owner who = { .tgid = tgid, .cgroup = bpf_get_current_cgroup_id() };
	bpf_get_current_comm(who.comm, sizeof(who.comm));
	bpf_map_update_elem(&dirtier, &key, &who, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	__u32 dev = rq_dev(rq), op = rq->cmd_flags & REQ_OP_MASK;
	struct task_struct *task = bpf_get_current_task_btf();
	struct owner *who = 0;
	if ((task->flags & PF_KTHREAD) && op == REQ_OP_WRITE) {
		/* Writeback: the first page's file names the process that dirtied it. */
		struct bio *bio = rq->bio;
		if (bio) {
			__u64 mapping = (__u64)bio->bi_io_vec->bv_page->mapping;
			who = bpf_map_lookup_elem(&dirtier, &mapping);
		}
	}
	/* A load from the task rather than a helper call: this runs for every request. (Read
	 * before choosing, so the compiler cannot merge it with the load from the map value:
	 * the verifier refuses one instruction over two kinds of pointer.) */
	__u32 tgid = task->tgid;
	barrier_var(tgid);
	if (who)
		tgid = who->tgid;
	struct inflight info = {
		.rq = addr_of(rq),
		.start_ns = own_start ? bpf_ktime_get_ns() : 0,
		.proc = proc_slot(tgid, dev, op, who),
		.dev = dev_slot(dev),
	};
	track(&info);
	return 0;
}

/* Attached only when some device's queue keeps no statistics, so the kernel does not stamp
 * its dispatch time (see rq_complete). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(rq_issue, struct request *rq)
{
	int spilled;
	struct inflight *e = find(addr_of(rq), &spilled);
	if (e) {
		e->issue_ns = bpf_ktime_get_ns();
		return 0;
	}
	/* Not seen at start (tracing began meanwhile, or a flush the block layer made itself):
	 * served time only, attributed to pid 0. */
	__u32 dev = rq_dev(rq);
	struct inflight fresh = {
		.rq = addr_of(rq),
		.issue_ns = bpf_ktime_get_ns(),
		.proc = proc_slot(0, dev, rq->cmd_flags & REQ_OP_MASK, 0),
		.dev = dev_slot(dev),
	};
	track(&fresh);
	return 0;
}

static __always_inline void hist_add(struct dev_slot *d, __u32 kind, __u64 ns)
{
	__u32 bucket = hist_bucket(ns);
	/* Keep the compiler from checking a copy: the verifier must see the bound on this one. */
	barrier_var(bucket);
	if (kind < 3 && bucket < HIST_BUCKETS)
		__sync_fetch_and_add(&d->hist[kind][bucket], 1);
}

static __always_inline void proc_hist_add(struct proc_slot *p, __u64 ns)
{
	__u32 bucket = proc_hist_bucket(ns);
	barrier_var(bucket);
	if (bucket < PROC_HIST_BUCKETS)
		__sync_fetch_and_add(&p->hist[bucket], 1);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = addr_of(rq);
	int spilled;
	struct inflight *e = find(key, &spilled);
	if (!e)
		return 0;
	/* A partial completion leaves bytes to come: the request counts once, when done. */
	int done = rq->__data_len <= nr_bytes;
	__u32 proc = e->proc;
	struct proc_slot *p = bpf_map_lookup_elem(&procs, &proc);
	if (p) {
		__sync_fetch_and_add(&p->bytes, nr_bytes);
		if (done)
			__sync_fetch_and_add(&p->count, 1);
	}
	if (!done)
		return 0;
	/* The kernel's own stamps, as iostat's await is computed from them: creation (set just
	 * after block_io_start fired, so read here) and dispatch (set where the queue keeps
	 * statistics; writeback throttling turns them on). Either may be a plug's cached time.
	 * Where some queue lacks one, tacho loads these programs to stamp it themselves, and
	 * their stamp wins: a queue without I/O statistics leaves a stale creation stamp from
	 * the request's previous use (seen: 9 s). */
	__u64 now = bpf_ktime_get_ns(), start = e->start_ns, issue = e->issue_ns;
	if (!start)
		start = rq->start_time_ns;
	if (!issue)
		issue = rq->io_start_time_ns;
	/* The submitter's share, in the slot already found above (no lookup more). */
	if (p && start && now >= start) {
		__sync_fetch_and_add(&p->total_ns, now - start);
		if (issue >= start && now >= issue)
			__sync_fetch_and_add(&p->queue_ns, issue - start);
		proc_hist_add(p, now - start);
	}
	__u32 dev = e->dev;
	struct dev_slot *d = bpf_map_lookup_elem(&devs, &dev);
	if (d) {
		if (start && issue >= start)
			hist_add(d, 0, issue - start);
		if (issue && now >= issue)
			hist_add(d, 1, now - issue);
		if (start && now >= start)
			hist_add(d, 2, now - start);
	}
	if (spilled)
		bpf_map_delete_elem(&inflight_spill, &key);
	else
		e->rq = 0;
	return 0;
}

/* Every task's counters for the process scan (tasks.h): loaded only when asked for. */
#include "tasks.h"

char LICENSE[] SEC("license") = "GPL";
