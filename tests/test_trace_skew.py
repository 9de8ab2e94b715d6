#!/usr/bin/env python3
"""scripts/trace-skew.py against a synthetic two-rank trace whose skews and segments are set by
construction: per step three collectives after segments g = 2, 10, 30 ms, the ranks arriving
k = 1 + 0.1 g ms before and after the segment's end (so the mean segment is g and the mean wait
for the last is k), a computation between them that must be ignored, the first step (ignored)
different. The script must print each task's k and g, and the line a = 1, rho = 0.1, r2 = 1.
Then inputs it must refuse with exit 2 and the file named.
usage: test_trace_skew.py SCRIPT"""
import json
import os
import re
import subprocess
import sys
import tempfile

script = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*paths):
    return subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)


def run_events(tmp, name, events):
    """The script on a trace of these events, written to tmp/name."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump({"displayTimeUnit": "ms", "traceEvents": events}, f)
    return run(path)


def table_rows(out):
    """{task: (steps, skew ms, segment ms)} of the script's table."""
    return {m.group(1).strip(): (int(m.group(2)), float(m.group(3)), float(m.group(4)))
            for m in re.finditer(r"^\| ([A-Za-z0-9 -]+?) +\| +(\d+) \| +([0-9.]+) \| +([0-9.]+) \|$",
                                 out, re.M)}


def event(cat, name, rank, t0_ms, t1_ms, step):
    return {"name": name, "cat": cat, "ph": "X", "ts": t0_ms * 1e3, "dur": (t1_ms - t0_ms) * 1e3,
            "pid": rank, "tid": 3, "args": {"step": step}}


tasks = [("alltoall", "fwd L0 c0 alltoall", 2.0), ("mp-allreduce", "fwd mp-allreduce", 10.0),
         ("reducescatter", "bwd L0 c0 reducescatter", 30.0)]
events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "rank 0"}}]
end = 0.0
for step in range(3):
    for cat, name, g in tasks:
        k = 1.0 + 0.1 * g
        if step == 0:
            k = 5.0  # the first step is not counted
        # a computation inside the segment on both ranks: not a collective
        events.append(event("attention", "fwd attention", 1, end, end + g / 2, step))
        events.append(event("attention", "fwd attention", 2, end, end + g / 2, step))
        t_late = end + g + k
        done = t_late + 0.5
        events.append(event(cat, name, 1, end + g - k, done, step))
        events.append(event(cat, name, 2, t_late, done, step))
        end = done

with tempfile.TemporaryDirectory() as tmp:
    r = run_events(tmp, "run.json", events)
    check(r.returncode == 0, f"exit {r.returncode} on a good trace: {r.stderr}")
    rows = table_rows(r.stdout)
    check(len(rows) == 3, f"3 task rows expected, got {rows}\n{r.stdout}")
    for _, name, g in tasks:
        got = rows.get(name)
        want = (2, 1.0 + 0.1 * g, g)
        check(got is not None and got[0] == want[0] and abs(got[1] - want[1]) < 1e-3 and
              abs(got[2] - want[2]) < 1e-3, f"{name}: got {got}, expected {want}")
    m = re.search(r"skew = ([0-9.]+) ms \+ ([0-9.]+) x segment \(r2 ([0-9.]+) over 3 tasks\)",
                  r.stdout)
    # a task of two groups at once (two pairs of ranks, each pair arriving together, the second
    # pair 4 ms after the first): no rank waits, so its skew is 0 (the latest start of all four
    # ranks would say 2 ms)
    pairs = []
    for step in range(3):
        for rank, t0 in ((1, 0.0), (2, 0.0), (3, 4.0), (4, 4.0)):
            base = 100.0 * step
            pairs.append(event("attention", "fwd attention", rank, base, base + t0 + 10.0, step))
            pairs.append(event("allgather", "fwd L0 allgather", rank, base + t0 + 10.0,
                               base + t0 + 11.0, step))
            pairs.append(event("grad-allreduce", "tail grad-allreduce", rank, base + 50.0,
                               base + 51.0, step))
    r2_ = run_events(tmp, "pairs.json", pairs)
    row = re.search(r"^\| fwd L0 allgather +\| +\d+ \| +([0-9.]+) \|", r2_.stdout, re.M)
    check(r2_.returncode == 0 and row is not None and float(row.group(1)) == 0.0,
          f"two pairs arriving apart: expected skew 0.000, got:\n{r2_.stdout}{r2_.stderr}")
    # a task the trace marks "meets" (the forward gate's small collectives) is one where the
    # ranks meet: a row of its own (durations 3 and 1 ms: skew 1), and its end starts the next
    # segment (the AllToAll 3 ms after it); an unmarked gate (the combine's order) is neither
    gates = []
    for step in range(3):
        base = 100.0 * step
        for rank, arrive in ((1, 19.0), (2, 21.0)):
            gates.append(event("attention", "fwd attention", rank, base, base + arrive, step))
            e = event("gate", "fwd L0 gate", rank, base + arrive, base + 22.0, step)
            e["args"]["meets"] = 1
            gates.append(e)
            gates.append(event("gate", "fwd L0 gate", rank, base + 22.0, base + 23.0, step))
            gates.append(event("alltoall", "fwd L0 c0 alltoall", rank, base + 25.0,
                               base + 26.0, step))
    r3 = run_events(tmp, "gates.json", gates)
    grows = {k: v[1:] for k, v in table_rows(r3.stdout).items()}
    check(r3.returncode == 0 and set(grows) == {"fwd L0 gate", "fwd L0 c0 alltoall"} and
          abs(grows["fwd L0 gate"][0] - 1.0) < 1e-3 and
          abs(grows["fwd L0 c0 alltoall"][1] - 3.0) < 1e-3,
          f"a gate marked meets: expected its row (skew 1) and the AllToAll's segment 3, got "
          f"{grows}:\n{r3.stdout}{r3.stderr}")
    check(m is not None, f"no fitted line in:\n{r.stdout}")
    if m:
        a, rho, r2 = map(float, m.groups())
        check(abs(a - 1.0) < 1e-3 and abs(rho - 0.1) < 1e-4 and r2 > 0.9995,
              f"line a {a} rho {rho} r2 {r2}, expected 1, 0.1, 1")

    # refused inputs: exit 2, the file named
    cases = {"missing.json": None, "notjson.json": '{"traceEvents": [', "noevents.json": "[1, 2]",
             "nofield.json": json.dumps({"traceEvents": [{"ph": "X", "cat": "alltoall",
                                                          "name": "x", "pid": 1, "ts": 0}]}),
             "negative.json": json.dumps({"traceEvents": [event("alltoall", "x", 1, 5, 4, 1)]})}
    for fname, text in cases.items():
        p = os.path.join(tmp, fname)
        if text is not None:
            with open(p, "w") as f:
                f.write(text)
        r = run(p)
        check(r.returncode == 2 and p in r.stderr, f"{fname}: exit {r.returncode}, {r.stderr!r}")
    notjson = os.path.join(tmp, "notjson.json")
    check(f"{notjson}:1:" in run(notjson).stderr, "a JSON error names line and column")

for f in failures:
    print(f"FAIL: {f}")
print("trace-skew: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
sys.exit(1 if failures else 0)
