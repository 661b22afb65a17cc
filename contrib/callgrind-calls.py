#!/usr/bin/env python3
"""Calls into one function in a callgrind profile, with their inclusive instruction counts.

    contrib/callgrind-calls.py FILE FUNCTION

Prints one line per (callee object, caller) pair of the calls into FUNCTION:
    CALLS INCLUSIVE_IR CALLEE_OBJECT CALLER
(contrib/bench-select.sh --callgrind: `select_p_job_test` is a symbol of both
select_gputopo.so and select_cons_tres.so, so the object tells them apart). Reads the
callgrind format's compressed names (`fn=(id) name` once, `(id)` after).
"""
import re
import sys
from collections import defaultdict

NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


def main():
    path, want = sys.argv[1], sys.argv[2]
    names = {"ob": {}, "fn": {}}
    ob = fn = cob = cfn = None
    pending = None  # calls count of the call line just read; its cost line follows
    edges = defaultdict(lambda: [0, 0])

    def name(kind, text):
        m = NAME.match(text)
        if not m:
            return text
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[kind][key] = m.group(2)
        return names[kind].get(key, text)

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if pending is not None:
                if line and (line[0].isdigit() or line[0] in "+-*"):
                    parts = line.split()
                    ir = int(parts[1]) if len(parts) > 1 else 0
                    if cfn == want:
                        e = edges[(cob or ob, fn)]
                        e[0] += pending
                        e[1] += ir
                pending = None
                cob = cfn = None
                continue
            key, _, val = line.partition("=")
            if key == "ob":
                ob = name("ob", val)
            elif key == "fn":
                fn = name("fn", val)
                cob = cfn = None
            elif key == "cob":
                cob = name("ob", val)
            elif key == "cfn":
                cfn = name("fn", val)
            elif key == "calls":
                pending = int(val.split()[0])
    for (callee_ob, caller), (calls, ir) in sorted(edges.items()):
        print(calls, ir, callee_ob, caller)


if __name__ == "__main__":
    main()
