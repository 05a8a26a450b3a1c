// SPDX-License-Identifier: GPL-2.0
// Programs that do nothing, on the tracepoints tacho's block tracer uses: what calling any
// program there costs (benches/bpf_floor.py).
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/block_io_start")
int BPF_PROG(io_start, void *rq)
{
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete, void *rq, int error, unsigned int nr_bytes)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
