#!/usr/bin/env python3
"""Where a process's resident memory is, from a copy of its /proc/PID/smaps: the totals (anonymous,
file-backed) and the largest mappings by resident size, so that a peak RSS can be matched to the
buffers the memory estimate counts (each large buffer is a mapping of its own size).

usage: bench/smaps_top.py SMAPS [N]"""
import re
import sys


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    maps, cur = [], None
    for line in open(path):
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$', line)
        if m:
            cur = {'size': int(m.group(2), 16) - int(m.group(1), 16), 'name': m.group(3) or '[anon]', 'rss': 0, 'anon': 0}
            maps.append(cur)
        elif line.startswith('Rss:'):
            cur['rss'] = int(line.split()[1]) << 10
        elif line.startswith('Anonymous:'):
            cur['anon'] = int(line.split()[1]) << 10
    gib = lambda b: b / 2**30
    rss, anon = sum(m['rss'] for m in maps), sum(m['anon'] for m in maps)
    print(f"resident {gib(rss):.2f} GiB: anonymous {gib(anon):.2f} GiB, file-backed {gib(rss - anon):.2f} GiB, "
          f"{len(maps)} mappings")
    print()
    print("| resident MiB | anonymous MiB | mapping MiB | mapping |")
    print("|---|---|---|---|")
    for m in sorted(maps, key=lambda m: -m['rss'])[:n]:
        print(f"| {m['rss'] / 2**20:.1f} | {m['anon'] / 2**20:.1f} | {m['size'] / 2**20:.1f} | {m['name']} |")
    small = [m for m in maps if m['size'] < 64 << 20]
    print()
    print(f"mappings under 64 MiB: {len(small)}, resident {sum(m['rss'] for m in small) / 2**20:.1f} MiB")


if __name__ == '__main__':
    main()
