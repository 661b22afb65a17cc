#!/usr/bin/env python3
"""Where gputopo's own instructions go in a callgrind profile of contrib/bench-select.sh.

    contrib/callgrind-own.py FILE [N]     # FILE: results/gputopo.cg.PID of a --callgrind run

gputopo's own cost is what its object (select_gputopo_cons_tres.so) executes itself plus
what it calls in other objects (libslurmfull, libc), cons_tres's select_p_job_test
excluded. Prints the top N (default 15) of each, per candidate node read: the count of
gputopo's calls into list_find_first_ro (one per candidate node of a steered call, one per
node of a GPU re-pick). The format is read by contrib/callgrind.py. A callback from Slurm into gputopo (the list predicate) is counted twice: in
its own line and in the inclusive cost of the Slurm call that runs it.
"""
import os
import sys
from collections import defaultdict

sys.dont_write_bytecode = True  # leave no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind import records  # noqa: E402

OURS = "select_gputopo"


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    own = defaultdict(int)
    out = defaultdict(lambda: [0, 0])
    for r in records(path):
        ob = r[1] or ""
        if OURS not in ob:
            continue
        if r[0] == "cost":
            own[r[2]] += r[3]
            continue
        _, _, _, callee, cfn, calls, ir = r
        callee = callee or ""
        stock = "cons_tres" in callee and cfn == "select_p_job_test"
        if OURS not in callee and not stock:
            e = out[(callee.rsplit("/", 1)[-1], cfn)]
            e[0] += calls
            e[1] += ir
    reads = sum(n for (_, f), (n, _) in out.items() if f == "list_find_first_ro") or 1
    total = sum(own.values()) + sum(ir for _, ir in out.values())
    print(f"gputopo own: {total:,} instructions, {reads:,} candidate reads, {total / reads:,.0f} per read")
    print("its own code (self), per read:")
    for f, ir in sorted(own.items(), key=lambda x: -x[1])[:top]:
        print(f"  {ir / reads:8.1f}  {f}")
    print("its calls into Slurm and libc (inclusive), per read:")
    for (o, f), (n, ir) in sorted(out.items(), key=lambda x: -x[1][1])[:top]:
        print(f"  {ir / reads:8.1f}  {f} [{o}] ({n:,} calls)")


if __name__ == "__main__":
    main()
