#!/usr/bin/env python3
"""Import knots between top-level modules, per crate (issue 45).

For every crate under crates/, each .rs file belongs to the top-level module it lives in
(src/foo.rs and src/foo/** are `foo`; lib.rs and main.rs are the crate root and not counted).
A module depends on another when its code names `crate::other` (in a `use` or a path,
`use crate::{a, b}` groups included). Prints every cycle (strongly connected component of more
than one module) and every pair of modules that import each other, then checks the limits:

    scripts/check-layers.py [--max-cycle 3] [--max-pairs 3] [--graph]

Exit status 1 when a crate has a cycle of more than --max-cycle modules or the workspace has
more than --max-pairs mutual pairs. Crates cannot form cycles between themselves (cargo
refuses), so the crate graph is the compiler-enforced layering and this checks what is left
inside each crate.
"""
import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
USE_GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def strip_comments(text):
    out = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith("//"):
            continue
        out.append(line)
    return "\n".join(out)


def module_of(src, path):
    rel = os.path.relpath(path, src)
    parts = rel.split(os.sep)
    if len(parts) == 1:
        stem = parts[0][:-3]
        return None if stem in ("lib", "main") else stem
    return parts[0]


def crate_graph(src):
    mods = set()
    edges = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dirpath, f)
            m = module_of(src, p)
            if m is None:
                continue
            mods.add(m)
            text = strip_comments(open(p, encoding="utf-8").read())
            deps = set(PATH.findall(text))
            for group in USE_GROUP.findall(text):
                for item in group.split(","):
                    name = item.strip().split("::")[0].strip()
                    if re.fullmatch(r"[a-z_][a-z0-9_]*", name or ""):
                        deps.add(name)
            edges.setdefault(m, set()).update(deps)
    for m in list(edges):
        edges[m] = {d for d in edges[m] if d in mods and d != m}
    for m in mods:
        edges.setdefault(m, set())
    return edges


def sccs(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-cycle", type=int, default=3)
    ap.add_argument("--max-pairs", type=int, default=3)
    ap.add_argument("--graph", action="store_true", help="print every module's imports")
    a = ap.parse_args()
    crates_dir = os.path.join(ROOT, "crates")
    worst, pairs_total, failed = 0, 0, []
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        edges = crate_graph(src)
        comps = [c for c in sccs(edges) if len(c) > 1]
        pairs = sorted(
            (x, y) for x in edges for y in edges[x] if x < y and x in edges[y]
        )
        pairs_total += len(pairs)
        biggest = max((len(c) for c in comps), default=1)
        worst = max(worst, biggest)
        print(f"{crate}: {len(edges)} top-level modules, largest cycle {biggest}, "
              f"{len(pairs)} mutual pairs")
        for c in comps:
            print(f"  cycle ({len(c)}): {' '.join(c)}")
        for x, y in pairs:
            print(f"  mutual: {x} <-> {y}")
        if a.graph:
            for m in sorted(edges):
                print(f"    {m} -> {' '.join(sorted(edges[m]))}")
        if biggest > a.max_cycle:
            failed.append(f"{crate} has a cycle of {biggest} modules (limit {a.max_cycle})")
    if pairs_total > a.max_pairs:
        failed.append(f"{pairs_total} mutual pairs in the workspace (limit {a.max_pairs})")
    print(f"workspace: largest cycle {worst}, {pairs_total} mutual pairs")
    for f in failed:
        print(f"check-layers: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
