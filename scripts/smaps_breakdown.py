#!/usr/bin/env python3
"""A process's resident memory by kind of mapping, from /proc/<pid>/smaps, in MiB.

    python3 scripts/smaps_breakdown.py PID

The kinds are told apart by shape, not by name (anonymous mappings have none): a thread's
stack is a read-write mapping right after a one-page guard (8 MiB: a `shale` connection
thread's); glibc malloc's thread arenas are 64 MiB-aligned reservations; `[heap]` is glibc's
main arena; named files are the binary and its libraries; the rest of the anonymous memory
is jemalloc's extents (and anything else mmap'd). Used for docs/operations.md, Memory.
"""
import re
import sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
pid = sys.argv[1]
maps = []
cur = None
for line in open(f"/proc/{pid}/smaps"):
    m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
    if m:
        cur = dict(start=int(m[1], 16), end=int(m[2], 16), perms=m[3], path=m[4].strip(), rss=0)
        maps.append(cur)
    elif line.startswith("Rss:"):
        cur["rss"] = int(line.split()[1])
cats = {}
def add(k, v): cats[k] = cats.get(k, 0) + v
for i, m in enumerate(maps):
    size = (m["end"] - m["start"]) // 1024
    nxt = maps[i + 1] if i + 1 < len(maps) else None
    prv = maps[i - 1] if i > 0 else None
    if m["path"] and not m["path"].startswith("["):
        add("file-backed (binary, libraries)", m["rss"])
    elif m["path"] == "[heap]":
        add("glibc malloc main arena ([heap])", m["rss"])
    elif m["path"] == "[stack]":
        add("main thread stack", m["rss"])
    elif m["path"]:
        add(m["path"], m["rss"])
    elif m["perms"].startswith("rw") and prv is not None and prv["perms"] == "---p" and prv["end"] == m["start"] and (prv["end"] - prv["start"]) == 4096 and size in (8192, 8196, 8188, 8200):
        add("8 MiB thread stacks (connections)", m["rss"])
    elif m["perms"].startswith("rw") and prv is not None and prv["perms"] == "---p" and prv["end"] == m["start"] and (prv["end"] - prv["start"]) == 4096 and size <= 8192:
        add("other thread stacks", m["rss"])
    elif m["perms"].startswith("rw") and nxt is not None and nxt["perms"] == "---p" and nxt["start"] == m["end"] and (m["start"] % (64 << 20)) == 0 and (nxt["end"] - m["start"]) == (64 << 20):
        add("glibc malloc thread arenas", m["rss"])
    elif m["perms"].startswith("rw") and (m["start"] % (64 << 20)) == 0 and size == 65536:
        add("glibc malloc thread arenas", m["rss"])
    elif m["perms"] == "---p":
        add("guard/reserved", m["rss"])
    else:
        add("other anonymous (jemalloc extents, ...)", m["rss"])
total = sum(cats.values())
for k, v in sorted(cats.items(), key=lambda kv: -kv[1]):
    print(f"{v/1024:9.1f} MiB  {k}")
print(f"{total/1024:9.1f} MiB  total Rss")
