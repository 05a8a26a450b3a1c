// SPDX-License-Identifier: GPL-2.0
// floor(log2) and the log2 slot of a value, shared by tacho's BPF programs' histograms.
#ifndef TACHO_LOG2_H
#define TACHO_LOG2_H

#define SLOTS 32

/* 1 when v > limit (limit below 2^63), else 0, without a jump: limit - v wraps to a number
 * with the top bit set exactly when v is above limit (and below 2^63; from there v's own top
 * bit says so). A comparison would be a jump, and the verifier would walk every program path
 * after it twice: floor_log2's five of them made 32 walks of the code after each histogram,
 * most of the time a short `tacho top` spent loading its programs. */
static __always_inline __u64 above(__u64 v, __u64 limit)
{
	return ((limit - v) | v) >> 63;
}

static __always_inline __u32 floor_log2(__u64 v)
{
	/* Branch-free floor(log2(v)); 0 for 0 and 1. */
	__u32 r = 0, shift;
	shift = above(v, 0xFFFFFFFF) << 5; v >>= shift; r |= shift;
	shift = above(v, 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = above(v, 0xFF) << 3; v >>= shift; r |= shift;
	shift = above(v, 0xF) << 2; v >>= shift; r |= shift;
	shift = above(v, 0x3) << 1; v >>= shift; r |= shift;
	return r | (__u32)(v >> 1);
}

/* The log2 slot of v, capped at the last slot. */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = floor_log2(v);
	return slot < SLOTS ? slot : SLOTS - 1;
}

#endif
