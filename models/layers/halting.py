"""Dynamic halting in depth [HALT §4.1, §5.1, Alg. 1 and 3], shared by UT, GUT and GUTLB.

A shared block is iterated up to ``max_iters`` times. After computing H_l, the halting
unit scores the *previous* state (eq. 5), optionally together with the new one (eq. 17):

    alpha_hat_{l-1} = halt(x)              x = h_{l-1}, or [h_{l-1}; h_l] (transition-aware)
    alpha_{l-1}     = alpha_hat_{l-1} * prod_{l'<l-1} (1 - alpha_hat_{l'})   (eqs. 6, 15)
    S_l             = (1 - sum_{l'<l} alpha_{l'}) H_l + sum_{l'<l} alpha_{l'} H_{l'}   (eqs. 7, 16)

so S_l is a mixture of H_0..H_l whose weights form a distribution. A halting unit stops
being updated once sum alpha >= alpha_thresh (0.999): its H and S are frozen.

Halting units ("levels"):
  * token:  one unit per position, x from h^(t) (Alg. 1, UT);
  * global: one unit per sequence, x from mean(H) over real positions (eqs. 12-14, GUT);
  * global + causal: one unit per position, x from the prefix mean cumsum(H)/t, so position
    t never sees positions > t; early exit then behaves like token-level halting.

Modes [HALT §7]: ``halt`` drops a sequence from the batch as soon as all its units halted
(real early exit: later iterations run on fewer rows; GUTLB instead freezes and checks once per
chunk, ``DepthHalting.forward``'s ``freeze``); ``upperbound`` computes the same
outputs but keeps every sequence to the upper bound (halted units frozen, nothing dropped);
``no-halt`` runs exactly ``max_iters`` iterations with no halting computation at all.

Ponder (ACT) cost per unit, as in the reference code: sum_j alpha_j (j+1) + (1 - sum_j alpha_j) n,
where n is the number of iterations the unit received (eq. 8 plus the remainder's cost).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

HALTING_MODES = ("halt", "upperbound", "no-halt")

# step(h_prev (b, T, d), s_prev (b, T, d), rows) -> h_new (b, T, d); rows: (b,) indices into the
# full batch of the sequences still running, or None while that is every sequence (no gather)
StepFn = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]


class HaltingUnit(nn.Module):
    """halt(x) = sigmoid(W2 GELU(W1 x + b1) + b2)  (eq. 5); W1 is 2d x d when transition-aware (eq. 17)."""

    def __init__(self, d_model: int, transition: bool, bias_init: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear((2 if transition else 1) * d_model, d_model)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_model, 1)
        # b2 sets the initial halting probability sigmoid(b2): a registry knob for experiments.
        nn.init.constant_(self.fc2.bias, bias_init)

    def forward(self, x: Tensor) -> Tensor:  # (..., d or 2d) -> (...)
        return torch.sigmoid(self.fc2(self.act(self.fc1(x)))).squeeze(-1)


def halting_input(h: Tensor, mask: Tensor, per_position: bool, global_pool: bool) -> Tensor:
    """The state the halting unit scores: (b, P, d) with P = T (per position) or 1 (per sequence)."""
    if not global_pool:
        return h  # token-level (b, T, d)
    m = mask.unsqueeze(-1).to(h.dtype)  # (b, T, 1)
    if per_position:  # causal global halting: prefix mean over real positions (cumsum / t)
        return (h * m).cumsum(1) / m.cumsum(1).clamp_min(1.0)
    return (h * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)  # (b, 1, d), eq. 14


@dataclass
class HaltingOutput:
    output: Tensor  # (B, T, d) S_L: the halting-weighted mixture (H_L in no-halt mode)
    ponder: Tensor  # (B,) per-example ponder cost (mean over real positions for per-position units)
    depth: Tensor  # (B,) iterations computed (mean over real positions for per-position units)


class DepthHalting(nn.Module):
    """Runs a shared step function in depth with dynamic halting (Alg. 1 / 3 / 4's inner loop)."""

    def __init__(
        self,
        d_model: int,
        max_iters: int,
        *,
        global_halt: bool,
        transition: bool,
        causal: bool,
        mode: str = "halt",
        threshold: float = 0.999,
        bias_init: float = 0.0,
    ):
        super().__init__()
        if mode not in HALTING_MODES:
            raise ValueError(f"unknown halting mode {mode!r}; choose one of {', '.join(HALTING_MODES)}")
        if max_iters < 1:
            raise ValueError(f"max_iters must be >= 1, got {max_iters}")
        self.max_iters = max_iters
        self.global_halt = global_halt
        self.transition = transition
        self.per_position = (not global_halt) or causal  # one halting unit per position
        self.mode = mode
        self.threshold = threshold
        # no-halt has no halting function at all ([HALT §7] "GUT No Halt Upperbound").
        self.unit = None if mode == "no-halt" else HaltingUnit(d_model, transition, bias_init)

    def forward(self, step: StepFn, h0: Tensor, mask: Tensor, *, freeze: bool = False) -> HaltingOutput:
        """Runs Alg. 1 / 3's loop on H_0 (B, T, d), mask (B, T) -> S_L, ponder and depth (eqs. 5-8, 15-17).

        Early exit in ``halt`` mode, two ways (the outputs are the same: a halted unit is frozen, so
        its S, ponder and depth no longer change; only the work done after it halted differs):

        * ``freeze=False`` (UT, GUT): after each iteration, the sequences whose units all halted are
          dropped from the batch (later iterations run on fewer rows): one host sync per iteration
          (``int(fin.sum())``; the batch's shape depends on it) plus the boolean gathers.
        * ``freeze=True`` (GUTLB: one call per chunk of g tokens, per-position causal units): every
          sequence runs as in ``upperbound`` (halted units frozen on the device, no row ever dropped)
          and ONE host sync per call, ``halted.all()`` after iteration ceil(L / 2), stops iterating
          when every unit has halted by then.

        Chosen by measurement (issue 25; CPU, flip-flop paper widths, B=2, T=512, fresh models, one
        forward + backward): GUTLB (L=10, 52 chunks) per-iteration exit 798 syncs per training step
        (710 in the committed BEFORE figures), freezing 52, at upperbound's op count plus two per chunk
        (dropping rows saves no kernel launch; a fresh model's units halt at ~9.6 of 10 iterations, so
        a check before L/2 would only add syncs). UT (L=10): drop 1,749 ops / 9 syncs / 2.8 s, freeze
        1,724 / 1 / 2.7 s; GUT (L=20): drop 2,300 / 33 / 5.7 s, freeze 3,977 / 1 / 14.2 s (its units
        halt at ~10 of 20: one check at 10 misses the exit by an iteration and runs all 20), so UT and
        GUT keep the per-iteration exit. ``upperbound`` / ``no-halt``: no host sync at all.
        """
        B, T, _ = h0.shape
        if self.unit is None:
            h = h0
            for _ in range(self.max_iters):
                h = step(h, h, None)
            full = torch.full((B,), float(self.max_iters), device=h0.device)
            return HaltingOutput(h, torch.zeros(B, device=h0.device), full)

        P = T if self.per_position else 1
        valid = mask if self.per_position else torch.ones(B, 1, dtype=torch.bool, device=h0.device)  # (B, P)
        rows: Tensor | None = None  # the running sequences' indices; None = all, in order
        h, s = h0, h0  # H_0, and S_0 = H_0 (Alg. 1 attends to S_{l-1})
        m = mask
        acc = torch.zeros_like(h0)  # sum_{l'} alpha_{l'} H_{l'}              (b, T, d)
        total = h0.new_zeros(B, P)  # sum_{l'} alpha_{l'}
        remain = h0.new_ones(B, P)  # prod_{l'} (1 - alpha_hat_{l'})
        ponder = h0.new_zeros(B, P)  # sum_j alpha_j (j + 1)
        steps = h0.new_zeros(B, P)  # iterations received
        halted = ~valid  # padding positions never count as running
        # pool(H_{l-1}) carried over from the last iteration's pool(H_l): exact for one unit per
        # sequence (a sequence is frozen or updated as a whole); a prefix mean over partly frozen
        # positions is not pool(H_l), so per-position units pool again
        reuse_pool = self.transition and not self.per_position
        x_prev = None
        done: list[tuple] = []  # (rows, S, ponder, total, steps) of finished sequences; rows None = all
        check_at = (self.max_iters + 1) // 2  # freeze: the one early-exit check, after iteration ceil(L / 2)

        def pooler(m: Tensor):  # halting_input's mask-only parts, once per mask (not once per iteration)
            if not self.global_halt:
                return lambda h: h  # token-level (b, T, d)
            mf = m.unsqueeze(-1).to(h0.dtype)  # (b, T, 1)
            if self.per_position:  # causal global halting: prefix mean over real positions (cumsum / t)
                den = mf.cumsum(1).clamp_min(1.0)
                return lambda h: (h * mf).cumsum(1) / den
            den = mf.sum(1, keepdim=True).clamp_min(1.0)
            return lambda h: (h * mf).sum(1, keepdim=True) / den  # (b, 1, d), eq. 14

        pool = pooler(m)  # = halting_input(., m, per_position, global_halt), bitwise

        for l in range(1, self.max_iters + 1):
            h_new = step(h, s, rows)  # H_l   (b, T, d)
            x = pool(h) if x_prev is None else x_prev  # pool(H_{l-1})
            if self.transition:
                x_new = pool(h_new)  # pool(H_l), eq. 17
                x = torch.cat([x, x_new], -1)
            a_hat = self.unit(x)  # alpha_hat_{l-1}  (b, P)
            live = ~halted
            live_f = live.to(h0.dtype)
            alpha = remain * a_hat * live_f  # alpha_{l-1}, eqs. 6 / 15 (0 for frozen units)
            w = alpha.unsqueeze(-1)  # (b, P, 1) broadcasts over T when P == 1
            acc = acc + w * h
            total = total + alpha
            remain = torch.where(live, remain * (1 - a_hat), remain)
            ponder = ponder + alpha * l  # H_{l-1} costs (l-1)+1
            steps = steps + live_f
            if reuse_pool:
                x_prev = torch.where(live.unsqueeze(-1), x_new, x[..., : x_new.shape[-1]])  # pool(H_l) as frozen
            h = torch.where(live.unsqueeze(-1), h_new, h)  # halted units stay read-only
            s = (1 - total).unsqueeze(-1) * h + acc  # S_l, eqs. 7 / 16 (unchanged where frozen)
            halted = halted | (total >= self.threshold)

            if l == self.max_iters:  # every sequence still running finishes here
                done.append((rows, s, ponder, total, steps))
            elif self.mode == "halt" and freeze:  # early exit once every unit halted, checked once
                if l == check_at and bool(halted.all()):  # the call's one host sync
                    done.append((rows, s, ponder, total, steps))
                    break
            elif self.mode == "halt":  # early exit: drop the sequences whose units all halted
                fin = halted.all(-1)  # (b,)
                n_fin = int(fin.sum())  # the host sync that early exit needs
                if n_fin == fin.shape[0]:
                    done.append((rows, s, ponder, total, steps))
                    break
                if n_fin:
                    idx = torch.arange(B, device=h0.device) if rows is None else rows
                    done.append((idx[fin], s[fin], ponder[fin], total[fin], steps[fin]))
                    keep = ~fin
                    rows, h, s, acc = idx[keep], h[keep], s[keep], acc[keep]
                    total, remain, ponder, steps, halted = total[keep], remain[keep], ponder[keep], steps[keep], halted[keep]
                    x_prev = None if x_prev is None else x_prev[keep]
                    m = mask[rows]
                    pool = pooler(m)

        pond = [d[2] + (1 - d[3]) * d[4] for d in done]  # + remainder cost (1 - H) n
        if len(done) == 1 and done[0][0] is None:  # every sequence ran to the end: already in order
            out, pond, stp = done[0][1], pond[0], done[0][4]
        else:
            inv = torch.argsort(torch.cat([d[0] for d in done]))  # put finished sequences back in batch order
            out = torch.cat([d[1] for d in done])[inv]
            pond = torch.cat(pond)[inv]
            stp = torch.cat([d[4] for d in done])[inv]
        vf = valid.to(h0.dtype)
        n_valid = vf.sum(-1).clamp_min(1.0)
        return HaltingOutput(out, (pond * vf).sum(-1) / n_valid, (stp * vf).sum(-1) / n_valid)


def take(x: Tensor | None, rows: Tensor | None) -> Tensor | None:
    """``x`` (B, ...) restricted to the running sequences: ``x`` itself while all of them run."""
    return x if rows is None or x is None else x[rows]
