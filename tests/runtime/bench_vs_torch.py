#!/usr/bin/python3
"""Benchmark: one training step of a model whose every block is MoE with GPT experts and a
top-k GShard gate (tiny-moe: B=8, L=128, M=64, H=256, 4 blocks, E=4; comm-moe: B=4, L=256,
M=256, H=1024, 2 blocks, E=8; the shape is read from the model file), AdamW, in fsmoe-run (host
backend) and in PyTorch (float32, vectorised MoE: top-k, capacity by cumsum, index_add
combine), same thread count, measured side by side in one run: for each thread count, `reps`
runs of `steps` timed steps each (plus one warm-up step), alternating fsmoe-run and PyTorch so
that background load hits both alike; each run gives its mean step time, the table shows the
median over the runs.

The GEMM-bound limit: the step's multiply-accumulates (fsmoe-run --profile counts them) at the
rate of this host's GEMM line, which fsmoe-bench fits for the model's expert shape (M:H) when
FSMOE_BENCH names it; the step can be no faster than its GEMMs. Below it, the FMA-peak bound:
the same MACs at the cores' fp32 FMA peak (fma_peak.c, when FSMOE_FMA_PEAK names it), which no
BLAS beats; with PyTorch's step it says how far below the GEMM line a 2x step would have to go.

Usage: bench_vs_torch.py FSMOE_RUN MODEL_YAML [threads[,threads...]] [steps] [reps]
Without PyTorch (Debian: python3-torch, run with /usr/bin/python3) it says so and reports
fsmoe-run alone.
"""
import math
import os
import re
import statistics
import subprocess
import sys
import time

exe, model = sys.argv[1], sys.argv[2]
thread_list = [int(t) for t in (sys.argv[3] if len(sys.argv) > 3 else "1").split(",")]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 30
reps = int(sys.argv[5]) if len(sys.argv) > 5 else 5


def model_field(text, section, key):
    """`key: value` inside `section:` of the model file (the subset the shipped models use)."""
    m = re.search(r"^%s:\n((?:[ \t]+.*\n|#.*\n|\n)*)" % section, text, re.M)
    if not m:
        sys.exit(f"bench_vs_torch: {model}: no '{section}:' section")
    v = re.search(r"^[ \t]+%s:[ \t]*([^#\n]+)" % key, m.group(1), re.M)
    if not v:
        sys.exit(f"bench_vs_torch: {model}: no '{section}.{key}'")
    return v.group(1).strip()


text = open(model).read()
name = re.search(r"^name:[ \t]*(\S+)", text, re.M).group(1)
M, H, nh, layers, V = (int(model_field(text, "architecture", k))
                       for k in ("hidden", "ffn_hidden", "heads", "layers", "vocab"))
E, k = int(model_field(text, "moe", "experts")), int(model_field(text, "moe", "top_k"))
f = float(model_field(text, "moe", "capacity_factor"))
B, L = int(model_field(text, "training", "batch")), int(model_field(text, "training", "seq"))
for sec, key, want in (("moe", "expert", "gpt"), ("moe", "gate", "gshard"), ("moe", "every", "1"),
                       ("moe", "first", "0")):
    if model_field(text, sec, key) != want:
        sys.exit(f"bench_vs_torch: {model}: {sec}.{key} must be {want} (the PyTorch model here)")
N = B * L


def run_fsmoe(threads, extra=()):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([exe, "--model", model, "--steps", str(steps + 1), "--threads",
                          str(threads), "--eval-every", "0", *extra], env=env,
                         capture_output=True, text=True, check=True).stdout
    if extra:
        return out
    return float(re.search(r"mean step ([0-9.]+) ms", out).group(1)) / 1e3


def gemm_limit(threads):
    """(GMAC per step, GMAC/s of this host's GEMM line on `threads` threads or None, source)"""
    out = run_fsmoe(threads, ("--profile",))
    macs = float(re.search(r"^# GEMM: ([0-9.e+-]+) GMAC per step", out, re.M).group(1))
    bench = os.environ.get("FSMOE_BENCH")
    if not bench:
        return macs, None, "FSMOE_BENCH not set: no fsmoe-bench GEMM line"
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "host.yaml")
        subprocess.run([bench, "--ops", "gemm", "--gemm-shapes", f"{M}:{H}", "--blas-threads",
                        str(threads), "-o", prof],
                       capture_output=True, text=True, check=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        beta = float(re.search(r"beta_s_per_mac:[ \t]*([0-9.e+-]+)", open(prof).read()).group(1))
    return macs, 1e-9 / beta, f"fsmoe-bench's one-rank GEMM line for {M}:{H}"


def fma_peak(threads):
    """GMAC/s of `threads` cores' fp32 FMA peak (fma_peak.c), or None where it cannot say."""
    exe_peak = os.environ.get("FSMOE_FMA_PEAK")
    if not exe_peak:
        return None, "FSMOE_FMA_PEAK not set"
    r = subprocess.run([exe_peak, str(threads)], capture_output=True, text=True)
    m = re.search(r"([0-9.]+) GMAC/s \(([^)]*)\)", r.stdout)
    if r.returncode != 0 or not m:
        return None, (r.stdout + r.stderr).strip()
    return float(m.group(1)), m.group(2)


def print_limit(threads, ms, theirs=None):
    macs, rate, src = gemm_limit(threads)
    if rate is None:
        print(f"# threads {threads}: GEMM-bound limit: {macs:.4g} GMAC per step; {src}")
        return
    t = macs / rate
    print(f"# threads {threads}: GEMM-bound limit {1e3 * t:.2f} ms ({macs:.4g} GMAC per step at "
          f"{rate:.2f} GMAC/s, {src}, {threads} BLAS thread(s)); fsmoe-run {ms:.2f} ms = "
          f"{ms / 1e3 / t:.2f}x the limit")
    peak, how = fma_peak(threads)
    if peak is None:
        print(f"# threads {threads}: FMA-peak bound: not measured ({how})")
        return
    tp = macs / peak
    line = (f"# threads {threads}: FMA-peak bound {1e3 * tp:.2f} ms (the same MACs at "
            f"{peak:.2f} GMAC/s, {threads} core(s)' fp32 FMA peak, {how}; the GEMM line is "
            f"{100 * rate / peak:.0f} % of it); fsmoe-run = {ms / 1e3 / tp:.2f}x this bound")
    if theirs is not None:
        line += (f"; 2x PyTorch needs {theirs / 2:.2f} ms = {theirs / 2e3 / tp:.2f}x it, "
                 f"{theirs / 2e3 / t:.2f}x the GEMM-bound limit")
    print(line)


try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"# PyTorch not available ({e}); install python3-torch and run this script with "
          f"/usr/bin/python3 for the side-by-side comparison. fsmoe-run alone:")
    print(f"# {name} train step, B={B} L={L}, median of {reps} runs x {steps} steps")
    print("| threads | fsmoe-run ms/step | tok/s |")
    meds = []
    for threads in thread_list:
        o = statistics.median(run_fsmoe(threads) for _ in range(reps))
        meds.append((threads, o))
        print(f"| {threads} | {1e3 * o:.2f} | {N / o:.0f} |")
    for threads, o in meds:
        print_limit(threads, 1e3 * o)
    sys.exit(0)

torch.manual_seed(0)
d = M // nh


def p(*shape, std=0.02):
    return (torch.randn(*shape) * std).requires_grad_(True)


P = {"wte": p(V, M), "wpe": p(L, M), "lnfw": torch.ones(M, requires_grad=True),
     "lnfb": torch.zeros(M, requires_grad=True), "head": p(M, V)}
for b in range(layers):
    P.update({f"{b}.ln1w": torch.ones(M, requires_grad=True),
              f"{b}.ln1b": torch.zeros(M, requires_grad=True),
              f"{b}.ln2w": torch.ones(M, requires_grad=True),
              f"{b}.ln2b": torch.zeros(M, requires_grad=True),
              f"{b}.wqkv": p(M, 3 * M), f"{b}.bqkv": torch.zeros(3 * M, requires_grad=True),
              f"{b}.wo": p(M, M), f"{b}.bo": torch.zeros(M, requires_grad=True),
              f"{b}.wg": p(M, E), f"{b}.w1": p(E, M, H),
              f"{b}.b1": torch.zeros(E, 1, H, requires_grad=True), f"{b}.w2": p(E, H, M),
              f"{b}.b2": torch.zeros(E, 1, M, requires_grad=True)})
C = math.ceil(k * f * N / E)
mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)


def moe(b, x):
    probs = torch.softmax(x @ P[f"{b}.wg"], dim=1)
    topv, topi = probs.topk(k, dim=1)
    w = topv / topv.sum(dim=1, keepdim=True)
    # capacity slots: first choices before second choices (GShard)
    onehot = F.one_hot(topi.t().reshape(-1), E)              # (k*N, E)
    pos = (onehot.cumsum(0) - 1) * onehot
    slot = pos.sum(1)                                        # position in its expert
    keep = slot < C
    e_idx = topi.t().reshape(-1)
    tok = torch.arange(N).repeat(k)
    flat = (e_idx * C + slot)[keep]
    xd = torch.zeros(E * C, M)
    xd = xd.index_copy(0, flat, x[tok[keep]])
    h = F.gelu(torch.bmm(xd.view(E, C, M), P[f"{b}.w1"]) + P[f"{b}.b1"], approximate="tanh")
    y = (torch.bmm(h, P[f"{b}.w2"]) + P[f"{b}.b2"]).view(E * C, M)
    ww = w.t().reshape(-1)[keep]
    out = torch.zeros(N, M).index_add(0, tok[keep], y[flat] * ww[:, None])
    fr = F.one_hot(topi[:, 0], E).float().mean(0)
    return out, E * (fr * probs.mean(0)).sum()


def step(opt, tok, tgt):
    x = P["wte"][tok] + P["wpe"][torch.arange(N) % L]
    aux = 0
    for b in range(layers):
        h = F.layer_norm(x, (M,), P[f"{b}.ln1w"], P[f"{b}.ln1b"])
        q, kk, v = (h @ P[f"{b}.wqkv"] + P[f"{b}.bqkv"]).view(B, L, 3, nh, d).permute(2, 0, 3, 1, 4)
        s = ((q @ kk.transpose(-1, -2)) / math.sqrt(d)).masked_fill(mask, float("-inf"))
        y = (torch.softmax(s, -1) @ v).permute(0, 2, 1, 3).reshape(N, M)
        x = x + y @ P[f"{b}.wo"] + P[f"{b}.bo"]
        o, a = moe(b, F.layer_norm(x, (M,), P[f"{b}.ln2w"], P[f"{b}.ln2b"]))
        x, aux = x + o, aux + a
    logits = F.layer_norm(x, (M,), P["lnfw"], P["lnfb"]) @ P["head"]
    loss = F.cross_entropy(logits, tgt) + 0.01 * aux
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
    opt.step()
    return loss.item()


data = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../data/jargon.txt"),
            "rb").read()
opt = torch.optim.AdamW(list(P.values()), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
g = torch.Generator().manual_seed(1)


def batch():
    offs = torch.randint(0, len(data) - L - 1, (B,), generator=g).tolist()
    t = torch.tensor([list(data[o:o + L + 1]) for o in offs])
    return t[:, :-1].reshape(-1), t[:, 1:].reshape(-1)


def run_torch():
    times = []
    for i in range(steps + 1):
        tok, tgt = batch()
        t0 = time.perf_counter()
        step(opt, tok, tgt)
        if i > 0:
            times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


# interleave the two so that background load hits both alike
rows = []
for threads in thread_list:
    torch.set_num_threads(threads)
    ours, theirs = [], []
    for rep in range(reps):
        ours.append(run_fsmoe(threads))
        theirs.append(run_torch())
    rows.append((threads, statistics.median(ours), statistics.median(theirs), ours, theirs))
print(f"# {name} train step, B={B} L={L}: median of {reps} interleaved runs x {steps} steps "
      f"(PyTorch {torch.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
print("| threads | fsmoe-run ms/step | fsmoe-run tok/s | PyTorch ms/step | PyTorch tok/s | ours/theirs time |")
print("|---|---|---|---|---|---|")
for threads, o, t, ours, theirs in rows:
    print(f"| {threads} | {1e3 * o:.2f} | {N / o:.0f} | {1e3 * t:.2f} | {N / t:.0f} | {o / t:.2f} |")
for threads, o, t, ours, theirs in rows:
    print(f"# threads {threads}: fsmoe-run runs (ms) " + " ".join(f"{1e3 * x:.1f}" for x in ours) +
          " | PyTorch runs (ms) " + " ".join(f"{1e3 * x:.1f}" for x in theirs))
for threads, o, t, ours, theirs in rows:
    print_limit(threads, 1e3 * o, 1e3 * t)
