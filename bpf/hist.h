// SPDX-License-Identifier: GPL-2.0
// Log-linear latency buckets shared by tacho's BPF programs (mirrored in src/bpf/hist.rs).
//
// A latency is first converted to units of 1/1024 µs, so that every power-of-two octave from
// 1 µs up starts exactly on a power of two microseconds (a log2 µs histogram is a sum of whole
// octaves). Values below 16 units get a bucket each; above, each octave [2^o, 2^(o+1)) is split
// into 16 equal buckets, so a bucket is at most 1/16 of its lower bound wide and a percentile
// interpolated inside it is off by under 6.25% however the requests spread in it (8 buckets
// were tried: a 2.1 ms device read 6% high). The last octave (from 2^31 µs) also holds
// everything longer.
#ifndef TACHO_HIST_H
#define TACHO_HIST_H

#include "log2.h"

#define HIST_LAST_OCTAVE 41
#define HIST_BUCKETS ((HIST_LAST_OCTAVE - 2) * 16)

static __always_inline __u32 hist_bucket(__u64 ns)
{
	__u64 v = (ns << 7) / 125; /* ns * 1024 / 1000 */
	if (v < 16)
		return v;
	__u32 o = floor_log2(v);
	if (o > HIST_LAST_OCTAVE)
		return HIST_BUCKETS - 1;
	return (o - 3) * 16 + ((v >> (o - 4)) & 15);
}

/* The coarser buckets of a process's request times (mirrored in src/bpf/hist.rs): units of
 * 1024 ns (a shift), one bucket each below 4, then every octave [2^o, 2^(o+1)) split in 4
 * (a bucket at most a quarter of its lower bound wide); the last (from 30 s) also holds
 * everything longer than 34 s. */
#define PROC_HIST_LAST_OCTAVE 24
#define PROC_HIST_BUCKETS ((PROC_HIST_LAST_OCTAVE - 1) * 4 + 4)

static __always_inline __u32 proc_hist_bucket(__u64 ns)
{
	__u64 v = ns >> 10;
	if (v < 4)
		return v;
	__u32 o = floor_log2(v);
	if (o > PROC_HIST_LAST_OCTAVE)
		return PROC_HIST_BUCKETS - 1;
	return (o - 1) * 4 + ((v >> (o - 2)) & 3);
}

#endif
