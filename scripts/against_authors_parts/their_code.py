"""The authors' code, read from the mirror: their ``models/`` and ``configs/`` at COMMIT extracted
into a temporary folder, PATCHES applied to it, SHIMS written beside it, both put first on sys.path
(their code is never copied into this repository); and einops, their one third-party import beyond
torch, numpy and flash_attn, found without installing anything."""

from __future__ import annotations

import contextlib
import glob
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

MIRROR = "/work/.mirror/JRC1995+InvestigatingRecurrentTransformers/repo"
COMMIT = "58026b2"  # the commit docs/depth_recurrence.md cites

#: (file, their line, what replaces it, why): exact text, each found exactly once or the run stops
PATCHES = [
    (
        "models/modules/FlashMHA.py",
        "q = q.to(T.float16)",
        "q = q  # float16 cast removed by bench's scripts/against_authors.py",
        "FlashMHA.flash casts the queries to float16 for the flash kernel (which takes float16 / bfloat16 only); "
        "removed so that attention runs in the compared dtype (kept, attention would read its inputs rounded to float16)",
    ),
    (
        "models/modules/FlashMHA.py",
        "kv = kv.to(T.float16)",
        "kv = kv  # float16 cast removed by bench's scripts/against_authors.py",
        "the same for the keys / values",
    ),
]

FLASH_ATTN_SHIM = '''"""CPU stand-in for flash_attn 2.x (written by bench's scripts/against_authors.py): the one function
the authors' FlashMHA calls, computing what the kernel computes: exact softmax attention over each
sequence of the packed (unpadded) batch, here in the inputs' dtype."""
import torch


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False, **unused):
    """q (total_q, heads, d), kv (total_k, 2, heads, d), sequence b = rows cu[b]:cu[b + 1] -> (total_q, heads, d)."""
    if dropout_p:
        raise NotImplementedError("the stand-in is for evaluation: dropout_p must be 0")
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    out = torch.zeros_like(q)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        scores = torch.einsum("qhd,khd->hqk", q[q0:q1], kv[k0:k1, 0]) * scale
        if causal:  # bottom-right aligned, as flash-attn >= 2.1: query i sees key j <= i + n_k - n_q
            i = torch.arange(q1 - q0).unsqueeze(1)
            j = torch.arange(k1 - k0).unsqueeze(0)
            scores = scores.masked_fill(j > i + (k1 - k0) - (q1 - q0), float("-inf"))
        probs = scores.softmax(-1).nan_to_num(0.0)  # a query that sees no key: output 0, as flash-attn 2.1's readme says
        out[q0:q1] = torch.einsum("hqk,khd->qhd", probs, kv[k0:k1, 1])
    return out
'''

#: module -> (source, why): what the temporary folder's shims/ holds, first on sys.path
SHIMS = {
    "flash_attn": (
        FLASH_ATTN_SHIM,
        "flash_attn_varlen_kvpacked_func (CUDA only) -> exact softmax attention per sequence of the packed "
        "batch on the CPU, in the inputs' dtype; causal masks bottom-right aligned as flash-attn >= 2.1, a query "
        "that sees no key giving 0",
    ),
}


def git(mirror: str, *args: str) -> bytes:
    """``git`` on the bare mirror -> its stdout."""
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, stdout=subprocess.PIPE).stdout


def extract_their_code(mirror: str, folder: Path) -> str:
    """Their models/ and configs/ at COMMIT into ``folder``, PATCHES applied, SHIMS written to
    folder/shims; both first on sys.path. -> the full commit hash."""
    full = git(mirror, "rev-parse", f"{COMMIT}^{{commit}}").decode().strip()
    with tarfile.open(fileobj=io.BytesIO(git(mirror, "archive", full, "models", "configs"))) as tar:
        tar.extractall(folder, filter="data")
    for name, old, new, _ in PATCHES:
        path = folder / name
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"patch target {old!r} occurs {text.count(old)} times in {name} at {full}, not once")
        path.write_text(text.replace(old, new))
    for module, (source, _) in SHIMS.items():
        (folder / "shims" / module).mkdir(parents=True)
        (folder / "shims" / module / "__init__.py").write_text(source)
    sys.path[:0] = [str(folder / "shims"), str(folder)]
    return full


def find_einops() -> str:
    """einops (their code's one third-party import besides torch, numpy and flash_attn): the installed
    package, else the pure-Python wheel on this machine's local package store, imported from the zip
    (nothing is installed or downloaded). -> where it came from."""
    with contextlib.suppress(ImportError):
        import einops

        return f"einops {einops.__version__} (installed)"
    wheels = sorted(glob.glob("/opt/pypi/files/einops-*-py3-none-any.whl"))
    if not wheels:
        raise SystemExit("their code imports einops: install it (pip install einops) or put its wheel in /opt/pypi/files")
    sys.path.insert(0, wheels[-1])
    import einops

    return f"einops {einops.__version__} (the real package, imported from the wheel {os.path.basename(wheels[-1])})"
