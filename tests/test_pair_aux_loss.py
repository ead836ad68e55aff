"""Pair tasks (logic, retrieval) average the two encodings' ACT losses, as the [HALT] reference
code does (models/sentence_pair_framework.py: (aux_loss1.mean() + aux_loss2.mean()) / 2)."""

import pytest
import torch

import bench
from bench.runner.module import Head, forward_batch


def test_pair_aux_loss_is_the_mean_of_the_two_encodings():
    torch.manual_seed(0)
    backbone = bench.build_model(
        "ut", vocab_size=12, causal=False, d_model=16, n_heads=2, d_ff=32, max_layers=4, beta=0.1, dropout=0.0
    ).eval()
    head = Head("pair_classify", 16, 12, 7, 0)
    tokens, tokens2 = torch.randint(1, 12, (3, 9)), torch.randint(1, 12, (3, 5))
    mask, mask2 = torch.ones(3, 9, dtype=torch.bool), torch.ones(3, 5, dtype=torch.bool)
    batch = {"tokens": tokens, "mask": mask, "tokens2": tokens2, "mask2": mask2, "label": torch.zeros(3, dtype=torch.long)}
    with torch.no_grad():
        a1 = float(backbone(tokens, mask).aux_loss)  # each encoding on its own
        a2 = float(backbone(tokens2, mask2).aux_loss)
        _, aux, _ = forward_batch(backbone, head, batch)
    assert a1 > 0 and a2 > 0 and abs(a1 - a2) > 1e-4  # two different, non-zero ponder costs
    assert float(aux) == pytest.approx((a1 + a2) / 2, rel=1e-6)
