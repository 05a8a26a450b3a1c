// SPDX-License-Identifier: GPL-2.0
// Every task's counters in one read: a task iterator (iter/task) that writes one fixed-size
// record per task (thread), so a scan of the processes costs one read() instead of generating
// /proc/PID/stat and /proc/PID/io for every process. tacho sums a thread group's records as
// the kernel's fs/proc/array.c do_task_stat and fs/proc/base.c do_io_accounting do: each live
// thread's counters plus the group's dead threads', held in task->signal (written with the
// leader's record only, so they count once).
//
// Included by blockio.bpf.c, so the block tracer's one load (one parse of the kernel's BTF)
// brings it. The structs carry a ___tasks flavour so they do not clash with the tracer's own
// declarations; CO-RE drops the suffix when matching the kernel's types. Each struct reached
// through a pointer costs the loader a search of every kernel type for its name (aya's CO-RE
// candidates, about a millisecond each), so members are read as chains from the four structs
// that must be pointers (task, signal, mm, delays), never through a pointer to a member.

struct task_io_accounting___tasks {
	__u64 rchar;
	__u64 wchar;
	__u64 read_bytes;
	__u64 write_bytes;
	__u64 cancelled_write_bytes;
} __attribute__((preserve_access_index));

struct prev_cputime___tasks {
	__u64 utime;
	__u64 stime;
} __attribute__((preserve_access_index));

struct percpu_counter___tasks {
	__s64 count;
} __attribute__((preserve_access_index));

struct mm_struct___tasks {
	struct percpu_counter___tasks rss_stat[4];
} __attribute__((preserve_access_index));

struct signal_struct___tasks {
	int nr_threads;
	__u64 utime;
	__u64 stime;
	__u64 sum_sched_runtime;
	unsigned long maj_flt;
	struct prev_cputime___tasks prev_cputime;
	struct task_io_accounting___tasks ioac;
} __attribute__((preserve_access_index));

struct sched_entity___tasks {
	__u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct task_delay_info___tasks {
	__u64 blkio_delay;
} __attribute__((preserve_access_index));

struct task_struct___tasks {
	unsigned int __state;
	unsigned int flags;
	int exit_state;
	int pid;
	int tgid;
	struct task_struct___tasks *real_parent;
	__u64 utime;
	__u64 stime;
	struct sched_entity___tasks se;
	unsigned long maj_flt;
	__u64 start_boottime;
	char comm[16];
	struct mm_struct___tasks *mm;
	struct signal_struct___tasks *signal;
	struct task_delay_info___tasks *delays;
	struct task_io_accounting___tasks ioac;
} __attribute__((preserve_access_index));

/* The iterator's context: fixed layouts (each pointer 8 bytes, __bpf_md_ptr), so no CO-RE. */
struct bpf_iter_meta {
	struct seq_file *seq;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

/* The mm's rss_stat counters (enum mm_counter_type) that make up RSS, as get_mm_rss sums. */
#define MM_FILEPAGES 0
#define MM_ANONPAGES 1
#define MM_SHMEMPAGES 3

/* One task. Times in ns; the group part (from `signal`, rss, ppid, flags, start) is filled in
 * the leader's record (pid == tgid) only, zero in other threads'. 232 bytes. */
struct task_record {
	__u32 pid;
	__u32 tgid;
	__u32 ppid;
	__u32 nr_threads;
	__u32 state;      /* task->__state */
	__u32 exit_state; /* task->exit_state */
	__u32 flags;      /* task->flags (PF_KTHREAD: its /proc name can be longer than comm) */
	__u32 pad;
	__u64 start_ns;   /* start_boottime */
	__u64 utime_ns;
	__u64 stime_ns;
	__u64 runtime_ns; /* se.sum_exec_runtime */
	__u64 maj_flt;
	__u64 io[5];      /* rchar, wchar, read_bytes, write_bytes, cancelled_write_bytes */
	__u64 blkio_ns;   /* delays->blkio_delay (leader only, as /proc reports it) */
	__u64 rss_pages;
	/* The group's dead threads (leader only). */
	__u64 sig_utime_ns;
	__u64 sig_stime_ns;
	__u64 sig_runtime_ns;
	__u64 sig_maj_flt;
	__u64 sig_io[5];
	/* cputime_adjust's last result for the group (leader only), for monotonic scaling. */
	__u64 prev_utime_ns;
	__u64 prev_stime_ns;
	char comm[16];
};

/* A macro, not a function taking a pointer: see the top of this file. */
#define TASKS_IO(out, ioac)                             \
	do {                                            \
		(out)[0] = (ioac).rchar;                \
		(out)[1] = (ioac).wchar;                \
		(out)[2] = (ioac).read_bytes;           \
		(out)[3] = (ioac).write_bytes;          \
		(out)[4] = (ioac).cancelled_write_bytes; \
	} while (0)

static __always_inline __u64 tasks_positive(__s64 v)
{
	return v > 0 ? v : 0;
}

SEC("iter/task")
int task_counters(struct bpf_iter__task *ctx)
{
	struct task_struct___tasks *t = (void *)ctx->task;
	struct task_record r = {};

	if (!t)
		return 0;
	r.pid = t->pid;
	r.tgid = t->tgid;
	/* Every thread's: tacho finds the threads blocked in D state among them. */
	r.state = t->__state;
	r.exit_state = t->exit_state;
	r.utime_ns = t->utime;
	r.stime_ns = t->stime;
	r.runtime_ns = t->se.sum_exec_runtime;
	r.maj_flt = t->maj_flt;
	TASKS_IO(r.io, t->ioac);
	if (r.pid == r.tgid) {
		struct signal_struct___tasks *sig = t->signal;
		struct task_struct___tasks *parent = t->real_parent;
		struct mm_struct___tasks *mm = t->mm;
		struct task_delay_info___tasks *delays = t->delays;

		r.flags = t->flags;
		r.start_ns = t->start_boottime;
		bpf_probe_read_kernel(r.comm, sizeof(r.comm), t->comm);
		if (parent)
			r.ppid = parent->tgid;
		if (delays)
			r.blkio_ns = delays->blkio_delay;
		if (mm)
			r.rss_pages = tasks_positive(mm->rss_stat[MM_FILEPAGES].count) +
				      tasks_positive(mm->rss_stat[MM_ANONPAGES].count) +
				      tasks_positive(mm->rss_stat[MM_SHMEMPAGES].count);
		if (sig) {
			r.nr_threads = sig->nr_threads;
			r.sig_utime_ns = sig->utime;
			r.sig_stime_ns = sig->stime;
			r.sig_runtime_ns = sig->sum_sched_runtime;
			r.sig_maj_flt = sig->maj_flt;
			r.prev_utime_ns = sig->prev_cputime.utime;
			r.prev_stime_ns = sig->prev_cputime.stime;
			TASKS_IO(r.sig_io, sig->ioac);
		}
	}
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
