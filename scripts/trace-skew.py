#!/usr/bin/env python3
"""The ranks' arrival skew at each collective of a multi-rank run, from its trace
(`fsmoe-run --trace run.json` on several ranks: every rank's tasks in one file, one clock), and
how it grows with the time each rank computed since its previous collective ended.

For every task where the ranks meet — the collectives (AllToAll, AllGather, ReduceScatter, the
MP/ESP AllReduces, SAA, the Gradient-AllReduce) and the tasks the trace marks "meets" (the forward
gate, whose statistics and token counts are small collectives) — of every step after the first,
with each rank's start t0 and end t1:
  skew    = the mean over the ranks of their time in it (t1 − t0) less the least of those times:
            what a rank waits for the last to arrive, on average (the cost model's sync
            latency), since the last to arrive waits for no one. Durations, not starts: they
            need no common clock, and a task of several groups at once (an MP AllGather runs
            in every MP pair) has each rank wait for its own group only, where the latest
            start of all ranks would charge it the other groups' offsets. fsmoe-run --report
            fits the same line (runtime/report.h);
  segment = the mean over the ranks of (this start − the end of the rank's previous such task
            of any kind): the wall time the rank spent outside them before arriving.
Prints per task label its median skew and segment over the steps, then the least-squares line
skew = a + rho * segment over the tasks' medians, with its r² (against the constant mean). The
profile's `sync_latency_s` charges every collective the same skew, measured by fsmoe-bench's sync
phase (microbench/interference.c): the line says how far one constant is from what the run met.

usage: scripts/trace-skew.py TRACE.json [TRACE.json ...]
Exit 0; 2 on an input it cannot read (the file and what is wrong)."""
import json
import math
import statistics
import sys

COLLECTIVES = {"alltoall", "allgather", "reducescatter", "mp-allreduce", "esp-allreduce", "saa",
               "grad-allreduce"}


def fail(msg):
    print(f"trace-skew: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The trace's complete events, each checked for the fields used."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}")
    except UnicodeDecodeError:
        fail(f"{path}: not UTF-8 text")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(f"{path}: expected an object with a traceEvents list (fsmoe-run --trace)")
    events = []
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ev = (e["cat"], e["name"], int(e["pid"]), float(e["ts"]), float(e["dur"]),
                  int(e["args"]["step"]), e["args"].get("meets") == 1)
        except (KeyError, TypeError, ValueError):
            fail(f"{path}: traceEvents[{i}]: expected cat, name, pid, ts, dur and args.step")
        if not all(math.isfinite(v) for v in ev[3:5]) or ev[4] < 0:
            fail(f"{path}: traceEvents[{i}]: ts and dur must be finite, dur at least 0")
        events.append(ev)
    return events


def task_rows(events):
    """{label: [(skew_us, segment_us) per step]} for the tasks where two or more ranks meet; a
    label a step runs several times (an S1 layer's dispatch and combine AllToAll) is one task per
    occurrence, counted in start order on each rank ("label #2")."""
    starts = {}   # (step, label) -> {rank: (t0, t1)}
    ends = {}     # rank -> sorted collective ends
    seen = {}     # (step, label, rank) -> occurrences so far
    for cat, name, pid, ts, dur, step, meets in sorted(events, key=lambda e: e[3]):
        if cat not in COLLECTIVES and not meets:
            continue
        k = seen.get((step, name, pid), 0)
        seen[(step, name, pid)] = k + 1
        label = name if k == 0 else f"{name} #{k + 1}"
        starts.setdefault((step, label), {})[pid] = (ts, ts + dur)
        ends.setdefault(pid, []).append(ts + dur)
    for v in ends.values():
        v.sort()
    first = min((step for step, _ in starts), default=None)
    rows = {}
    for (step, name), per in starts.items():
        if step == first or len(per) < 2:
            continue
        durations = [t1 - t0 for t0, t1 in per.values()]
        skew = statistics.fmean(durations) - min(durations)
        segs = []
        for rank, (t0, _) in per.items():
            before = [t for t in ends[rank] if t <= t0]
            if before:
                segs.append(t0 - before[-1])
        if segs:
            rows.setdefault(name, []).append((skew, statistics.fmean(segs)))
    return rows


def line_fit(points):
    """(a, rho, r2) of y = a + rho x by least squares; r2 against the mean (0 with one x)."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0, 0.0
    rho = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - rho * mx
    syy = sum((y - my) ** 2 for y in ys)
    res = sum((y - a - rho * x) ** 2 for x, y in points)
    return a, rho, (1.0 - res / syy) if syy > 0 else 1.0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    for path in argv[1:]:
        rows = task_rows(load(path))
        print(f"# {path}: arrival skew per collective task, medians over the steps after the first")
        if not rows:
            print("# no collective run by two or more ranks in two or more steps")
            continue
        print(f"| {'task':32s} | {'steps':>5s} | {'skew ms':>8s} | {'segment ms':>10s} |")
        print(f"|{'-' * 34}|{'-' * 7}|{'-' * 10}|{'-' * 12}|")
        medians = []
        for name in sorted(rows, key=lambda n: statistics.median(s for _, s in rows[n])):
            v = rows[name]
            skew = statistics.median(k for k, _ in v) / 1e3
            seg = statistics.median(s for _, s in v) / 1e3
            medians.append((seg, skew))
            print(f"| {name:32s} | {len(v):5d} | {skew:8.3f} | {seg:10.3f} |")
        a, rho, r2 = line_fit(medians)
        mean = statistics.fmean(k for _, k in medians)
        print(f"# skew = {a:.3f} ms + {rho:.4f} x segment (r2 {r2:.3f} over {len(medians)} "
              f"tasks); one constant for all: {mean:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
