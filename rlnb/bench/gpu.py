"""GPU tier of the loss benchmark: CUDA timings against the hardware limit.

Three cases, each behind the same fp64 gate as the CPU tier:

* ``batch``: B x T = 16 x 1024 tokens (N = 16384), V = 151936, bf16; every variant and peer.
  Achieved GB/s counts the minimum traffic of forward + backward: read the logits twice and write
  their gradient once, 3 N V x 2 bytes; compared with the device's nominal bandwidth (from its memory
  clock and bus width) and with a measured device-to-device copy.
* ``long``: one 65536-token sequence (row offsets pass 2**31 elements; rows must not sit on grid y).
* ``linear``: the fused-linear path, hidden (N, H) x lm_head (V, H), N = 16384, H = 1536 (Qwen2.5-1.5B),
  as TFLOP/s of the useful 6 N H V flops (ours does 8 N H V: it recomputes the logits in backward).

Plus a sweep of the launch heuristic (BLOCK_V x num_warps) for the two row kernels.
"""

from __future__ import annotations

import math

import torch

import rlnb.kernels as K
from rlnb.bench import variants as VV
from rlnb.bench.variants import format_table, gate_all, select

LINEAR_H = 1536
DEVICE = "cuda"  # a dry run on CPU (interpreter, stubbed timers) patches this


def _do_bench(fn) -> float:
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=25, rep=100))


def bandwidth() -> dict:
    p = torch.cuda.get_device_properties(0)
    nominal = None
    if getattr(p, "memory_clock_rate", 0) and getattr(p, "memory_bus_width", 0):
        nominal = p.memory_clock_rate * 1e3 * 2 * p.memory_bus_width / 8 / 1e9     # DDR: 2 transfers/clock
    src = torch.empty(2**30, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    ms = _do_bench(lambda: dst.copy_(src))
    return {"name": p.name, "nominal_GBps": nominal, "copy_GBps": 2 * src.numel() / ms / 1e6}


def _measure(fn, inp, mode) -> dict:
    VV.restore(fn, inp)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    VV.step(fn, inp, mode)
    torch.cuda.synchronize()
    extra = (torch.cuda.max_memory_allocated() - base) / 2**20
    ms = _do_bench(lambda: VV.step(fn, inp, mode))
    return {"extra_mb": extra, "ms": ms}


def logits_case(B, T, V, mode, names, bw) -> dict:
    chosen, skipped = select(VV.GPU_VARIANTS, names, "cuda")
    if mode != "none" and "liger" in chosen:
        skipped["liger"] = "no entropy output (runs with --entropy none)"
        chosen.pop("liger")
    inp = VV.make_inputs(B, T, V, device=DEVICE, liger="liger" in chosen)
    gates = gate_all(chosen, inp, mode)
    rows = {}
    bytes_min = 3 * B * T * V * inp.x0.element_size()
    for name, fn in chosen.items():
        row = {"gate": gates[name], "grad_mb": inp.x0.numel() * inp.x0.element_size() / 2**20}
        if gates[name].get("passed"):
            try:
                row.update(_measure(fn, inp, mode))
                row["GBps"] = bytes_min / row["ms"] / 1e6
                row["frac_of_copy"] = row["GBps"] / bw["copy_GBps"]
            except Exception as e:  # noqa: BLE001 - e.g. out of memory for a naive peer
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            torch.cuda.empty_cache()
        rows[name] = row
    base = rows.get("naive_fp32", {}).get("ms")
    for row in rows.values():
        if base and "ms" in row:
            row["ratio_vs_naive"] = row["ms"] / base
    del inp
    torch.cuda.empty_cache()
    return {"B": B, "T": T, "V": V, "dtype": "bfloat16", "entropy": mode, "variants": rows, "skipped": skipped}


def linear_case(N, H, V, mode) -> dict:
    """Fused linear vs materialised logits; gate on logp and d hidden of a few rows against fp64."""
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    h = (torch.randn(N, H, device=DEVICE, generator=gen)).bfloat16().requires_grad_()
    W = (torch.randn(V, H, device=DEVICE, generator=gen) / math.sqrt(H) * 2).bfloat16().requires_grad_()
    y = torch.randint(0, V, (N,), device=DEVICE, generator=gen)
    g = torch.randn(N, device=DEVICE, generator=gen) / N
    variants = {"naive_linear": "torch", "rlnb_linear_chunked": "chunked", "rlnb_linear_triton": "triton"}
    rows_idx = torch.tensor([0, 1, N // 2, N - 1], device=DEVICE)
    h64 = h[rows_idx].detach().double().requires_grad_()
    p = torch.softmax(h64 @ W.detach().double().T, -1)                       # (4, V) fp64 oracle
    lp64 = torch.log(p.gather(-1, y[rows_idx, None]).squeeze(-1))
    H64 = -(p * torch.log(p)).sum(-1)
    ((lp64 + (0.01 * H64 if mode == "grad" else 0)) * g[rows_idx].double()).sum().backward()
    del p
    out = {}

    def run(backend):
        h.grad, W.grad = None, None
        logp, H_ = K.linear_token_logprobs(h, W, y, entropy=mode != "none", backend=backend)
        obj = (logp * g).sum() + (0.01 * (H_ * g).sum() if mode == "grad" else 0)
        obj.backward()
        return logp

    for name, backend in variants.items():
        try:
            logp = run(backend)
            gate = {"logp": (logp[rows_idx].double() - lp64).abs().max().item(),
                    "d_hidden_rel": ((h.grad[rows_idx].double() - h64.grad).abs().max()
                                     / h64.grad.abs().max()).item()}
            # bf16 logits: the matmul rounds each logit to 8 bits (|z| ~ 4: 0.016), so the gate is loose here
            gate["passed"] = gate["logp"] < 5e-2 and gate["d_hidden_rel"] < 2e-2
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            run(backend)
            torch.cuda.synchronize()
            extra = (torch.cuda.max_memory_allocated() - base) / 2**20
            ms = _do_bench(lambda b=backend: run(b))
            out[name] = {"gate": gate, "extra_mb": extra, "ms": ms, "TFLOPs": 6 * N * H * V / ms / 1e9}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        torch.cuda.empty_cache()
    return {"N": N, "H": H, "V": V, "entropy": mode, "variants": out}


def sweep(N=16384, V=151936) -> list[dict]:
    """Forward and backward kernel times for a few (BLOCK_V, num_warps) pairs, entropy on."""
    from rlnb.kernels.token_loss import row_backward, row_forward
    x = torch.randn(1, N, V, device=DEVICE).bfloat16()
    y = torch.randint(0, V, (N,), device=DEVICE)
    o = row_forward(x, y, temperature=1.0, entropy=True)
    g, h = torch.randn(N, device=DEVICE), torch.randn(N, device=DEVICE)
    res = []
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8, 16):
            kw = dict(block_v=block, num_warps=warps)
            f = _do_bench(lambda kw=kw: row_forward(x, y, temperature=1.0, entropy=True, **kw))
            b = _do_bench(lambda kw=kw: row_backward(x, y, o["lse"], o["H"], g, h, temperature=1.0, **kw))
            res.append({"BLOCK_V": block, "num_warps": warps, "fwd_ms": f, "bwd_ms": b,
                        "fwd_GBps": N * V * 2 / f / 1e6, "bwd_GBps": 2 * N * V * 2 / b / 1e6})
    return res


def gpu_tier(args) -> dict:
    """Run the cases in order of importance, printing and saving after each (a timeout keeps what ran)."""
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    import json
    out = args.out or "bench-loss-cuda.json"
    B, T = args.B or 16, args.T or 1024
    res = {"tier": "cuda", "device": bandwidth(), "cases": {}}
    steps = [("batch", lambda: logits_case(B, T, args.V, args.entropy, args.variants, res["device"]))]
    if not args.variants:
        steps += [("linear", lambda: linear_case(B * T, LINEAR_H, args.V, args.entropy)),
                  ("long", lambda: logits_case(1, 65536, args.V, args.entropy,
                                               "rlnb_triton,rlnb_triton_inplace,liger", res["device"])),
                  ("sweep", lambda: sweep(B * T, args.V))]
    for name, run in steps:
        if name == "sweep":
            res["sweep"] = run()
        else:
            res["cases"][name] = run()
        print(gpu_table(res, only=name), flush=True)
        with open(out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    res["table"] = gpu_table(res)
    return res


def gpu_table(res, only: str | None = None) -> str:
    bw = res["device"]
    nominal = f"{bw['nominal_GBps']:.0f}" if bw["nominal_GBps"] else "?"
    lines = [f"{bw['name']}: nominal {nominal} GB/s, measured copy {bw['copy_GBps']:.0f} GB/s"]
    for case in ("batch", "long"):
        if case in res["cases"] and only in (None, case):
            c = res["cases"][case]
            t = dict(tier=f"cuda/{case}", **{k: c[k] for k in ("B", "T", "V", "dtype", "entropy", "variants",
                                                               "skipped")})
            for r in t["variants"].values():
                if "ms" in r:
                    r["seconds"] = r["ms"] / 1e3
            lines.append(format_table(t))
            lines += [f"    {n}: {r['GBps']:.0f} GB/s = {r['frac_of_copy']:.2f} of copy"
                      for n, r in c["variants"].items() if "GBps" in r]
    if "linear" in res["cases"] and only in (None, "linear"):
        c = res["cases"]["linear"]
        lines.append(f"cuda/linear: N={c['N']} H={c['H']} V={c['V']} entropy={c['entropy']}")
        for n, r in c["variants"].items():
            lines.append(f"    {n:<22} " + (f"gate {r['gate']}  extra {r['extra_mb']:.0f} MB  {r['ms']:.2f} ms  "
                                            f"{r['TFLOPs']:.0f} TFLOP/s" if "ms" in r else r.get("error", "")))
    for s in res.get("sweep", []) if only in (None, "sweep") else []:
        lines.append(f"    sweep BLOCK_V={s['BLOCK_V']:>5} warps={s['num_warps']:>2}: fwd {s['fwd_ms']:.3f} ms "
                     f"({s['fwd_GBps']:.0f} GB/s)  bwd {s['bwd_ms']:.3f} ms ({s['bwd_GBps']:.0f} GB/s)")
    return "\n".join(lines)
