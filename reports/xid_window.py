#!/usr/bin/env python3
"""The audit cases that were running when the driver logged each Xid (glue).

Usage: reports/xid_window.py DMESG_TXT IN_FLIGHT_HISTORY_TXT [SECONDS_BEFORE]

DMESG_TXT is `dmesg --follow --time-format iso` of the call (h200_lib.sh's
samplers), IN_FLIGHT_HISTORY_TXT an audit's OUT/in_flight_history.txt (UTC
to the microsecond).  For each Xid line: the cases running at that moment,
and those that ended in the SECONDS_BEFORE (default 2) before it, each with
the `--cells` that runs it alone.
"""
import datetime
import re
import sys


def dmesg_time(stamp):
    # 2026-12-02T07:47:12,123456+00:00
    return datetime.datetime.fromisoformat(stamp.replace(",", ".")).astimezone(datetime.timezone.utc)


def history_time(stamp):
    # 2026-12-02T07:47:12.123456Z
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2])
    before = datetime.timedelta(seconds=float(sys.argv[3]) if len(sys.argv) > 3 else 2.0)
    xids = []
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            m = re.match(r"(\S+)\s+(.*)", line)
            if m and "xid" in m.group(2).lower():
                try:
                    xids.append((dmesg_time(m.group(1)), m.group(2).strip()))
                except ValueError:
                    continue
    events = []  # (time, "start"|"end", line)
    with open(sys.argv[2]) as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) == 3:
                events.append((history_time(parts[0]), parts[1], parts[2].strip()))
    if not xids:
        print("no Xid line in", sys.argv[1])
    for when, text in xids:
        running, ended = {}, {}
        for t, kind, case in events:
            if t > when:
                break
            if kind == "start":
                running[case] = t
            else:
                running.pop(case, None)
                if when - t <= before:
                    ended[case] = t
        print(f"{when.isoformat()}  {text}")
        for case, t in sorted(running.items(), key=lambda x: x[1]):
            print(f"  running since {(when - t).total_seconds():8.3f} s: {case}")
        for case, t in sorted(ended.items(), key=lambda x: x[1]):
            print(f"  ended {(when - t).total_seconds():8.3f} s before: {case}")


if __name__ == "__main__":
    main()
