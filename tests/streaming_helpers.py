"""Shared by the streaming tests (``tests/test_streaming*.py``): tiny causal builds of registry
entries, feeding tokens through ``step`` in pieces, and reading a state's tensors.

The ``one_thread`` fixture they all use lives in ``tests/conftest.py``.
"""

import torch

import bench
from bench.registry import Registry, constructor_params
from bench.targets import import_target

REG = Registry()
T = 23  # crosses several XL segments / BRT blocks of 5 and LocalRNN windows of 4
TOL = 1e-5


def model_class(name):
    return import_target(REG.model_entry(name)["target"], name)


CAUSAL = [m for m in REG.model_names() if model_class(m).supports_causal]
STREAMING = [m for m in CAUSAL if model_class(m).supports_streaming]


def small(name) -> dict:
    """Tiny sizes, and windows short enough that T crosses several of them (unless the entry
    fixes its own, e.g. transformer-star's single segment)."""
    accepted = constructor_params(model_class(name))
    fixed = REG.model_entry(name)["params"]
    n_heads = fixed.get("n_heads", accepted.get("n_heads", 4))
    want = {
        "d_model": 4 * n_heads,
        "d_ff": 32,
        "dropout": 0.0,
        "segment_len": 5,
        "mem_len": 7,
        "block_size": 5,
        "n_state": 3,
        "window": 4,
        "chunk_size": 5,
        "memory_slots": 3,
    }
    return {k: v for k, v in want.items() if k in accepted and k not in fixed}


def build(name, **over):
    torch.manual_seed(0)
    return bench.build_model(name, vocab_size=11, causal=True, **{**small(name), **over}).eval()


def stream(model, tokens, sizes, state=None):
    """Feed tokens through step in pieces of the given sizes -> (hidden (B, T, d), state)."""
    state = model.init_state(tokens.shape[0]) if state is None else state
    outs, start = [], 0
    for size in sizes:
        out, state = model.step(tokens[:, start : start + size], state)
        assert out.hidden.shape[:2] == (tokens.shape[0], min(size, tokens.shape[1] - start))
        outs.append(out.hidden)
        start += size
    assert start == tokens.shape[1]
    return torch.cat(outs, dim=1), state


def random_sizes(total, rng, largest=9):
    sizes = []
    while sum(sizes) < total:
        sizes.append(min(rng.randint(1, largest), total - sum(sizes)))
    return sizes


def leaves(state):
    """The tensors and ints of a state, in order (plain containers only)."""
    if isinstance(state, torch.Tensor) or isinstance(state, int):
        return [state]
    if isinstance(state, dict):
        return [x for k in sorted(state) for x in leaves(state[k])]
    if isinstance(state, (list, tuple)):
        return [x for s in state for x in leaves(s)]
    if state is None:
        return []
    raise AssertionError(f"a state holds only tensors, ints, None and lists/dicts/tuples of them; got {type(state).__name__}")


def numel(state) -> int:
    return sum(x.numel() for x in leaves(state) if isinstance(x, torch.Tensor))


def tokens_for(seed=0, batch=2, length=T):
    return torch.randint(0, 11, (batch, length), generator=torch.Generator().manual_seed(seed))
