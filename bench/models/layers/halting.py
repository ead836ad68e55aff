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
chunk, ``DepthHalting``'s ``exit="freeze"``); ``upperbound`` computes the same
outputs but keeps every sequence to the upper bound (halted units frozen, nothing dropped);
``no-halt`` runs exactly ``max_iters`` iterations with no halting computation at all.

Ponder (ACT) cost per unit, as in the reference code: sum_j alpha_j (j+1) + (1 - sum_j alpha_j) n,
where n is the number of iterations the unit received (eq. 8 plus the remainder's cost).

Rules (``rules``; the registry's ``model.halt_rules``): ``paper`` is eqs. 5-7 as printed: the
iteration whose update takes sum alpha past alpha_thresh is kept, and depth is bounded by max_iters
only. ``reference`` follows the authors' code (JRC1995/InvestigatingRecurrentTransformers,
``models/encoders/UniversalTransformerEncoder.py`` and ``UTLBEncoder.py``; docs/depth_recurrence.md
cites the lines), which differs twice:

  * length cap: a unit is updated at iteration l only while l <= n + 1, n the sequence's real
    length as the mask counts it (START / END included; per chunk for GUTLB): the code's
    ``force_halt = l >= lengths + 1`` (l from 0) in its update flag;
  * crossing undone: the update flag is computed from the total AFTER iteration l, so the
    iteration that takes the total to >= alpha_thresh is reverted (H, S and the ponder cost
    keep their values from before it) and the unit freezes there.

``length-cap`` and ``undo-crossing`` apply one of the two (the ablation of each). The cap needs
the whole sequence's length: a causal stream (``step``) does not know it, so streaming applies
the undo rule only and equals ``forward`` wherever the cap does not bind (n + 1 >= max_iters).

Streaming (causal only; ``init_state`` / ``step``): t new positions run through every iteration
l = 1..max_iters, each iteration's block step reading and extending that iteration's cache (the
keys / values of H_{l-1}, or S_{l-1} for Alg. 1, of every earlier position, as frozen at that
depth). Causal units are per position, so a new position's halting needs only its own history
and, for global halting, the prefix sums over earlier positions of H_{l-1} (and of H_l when
transition-aware) at every depth, carried as running sums. Halted positions stay frozen but keep
being stepped to max_iters (as in ``upperbound``): later positions attend to them at every depth,
and the transition-aware prefix mean of H_l sums every position's freshly computed H_l, frozen or
not, exactly as ``forward`` does. So ``halt`` mode streams like ``upperbound`` (same outputs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

HALTING_MODES = ("halt", "upperbound", "no-halt")
# model.halt_rules -> (length cap, crossing undone): eqs. 5-7 as printed, the authors' code (both
# rules), or one of its two rules alone (the ablation of each)
HALT_RULES = {"paper": (False, False), "reference": (True, True), "length-cap": (True, False), "undo-crossing": (False, True)}

# step(h_prev (b, T, d), s_prev (b, T, d), rows) -> h_new (b, T, d); rows: (b,) indices into the
# full batch of the sequences still running, or None while that is every sequence (no gather)
StepFn = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]
# streaming: block_step(h_prev (B, t, d), s_prev (B, t, d), cache) -> (h_new (B, t, d), cache), one
# iteration on the t new positions with that iteration's cache (``DepthHalting.step``)
BlockStepFn = Callable[[Tensor, Tensor, object], "tuple[Tensor, object]"]
# iterate(l, h_prev, s_prev, carry, x_prev, parts, rows) -> (h, s, carry, x_prev): ``DepthHalting.iteration``
# with the step bound (``run``'s ``iterate``; e.g. compiled once and reused for every l); ``rows`` as
# for StepFn (the running sequences, whose rows h, s, carry, x_prev and parts already are; None = all)
IterateFn = Callable[..., "tuple[Tensor, Tensor, HaltingCarry | None, Tensor | None]"]


class HaltingUnit(nn.Module):
    """halt(x) = sigmoid(W2 GELU(W1 x + b1) + b2)  (eq. 5); W1 is 2d x d when transition-aware (eq. 17)."""

    def __init__(self, d_model: int, transition: bool, bias_init: float | None = 0.0):
        super().__init__()
        self.fc1 = nn.Linear((2 if transition else 1) * d_model, d_model)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_model, 1)
        # b2 sets the initial halting probability sigmoid(b2): a registry knob for experiments;
        # None keeps torch's default (uniform +-1/sqrt(d)), as the reference code's nn.Linear does.
        if bias_init is not None:
            nn.init.constant_(self.fc2.bias, bias_init)

    def forward(self, x: Tensor) -> Tensor:  # (..., d or 2d) -> (...)
        return torch.sigmoid(self.fc2(self.act(self.fc1(x)))).squeeze(-1)


@dataclass
class HaltingOutput:
    output: Tensor  # (B, T, d) S_L: the halting-weighted mixture (H_L in no-halt mode)
    ponder: Tensor  # (B,) per-example ponder cost (mean over real positions for per-position units)
    depth: Tensor  # (B,) iterations computed (mean over real positions for per-position units)
    # (``DepthHalting.step`` gives ponder and depth per new position instead: (B, t) each)


class HaltingCarry(NamedTuple):
    """The running mixture of a set of halting units, updated once per iteration (``advance``)."""

    acc: Tensor  # sum_{l'} alpha_{l'} H_{l'}     (b, T, d)
    total: Tensor  # sum_{l'} alpha_{l'}           (b, P)
    remain: Tensor  # prod_{l'} (1 - alpha_hat_{l'})
    ponder: Tensor  # sum_j alpha_j (j + 1)
    steps: Tensor  # iterations received
    halted: Tensor  # (b, P) bool: frozen (or padding)
    limit: Tensor | None = None  # (b, 1) the last iteration a unit may update (real length + 1), or None: no cap

    @staticmethod
    def start(h0: Tensor, P: int, halted: Tensor, *, like_later: bool = False, limit: Tensor | None = None) -> HaltingCarry:
        """The carry before iteration 1: no weight, remain 1, no ponder, no step. ``like_later``: its
        float parts as iteration 1 leaves them, so a compiled iteration sees the same kinds of inputs
        at every l (no recompile): computed from h0 (acc = h0 - h0 = 0, total, ponder = 0, remain
        = 1; the same values), they require grad where h0 does, and none is another's alias."""
        b = h0.shape[0]
        if like_later:
            acc = h0 - h0  # exact zeros (finite h0); requires grad as h0 does
            zeros = acc[:, :P, 0].contiguous()  # (b, P)
            return HaltingCarry(acc, zeros, zeros + 1, zeros.clone(), h0.new_zeros(b, P), halted, limit)
        zeros = h0.new_zeros(b, P)
        return HaltingCarry(torch.zeros_like(h0), zeros, h0.new_ones(b, P), zeros.clone(), zeros.clone(), halted, limit)

    def rows(self, keep: Tensor) -> HaltingCarry:
        return HaltingCarry(*(None if x is None else x[keep] for x in self))

    def cost(self) -> Tensor:  # (b, P) ponder cost + the remainder's (1 - sum alpha) n
        return self.ponder + (1 - self.total) * self.steps


class DepthHalting(nn.Module):
    """Runs a shared step function in depth with dynamic halting (Alg. 1 / 3 / 4's inner loop).

    ``exit``: how ``halt`` mode stops early, the host's choice (the outputs are the same either way:
    a halted unit is frozen, so its S, ponder and depth no longer change; only the work differs):
    ``"drop"`` (UT, GUT) drops the sequences whose units all halted after every iteration
    (``run_dropping``); ``"freeze"`` (GUTLB, one call per chunk) keeps every sequence, halted units
    frozen on the device, and checks once, after iteration ceil(L / 2), whether all have halted
    (``run_frozen``). ``upperbound`` freezes and never exits; ``no-halt`` has no unit (``run_fixed``).
    """

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
        bias_init: float | None = 0.0,
        exit: str = "drop",
        rules: str = "paper",
    ):
        super().__init__()
        if rules not in HALT_RULES:
            raise ValueError(f"unknown halting rules {rules!r}; choose one of {', '.join(HALT_RULES)}")
        if mode not in HALTING_MODES:
            raise ValueError(f"unknown halting mode {mode!r}; choose one of {', '.join(HALTING_MODES)}")
        if max_iters < 1:
            raise ValueError(f"max_iters must be >= 1, got {max_iters}")
        if exit not in ("drop", "freeze"):
            raise ValueError(f"exit must be 'drop' or 'freeze', got {exit!r}")
        self.max_iters = max_iters
        self.d_model = d_model
        self.causal = causal
        self.global_halt = global_halt
        self.transition = transition
        self.per_position = (not global_halt) or causal  # one halting unit per position
        self.mode = mode
        self.exit = exit
        self.threshold = threshold
        self.rules = rules  # the one form of the setting; ``length_cap`` / ``undo_crossing`` read it
        # no-halt has no halting function at all ([HALT §7] "GUT No Halt Upperbound").
        self.unit = None if mode == "no-halt" else HaltingUnit(d_model, transition, bias_init)

    @property
    def length_cap(self) -> bool:
        """Whether a unit takes no update past iteration n + 1 (``rules`` reference / length-cap)."""
        return HALT_RULES[self.rules][0]

    @property
    def undo_crossing(self) -> bool:
        """Whether the iteration taking sum alpha past the threshold is reverted (reference / undo-crossing)."""
        return HALT_RULES[self.rules][1]

    def forward(self, step: StepFn, h0: Tensor, mask: Tensor) -> HaltingOutput:
        """Alg. 1 / 3's loop with ``step`` (one iteration of the shared block) on H_0 (B, T, d), mask
        (B, T) -> S_L, ponder and depth (eqs. 5-8, 15-17)."""
        return self.run(functools.partial(self.iteration, step), h0, mask)

    def run(self, iterate: IterateFn, h0: Tensor, mask: Tensor, *, compiled: bool = False) -> HaltingOutput:
        """The loop with ``iterate`` (``iteration`` with the step bound), by exit strategy. ``compiled``:
        ``iterate`` is compiled, so its inputs at l = 1 take the form later iterations give it
        (``start``): one graph for every l."""
        if self.unit is None:
            return self.run_fixed(iterate, h0, mask)
        if self.mode == "halt" and self.exit == "drop":
            return self.run_dropping(iterate, h0, mask, compiled)
        return self.run_frozen(iterate, h0, mask, compiled)

    def run_fixed(self, iterate: IterateFn, h0: Tensor, mask: Tensor) -> HaltingOutput:
        """``no-halt``: H_L after exactly max_iters iterations, no halting computation; with the length
        cap, a sequence's H stops changing after iteration n + 1 (depth min(max_iters, n + 1))."""
        B, h = h0.shape[0], h0
        limit = self.limit(mask, h0.dtype) if self.length_cap else None  # (B, 1)
        for l in range(1, self.max_iters + 1):
            h_new = iterate(l, h, h, None, None, (), None)[0]
            h = h_new if limit is None else torch.where((l <= limit).unsqueeze(-1), h_new, h)
        full = torch.full((B,), float(self.max_iters), device=h0.device)
        depth = full if limit is None else torch.minimum(full.to(h0.dtype), limit.squeeze(-1))
        return HaltingOutput(h, torch.zeros(B, device=h0.device), depth)

    @staticmethod
    def limit(mask: Tensor, dtype: torch.dtype) -> Tensor:
        """The length cap: the last iteration each sequence's units may update, its real length + 1
        (mask (B, T) -> (B, 1)); the code's ``force_halt = l >= lengths + 1`` with l from 0."""
        return (mask.sum(-1, keepdim=True) + 1).to(dtype)

    def run_frozen(self, iterate: IterateFn, h0: Tensor, mask: Tensor, compiled: bool) -> HaltingOutput:
        """Every sequence runs to the end, halted units frozen (``upperbound``); in ``halt`` mode ONE host
        sync, ``halted.all()`` after iteration ceil(L / 2), stops when every unit has halted by then."""
        valid, h, s, c, parts, x_prev = self.start(h0, mask, compiled)
        check_at = (self.max_iters + 1) // 2 if self.mode == "halt" else None
        for l in range(1, self.max_iters + 1):
            h, s, c, x_prev = iterate(l, h, s, c, x_prev, parts, None)
            if l == check_at and l < self.max_iters and bool(c.halted.all()):  # the call's one host sync
                break
        return self.finish([(None, s, c)], valid, h0.dtype)

    def run_dropping(self, iterate: IterateFn, h0: Tensor, mask: Tensor, compiled: bool) -> HaltingOutput:
        """``halt`` with per-iteration exit: after each iteration, the sequences whose units all halted
        leave the batch (later iterations run on fewer rows): one host sync per iteration."""
        B = h0.shape[0]
        valid, h, s, c, parts, x_prev = self.start(h0, mask, compiled)
        rows: Tensor | None = None  # the running sequences' indices; None = all, in order
        done: list[tuple] = []  # (rows, S, carry) of finished sequences; rows None = all
        for l in range(1, self.max_iters + 1):
            h, s, c, x_prev = iterate(l, h, s, c, x_prev, parts, rows)
            if l == self.max_iters:  # every sequence still running finishes here
                done.append((rows, s, c))
                break
            fin = c.halted.all(-1)  # (b,)
            n_fin = int(fin.sum())  # the host sync that early exit needs
            if n_fin == fin.shape[0]:
                done.append((rows, s, c))
                break
            if n_fin:
                idx = torch.arange(B, device=h0.device) if rows is None else rows
                done.append((idx[fin], s[fin], c.rows(fin)))
                keep = ~fin
                rows, h, s, c = idx[keep], h[keep], s[keep], c.rows(keep)
                x_prev = None if x_prev is None else x_prev[keep]
                parts = self.pool_parts(mask[rows], h0.dtype)
        return self.finish(done, valid, h0.dtype)

    def start(self, h0: Tensor, mask: Tensor, compiled: bool) -> tuple:
        """Before iteration 1: (valid units (B, P), H_0, S_0 = H_0, the carry, ``pool_parts``, pool(H_0)
        if carried over). Padding positions never count as running. pool(H_{l-1}) is carried over from
        the last iteration's pool(H_l) where exact, one unit per sequence (a sequence is frozen or updated
        as a whole; a prefix mean over partly frozen positions is not pool(H_l)). ``compiled``: the carry
        as iteration 1 leaves it, S_0 a copy (a compiled iteration would guard on h is s) and pool(H_0)
        before the loop, so l = 1 runs the graph of every later l (eager pools it in iteration 1)."""
        B, T, _ = h0.shape
        P = T if self.per_position else 1
        valid = mask if self.per_position else torch.ones(B, 1, dtype=torch.bool, device=h0.device)  # (B, P)
        limit = self.limit(mask, h0.dtype) if self.length_cap else None
        c = HaltingCarry.start(h0, P, ~valid, like_later=compiled, limit=limit)
        parts = self.pool_parts(mask, h0.dtype)
        x_prev = self.pool(h0, *parts) if self.reuse_pool and compiled else None
        return valid, h0, (h0.clone() if compiled else h0), c, parts, x_prev

    @staticmethod
    def finish(done: list[tuple], valid: Tensor, dtype: torch.dtype) -> HaltingOutput:
        """The finished sequences' (rows, S, carry), back in batch order -> S_L, and ponder and depth
        averaged over the valid units (B,)."""
        pond = [d[2].cost() for d in done]
        if len(done) == 1 and done[0][0] is None:  # every sequence ran to the end: already in order
            out, pond, stp = done[0][1], pond[0], done[0][2].steps
        else:
            inv = torch.argsort(torch.cat([d[0] for d in done]))  # put finished sequences back in batch order
            out = torch.cat([d[1] for d in done])[inv]
            pond = torch.cat(pond)[inv]
            stp = torch.cat([d[2].steps for d in done])[inv]
        vf = valid.to(dtype)
        n_valid = vf.sum(-1).clamp_min(1.0)
        return HaltingOutput(out, (pond * vf).sum(-1) / n_valid, (stp * vf).sum(-1) / n_valid)

    @property
    def reuse_pool(self) -> bool:
        """Whether pool(H_{l-1}) is carried over from the last iteration's pool(H_l) (``forward``'s x_prev)."""
        return self.unit is not None and self.transition and not self.per_position

    def pool_parts(self, mask: Tensor, dtype: torch.dtype) -> tuple:
        """``pool``'s mask-only parts, once per mask (not once per iteration): (mf (b, T, 1), the
        denominator) for global units, () for token-level ones."""
        if not self.global_halt:
            return ()
        mf = mask.unsqueeze(-1).to(dtype)  # (b, T, 1)
        if self.per_position:  # causal global halting: prefix mean over real positions (cumsum / t)
            return mf, mf.cumsum(1).clamp_min(1.0)
        return mf, mf.sum(1, keepdim=True).clamp_min(1.0)

    def pool(self, h: Tensor, *parts: Tensor) -> Tensor:
        """The state the halting unit scores, from ``pool_parts(mask)``: h itself (token-level, (b, T, d)),
        the prefix mean over real positions (causal global units, (b, T, d)) or the mean over real
        positions (global units, (b, 1, d), eq. 14)."""
        if not parts:
            return h  # token-level (b, T, d)
        mf, den = parts
        if self.per_position:
            return (h * mf).cumsum(1) / den
        return (h * mf).sum(1, keepdim=True) / den

    def iteration(
        self,
        step: StepFn,
        l,
        h: Tensor,
        s: Tensor,
        c: HaltingCarry | None,
        x_prev: Tensor | None,
        parts: tuple,
        rows: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, HaltingCarry | None, Tensor | None]:
        """One iteration of ``forward``'s loop, the block and the halting update: (H_{l-1}, S_{l-1},
        the carry, pool(H_{l-1}) if carried over) -> (H_l, S_l, the carry after l, pool(H_l) if carried).
        No host sync and, for a fixed batch, the same shapes at every l: a host compiles it once and
        passes it to ``run`` (``DepthRecurrent.compile``; ``l`` then a 0-dim tensor).
        ``no-halt`` (no unit): H_l = step(H_{l-1}), c and x_prev pass through (None)."""
        if self.unit is None:
            h = step(h, h, rows)
            return h, h, c, x_prev
        h_new = step(h, s, rows)  # H_l   (b, T, d)
        x = self.pool(h, *parts) if x_prev is None else x_prev  # pool(H_{l-1})
        if self.transition:
            x_new = self.pool(h_new, *parts)  # pool(H_l), eq. 17
            x = torch.cat([x, x_new], -1)
        a_hat = self.unit(x)  # alpha_hat_{l-1}  (b, P)
        h, s, c_new = self.advance(l, a_hat, h, h_new, c)
        if self.reuse_pool:  # pool(H_l) as frozen: where the unit took iteration l's update
            updated = ~c.halted if not (self.length_cap or self.undo_crossing) else c_new.steps > c.steps
            x_prev = torch.where(updated.unsqueeze(-1), x_new, x[..., : x_new.shape[-1]])
        return h, s, c_new, x_prev

    def advance(self, l: int | Tensor, a_hat: Tensor, h: Tensor, h_new: Tensor, c: HaltingCarry) -> tuple[Tensor, Tensor, HaltingCarry]:
        """Iteration l's halting update, shared by ``forward`` and ``step``: alpha_hat_{l-1} (b, P),
        H_{l-1} and H_l (b, T, d) -> (H_l with frozen units kept, S_l, the carry after l).
        ``rules`` other than ``paper``: a unit past its length cap takes no update, and (undo) the
        iteration that takes its total to >= threshold is not taken (its H, S, weights and ponder
        stay as before it), the unit frozen from then on (module docstring)."""
        if self.undo_crossing or c.limit is not None:
            return self.advance_reference(l, a_hat, h, h_new, c)
        live = ~c.halted
        live_f = live.to(h.dtype)
        alpha = c.remain * a_hat * live_f  # alpha_{l-1}, eqs. 6 / 15 (0 for frozen units)
        w = alpha.unsqueeze(-1)  # (b, P, 1) broadcasts over T when P == 1
        acc = c.acc + w * h
        total = c.total + alpha
        remain = torch.where(live, c.remain * (1 - a_hat), c.remain)
        ponder = c.ponder + alpha * l  # H_{l-1} costs (l-1)+1
        steps = c.steps + live_f
        h = torch.where(live.unsqueeze(-1), h_new, h)  # halted units stay read-only
        s = (1 - total).unsqueeze(-1) * h + acc  # S_l, eqs. 7 / 16 (unchanged where frozen)
        halted = c.halted | (total >= self.threshold)
        return h, s, HaltingCarry(acc, total, remain, ponder, steps, halted, c.limit)

    def advance_reference(self, l: int | Tensor, a_hat: Tensor, h: Tensor, h_new: Tensor, c: HaltingCarry):
        """``advance`` under the reference code's update flag: a unit takes iteration l only if it is
        running, l <= its cap (if any) and (undo rule) the total after l stays below the threshold;
        otherwise it keeps everything from before l and is frozen."""
        live = ~c.halted
        if c.limit is not None:
            live = live & (l <= c.limit)  # the length cap (force_halt)
        alpha = c.remain * a_hat * live.to(h.dtype)  # alpha_{l-1} if taken
        if self.undo_crossing:
            live = live & (c.total + alpha < self.threshold)  # the crossing iteration is not taken
            alpha = alpha * live.to(h.dtype)
        acc = c.acc + alpha.unsqueeze(-1) * h  # + 0 where not taken: c.acc exactly
        total = c.total + alpha
        remain = torch.where(live, c.remain * (1 - a_hat), c.remain)
        ponder = c.ponder + alpha * l
        steps = c.steps + live.to(h.dtype)
        h = torch.where(live.unsqueeze(-1), h_new, h)
        s = (1 - total).unsqueeze(-1) * h + acc  # S_l; where not taken, S_{l-1} recomputed from the same terms
        halted = ~live if self.undo_crossing else c.halted | ~live | (total >= self.threshold)
        return h, s, HaltingCarry(acc, total, remain, ponder, steps, halted, c.limit)

    # ---- streaming (causal) ----------------------------------------------------------------
    def init_state(self, caches: list, batch_size: int, device=None) -> dict:
        """An empty stream. ``caches``: the block's empty cache for each of the max_iters
        iterations (e.g. ``[block.init_cache(B, device) for _ in range(max_iters)]``). State:
        {"n": positions seen, "caches": per-iteration caches, "sum_prev" / "sum_new": per
        iteration, the running sums over the seen positions of H_{l-1} as frozen (the tensor
        ``forward`` pools) and of the freshly computed H_l (transition-aware), (B, d) each; None
        where the units are not global}. A chunked host (GUTLB) starts a new one per chunk."""
        if not self.causal:
            raise ValueError("depth halting streams causally only (bidirectional units need the whole input)")
        if len(caches) != self.max_iters:
            raise ValueError(f"one cache per iteration: expected {self.max_iters}, got {len(caches)}")
        sums = lambda: [self.unit.fc1.weight.new_zeros(batch_size, self.d_model, device=device) for _ in caches]  # noqa: E731
        pooled = self.unit is not None and self.global_halt
        return {
            "n": 0,
            "caches": list(caches),
            "sum_prev": sums() if pooled else None,
            "sum_new": sums() if pooled and self.transition else None,
        }

    def step(self, block_step: BlockStepFn, h0: Tensor, state: dict) -> tuple[HaltingOutput, dict]:
        """``forward``'s depth loop on t new positions (causal): H_0 of the new positions h0
        (B, t, d) -> (HaltingOutput: S_L (B, t, d), ponder and depth per new position (B, t); the
        new state). ``block_step(h_prev, s_prev, cache) -> (h_new, cache)`` is one iteration of
        the shared block on the new positions given that iteration's cache: the host puts in it
        what ``forward``'s step function closes over (rope / key_scale of the new positions, K, V
        = S_{l-1} or H_{l-1}, GUTLB's memory read). Every position runs all max_iters iterations
        (see the module docstring); the state's ``n`` counts positions, not the host's.

        UT / GUT (``bench/models/universal.py``) keep one such state for the whole stream. GUTLB keeps
        one per chunk, its prefix means and caches restarting at each chunk boundary:

            state = halting.init_state([block.init_cache(B, dev) for _ in range(max_iters)], B, dev)
            def block_step(c, s, cache):  # the chunk's positions so far, memory M^t of earlier chunks
                return block.step(c, cache, context=s if attend_to_mixture else None, memory=memory,
                                  rope=rope, key_scale=key_scale)
            res, state = halting.step(block_step, c0, state)   # res.output: S_L of the new positions
        """
        B, t, _ = h0.shape
        n, L = state["n"], self.max_iters
        caches = list(state["caches"])
        if self.unit is None:  # no-halt: H_L after L iterations, no halting computation
            h = h0
            for i in range(L):
                h, caches[i] = block_step(h, h, caches[i])
            depth = h0.new_full((B, t), float(L))
            return HaltingOutput(h, torch.zeros_like(depth), depth), {**state, "n": n + t, "caches": caches}

        count = torch.arange(n + 1, n + t + 1, device=h0.device).to(h0.dtype).unsqueeze(-1)  # (t, 1) positions <= each

        def prefix_mean(x: Tensor, sums: list, i: int) -> Tensor:  # x (B, t, d) -> its prefix mean (B, t, d)
            csum = sums[i].unsqueeze(1) + x.cumsum(1)  # sum over positions <= each new one
            sums[i] = csum[:, -1]  # the running sum accumulates in forward's cumsum order
            return csum / count

        sum_prev = None if state["sum_prev"] is None else list(state["sum_prev"])
        sum_new = None if state["sum_new"] is None else list(state["sum_new"])
        h, s = h0, h0  # H_0 and S_0
        c = HaltingCarry.start(h0, t, torch.zeros(B, t, dtype=torch.bool, device=h0.device))
        for l in range(1, L + 1):
            h_new, caches[l - 1] = block_step(h, s, caches[l - 1])  # H_l  (B, t, d)
            x = prefix_mean(h, sum_prev, l - 1) if self.global_halt else h  # pool(H_{l-1}), as frozen
            if self.transition:  # pool(H_l), eq. 17: every position's fresh H_l
                x = torch.cat([x, prefix_mean(h_new, sum_new, l - 1) if self.global_halt else h_new], -1)
            h, s, c = self.advance(l, self.unit(x), h, h_new, c)
        new = {"n": n + t, "caches": caches, "sum_prev": sum_prev, "sum_new": sum_new}
        return HaltingOutput(s, c.cost(), c.steps), new


def take(x: Tensor | None, rows: Tensor | None) -> Tensor | None:
    """``x`` (B, ...) restricted to the running sequences: ``x`` itself while all of them run."""
    return x if rows is None or x is None else x[rows]
