"""Bitwise before/after check of every registry model's numerics.

    python scripts/bitwise_check.py --save OUT.pt          # record this tree's models (PYTHONPATH picks the tree)
    python scripts/bitwise_check.py --compare A.pt B.pt    # torch.equal on every tensor; exit 1 on a difference

For every model of ``bench/registry.yaml`` (each causality its class supports: the causal one on the
flipflop task's smoke preset, the bidirectional one on listops's), built at a small size with a fixed
seed, on fixed padded inputs, the record holds:

* ``forward``: the hidden states, pooled summary, aux loss and every tensor statistic (halting depth,
  ponder, gate means, RSA gates, ...);
* ``grad``: the gradient of every parameter after backward of a fixed loss
  (a fixed random projection of the hidden states + of ``pooled`` + the aux loss);
* ``stream``: for models that stream, the hidden states and statistics of ``init_state`` / ``step``
  fed in fixed piece sizes, and the last step's pooled summary.

Extra variants exercise the paths a registry default leaves idle: the halting modes (upperbound,
no-halt), early exit (a halting bias that halts within a few iterations) and the compiled step
(``model.compile(backend="eager")``: dynamo traces the same step functions and runs them eagerly).

The script uses only the public API (``bench.build_model``, ``bench.Registry``) and the backbone
contract (``forward`` / ``init_state`` / ``step`` / ``compile``), so the same file records an old tree
and a new one.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import traceback

import torch

import bench

CAUSAL_TASK, BIDIR_TASK = "flipflop", "listops"
VOCAB_SEED, MODEL_SEED = 1234, 0
# small sizes, applied where the class accepts them: T crosses several chunks / segments / blocks
SMALL = {
    "chunk_size": 7,
    "memory_slots": 3,
    "segment_len": 6,
    "mem_len": 5,
    "block_size": 6,
    "n_state": 3,
    "window": 4,
    "max_layers": 4,
    "n_layers": 2,
    "update_layers": 2,
}
PIECES = [1, 3, 2, 7, 1, 5, 4, 6]  # streaming piece sizes (sum 29 = T_CAUSAL)
T_CAUSAL, T_BIDIR = 29, 45
LENGTHS = {T_CAUSAL: [29, 20, 13, 5], T_BIDIR: [45, 31, 17, 3]}
HALTING = ("ut", "gut", "gut-no-global-halt", "gut-no-transition", "gut-no-gate", "gutlb")
COMPILED = ("tlb", "rsa-tlb", "gutlb", "ut", "gut")


def accepted_params(cls) -> set:
    """Constructor parameter names of ``cls`` and of every base its ``**kwargs`` reach."""
    names: set = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names


def model_class(registry, name):
    module, _, cls = registry.model_entry(name)["target"].partition(":")
    return getattr(__import__(module, fromlist=[cls]), cls)


def variants(registry) -> list[tuple[str, str, bool, dict]]:
    """(key, model name, causal, extra overrides) for every configuration recorded."""
    out = []
    for name in registry.model_names():
        cls = model_class(registry, name)
        accepted = accepted_params(cls)
        fixed = registry.model_entry(name).get("params") or {}
        base = {k: v for k, v in SMALL.items() if k in accepted and k not in fixed}
        extras = [("", {})]
        if name in HALTING:
            extras += [
                ("@upperbound", {"mode": "upperbound"}),
                ("@no-halt", {"mode": "no-halt"}),
                ("@early", {"halt_bias_init": 1.5, "max_layers": 6}),
                ("@exit", {"halt_bias_init": 3.0, "max_layers": 6}),
                ("@early-upperbound", {"halt_bias_init": 1.5, "max_layers": 6, "mode": "upperbound"}),
            ]
        if name in COMPILED:
            extras += [("@compiled", {"__compile__": True})]
            if name in HALTING:
                extras += [
                    ("@compiled-early", {"__compile__": True, "halt_bias_init": 1.5, "max_layers": 6}),
                    ("@compiled-exit", {"__compile__": True, "halt_bias_init": 3.0, "max_layers": 6}),
                ]
        for causal, ok in ((True, cls.supports_causal), (False, cls.supports_bidirectional)):
            if not ok:
                continue
            for suffix, extra in extras:
                out.append((f"{name}{suffix}:{'causal' if causal else 'bidir'}", name, causal, {**base, **extra}))
    return out


def inputs(vocab: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(VOCAB_SEED + T)
    tokens = torch.randint(0, vocab, (len(LENGTHS[T]), T), generator=gen)
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(LENGTHS[T]).unsqueeze(1)
    return tokens.masked_fill(~mask, 0), mask


def tensors(prefix: str, stats: dict, out: dict) -> None:
    for k, v in sorted(stats.items()):
        if isinstance(v, torch.Tensor):
            out[f"{prefix}.{k}"] = v.detach().clone()
        elif isinstance(v, (int, float)):
            out[f"{prefix}.{k}"] = torch.tensor(float(v), dtype=torch.float64)


def record(name: str, causal: bool, over: dict) -> dict:
    over = dict(over)
    compiled = over.pop("__compile__", False)
    task = CAUSAL_TASK if causal else BIDIR_TASK
    torch.manual_seed(MODEL_SEED)
    model = bench.build_model(name, task=task, preset="smoke", causal=causal, **over)
    vocab, d = model.vocab_size, model.d_model
    T = T_CAUSAL if causal else T_BIDIR
    tokens, mask = inputs(vocab, T)
    gen = torch.Generator().manual_seed(7)
    proj, proj_pooled = torch.randn(T, d, generator=gen), torch.randn(d, generator=gen)
    rec: dict = {}
    model.train()
    if compiled:
        torch._dynamo.reset()
        model.compile(backend="eager")
    out = model(tokens, mask)
    rec["forward.hidden"] = out.hidden.detach().clone()
    rec["forward.aux_loss"] = out.aux_loss.detach().clone()
    if out.pooled is not None:
        rec["forward.pooled"] = out.pooled.detach().clone()
    tensors("forward.stats", out.stats, rec)
    loss = (out.hidden * mask.unsqueeze(-1) * proj).sum() + out.aux_loss
    if out.pooled is not None:
        loss = loss + (out.pooled * proj_pooled).sum()
    loss.backward()
    for pname, p in model.named_parameters():
        if p.grad is not None:
            rec[f"grad.{pname}"] = p.grad.detach().clone()
        else:
            rec[f"grad.{pname}"] = torch.tensor([float("nan")])  # no gradient: recorded as such
    if causal and type(model).supports_streaming and not compiled:
        model.eval()
        with torch.no_grad():
            full = tokens[:1].expand(2, -1).clone()  # streams have no padding
            state, start, outs = model.init_state(2), 0, []
            for i, size in enumerate(PIECES):
                o, state = model.step(full[:, start : start + size], state)
                outs.append(o.hidden)
                tensors(f"stream.{i}.stats", o.stats, rec)
                start += size
            rec["stream.hidden"] = torch.cat(outs, 1).clone()
            if o.pooled is not None:
                rec["stream.pooled"] = o.pooled.clone()
    return rec


def save(path: str, only: list[str] | None) -> None:
    registry = bench.Registry()
    torch.set_num_threads(1)
    result, failed = {}, {}
    for key, name, causal, over in variants(registry):
        if only and name not in only:
            continue
        try:
            result[key] = record(name, causal, over)
            print(f"{key}: {len(result[key])} tensors", flush=True)
        except Exception as exc:  # noqa: BLE001 (recorded: a build that fails must fail the same way after)
            failed[key] = f"{type(exc).__name__}: {exc}"
            print(f"{key}: FAILED {failed[key]}", flush=True)
            traceback.print_exc()
    torch.save({"records": result, "failed": failed}, path)
    print(f"saved {len(result)} configurations ({len(failed)} failed) to {path}")


def same(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Bitwise equal, NaN equal to NaN (the no-gradient marker)."""
    if x.is_floating_point():
        return torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0))
    return torch.equal(x, y)


def compare(a_path: str, b_path: str, only: list[str] | None = None) -> int:
    a, b = torch.load(a_path, weights_only=True), torch.load(b_path, weights_only=True)
    differ = []
    keys = set(a["records"]) | set(b["records"]) | set(a["failed"]) | set(b["failed"])
    if only:
        keys = {k for k in keys if k.split(":")[0].split("@")[0] in only}
    for key in sorted(keys):
        ra, rb = a["records"].get(key), b["records"].get(key)
        if ra is None or rb is None:
            if a["failed"].get(key) != b["failed"].get(key) or (ra is None) != (rb is None):
                differ.append(key)
                print(f"DIFFER {key}: missing or failed ({a['failed'].get(key)} / {b['failed'].get(key)})")
            continue
        bad = sorted(
            k
            for k in set(ra) | set(rb)
            if k not in ra or k not in rb or ra[k].dtype != rb[k].dtype or ra[k].shape != rb[k].shape or not same(ra[k], rb[k])
        )
        if bad:
            differ.append(key)
            print(f"DIFFER {key}: {len(bad)} of {len(set(ra) | set(rb))} tensors, e.g. {', '.join(bad[:5])}")
        else:
            print(f"equal  {key}: {len(ra)} tensors")
    total = len(keys)
    print(f"{total - len(differ)} of {total} configurations bitwise equal; differ: {', '.join(differ) or 'none'}")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", metavar="OUT")
    ap.add_argument("--only", nargs="*", help="registry model names to record (default: all)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare, only=args.only)
    if args.save:
        save(args.save, args.only)
        return 0
    ap.error("give --save OUT or --compare A B")
    return 2


if __name__ == "__main__":
    sys.exit(main())
