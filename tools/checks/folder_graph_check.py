#!/usr/bin/env python3
"""The folder include graph, checked (docs/architecture.md "Folders").

Reads every `#include "..."` of the product's sources (agent/, clock/,
common/, options/, trace/, collector/, include/, tools/, bench/, bpf/) that
names a file of the tree, and folds it into a graph of folders: the second
level under agent/, trace/, collector/ and tools/ (agent/pair,
trace/align, ...), the first level elsewhere (clock, common, ...).

Fails (exit 1, each offending include named) when
  - the graph has a cycle: a folder that, through its includes, includes
    itself; or
  - a library includes a folder it must know nothing of (RULES below, the
    architecture's layering: the shared libraries include nothing of the
    programs, the trace library nothing of the agent or the collector, the
    collector nothing of the agent, the agent nothing of the trace tools);
    or
  - a folder of agent/ includes another of agent/ that AGENT_ALLOWED does
    not list for it (the agent's data flow, docs/architecture.md: the wire
    format and the maths include nothing of the agent but the maths below
    them; only config/, export/ and runtime/ see most of it).

  folder_graph_check.py [--root DIR] [--print]   (--print: the edges too)
"""
import argparse
import collections
import os
import re
import sys

SOURCE_TOPS = ["agent", "clock", "common", "options", "trace", "collector", "include", "tools", "bench", "bpf"]
SPLIT_TOPS = {"agent", "trace", "collector", "tools"}  # folders of folders
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')

# folder prefix -> prefixes it must not include
RULES = {
    "clock": ["agent", "trace", "collector", "tools", "options", "common"],
    "common": ["agent", "trace", "collector", "tools", "clock", "options"],
    "options": ["agent", "trace", "collector", "tools"],
    "include": ["agent", "trace", "collector", "tools", "clock", "common", "options"],
    "trace": ["agent", "collector", "tools"],
    "collector": ["agent", "tools"],
    "agent": ["trace", "collector", "tools"],
}

# agent/<folder> -> the other agent/ folders it may include (docs/
# architecture.md's table). A folder of agent/ not named here may include
# any of them.
AGENT_ALLOWED = {
    "agent/wire": set(),
    "agent/pair": set(),
    "agent/estimate": {"agent/pair"},
    "agent/solve": set(),
    "agent/cluster": {"agent/estimate", "agent/solve"},
    "agent/capture": {"agent/wire"},
    "agent/probe": {"agent/capture", "agent/pair", "agent/wire"},
    "agent/coord": {"agent/cluster", "agent/wire"},
    "agent/config": {"agent/cluster", "agent/coord", "agent/estimate", "agent/probe", "agent/wire"},
    "agent/export": {"agent/capture", "agent/cluster", "agent/coord", "agent/estimate", "agent/pair",
                     "agent/probe", "agent/solve"},
}


def folder_of(path):
    parts = path.split("/")
    if parts[0] in SPLIT_TOPS and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def read_graph(root):
    edges = collections.defaultdict(list)  # folder -> [(folder, file, include)]
    for top in SOURCE_TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".c")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                with open(os.path.join(root, path), errors="replace") as f:
                    for line in f:
                        m = INCLUDE.match(line)
                        if not m or not os.path.isfile(os.path.join(root, m.group(1))):
                            continue
                        a, b = folder_of(path), folder_of(m.group(1))
                        if a != b:
                            edges[a].append((b, path, m.group(1)))
    return edges


def cycles(edges):
    """Strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted({b for b, _, _ in edges.get(v, [])}):
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

    nodes = sorted(set(edges) | {b for v in edges.values() for b, _, _ in v})
    sys.setrecursionlimit(max(1000, 10 * len(nodes)))
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def forbidden(edges):
    bad = []
    for a, targets in sorted(edges.items()):
        top = a.split("/")[0]
        for b, path, inc in targets:
            if any(b == p or b.startswith(p + "/") for p in RULES.get(top, [])):
                bad.append((a, b, path, inc))
            elif a in AGENT_ALLOWED and b.startswith("agent/") and b not in AGENT_ALLOWED[a]:
                bad.append((a, b, path, inc))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--print", action="store_true", help="print every folder edge")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    edges = read_graph(root)
    if args.print:
        for a in sorted(edges):
            print(f"{a} -> {', '.join(sorted({b for b, _, _ in edges[a]}))}")
    failed = False
    for comp in cycles(edges):
        failed = True
        print(f"cycle: {' <-> '.join(comp)}")
        for a in comp:
            for b, path, inc in sorted(set(edges[a])):
                if b in comp:
                    print(f"  {a} -> {b}: {path} includes {inc}")
    for a, b, path, inc in forbidden(edges):
        failed = True
        print(f"forbidden: {a} must know nothing of {b}: {path} includes {inc}")
    n_edges = sum(len({b for b, _, _ in v}) for v in edges.values())
    print(f"folder graph: {len(set(edges) | {b for v in edges.values() for b, _, _ in v})} folders, "
          f"{n_edges} edges: {'FAILED' if failed else 'no cycle, no forbidden include'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
