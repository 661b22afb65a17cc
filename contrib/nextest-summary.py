#!/usr/bin/env python3
"""Counts one cargo-nextest run of the e2e suite: passed, skipped and failed tests.

    contrib/nextest-summary.py JUNIT [LEFT_OUT]

JUNIT is the run's report (target/nextest/PROFILE/junit.xml; the e2e and stock profiles of
.config/nextest.toml write it with every test's output). A test that returned early because it
does not apply here (tests/skip.rs: the release lacks the feature, a gputopo-only test on stock
cons_tres) printed MARKER; nextest saw it pass, this counts it as skipped. LEFT_OUT (optional)
lists the e2e tests the run's profile leaves out, one a line as `cargo nextest list
--message-format oneline` prints them (contrib/test-all.sh: the stock profile's gputopo-only
tests); they count as skipped too.

Prints each skipped test with its reason, then one line: "N passed, M skipped, F failed".
Exit status 1 when the report is missing or unreadable (the run did not get that far).
"""
import sys
import xml.etree.ElementTree as ET

MARKER = "gputopo-test: skipped:"  # tests/skip.rs


def skip_reason(case):
    """The reason a test printed with MARKER, or None when it ran."""
    for tag in ("system-err", "system-out"):
        el = case.find(tag)
        for line in (el.text or "").splitlines() if el is not None else []:
            if line.startswith(MARKER):
                return line[len(MARKER):].strip()
    return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"no nextest report ({e})")
        return 1
    passed, failed, skipped = 0, 0, []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif (why := skip_reason(case)) is not None:
            skipped.append((name, why))
        else:
            passed += 1
    if len(sys.argv) == 3:
        with open(sys.argv[2]) as f:
            left_out = [line.split()[-1] for line in f if line.strip()]
        skipped += [(n, "left out by the run's profile") for n in left_out]
    for name, why in skipped:
        print(f"skipped: {name}: {why}")
    print(f"{passed} passed, {len(skipped)} skipped, {failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
