#!/usr/bin/env python3
"""Where gputopo's own instructions go in a callgrind profile of contrib/bench-select.sh.

    contrib/callgrind-own.py FILE [N]     # FILE: results/gputopo.cg.PID of a --callgrind run

gputopo's own cost is what its object (select_gputopo_cons_tres.so) executes itself plus
what it calls in other objects (libslurmfull, libc), cons_tres's select_p_job_test
excluded. Prints the top N (default 15) of each, per candidate node read: the count of
gputopo's calls into list_find_first_ro (one per candidate node of a steered call, one per
node of a GPU re-pick). Reads the callgrind format's compressed names (`fn=(id) name` once,
`(id)` after). A callback from Slurm into gputopo (the list predicate) is counted twice: in
its own line and in the inclusive cost of the Slurm call that runs it.
"""
import re
import sys
from collections import defaultdict

NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")
OURS = "select_gputopo"


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    names = {"ob": {}, "fn": {}}
    ob = fn = cob = cfn = None
    pending = None  # calls count of the call line just read; its cost line follows
    own = defaultdict(int)
    out = defaultdict(lambda: [0, 0])

    def name(kind, text):
        m = NAME.match(text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), text)

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line[0].isdigit() or line[0] in "+-*":
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 else 0
                ours = OURS in (ob or "")
                if pending is not None:
                    callee = cob or ob or ""
                    stock = "cons_tres" in callee and cfn == "select_p_job_test"
                    if ours and OURS not in callee and not stock:
                        e = out[(callee.rsplit("/", 1)[-1], cfn)]
                        e[0] += pending
                        e[1] += ir
                    pending = None
                    cob = cfn = None
                elif ours:
                    own[fn] += ir
                continue
            key, _, val = line.partition("=")
            if key == "ob":
                ob = name("ob", val)
            elif key == "cob":
                cob = name("ob", val)
            elif key == "fn":
                fn = name("fn", val)
                cob = cfn = None
            elif key == "cfn":
                cfn = name("fn", val)
            elif key == "calls":
                pending = int(val.split()[0])
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
