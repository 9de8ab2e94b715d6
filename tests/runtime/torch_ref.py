#!/usr/bin/python3
"""PyTorch reference of fsmoe-run's MoE transformer, independent of the C code.

Reads the C test's dump (config, initial weights by name, 10 batches), builds the same model
from torch primitives in float64 with autograd, and writes: logits and loss of batch 0, every
named gradient, and the losses of 10 AdamW steps (warm-up + cosine LR, global-norm clipping).

Usage: torch_ref.py IN OUT     (exit 77 when torch is not installed: test skipped)
"""
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("torch_ref.py: PyTorch not installed (apt-get install python3-torch)\n")
    sys.exit(77)

torch.set_default_dtype(torch.float64)


def read(path):
    buf = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v

    assert buf[:8] == b"FSMTREF2", "bad magic"
    pos = 8
    keys = ["V", "M", "H", "heads", "layers", "L", "B", "E", "k", "moe_first", "moe_every",
            "steps", "warmup", "expert", "kv_heads"]
    cfg = dict(zip(keys, take("15q")))
    cfg.update(zip(["f", "aux", "lr", "lr_min", "wd", "b1", "b2", "eps", "clip"], take("9d")))
    (n,) = take("q")
    params = []
    for _ in range(n):
        (ln,) = take("q")
        name = buf[pos:pos + ln].decode()
        pos += ln
        (nd,) = take("q")
        shape = take("%dq" % nd)
        cnt = math.prod(shape)
        data = take("%df" % cnt)
        params.append((name, torch.tensor(data).reshape(shape)))
    N = cfg["B"] * cfg["L"]
    S = cfg["steps"]
    toks = torch.tensor(take("%di" % (S * N))).reshape(S, N).long()
    tgts = torch.tensor(take("%di" % (S * N))).reshape(S, N).long()
    return cfg, params, toks, tgts


def expert(P, pre, e, x, kind):
    if kind == 0:
        a = x @ P[pre + ".w1"][e] + P[pre + ".b1"][e]
        return F.gelu(a, approximate="tanh") @ P[pre + ".w2"][e] + P[pre + ".b2"][e]
    a = x @ P[pre + ".w1"][e]
    g = x @ P[pre + ".w3"][e]
    return (F.silu(a) * g) @ P[pre + ".w2"][e]


def moe(cfg, P, b, x):
    """GShard top-k gate (no noise), capacity ceil(k f N / E), first choices before second
    choices in token order, renormalised weights; load-balancing loss E·Σ f_e·P_e."""
    N, E, k = x.shape[0], cfg["E"], cfg["k"]
    p = torch.softmax(x @ P["h%d.gate.wg" % b], dim=1)
    with torch.no_grad():
        order = torch.argsort(-p.detach(), dim=1, stable=True)[:, :k]
    C = max(1, min(N, math.ceil(k * cfg["f"] * N / E - 1e-9))) if cfg["f"] > 0 else N
    load = [0] * E
    y = torch.zeros_like(x)
    denom = sum(p[torch.arange(N), order[:, j]] for j in range(k)) if k > 1 else None
    for j in range(k):
        for n in range(N):
            e = int(order[n, j])
            if load[e] >= C:
                continue
            load[e] += 1
            w = p[n, e] / denom[n] if k > 1 else p[n, e]
            y[n] = y[n] + w * expert(P, "h%d.experts" % b, e, x[n:n + 1], cfg["expert"])[0]
    f = torch.tensor([(order[:, 0] == e).sum().item() / N for e in range(E)])
    aux = E * (f * p.mean(dim=0)).sum()
    return y, aux


def forward(cfg, P, tok, tgt):
    B, L, M, nh = cfg["B"], cfg["L"], cfg["M"], cfg["heads"]
    d = M // nh
    N = B * L
    x = P["wte"][tok] + P["wpe"][torch.arange(N) % L]
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    aux_total = 0.0
    for b in range(cfg["layers"]):
        h = F.layer_norm(x, (M,), P["h%d.ln1.w" % b], P["h%d.ln1.b" % b], eps=1e-5)
        qkv = h @ P["h%d.attn.wqkv" % b] + P["h%d.attn.bqkv" % b]
        # [q (nh·d) | k (nkv·d) | v (nkv·d)]; query head h reads kv head h // (nh/nkv)
        nkv = cfg["kv_heads"]
        q = qkv[:, :nh * d].view(B, L, nh, d).transpose(1, 2)
        k = qkv[:, nh * d:(nh + nkv) * d].view(B, L, nkv, d).transpose(1, 2)
        v = qkv[:, (nh + nkv) * d:].view(B, L, nkv, d).transpose(1, 2)
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        s = s.masked_fill(mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ v).permute(0, 2, 1, 3).reshape(N, M)
        x = x + y @ P["h%d.attn.wo" % b] + P["h%d.attn.bo" % b]
        h = F.layer_norm(x, (M,), P["h%d.ln2.w" % b], P["h%d.ln2.b" % b], eps=1e-5)
        is_moe = b >= cfg["moe_first"] and (b - cfg["moe_first"]) % cfg["moe_every"] == 0
        if is_moe:
            out, aux = moe(cfg, P, b, h)
            aux_total = aux_total + aux
        else:
            out = expert(P, "h%d.ffn" % b, 0, h, cfg["expert"])
        x = x + out
    h = F.layer_norm(x, (M,), P["lnf.w"], P["lnf.b"], eps=1e-5)
    logits = h @ P["head"]
    ce = F.cross_entropy(logits, tgt)
    return logits, ce, ce + cfg["aux"] * aux_total


def lr_at(cfg, s):
    w, steps = cfg["warmup"], cfg["steps"]
    if s < w:
        return cfg["lr"] * (s + 1) / w
    rest = steps - w
    prog = min(1.0, (s - w) / (rest - 1)) if rest > 1 else 1.0
    return cfg["lr_min"] + 0.5 * (cfg["lr"] - cfg["lr_min"]) * (1 + math.cos(math.pi * prog))


def main():
    cfg, plist, toks, tgts = read(sys.argv[1])
    P = {name: t.clone().requires_grad_(True) for name, t in plist}
    names = [name for name, _ in plist]
    out = bytearray()
    logits, ce, loss = forward(cfg, P, toks[0], tgts[0])
    loss.backward()
    out += struct.pack("<%dd" % logits.numel(), *logits.detach().flatten().tolist())
    out += struct.pack("<2d", loss.item(), ce.item())
    for name in names:
        out += struct.pack("<%dd" % P[name].numel(), *P[name].grad.flatten().tolist())
    # 10 steps of AdamW from the same initial weights
    P = {name: t.clone().requires_grad_(True) for name, t in plist}
    decay = [P[n] for n in names if P[n].dim() >= 2]
    no_decay = [P[n] for n in names if P[n].dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["wd"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(cfg["b1"], cfg["b2"]), eps=cfg["eps"])
    losses = []
    for s in range(cfg["steps"]):
        opt.zero_grad()
        _, ce, loss = forward(cfg, P, toks[s], tgts[s])
        loss.backward()
        norm = math.sqrt(sum(float((P[n].grad ** 2).sum()) for n in names))
        if cfg["clip"] > 0 and norm > cfg["clip"]:
            for n in names:
                P[n].grad.mul_(cfg["clip"] / norm)
        for g in opt.param_groups:
            g["lr"] = lr_at(cfg, s)
        opt.step()
        losses.append(loss.item())
    out += struct.pack("<%dd" % len(losses), *losses)
    open(sys.argv[2], "wb").write(bytes(out))


if __name__ == "__main__":
    main()
