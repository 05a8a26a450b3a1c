// SPDX-License-Identifier: GPL-2.0
// Off-CPU time for tacho profile --off-cpu and --wall: how long each thread stays off the CPU,
// with the kernel and user stacks it left with, summed in the kernel.
//
// At sched_switch the leaving task (prev, still current) has its time, stacks, state and the
// system call it sleeps in (number and first argument, from its saved user registers) kept by
// thread; when a task comes back (next), the time since is added to (process, thread, kernel
// stack, user stack, state, syscall, argument). Nothing is sent to userspace per event: tacho
// reads the sums, and the waits still open, when it reports.
//
// Cost: walking the two stacks is most of it (~2.5 us a switch on the project VM, against
// ~0.3 us for the rest), so the stacks walked at each of a thread's last few places (user
// ip/sp/bp, system call, state) are reused while it leaves the CPU from one of them, and
// walked again every REWALK-th time there. With `no_stacks` set (tacho top --waits, which
// classes waits by call, state and descriptor) no stack is ever walked: ~0.29 us a switch.
//
// Left out, to stay cheap and on topic: the idle task, kernel threads (their waits are waiting
// for work), tacho itself, a task that is dying, and with a target set, every other process
// (one thread group, or one cgroup v2 subtree: the unit's).
//
// The first argument is kept only for the system calls whose first argument is the descriptor
// waited on (x86-64 numbers; poll's is read from its first pollfd), so a sleep in futex or
// nanosleep does not make a key per address.
//
// The few kernel structs used are declared here with preserve_access_index (CO-RE relocates the
// field offsets against the running kernel's BTF at load), so no vmlinux.h is committed.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

struct pt_regs {
	unsigned long di;
	unsigned long bp;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
	int pid;
	int tgid;
	char comm[16];
	struct task_struct *group_leader;
} __attribute__((preserve_access_index));

#define PF_KTHREAD 0x00200000
#define PF_EXITING 0x00000004
#define TASK_DEAD 0x80
/* The state bits kept: interruptible, uninterruptible (D), stopped, traced. */
#define STATE_BITS 0xf
#define NO_ARG 0xffffffffffffffffULL
/* Times a thread's stacks are reused at the same place before they are walked again. */
#define REWALK 64

/* Set before load: a thread group, and a cgroup v2 (its id as two halves, and its level). */
const volatile __u32 target_tgid = 0;
const volatile __u32 own_tgid = 0;
const volatile __u32 cgroup_lo = 0;
const volatile __u32 cgroup_hi = 0;
const volatile __u32 cgroup_level = 0;
/* Set before load: walk no stacks (tacho top's waits need the call, state and descriptor). */
const volatile __u32 no_stacks = 0;

/* Stacks walked at one place a thread left the CPU from (see leave). */
struct walked {
	__u64 place;
	__s32 kstack;
	__s32 ustack;
	__u32 reused;
	__u32 pad;
};

#define PLACES 4
/* Threads followed at once, at most (the rest are counted as lost waits). */
#define THREADS 32768

/* Per thread: since when it is off the CPU (0: it is on), with which stacks, in
 * which state and system call; and the last few places it left the CPU from (its user
 * registers, state and system call) with the stacks walked there, reused while it leaves from
 * one of them. A thread typically alternates between two or three (preempted as it wakes its
 * peer, then blocked in its read). */
struct start {
	__u64 ts;
	__u32 tgid;
	__u32 pad0;
	__s32 kstack;
	__s32 ustack;
	__u32 state;
	__s32 syscall;
	__u64 arg;
	__u32 next_place;
	__u32 pad;
	struct walked places[PLACES];
};

struct wait_key {
	__u32 tgid;
	__u32 pid;
	__s32 kstack;
	__s32 ustack;
	__u32 state;
	__s32 syscall;
	__u64 arg;
};

/* Time off the CPU and intervals, and the names when the key was first seen. */
struct wait_val {
	__u64 ns;
	__u64 count;
	char comm[16];
	char process[16];
};

/* Waits not counted because the table was full; stacks not kept (table full or collision). */
struct lost {
	__u64 waits;
	__u64 stacks;
};

/* By thread id; preallocated, so claiming an entry in sched_switch never waits on or fails
 * for memory (task storage, allocated on first use, sometimes failed there). An exiting
 * thread's entry is removed at its last switches. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, THREADS);
	__type(key, __u32);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct wait_key);
	__type(value, struct wait_val);
} waits SEC(".maps");

#define STACK_DEPTH 64

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lost);
} lost SEC(".maps");

static __always_inline void count_lost(int waits)
{
	__u32 zero = 0;
	struct lost *l = bpf_map_lookup_elem(&lost, &zero);
	if (!l)
		return;
	if (waits)
		__sync_fetch_and_add(&l->waits, 1);
	else
		__sync_fetch_and_add(&l->stacks, 1);
}

static __always_inline int wanted(struct task_struct *prev, unsigned int state)
{
	if (prev->pid == 0 || (prev->flags & (PF_KTHREAD | PF_EXITING)) || (state & TASK_DEAD))
		return 0;
	__u32 tgid = prev->tgid;
	if (tgid == own_tgid)
		return 0;
	if (target_tgid && tgid != target_tgid)
		return 0;
	if (cgroup_lo || cgroup_hi) {
		/* prev is still the current task here. */
		__u64 want = ((__u64)cgroup_hi << 32) | cgroup_lo;
		if (bpf_get_current_ancestor_cgroup_id(cgroup_level) != want)
			return 0;
	}
	return 1;
}

/* Whether system call `nr` waits on the descriptor in its first argument. */
static __always_inline int fd_first(long nr)
{
	switch (nr) {
	case 0:   /* read */
	case 1:   /* write */
	case 17:  /* pread64 */
	case 18:  /* pwrite64 */
	case 19:  /* readv */
	case 20:  /* writev */
	case 42:  /* connect */
	case 43:  /* accept */
	case 44:  /* sendto */
	case 45:  /* recvfrom */
	case 46:  /* sendmsg */
	case 47:  /* recvmsg */
	case 74:  /* fsync */
	case 75:  /* fdatasync */
	case 232: /* epoll_wait */
	case 277: /* sync_file_range */
	case 281: /* epoll_pwait */
	case 288: /* accept4 */
	case 295: /* preadv */
	case 296: /* pwritev */
	case 299: /* recvmmsg */
	case 307: /* sendmmsg */
	case 441: /* epoll_pwait2 */
		return 1;
	}
	return 0;
}

static __always_inline void leave(void *ctx, struct task_struct *prev, unsigned int state,
				  __u64 now)
{
	__u32 pid = prev->pid;
	struct start *s = bpf_map_lookup_elem(&starts, &pid);
	if (!s) {
		struct start fresh = {};
		bpf_map_update_elem(&starts, &pid, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&starts, &pid);
		if (!s) {
			count_lost(1);
			return;
		}
	}
	s->tgid = prev->tgid;
	long nr = -1;
	__u64 arg = NO_ARG, place = state & STATE_BITS;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	if (regs) {
		nr = regs->orig_ax;
		/* A negative orig_ax is an interrupt or exception entry, not a system call. */
		if (nr < 0 || nr >= 1024) {
			nr = -1;
		} else if (fd_first(nr)) {
			arg = (__u32)regs->di;
		} else if (nr == 7 || nr == 271) {
			/* poll, ppoll: the first pollfd's descriptor (prev's memory is current). */
			int fd = -1;
			if (bpf_probe_read_user(&fd, sizeof(fd), (void *)regs->di) == 0 && fd >= 0)
				arg = (__u32)fd;
		}
		/* Where it left from: the same user registers, call and state give the same
		 * stacks, which need not be walked again. */
		place ^= (regs->ip * 0x9E3779B97F4A7C15ULL) ^ (regs->sp * 0xC2B2AE3D27D4EB4FULL) ^
			 (regs->bp * 0x165667B19E3779F9ULL) ^ ((__u64)(nr + 1) << 52);
	}
	s->state = state & STATE_BITS;
	s->syscall = nr;
	s->arg = arg;
	s->ts = now;
	/* A preempted task (still runnable) waits for a CPU wherever it was: its stacks say
	 * nothing about why, and a busy program is preempted at a new place each time, where
	 * they would be walked every time. */
	if (s->state == 0 || no_stacks) {
		s->kstack = -1;
		s->ustack = -1;
		return;
	}
	/* Walking the stacks is most of the cost: done at a new place, and every REWALK-th time
	 * at a known one, in case the kernel path under it changed. */
	struct walked *w = 0;
	for (int i = 0; i < PLACES; i++) {
		if (s->places[i].place == place && s->places[i].kstack >= 0) {
			w = &s->places[i];
			break;
		}
	}
	if (!w || w->reused >= REWALK) {
		if (!w) {
			__u32 i = s->next_place++ & (PLACES - 1);
			w = &s->places[i];
		}
		w->kstack = bpf_get_stackid(ctx, &stacks, 0);
		w->ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		if (w->kstack < 0 && w->kstack != -14 /* EFAULT: no stack */)
			count_lost(0);
		w->place = place;
		w->reused = 0;
	} else {
		w->reused++;
	}
	s->kstack = w->kstack;
	s->ustack = w->ustack;
}

static __always_inline void arrive(struct task_struct *next, __u64 now)
{
	__u32 pid = next->pid;
	struct start *s = bpf_map_lookup_elem(&starts, &pid);
	if (!s || !s->ts)
		return;
	__u64 delta = now - s->ts;
	s->ts = 0;
	struct wait_key key = {
		.tgid = next->tgid,
		.pid = next->pid,
		.kstack = s->kstack,
		.ustack = s->ustack,
		.state = s->state,
		.syscall = s->syscall,
		.arg = s->arg,
	};
	struct wait_val *v = bpf_map_lookup_elem(&waits, &key);
	if (!v) {
		struct wait_val fresh = {};
		bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), next->comm);
		struct task_struct *leader = next->group_leader;
		if (leader)
			bpf_probe_read_kernel_str(fresh.process, sizeof(fresh.process), leader->comm);
		if (bpf_map_update_elem(&waits, &key, &fresh, BPF_NOEXIST) != 0 &&
		    bpf_map_lookup_elem(&waits, &key) == 0) {
			count_lost(1);
			return;
		}
		v = bpf_map_lookup_elem(&waits, &key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->ns, delta);
	__sync_fetch_and_add(&v->count, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	if (wanted(prev, prev_state)) {
		leave(ctx, prev, prev_state, now);
	} else if (prev->flags & PF_EXITING) {
		__u32 pid = prev->pid;
		bpf_map_delete_elem(&starts, &pid);
	}
	if (next->pid != 0)
		arrive(next, now);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
