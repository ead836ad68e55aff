"""Matrix-state linear recurrences, written once: gated linear attention and the (gated) delta rule.

Per head the state is a matrix S in R^{dk x dv}; inputs are q, k (B, H, T, dk), v (B, H, T, dv);
nothing is scaled inside (a family scales or normalises q, k itself).

    gated_linear_attention   S_t = diag(a_t) S_{t-1} + k_t v_t^T                  o_t = S_t^T q_t
    delta_rule               S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
                                                                                    o_t = S_t^T q_t
    dplr_delta_rule          S_t = (diag(a_t) + b_t a~_t^T) S_{t-1} + k_t v_t^T     o_t = S_t^T q_t
                             (diagonal plus rank one: the state is read along a~_t and written
                             back along b_t; RWKV-7's generalised delta rule)

with a_t = exp(log_decay_t) in (0, 1]: ``log_decay`` None (a_t = 1: linear attention / DeltaNet),
(B, H, T) (one decay per head and step: RetNet, Mamba-2, Gated DeltaNet) or, for gated linear
attention and the DPLR rule, (B, H, T, dk) (one per key channel: GLA, RWKV-7). Gated linear attention also takes
``decay_sign`` (B, H, T) of +-1 beside a per-head decay: a_t = decay_sign_t exp(log_decay_t) in
[-1, 1] (negative transitions, Grazzi et al. 2025).

Three forms of each, which agree (tests/test_linear_recurrence.py):

* the chunkwise-parallel form (training; Yang et al. 2024, "Parallelizing Linear Transformers with
  the Delta Rule over Sequence Length"; Yang et al. 2023, GLA §4): the sequence cut into chunks of
  C steps; inside a chunk the outputs are attention-like (C, C) products, across chunks only the
  state is passed, one (dk, dv) update per chunk. With b_t the cumulative log decay inside a chunk
  (b_0 = 0 at its start), the chunk's initial state S_0 and its steps t = 1..C:

      gated linear attention:
          o_t = (q_t * e^{b_t})^T S_0 + sum_{s<=t} (q_t * e^{b_t - b_s}) . k_s  v_s          (GLA eq. 5)
          S_C = diag(e^{b_C}) S_0 + sum_s (k_s * e^{b_C - b_s}) v_s^T

      delta rule (the UT transform): the chunk's updates are S_t = e^{b_t} S_0 +
      sum_{i<=t} e^{b_t - b_i} k_i u_i^T with pseudo-values u_t = beta_t (v_t - a_t S_{t-1}^T k_t),
      i.e. (I + diag(beta) (K K^T * G)_strict) U = diag(beta) V - diag(beta e^{b}) K S_0, with
      G_ti = e^{b_t - b_i}: one unit-lower-triangular solve gives U = U~ - W S_0, then
          O   = (Q * e^{b}) S_0 + (Q K^T * G)_causal U
          S_C = e^{b_C} S_0 + (K * e^{b_C - b})^T U                                   (DeltaNet §3.2)

      DPLR rule (the same with a pseudo-value per step): u_t = a~_t^T S_{t-1}, so S_t =
      diag(e^{b_t}) S_0 + sum_{i<=t} diag(e^{b_t - b_i}) (b_i u_i + k_i v_i^T), and the u_t solve
      (I - L) U = (A~ * e^{b_{t-1}}) S_0 + M V with L_ti = a~_t . (e^{b_{t-1} - b_i} * b_i),
      M_ti = a~_t . (e^{b_{t-1} - b_i} * k_i) (i < t): again U = U~ + W S_0, then
          O   = (Q * e^{b}) S_0 + P_b U + P_k V,    (P_x)_ti = q_t . (e^{b_t - b_i} * x_i), i <= t
          S_C = diag(e^{b_C}) S_0 + (B * e^{b_C - b})^T U + (K * e^{b_C - b})^T V

  A per-channel decay needs the (C, C, dk) tensor of e^{b_t - b_s}, so its chunks are at most 8
  steps (``PER_CHANNEL_CHUNK``); every exponent is of a difference b_t - b_s <= 0, never of b_s
  alone, so no chunk overflows whatever the decays. Where the decays are mild enough, a per-channel
  decay instead factors e^{b_t - b_s} = e^{b_t} e^{-b_s} (plain (C, C) products, chunks up to
  ``chunk_size``): while every b of a chunk stays above -``FACTORED_LOG_RANGE`` no factor exceeds
  e^30; the chunk is shortened to keep it so, and below 8 steps the exact form is used
  (``_per_channel_chunk``).
* the step form (streaming, one token): ``*_step`` with q, k, v (B, H, d) and the state.
* the step-by-step reference loop (``*_reference``): the defining recurrence literally, for tests.

Where a CUDA device is present and flash-linear-attention is installed, its Triton kernels compute
the same functions (``pytest -m gpu``: tests/test_linear_recurrence_gpu.py compares them with
these forms; fla is imported only there).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

PER_CHANNEL_CHUNK = 8  # the exact per-channel form builds (C, C, dk) decay tensors: chunks of at most this (8: fastest on the CPU)
FACTORED_LOG_RANGE = 30.0  # a per-channel decay factors e^{b_t - b_i} = e^{b_t} e^{-b_i} while every b_i >= -this (e^30 ~ 1e13)


# ---- checks ---------------------------------------------------------------------------------


def _check(
    q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor | None, initial_state: Tensor | None, chunk_size: int, per_channel_ok: bool = True
) -> None:
    if q.dim() != 4 or k.shape != q.shape or v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"q, k must be (B, H, T, dk) and v (B, H, T, dv); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, T, dk = q.shape
    if log_decay is not None:
        shapes = [(B, H, T)] + ([(B, H, T, dk)] if per_channel_ok else [])
        if tuple(log_decay.shape) not in shapes:
            raise ValueError(f"log_decay must be {' or '.join(str(s) for s in shapes)}; got {tuple(log_decay.shape)}")
    if initial_state is not None and tuple(initial_state.shape) != (B, H, dk, v.shape[-1]):
        raise ValueError(f"initial_state must be (B, H, dk, dv) = {(B, H, dk, v.shape[-1])}; got {tuple(initial_state.shape)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")


def _chunked(x: Tensor, C: int, pad: int) -> Tensor:
    """(B, H, T, ...) -> (B, H, N, C, ...), the time axis zero-padded to N * C."""
    if pad:
        x = F.pad(x, (0, 0) * (x.dim() - 3) + (0, pad))
    return x.reshape(*x.shape[:2], -1, C, *x.shape[3:])


def _causal(C: int, device, diagonal: int = 0, dtype=torch.bool) -> Tensor:
    """(C, C) [t, s]: s <= t (+ diagonal). A float mask multiplies finite products (cheaper than ``torch.where`` on
    the CPU, forward and backward); a boolean one selects where an exponent must become -inf."""
    return torch.ones(C, C, dtype=dtype, device=device).tril(diagonal)


def _per_channel_chunk(log_decay: Tensor, chunk_size: int, T: int, decay_floor: float | None = None) -> tuple[int, bool]:
    """The chunk length for a per-channel decay (B, H, T, dk), and whether its decays factor inside a
    chunk (e^{b_t - b_s} = e^{b_t} e^{-b_s}, plain (C, C) products): they do while every chunk's
    cumulative log decay stays above -FACTORED_LOG_RANGE, so the chunk is cut to FACTORED_LOG_RANGE /
    (the strongest decay) steps; below PER_CHANNEL_CHUNK steps the exact (C, C, dk) form is used.
    The strongest decay is read from the tensor (a host sync on a GPU) unless the caller guarantees a
    ``decay_floor`` <= every entry (RWKV-7's -e^{-1/2})."""
    C = max(1, min(chunk_size, T))
    if decay_floor is not None:
        strongest = -decay_floor
    else:
        strongest = -log_decay.min().item() if log_decay.numel() else 0.0
    if strongest * C <= FACTORED_LOG_RANGE:
        return C, True
    if strongest * PER_CHANNEL_CHUNK <= FACTORED_LOG_RANGE:
        return int(FACTORED_LOG_RANGE // strongest), True
    return min(C, PER_CHANNEL_CHUNK), False


def _pass_states(transition: Tensor | None, update: Tensor, initial_state: Tensor | None, matrix: bool = False):
    """The inter-chunk recurrence S_{n+1} = transition_n (*|@) S_n + update_n over chunks n = 0..N-1.
    update (B, H, N, dk, dv); transition None (identity), broadcastable to it (elementwise) or
    (B, H, N, dk, dk) (``matrix``). -> (the state entering each chunk (B, H, N, dk, dv), final state)."""
    S = update.new_zeros(update.shape[:2] + update.shape[3:]) if initial_state is None else initial_state.to(update.dtype)
    # unbound once: indexing chunk n inside the loop would make each index's backward a zero tensor of
    # the whole, N of them per call (measured: the largest cost of a training step at N = 16)
    updates = update.unbind(2)
    transitions = [None] * len(updates) if transition is None else transition.expand(*update.shape[:3], *transition.shape[3:]).unbind(2)
    entering = []
    for T_n, U_n in zip(transitions, updates):
        entering.append(S)
        if T_n is None:
            S = S + U_n
        elif matrix:
            S = T_n @ S + U_n
        else:
            S = T_n * S + U_n
    return torch.stack(entering, dim=2), S


# ---- gated linear attention -----------------------------------------------------------------


def gated_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor | None = None,
    *,
    initial_state: Tensor | None = None,
    chunk_size: int = 64,
    decay_sign: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """S_t = diag(a_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, chunkwise-parallel (module docstring).

    q, k (B, H, T, dk); v (B, H, T, dv); log_decay None, (B, H, T) or (B, H, T, dk), every entry
    <= 0; decay_sign (B, H, T) of +-1 with a (B, H, T) log_decay (transitions in [-1, 1]);
    initial_state (B, H, dk, dv) or None (zeros). -> (o (B, H, T, dv), final state (B, H, dk, dv))."""
    _check(q, k, v, log_decay, initial_state, chunk_size)
    if decay_sign is not None and (log_decay is None or log_decay.dim() != 3 or decay_sign.shape != log_decay.shape):
        raise ValueError("decay_sign goes with a per-head log_decay (B, H, T) of the same shape")
    B, H, T, dk = q.shape
    per_channel = log_decay is not None and log_decay.dim() == 4
    C, factored = _per_channel_chunk(log_decay, chunk_size, T) if per_channel else (max(1, min(chunk_size, T)), False)
    N = -(-T // C)
    pad = N * C - T
    q, k, v = (_chunked(x, C, pad) for x in (q, k, v))  # (B, H, N, C, d)
    causal = _causal(C, q.device)
    transition = None
    if log_decay is None:
        A = (q @ k.mT) * _causal(C, q.device, dtype=q.dtype)  # (B, H, N, C, C)
        q_in, k_out = q, k  # queries reading S_0, keys as they reach S_C
    elif not per_channel:
        b = _chunked(log_decay.unsqueeze(-1), C, pad).squeeze(-1).cumsum(-1)  # (B, H, N, C) cumulative log decay
        D = torch.where(causal, b[..., :, None] - b[..., None, :], -math.inf).exp()  # (B, H, N, C, C) e^{b_t - b_s}
        if decay_sign is not None:  # prod of signs from s+1 to t = sigma_t sigma_s, sigma the running product
            sigma = _chunked(decay_sign.unsqueeze(-1), C, pad).squeeze(-1).to(q.dtype)
            sigma = torch.where(sigma < 0, -1.0, 1.0).to(q.dtype).cumprod(-1)  # (B, H, N, C); padding: +1
            D = D * sigma[..., :, None] * sigma[..., None, :]
        A = (q @ k.mT) * D
        q_in = q * b.exp()[..., None]  # (B, H, N, C, dk)
        k_out = k * (b[..., -1:] - b).exp()[..., None]
        transition = b[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)
        if decay_sign is not None:
            q_in = q_in * sigma[..., None]
            k_out = k_out * (sigma[..., -1:] * sigma)[..., None]
            transition = transition * sigma[..., -1, None, None]
    else:
        b = _chunked(log_decay, C, pad).cumsum(-2)  # (B, H, N, C, dk)
        q_in = q * b.exp()
        if factored:  # e^{b_t - b_s} = e^{b_t} e^{-b_s}
            A = (q_in @ (k * (-b).exp()).mT) * _causal(C, q.device, dtype=q.dtype)
        else:
            D = torch.where(causal[..., None], b[..., :, None, :] - b[..., None, :, :], -math.inf).exp()  # (B, H, N, C, C, dk)
            A = torch.einsum("bhntc,bhnsc,bhntsc->bhnts", q, k, D)
        k_out = k * (b[..., -1:, :] - b).exp()
        transition = b[..., -1, :].exp()[..., None]  # (B, H, N, dk, 1)
    o = A @ v  # (B, H, N, C, dv) within each chunk
    entering, final = _pass_states(transition, k_out.mT @ v, initial_state)  # (B, H, N, dk, dv)
    o = o + q_in @ entering  # what the chunk's initial state contributes
    return o.reshape(B, H, N * C, -1)[:, :, :T], final


def gated_linear_attention_step(
    q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor | None, state: Tensor, decay_sign: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One step: q, k (B, H, dk), v (B, H, dv), log_decay None / (B, H) / (B, H, dk), state (B, H, dk, dv)
    -> (o (B, H, dv), new state)."""
    if log_decay is not None:
        a = log_decay.exp()
        if decay_sign is not None:
            a = a * decay_sign
        state = state * (a[..., None, None] if a.dim() == 2 else a[..., None])
    state = state + k[..., :, None] * v[..., None, :]
    return torch.einsum("bhk,bhkv->bhv", q, state), state


def gated_linear_attention_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor | None = None,
    *,
    initial_state: Tensor | None = None,
    decay_sign: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The recurrence step by step (tests): S_t = diag(a_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t."""
    B, H, T, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1]) if initial_state is None else initial_state
    outs = []
    for t in range(T):
        if log_decay is not None:
            a = log_decay[:, :, t].exp()
            if decay_sign is not None:
                a = a * decay_sign[:, :, t]
            a = a[..., None].expand(B, H, dk) if a.dim() == 2 else a  # (B, H, dk)
            S = torch.diag_embed(a) @ S
        S = S + k[:, :, t, :, None] @ v[:, :, t, None, :]
        outs.append((S.mT @ q[:, :, t, :, None])[..., 0])
    return torch.stack(outs, dim=2), S


# ---- delta rule -----------------------------------------------------------------------------


def delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_decay: Tensor | None = None,
    *,
    initial_state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t, chunkwise-parallel
    by the UT transform (module docstring).

    q, k (B, H, T, dk); v (B, H, T, dv); beta (B, H, T); log_decay None or (B, H, T), <= 0;
    initial_state (B, H, dk, dv) or None. -> (o (B, H, T, dv), final state (B, H, dk, dv))."""
    _check(q, k, v, log_decay, initial_state, chunk_size, per_channel_ok=False)
    if beta.shape != q.shape[:3]:
        raise ValueError(f"beta must be (B, H, T) = {tuple(q.shape[:3])}; got {tuple(beta.shape)}")
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    C = max(1, min(chunk_size, T))
    N = -(-T // C)
    pad = N * C - T
    q, k, v = (_chunked(x, C, pad) for x in (q, k, v))  # (B, H, N, C, d)
    beta = _chunked(beta.unsqueeze(-1), C, pad)  # (B, H, N, C, 1); padding: beta 0, no write
    causal = _causal(C, q.device)
    if log_decay is None:
        G = causal.to(q.dtype)  # (C, C) e^{b_t - b_s} = 1 on and below the diagonal
        gamma = gamma_C = None
    else:
        b = _chunked(log_decay.unsqueeze(-1), C, pad).squeeze(-1).cumsum(-1)  # (B, H, N, C)
        G = torch.where(causal, b[..., :, None] - b[..., None, :], -math.inf).exp()  # (B, H, N, C, C)
        gamma, gamma_C = b.exp()[..., None], b[..., -1].exp()  # (B, H, N, C, 1), (B, H, N)
    # the UT transform: (I + diag(beta) (K K^T * G)_strict) [U~, W] = [diag(beta) V, diag(beta e^b) K]
    L = (beta * (k @ k.mT) * G).tril(-1)  # (B, H, N, C, C); the unit diagonal is implied
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    rhs = torch.cat((beta * v, beta * (k if gamma is None else gamma * k)), dim=-1)  # (B, H, N, C, dv + dk)
    U_tilde, W = torch.linalg.solve_triangular(L + eye, rhs, upper=False, unitriangular=True).split((dv, dk), dim=-1)
    A = (q @ k.mT) * G  # (B, H, N, C, C), causal (G is zero above the diagonal)
    # U = U~ - W S_0:  O = A U~ + (Q e^b - A W) S_0;  S_C = (e^{b_C} I - K_out^T W) S_0 + K_out^T U~
    k_out = k if gamma is None else k * (b[..., -1:] - b).exp()[..., None]  # (B, H, N, C, dk)
    q_in = (q if gamma is None else q * gamma) - A @ W  # (B, H, N, C, dk)
    Ieye = torch.eye(dk, dtype=q.dtype, device=q.device)
    transition = (Ieye if gamma_C is None else gamma_C[..., None, None] * Ieye) - k_out.mT @ W  # (B, H, N, dk, dk)
    entering, final = _pass_states(transition, k_out.mT @ U_tilde, initial_state, matrix=True)
    o = A @ U_tilde + q_in @ entering  # (B, H, N, C, dv)
    return o.reshape(B, H, N * C, dv)[:, :, :T], final


def delta_rule_step(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None, state: Tensor) -> tuple[Tensor, Tensor]:
    """One step: q, k (B, H, dk), v (B, H, dv), beta (B, H), log_decay None / (B, H), state (B, H, dk, dv)
    -> (o (B, H, dv), new state). S <- a S;  S <- S + beta k (v - S^T k)^T."""
    if log_decay is not None:
        state = state * log_decay.exp()[..., None, None]
    u = beta[..., None] * (v - torch.einsum("bhk,bhkv->bhv", k, state))  # (B, H, dv)
    state = state + k[..., :, None] * u[..., None, :]
    return torch.einsum("bhk,bhkv->bhv", q, state), state


def delta_rule_reference(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None = None, *, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The recurrence step by step (tests), the transition written out as a (dk, dk) matrix."""
    B, H, T, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1]) if initial_state is None else initial_state
    eye = torch.eye(dk, dtype=q.dtype, device=q.device)
    outs = []
    for t in range(T):
        kt, bt = k[:, :, t, :, None], beta[:, :, t, None, None]  # (B, H, dk, 1), (B, H, 1, 1)
        a = 1.0 if log_decay is None else log_decay[:, :, t, None, None].exp()
        S = a * (eye - bt * kt @ kt.mT) @ S + bt * kt @ v[:, :, t, None, :]
        outs.append((S.mT @ q[:, :, t, :, None])[..., 0])
    return torch.stack(outs, dim=2), S


# ---- diagonal plus low rank (the generalised delta rule) ------------------------------------


def dplr_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor,
    b: Tensor,
    log_decay: Tensor | None = None,
    *,
    initial_state: Tensor | None = None,
    chunk_size: int = 32,
    decay_floor: float | None = None,
) -> tuple[Tensor, Tensor]:
    """S_t = (diag(exp(log_decay_t)) + b_t a_t^T) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, chunkwise-parallel
    (module docstring): the state read along a_t (a_t^T S_{t-1}), written back along b_t. The delta rule
    is a = k, b = -beta a k (times its decay a); RWKV-7 is a = -kappa^, b = kappa^ * in-context rate.

    q, k, a, b (B, H, T, dk); v (B, H, T, dv); log_decay None, (B, H, T) or (B, H, T, dk), <= 0;
    initial_state (B, H, dk, dv) or None; decay_floor: a lower bound of log_decay the caller
    guarantees (then it is not read from the tensor: no host sync). -> (o (B, H, T, dv), final state).

    Inside a chunk the decays e^{b_t - b_i} factor as e^{b_t} e^{-b_i} (plain matrix products) where
    the chunk's cumulative log decay stays above -``FACTORED_LOG_RANGE`` (``_per_channel_chunk``:
    RWKV-7's decays, >= -0.61 a step, keep chunks of 32), the exact (C, C, dk) form elsewhere."""
    _check(q, k, v, log_decay, initial_state, chunk_size)
    if a.shape != q.shape or b.shape != q.shape:
        raise ValueError(f"a and b must be (B, H, T, dk) = {tuple(q.shape)}; got {tuple(a.shape)}, {tuple(b.shape)}")
    B, H, T, dk = q.shape
    dv = v.shape[-1]
    if log_decay is None:
        log_decay, decay_floor = q.new_zeros(B, H, T, dk), 0.0
    elif log_decay.dim() == 3:
        log_decay = log_decay[..., None].expand(B, H, T, dk)
    C, factored = _per_channel_chunk(log_decay, chunk_size, T, decay_floor)
    N = -(-T // C)
    pad = N * C - T
    q, k, v, a, b = (_chunked(x, C, pad) for x in (q, k, v, a, b))  # (B, H, N, C, d); padding: no read, no write
    g = _chunked(log_decay, C, pad).cumsum(-2)  # (B, H, N, C, dk) b_t: cumulative log decay inside the chunk
    g_prev = F.pad(g[..., :-1, :], (0, 0, 1, 0))  # b_{t-1}, b_0 = 0
    q_in, a_in = q * g.exp(), a * g_prev.exp()  # (B, H, N, C, dk): queries reading S_0, reads of S_0 at t - 1
    causal, strict = _causal(C, q.device), _causal(C, q.device, -1)  # (C, C) [t, i]: i <= t, i < t
    bk = torch.stack((b, k), dim=3)  # (B, H, N, 2, C, dk): what each step writes: b_i (times u_i), k_i (times v_i)
    if factored:  # e^{b_t - b_i} = e^{b_t} e^{-b_i}: (C, C) products
        bk_in = bk * (-g).exp()[:, :, :, None]
        L, M = (a_in[:, :, :, None] @ bk_in.mT * strict.to(q.dtype)).unbind(3)  # (B, H, N, C, C) each
        P_b, P_k = (q_in[:, :, :, None] @ bk_in.mT * causal.to(q.dtype)).unbind(3)
    else:  # the (C, C, dk) tensors of e^{b_t - b_i} and e^{b_{t-1} - b_i}
        E = torch.where(causal[..., None], g[..., :, None, :] - g[..., None, :, :], -math.inf).exp()
        E_prev = torch.where(strict[..., None], g_prev[..., :, None, :] - g[..., None, :, :], -math.inf).exp()
        L, M = torch.einsum("bhntc,bhnxic,bhntic->xbhnti", a, bk, E_prev)
        P_b, P_k = torch.einsum("bhntc,bhnxic,bhntic->xbhnti", q, bk, E)
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    rhs = torch.cat((M @ v, a_in), dim=-1)  # (B, H, N, C, dv + dk)
    U_tilde, W = torch.linalg.solve_triangular(eye - L, rhs, upper=False, unitriangular=True).split((dv, dk), dim=-1)
    decay_out = (g[..., -1:, :] - g).exp()  # (B, H, N, C, dk) e^{b_C - b_i}
    b_out, k_out = b * decay_out, k * decay_out
    # U = U~ + W S_0:  O = P_b U~ + P_k V + (Q e^b + P_b W) S_0;  S_C = (diag(e^{b_C}) + B_out^T W) S_0 + B_out^T U~ + K_out^T V
    transition = torch.diag_embed(g[..., -1, :].exp()) + b_out.mT @ W  # (B, H, N, dk, dk)
    entering, final = _pass_states(transition, b_out.mT @ U_tilde + k_out.mT @ v, initial_state, matrix=True)
    o = P_b @ U_tilde + P_k @ v + (q_in + P_b @ W) @ entering  # (B, H, N, C, dv)
    return o.reshape(B, H, N * C, dv)[:, :, :T], final


def dplr_delta_rule_step(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, log_decay: Tensor | None, state: Tensor
) -> tuple[Tensor, Tensor]:
    """One step: q, k, a, b (B, H, dk), v (B, H, dv), log_decay None / (B, H) / (B, H, dk), state (B, H, dk, dv)
    -> (o (B, H, dv), new state). S <- diag(w) S + b (a^T S) + k v^T."""
    read = torch.einsum("bhk,bhkv->bhv", a, state)  # (B, H, dv) a^T S_{t-1}
    if log_decay is not None:
        w = log_decay.exp()
        state = state * (w[..., None, None] if w.dim() == 2 else w[..., None])
    state = state + b[..., :, None] * read[..., None, :] + k[..., :, None] * v[..., None, :]
    return torch.einsum("bhk,bhkv->bhv", q, state), state


def dplr_delta_rule_reference(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, log_decay: Tensor | None = None, *, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The recurrence step by step (tests), the transition written out as a (dk, dk) matrix."""
    B, H, T, dk = q.shape
    S = q.new_zeros(B, H, dk, v.shape[-1]) if initial_state is None else initial_state
    outs = []
    for t in range(T):
        w = q.new_ones(B, H, dk) if log_decay is None else log_decay[:, :, t].exp()
        w = w[..., None].expand(B, H, dk) if w.dim() == 2 else w
        transition = torch.diag_embed(w) + b[:, :, t, :, None] @ a[:, :, t, None, :]  # (B, H, dk, dk)
        S = transition @ S + k[:, :, t, :, None] @ v[:, :, t, None, :]
        outs.append((S.mT @ q[:, :, t, :, None])[..., 0])
    return torch.stack(outs, dim=2), S
