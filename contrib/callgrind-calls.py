#!/usr/bin/env python3
"""Calls into one function in a callgrind profile, with their inclusive instruction counts.

    contrib/callgrind-calls.py FILE FUNCTION

Prints one line per (callee object, caller) pair of the calls into FUNCTION:
    CALLS INCLUSIVE_IR CALLEE_OBJECT CALLER
(contrib/bench-select.sh --callgrind: `select_p_job_test` is a symbol of both
select_gputopo.so and select_cons_tres.so, so the object tells them apart). The format is
read by contrib/callgrind.py.
"""
import os
import sys
from collections import defaultdict

sys.dont_write_bytecode = True  # leave no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind import records  # noqa: E402


def main():
    path, want = sys.argv[1], sys.argv[2]
    edges = defaultdict(lambda: [0, 0])
    for r in records(path):
        if r[0] == "call" and r[4] == want:
            _, _, fn, cob, _, calls, ir = r
            e = edges[(cob, fn)]
            e[0] += calls
            e[1] += ir
    for (callee_ob, caller), (calls, ir) in sorted(edges.items()):
        print(calls, ir, callee_ob, caller)


if __name__ == "__main__":
    main()
