#!/usr/bin/env python3
"""Fails when two source files of src/ import each other, directly or around a circle, or when
a file imports from a layer above its own (the table of docs/architecture.md, kept in LAYERS).

Reads `crate::…` and `super::…` paths (in `use` lines and inline), resolves each to the file
that defines the module it names, and looks for cycles in that file graph. Test code is left
out: files named tests.rs or under a tests/ folder, and everything after `#[cfg(test)]` in a
file (tacho keeps unit tests at the end). Run from the repository root:

    python3 .ci/module_cycles.py
"""

import os
import re
import sys

SRC = "src"
PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^}]*)\}")


def module_of(path):
    """src/a/b.rs and src/a/b/mod.rs are module a::b; src/lib.rs is the crate root."""
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] == "mod" or rel == ["lib"] or rel == ["main"]:
        rel = rel[:-1]
    return rel


def file_of(parts, files):
    """The file defining the longest prefix of module path `parts`."""
    for n in range(len(parts), 0, -1):
        key = tuple(parts[:n])
        if key in files:
            return files[key]
    return None


# The layers of docs/architecture.md, lowest first: a file may import its own layer and the
# ones below. Each entry: the layer's name as the table says it, and the module paths (folders
# or files under src/) it holds; the longest matching path decides.
LAYERS = [
    ("shared", ["units.rs", "stats.rs", "choice.rs", "parallel.rs", "text.rs", "mapping.rs",
                "warning.rs", "words.rs", "fit.rs", "abandon.rs", "features.rs", "sqlite.rs", "form.rs", "labels.rs"]),
    ("readers and tracers", ["kernel", "files", "safety", "net", "bpf", "config.rs"]),
    ("profiler, engines and samplers",
     ["profile", "io", "diagnose/sample", "cpubench", "membench", "stress", "timing", "tune",
      "load"]),
    ("models and plans", ["bench", "diagnose/model", "snapshot", "totals"]),
    ("findings", ["diagnose/findings", "check", "bench/honesty.rs", "bench/verdict.rs"]),
    ("sessions", ["diagnose/live.rs", "bench/session.rs"]),
    ("store and comparison", ["store", "history", "compare"]),
    ("reporters", ["report", "tui"]),
    ("experiments", ["experiment"]),
    ("command line", ["main.rs", "cli.rs", "cli", "cmd", "lib.rs", "diagnose/mod.rs"]),
]

def layer_of(path):
    """(rank, name) of the layer holding src/ file `path`."""
    rel = os.path.relpath(path, SRC)
    best = None
    for rank, (name, members) in enumerate(LAYERS):
        for m in members:
            if rel == m or rel.startswith(m + os.sep):
                if best is None or len(m) > best[2]:
                    best = (rank, name, len(m))
    if best is None:
        return None
    return best[0], best[1]


def upward_imports(graph):
    """Every import from a lower layer's file into a higher layer's, and unplaced files."""
    found, unplaced = [], []
    for src in sorted(graph):
        here = layer_of(src)
        if here is None:
            unplaced.append(src)
            continue
        for dest in sorted(graph[src]):
            there = layer_of(dest)
            if there is not None and there[0] > here[0]:
                found.append((src, dest, here[1], there[1]))
    return found, unplaced


def main():
    files = {}
    for root, _, names in os.walk(SRC):
        for name in names:
            path = os.path.join(root, name)
            if name.endswith(".rs") and name != "tests.rs" and "tests" not in root.split(os.sep):
                files[tuple(module_of(path))] = path
    graph = {path: set() for path in files.values()}
    for mod, path in files.items():
        text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
        # Comments name modules without importing them (doc links); strings rarely hold `//`.
        text = re.sub(r"//[^\n]*", "", text)
        # A file's own `super` is its parent module; mod.rs files are their folder's module.
        here = list(mod)
        refs = []
        for m in GROUP.finditer(text):
            for item in m.group(3).split(","):
                item = item.strip().split(" as ")[0]
                if item and item != "self":
                    refs.append((m.group(1), m.group(2) + "::" + item.split("::")[0]))
        refs += [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
        for base, tail in refs:
            parts = [p for p in tail.split("::") if p]
            if base == "crate":
                target = parts
            else:
                ups = 1
                while parts and parts[0] == "super":
                    ups += 1
                    parts = parts[1:]
                target = here[: len(here) - ups] + parts if ups <= len(here) else None
            if target is None:
                continue
            dest = file_of(target, files)
            # A module's own file declares and re-exports its children: not an import.
            if dest and dest != path and tuple(module_of(dest)[: len(mod)]) != mod:
                graph[path].add(dest)
    cycles = []
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    real = cycles
    for c in real:
        print("cycle: " + " -> ".join(c))
    upward, unplaced = upward_imports(graph)
    for path in unplaced:
        print(f"{path}: in no layer of docs/architecture.md (add it to LAYERS and the table)")
    for src, dest, low, high in upward:
        print(f"upward import: {src} ({low}) imports {dest} ({high})")
    print(
        f"{len(files)} files, {sum(len(v) for v in graph.values())} imports, {len(real)} cycles, "
        f"{len(upward)} upward imports"
    )
    return 1 if real or upward or unplaced else 0


if __name__ == "__main__":
    sys.exit(main())
