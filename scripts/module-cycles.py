#!/usr/bin/env python3
"""Import circles between the top-level modules of a crate.

usage: scripts/module-cycles.py CRATE_SRC_DIR [--fail]

Reads every .rs file under the crate's src/, maps it to its top-level module
(src/conn/mod.rs and src/conn/x.rs are `conn`; lib.rs and main.rs are the root),
and records an edge A -> B whenever code (not a comment) of A names `crate::B`
(in a `use` or a path). Prints each strongly connected component of two or more modules, one
line each. With --fail, exits 1 when there is any (scripts/test.sh keeps `web`
free of them).
"""
import os
import re
import sys


def top_module(src, path):
    rel = os.path.relpath(path, src)
    parts = rel.split(os.sep)
    if parts[0] in ("lib.rs", "main.rs"):
        return None
    return parts[0][:-3] if parts[0].endswith(".rs") else parts[0]


def edges(src):
    graph = {}
    for root, _dirs, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            module = top_module(src, path)
            if module is None:
                continue
            text = open(path, encoding="utf-8").read()
            # Code only: a doc link is no dependency.
            text = "\n".join(
                line for line in text.splitlines() if not line.lstrip().startswith("//")
            )
            # `use crate::{a, b::c}` and `crate::a::` paths.
            names = set(re.findall(r"crate::(\w+)", text))
            for group in re.findall(r"crate::\{([^}]*)\}", text, re.S):
                names.update(re.findall(r"(?:^|,)\s*(\w+)", group))
            graph.setdefault(module, set()).update(n for n in names if n != module)
    modules = set(graph)
    return {m: {n for n in targets if n in modules} for m, targets in graph.items()}


def components(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--fail"]
    if len(args) != 1:
        sys.exit(__doc__)
    found = components(edges(args[0]))
    for comp in found:
        print(f"{len(comp)} modules: {' '.join(comp)}")
    if not found:
        print("no import circle")
    sys.exit(1 if found and "--fail" in sys.argv else 0)


if __name__ == "__main__":
    main()
