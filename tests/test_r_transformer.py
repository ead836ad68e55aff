"""R-Transformer [RT]: LocalRNN windows, causality, no positional encoding, learning."""

import pytest
import torch

from bench.models.layers.local_rnn import LocalRNN
from bench.models.r_transformer import RTransformer

torch.set_num_threads(1)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_local_rnn_equals_running_the_rnn_on_each_left_padded_window(cell):
    torch.manual_seed(0)
    B, T, d, M = 2, 9, 6, 4
    layer = LocalRNN(d, M, cell)
    x = torch.randn(B, T, d)
    with torch.no_grad():
        out = layer(x)
        padded = torch.cat([torch.zeros(B, M - 1, d), x], 1)
        for t in range(T):
            seq, _ = layer.rnn(padded[:, t : t + M])  # window ending at t
            torch.testing.assert_close(out[:, t], seq[:, -1], atol=1e-6, rtol=1e-5)


def test_local_rnn_handles_any_length_including_shorter_than_the_window():
    layer = LocalRNN(4, 8)
    for T in (1, 3, 8, 1000):
        assert layer(torch.randn(2, T, 4)).shape == (2, T, 4)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_causal_r_transformer_never_sees_the_future(cell):
    torch.manual_seed(0)
    model = RTransformer(20, True, d_model=32, n_heads=4, n_layers=2, d_ff=64, window=3, cell=cell, dropout=0.0).eval()
    tokens = torch.randint(1, 20, (3, 15))
    changed = tokens.clone()
    changed[:, 9:] = changed[:, 9:] % 19 + 1
    with torch.no_grad():
        a, b = model(tokens).hidden, model(changed).hidden
    torch.testing.assert_close(a[:, :9], b[:, :9])
    assert not torch.allclose(a[:, 9:], b[:, 9:])


def test_order_sensitive_without_positional_encoding():
    # The LocalRNN alone makes a bidirectional stack order-aware (plain attention without PE is not).
    torch.manual_seed(0)
    model = RTransformer(20, False, d_model=32, n_heads=4, n_layers=1, d_ff=64, window=3, dropout=0.0).eval()
    tokens = torch.randint(1, 20, (1, 10))
    perm = torch.randperm(10)
    with torch.no_grad():
        a, b = model(tokens).hidden, model(tokens[:, perm]).hidden
    assert not torch.allclose(a[:, perm], b, atol=1e-4)


def test_r_transformer_learns_a_local_pattern_language_model():
    # Next token = (previous + token two back) mod 5: solvable from a window of 3.
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(0, 5, (256, 2), generator=g)
    for _ in range(14):
        seqs = torch.cat([seqs, ((seqs[:, -1] + seqs[:, -2]) % 5).unsqueeze(1)], 1)
    tokens = seqs + 1  # 0 stays the pad id
    model = RTransformer(7, True, d_model=32, n_heads=4, n_layers=1, d_ff=64, window=3, dropout=0.0)
    head = torch.nn.Linear(32, 7)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(120):
        idx = torch.randint(0, 192, (32,), generator=g)
        logits = head(model(tokens[idx, :-1]).hidden)
        loss = torch.nn.functional.cross_entropy(logits[:, 1:].reshape(-1, 7), tokens[idx, 2:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = head(model.eval()(tokens[192:, :-1]).hidden)[:, 1:].argmax(-1)
    acc = (pred == tokens[192:, 2:]).float().mean()
    assert acc > 0.9, acc
