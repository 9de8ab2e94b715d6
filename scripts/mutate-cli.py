#!/usr/bin/env python3
"""A black-box reliability campaign over the three programs, as a careless user would feed them:
mutated models, clusters, plans, checkpoints, data files and flags (deterministic from --seed),
each run under a time bound (the build should be the sanitizer build: a sanitizer report counts
as a crash). Prints one row per input kind:

  cases | crashes | hangs | wrong exit | no location | leftovers

- crash: killed by a signal other than the bound's, or a sanitizer report about our code on
  stderr (a leak counts when one of its stacks passes through our sources);
- hang: still running at the bound (--timeout, default 10 s);
- wrong exit: an exit status other than 0 (accepted), 2 (input refused) or, for `diff`, 1;
- no location: refused (exit 2) without naming where: a YAML input's message must carry
  `FILE:LINE:COL`, a flag's must carry the flag (`--name`), the value it was given (a path) or
  the FILE:LINE:COL of what it led to; binary inputs (checkpoints, data) must name the file;
- leftovers: temporary files (`*.tmp.*`) left in the output directory, or an input file changed.

The libFuzzer harnesses (scripts/fuzz.sh) search the readers coverage-guided; this campaign
checks the programs end to end (exit codes, messages, outputs) as the user sees them.

usage: scripts/mutate-cli.py BUILD_DIR [--cases N] [--seed S] [--timeout SEC] [--kinds a,b]
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAN = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:)")
LOC = re.compile(r":\d+:\d+")

EXTREMES = ["0", "-1", "1e30", "-1e30", ".nan", ".inf", "-.inf", "1000000000", "16777216",
            "2147483648", "99999999999999999999", "0.5", "1e-300", "abc", "", "[]", "{}",
            "\"\"", "~", "true", "0x10", "3.7", "1e9"]
GARBAGE = [b"\xff\xfe", b"\xc3\x28", b"\x00", b"\t", b"&a [1]", b"*a", b"!!binary",
           b"{{{{", b"- - -", b": :", b"\xe2\x82", b"%YAML 1.1\n", b"---\n", b"...\n"]


def mutate_yaml(text, rnd):
    """One to three edits of a YAML file: a scalar value replaced by an extreme, a line deleted,
    duplicated or moved, garbage bytes inserted, the file truncated."""
    data = text.encode()
    lines = data.split(b"\n")
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.randrange(7)
        if kind <= 2:  # replace a value
            cands = [i for i, l in enumerate(lines) if re.search(rb":\s*\S", l)]
            if cands:
                i = rnd.choice(cands)
                key, _, _ = lines[i].partition(b":")
                lines[i] = key + b": " + rnd.choice(EXTREMES).encode()
        elif kind == 3 and len(lines) > 1:
            del lines[rnd.randrange(len(lines))]
        elif kind == 4 and lines:
            i = rnd.randrange(len(lines))
            lines.insert(rnd.randrange(len(lines) + 1), lines[i])
        elif kind == 5:
            i = rnd.randrange(len(lines) or 1)
            if lines:
                pos = rnd.randrange(len(lines[i]) + 1)
                lines[i] = lines[i][:pos] + rnd.choice(GARBAGE) + lines[i][pos:]
        else:
            joined = b"\n".join(lines)
            lines = joined[: rnd.randrange(len(joined) + 1)].split(b"\n")
    return b"\n".join(lines)


def mutate_bytes(data, rnd):
    b = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        kind = rnd.randrange(4)
        if not b:
            break
        i = rnd.randrange(len(b))
        if kind == 0:
            b[i] ^= 1 << rnd.randrange(8)
        elif kind == 1:
            b[i] = rnd.randrange(256)
        elif kind == 2:
            del b[i:]
        else:
            b[i:i] = b[rnd.randrange(len(b)):][:rnd.randrange(64)]
    return bytes(b)


class Tally:
    def __init__(self, name):
        self.name = name
        self.cases = self.crash = self.hang = self.wrong = self.noloc = self.left = 0
        self.examples = []

    def note(self, what, argv, detail):
        if len(self.examples) < 3:
            self.examples.append("%s: %s\n    %s" % (what, " ".join(argv), detail[:300]))


def ours(err):
    """A sanitizer report about our code: any ASan/UBSan error, or a leak one of whose stacks
    passes through our sources (leaks only inside the MPI library and its dlopened components,
    which keep allocations until exit, are not counted)."""
    if not SAN.search(err):
        return False
    if "ERROR: AddressSanitizer" in err or "runtime error:" in err:
        return True
    return bool(re.search(r"/(libfsmoe|planner|runtime|microbench|comm)/[a-z_0-9]+\.c", err))


def run(argv, timeout, cwd):
    try:
        p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout, start_new_session=True)
        return p.returncode, p.stderr.decode(errors="replace"), False
    except subprocess.TimeoutExpired as e:
        return None, (e.stderr or b"").decode(errors="replace"), True


def judge(t, argv, timeout, cwd, inputs, need, ok_codes=(0, 2)):
    """Runs one case in cwd (the work directory: relative outputs of mutated flags land there;
    it links models/, clusters/ and data/ so that plans find what they name) and classifies it.
    need: 'loc' (YAML: FILE:LINE:COL), 'flag', 'file'."""
    before = {p: open(p, "rb").read() for p in inputs}
    rc, err, hung = run(argv, timeout, cwd)
    t.cases += 1
    if hung:
        t.hang += 1
        t.note("hang", argv, "")
    elif rc < 0 and rc != -signal.SIGTERM or ours(err):
        t.crash += 1
        t.note("crash", argv, err)
    elif rc not in ok_codes:
        t.wrong += 1
        t.note("exit %d" % rc, argv, err)
    elif rc == 2:
        msg = err.strip()
        named = {"loc": lambda: any(os.path.basename(p) + ":" in msg for p in inputs)
                 and LOC.search(msg),
                 "flag": lambda: "--" in msg or "-o" in msg or LOC.search(msg)
                 or any(v and (msg.startswith(v + ":") or ": " + v + ":" in msg or v + "/" in msg
                                or (len(v) > 1 and v in msg))
                        for v in argv[1:] if not v.startswith("-")),
                 "file": lambda: any(os.path.basename(p) in msg for p in inputs)}[need]()
        if not named:
            t.noloc += 1
            t.note("no location", argv, msg)
    for p in inputs:
        if not os.path.exists(p) or open(p, "rb").read() != before[p]:
            t.left += 1
            t.note("input changed", argv, p)
    for f in os.listdir(cwd):
        if ".tmp." in f:
            t.left += 1
            t.note("leftover", argv, f)
            os.unlink(os.path.join(cwd, f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--kinds", default="model,cluster,plan,flags,run-model,run-data,checkpoint")
    a = ap.parse_args()
    plan = os.path.join(os.path.abspath(a.build), "planner", "fsmoe-plan")
    runx = os.path.join(os.path.abspath(a.build), "runtime", "fsmoe-run")
    bench = os.path.join(os.path.abspath(a.build), "microbench", "fsmoe-bench")
    rnd = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="fsmoe-mutate.")
    env_t = a.timeout
    for d in ("models", "clusters", "data"):
        os.symlink(os.path.join(ROOT, d), os.path.join(work, d))
    os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    # Open MPI and the libraries under it keep allocations until exit by design; their leaks are
    # not ours (a leak with one of these anywhere in its stack is not reported).
    supp = os.path.join(work, "lsan.supp")
    with open(supp, "w") as f:
        for lib in ["libmpi", "libopen-pal", "libopen-rte", "libpmix", "libprrte", "libhwloc",
                    "libevent", "libucp", "libucs", "libfabric", "libgomp", "libopenblas"]:
            f.write("leak:%s\n" % lib)
    os.environ["LSAN_OPTIONS"] = "exitcode=0:suppressions=" + supp  # the program's own status
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows = []
    read = lambda p: open(os.path.join(ROOT, p)).read()
    models = sorted("models/" + f for f in os.listdir(os.path.join(ROOT, "models")))
    clusters = sorted("clusters/" + f for f in os.listdir(os.path.join(ROOT, "clusters")))
    plans = sorted("plans/" + f for f in os.listdir(os.path.join(ROOT, "plans")))
    kinds = a.kinds.split(",")
    try:
        if "model" in kinds:
            t = Tally("fsmoe-plan, mutated models")
            for i in range(a.cases):
                m = os.path.join(work, "m%d.yaml" % i)
                open(m, "wb").write(mutate_yaml(read(rnd.choice(models)), rnd))
                judge(t, [plan, "--model", m, "--cluster", os.path.join(ROOT, "clusters/testbed-b.yaml"),
                          "-o", os.path.join(work, "out.yaml"), "--quiet"], env_t, work, [m], "loc")
            rows.append(t)
        if "cluster" in kinds:
            t = Tally("fsmoe-plan, mutated clusters")
            for i in range(a.cases):
                c = os.path.join(work, "c%d.yaml" % i)
                open(c, "wb").write(mutate_yaml(read(rnd.choice(clusters)), rnd))
                judge(t, [plan, "--model", os.path.join(ROOT, "models/gpt2-xl-moe.yaml"), "--cluster", c,
                          "-o", os.path.join(work, "out.yaml"), "--quiet"], env_t, work, [c], "loc")
            rows.append(t)
        if "plan" in kinds:
            t = Tally("plan files (explain/simulate/regenerate/diff)")
            for i in range(a.cases):
                p = os.path.join(work, "p%d.yaml" % i)
                src = rnd.choice(plans)
                open(p, "wb").write(mutate_yaml(read(src), rnd))
                sub = rnd.choice(["explain", "simulate", "regenerate", "diff"])
                if sub == "regenerate":
                    argv = [plan, "--regenerate", p, "-o", os.path.join(work, "out.yaml"), "--quiet"]
                elif sub == "diff":
                    argv = [plan, "diff", os.path.join(ROOT, src), p]
                elif sub == "simulate":
                    argv = [plan, "simulate", p, "--schedule", "all"]
                else:
                    argv = [plan, "explain", p]
                judge(t, argv, env_t, work, [p], "loc", (0, 1, 2) if sub == "diff" else (0, 2))
            rows.append(t)
        if "flags" in kinds:
            t = Tally("flags of the three programs")
            vals = ["", "0", "-1", "1e9", "abc", "2x", "1K", "99999999999", "none", "/nonexistent/x",
                    work, "/dev/null", "nan"]
            pf = ["--batch", "--seq", "--world", "--gpus-per-node", "--dp", "--mp", "--ep", "--esp",
                  "--capacity-factor", "--method", "-o", "--bogus"]
            rf = ["--steps", "--batch", "--seq", "--lr", "--threads", "--chunks", "--ep", "--save",
                  "--data", "--resume", "--gate", "--capacity-factor", "--comm-timeout", "--bogus",
                  "--stop-at", "--mem-limit"]
            bf = ["-b", "-e", "-f", "-i", "-n", "-w", "-o", "--plot", "--bogus", "--comm-timeout"]
            for i in range(a.cases):
                prog = rnd.randrange(3)
                if prog == 0:
                    argv = [plan, "--model", os.path.join(ROOT, "models/tiny-moe.yaml"), "--cluster",
                            os.path.join(ROOT, "clusters/testbed-b.yaml"), "--quiet"]
                    flags = pf
                elif prog == 1:
                    argv = [runx, "--model", os.path.join(ROOT, "models/tiny-moe.yaml"), "--steps", "1",
                            "--eval-every", "0", "--seq", "16", "--batch", "1"]
                    flags = rf
                else:
                    argv = [bench, "-n", "1", "-w", "0", "-b", "8", "-e", "8"]
                    flags = bf
                for _ in range(rnd.randint(1, 2)):
                    argv += [rnd.choice(flags), rnd.choice(vals)]
                judge(t, argv, env_t, work, [], "flag")
            rows.append(t)
        if "run-model" in kinds:
            t = Tally("fsmoe-run, mutated models")
            for i in range(a.cases):
                m = os.path.join(work, "rm%d.yaml" % i)
                open(m, "wb").write(mutate_yaml(read("models/tiny-moe.yaml"), rnd))
                judge(t, [runx, "--model", m, "--steps", "1", "--eval-every", "0", "--seq", "16",
                          "--batch", "1"], env_t, work, [m], "loc")
            rows.append(t)
        if "run-data" in kinds:
            t = Tally("fsmoe-run, data files")
            corpus = open(os.path.join(ROOT, "data/jargon.txt"), "rb").read()[:20000]
            for i in range(a.cases // 4):
                d = os.path.join(work, "d%d.txt" % i)
                k = rnd.randrange(4)
                body = {0: b"", 1: corpus[: rnd.randrange(64)], 2: mutate_bytes(corpus, rnd),
                        3: bytes(rnd.randrange(256) for _ in range(rnd.randrange(4096)))}[k]
                open(d, "wb").write(body)
                judge(t, [runx, "--model", os.path.join(ROOT, "models/tiny-moe.yaml"), "--data", d,
                          "--steps", "1", "--eval-every", "0", "--seq", "16", "--batch", "1"],
                      env_t, work, [d], "file")
            rows.append(t)
        if "checkpoint" in kinds:
            t = Tally("corrupted checkpoints + --resume")
            base = os.path.join(work, "ck")
            common = [runx, "--model", os.path.join(ROOT, "models/tiny-moe.yaml"), "--eval-every", "0",
                      "--seq", "16", "--batch", "1", "--steps", "3"]
            rc, err, _ = run(common[:-1] + ["2", "--save", base], 60, work)
            if rc == 0:
                files = []
                for dp, _, fs in os.walk(base):
                    files += [os.path.join(dp, f) for f in fs]
                for i in range(a.cases // 4):
                    ck = os.path.join(work, "ck%d" % i)
                    shutil.copytree(base, ck)
                    victim = os.path.join(ck, os.path.relpath(rnd.choice(files), base))
                    data = open(victim, "rb").read()
                    open(victim, "wb").write(mutate_yaml(data.decode(errors="replace"), rnd)
                                             if victim.endswith(".yaml") else mutate_bytes(data, rnd))
                    judge(t, common + ["--resume", ck], env_t, work, [victim], "file")
                    shutil.rmtree(ck)
            else:
                t.note("setup", common, err)
            rows.append(t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| input kind | cases | crashes | hangs | wrong exit | no location | leftovers |")
    print("|---|---|---|---|---|---|---|")
    for t in rows:
        print("| %s | %d | %d | %d | %d | %d | %d |" % (t.name, t.cases, t.crash, t.hang, t.wrong,
                                                       t.noloc, t.left))
    for t in rows:
        for e in t.examples:
            print("# %s: %s" % (t.name, e), file=sys.stderr)
    bad = sum(t.crash + t.hang + t.wrong + t.noloc + t.left for t in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
