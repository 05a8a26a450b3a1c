#!/usr/bin/env bash
# Rebuilds every bpf/*.bpf.c into bpf/*.bpf.o (CO-RE, BTF-typed tracepoints). Deterministic:
# pinned flags, relative paths and -fdebug-prefix-map, so two builds give identical bytes and CI
# can compare them with the committed objects. Needs clang 14 and libbpf-dev (headers only).
set -euo pipefail
cd "$(dirname "$0")"
CLANG=${CLANG:-clang-14}
for src in *.bpf.c; do
  "$CLANG" -target bpf -mcpu=v3 -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
    -fdebug-prefix-map="$PWD"=. -fno-ident -c "$src" -o "${src%.c}.o"
  # Drop the DWARF sections (BTF and .BTF.ext stay: the loader needs them for CO-RE).
  llvm-strip-14 -g "${src%.c}.o"
done
