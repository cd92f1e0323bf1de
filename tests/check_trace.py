#!/usr/bin/env python3
"""Checks a `dtrain train --trace` file against the Chrome trace event format's rules
that Perfetto and chrome://tracing rely on, and against what dtrain promises:

- it loads as JSON: an object with traceEvents (a list), displayTimeUnit, otherData;
- every event has a known phase (M metadata, X complete, C counter), integer pid and
  tid, and complete events a name, a ts >= 0 and a dur >= 0 (microseconds);
- every rank (pid) is named by a process_name record and every track it uses by a
  thread_name record;
- no two complete events overlap on one track (pid, tid): Perfetto drops one that
  overlaps another without nesting in it;
- every span with a step lies inside that step's span on its rank;
- each rank's clock offsets against the first worker are within the recorded error
  (all ranks of these tests share one machine's clock: the true offset is 0);
- at most the stated cap of events a rank, and steps_traced + steps_left_out equal
  the steps in the window.

usage: check_trace.py TRACE RANKS STEPS [MAX_BYTES]
(STEPS: the steps the run trained; MAX_BYTES: a bound on the file's size)."""
import json
import os
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    path, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    max_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else None
    size = os.path.getsize(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("not a JSON object with a traceEvents list")
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        fail("displayTimeUnit must be ms or ns")
    other = doc.get("otherData")
    if not isinstance(other, dict):
        fail("no otherData")
    named_pids, named_tracks = set(), set()
    spans = {}  # (pid, tid) -> [(ts, end, name, step)]
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        if ph not in ("M", "X", "C"):
            fail("unknown phase %r" % ph)
        if not isinstance(e.get("pid"), int):
            fail("an event without an integer pid: %r" % e)
        if ph == "M":
            if e["name"] == "process_name":
                named_pids.add(e["pid"])
            elif e["name"] == "thread_name":
                named_tracks.add((e["pid"], e["tid"]))
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            fail("an event without a ts >= 0: %r" % e)
        if ph == "C":
            continue
        if not isinstance(e.get("tid"), int) or not e.get("name"):
            fail("a complete event without tid or name: %r" % e)
        if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
            fail("a complete event without a dur >= 0: %r" % e)
        step = e.get("args", {}).get("step", -1)
        # whole nanoseconds, as written: no float sums to compare
        t0 = round(e["ts"] * 1000)
        spans.setdefault((e["pid"], e["tid"]), []).append(
            (t0, t0 + round(e["dur"] * 1000), e["name"], step))
    pids = sorted({p for p, _ in spans})
    if pids != list(range(ranks)):
        fail("ranks %s in the trace, %d expected" % (pids, ranks))
    for key in spans:
        if key[0] not in named_pids or key not in named_tracks:
            fail("track %s is not named" % (key,))
    for key, evs in spans.items():
        evs.sort()
        for a, b in zip(evs, evs[1:]):
            if b[0] < a[1]:
                fail("track %s: %s (%d..%d ns) overlaps %s (%d.. ns)" %
                     (key, a[2], a[0], a[1], b[2], b[0]))
    for pid in pids:
        step_span = {s: (t0, t1) for t0, t1, n, s in spans.get((pid, 1), []) if n == "step"}
        for (p, _), evs in spans.items():
            if p != pid:
                continue
            for t0, t1, name, s in evs:
                if s < 0 or name == "step":
                    continue
                if s not in step_span:
                    fail("rank %d: %s of step %d, which has no step span" % (pid, name, s))
                a, b = step_span[s]
                if t0 < a or t1 > b:
                    fail("rank %d: %s (%d..%d ns) outside step %d (%d..%d ns)" %
                         (pid, name, t0, t1, s, a, b))
    clocks = other.get("clocks", [])
    if len(clocks) != ranks:
        fail("%d clocks for %d ranks" % (len(clocks), ranks))
    worst = 0.0
    for c in clocks:
        for k in ("offset_start_us", "offset_end_us"):
            if abs(c[k]) > c["error_us"] + 0.001:
                fail("rank %d: %s %.3f us beyond its error %.3f us" %
                     (c["rank"], k, c[k], c["error_us"]))
        worst = max(worst, c["error_us"])
    cap = other["event_cap_per_rank"]
    for pid in pids:
        n = sum(len(v) for (p, _), v in spans.items() if p == pid)
        if n > cap:
            fail("rank %d has %d events, over the cap %d" % (pid, n, cap))
    first, last = other["steps_first"], other["steps_last"]
    window = (steps if last < 0 else min(steps, last + 1)) - first
    if other["steps_traced"] + other["steps_left_out"] != window:
        fail("steps traced %d + left out %d != %d in the window" %
             (other["steps_traced"], other["steps_left_out"], window))
    traced = len([1 for _, _, n, _ in spans.get((0, 1), []) if n == "step"])
    if traced != other["steps_traced"]:
        fail("rank 0 has %d step spans, otherData says %d" % (traced, other["steps_traced"]))
    if max_bytes is not None and size > max_bytes:
        fail("%d bytes, over %d" % (size, max_bytes))
    n_events = sum(len(v) for v in spans.values())
    print("ok: %s: %d ranks, %d spans, no overlaps, spans inside their steps, clocks within "
          "%.1f us, %d steps traced, %d left out, %d bytes" %
          (os.path.basename(path), ranks, n_events, worst, other["steps_traced"],
           other["steps_left_out"], size))


main()
