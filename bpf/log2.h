// SPDX-License-Identifier: GPL-2.0
// The log2 slot of a value, shared by tacho's BPF programs' latency histograms.
#ifndef TACHO_LOG2_H
#define TACHO_LOG2_H

#define SLOTS 32

static __always_inline __u32 log2_slot(__u64 v)
{
	/* Branch-free floor(log2(v)), capped at the last slot; 0 and 1 go to slot 0. */
	__u32 slot = 0, shift;
	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; slot |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; slot |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; slot |= shift;
	shift = (v > 0xF) << 2; v >>= shift; slot |= shift;
	shift = (v > 0x3) << 1; v >>= shift; slot |= shift;
	slot |= (v >> 1);
	return slot < SLOTS ? slot : SLOTS - 1;
}

#endif
