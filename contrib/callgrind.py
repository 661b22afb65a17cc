"""One reader of callgrind's output format, for contrib/callgrind-calls.py and
contrib/callgrind-own.py (the perf gate's and the own-cost breakdown's numbers).

`records(path)` yields, in file order:
    ("cost", ob, fn, ir)                   a cost line of fn's own code (object ob)
    ("call", ob, fn, cob, cfn, calls, ir)  a call from fn into cfn (callee object cob, which
                                           is ob when the call stays in one object), with the
                                           call's inclusive instruction count
Names come back decompressed (`fn=(id) name` once, `(id)` after).
"""
import re

NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


def records(path):
    names = {"ob": {}, "fn": {}}
    ob = fn = cob = cfn = None
    pending = None  # calls count of the call line just read; its cost line follows

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
            if line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 else 0
                if pending is not None:
                    yield ("call", ob, fn, cob or ob, cfn, pending, ir)
                    pending = None
                    cob = cfn = None
                else:
                    yield ("cost", ob, fn, ir)
                continue
            if pending is not None:
                # A call line without its cost line: drop it, as callgrind_annotate does.
                pending = None
                cob = cfn = None
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
