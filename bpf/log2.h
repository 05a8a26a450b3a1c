// SPDX-License-Identifier: GPL-2.0
// floor(log2) and the log2 slot of a value, shared by tacho's BPF programs' histograms.
#ifndef TACHO_LOG2_H
#define TACHO_LOG2_H

#define SLOTS 32

static __always_inline __u32 floor_log2(__u64 v)
{
	/* Branch-free floor(log2(v)); 0 for 0 and 1. */
	__u32 r = 0, shift;
	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	return r | (__u32)(v >> 1);
}

/* The log2 slot of v, capped at the last slot. */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = floor_log2(v);
	return slot < SLOTS ? slot : SLOTS - 1;
}

#endif
