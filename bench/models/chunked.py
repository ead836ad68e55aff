"""Chunk recurrence with a memory bottleneck [HALT §4.2, §5.2, Alg. 2 and 4], shared by TLB (and
RSA-TLB, TLB-FR) and GUTLB: the outer loop over chunks, the memory and its update, streaming.

Alg. 2 (lines numbered as printed in [HALT], comments included):

    1-2    M^0 learned slots (S, d);  g the chunk size
    3-4    chunks = H_0 cut into ceil(len / g) chunks of g tokens
    5      for t, C_0 in enumerate(chunks):
    7-13       C_L = the per-chunk stack on C_0, reading M^t           (TLB: L layers; GUTLB: Alg. 4's halting loop)
    14-19      M^t_l = M^t_{l-1} + Attention3_l(M^t_{l-1} -> C_L); += FFN_l, l = 1..U
    20         M^{t+1} = M^t_U
    per-token output: LN(C_L) of each chunk;  sequence summary: mean over slots of LN(M^final)

Options the [HALT] authors' code takes (``model.faithful=reference``): ``final_norm=False``, the
per-token output C_L itself (``TLBEncoder.py`` lines 150, 158, 174 and ``UTLBEncoder.py`` lines 300,
308, 325 return the chunk states with no LayerNorm); ``classifier="mlp"``, the per-token outputs and
the summary through Linear - ReLU before the task's Linear (``layers/feedforward.py: head_mlp``).

The algorithm first: ``reference_forward`` is Alg. 2 / 4 as printed, a plain loop over the chunks
around the family's per-chunk stack written out (``reference_stack``: TLB's lines 8-13 in ``tlb.py``,
GUTLB's lines 8-20 in ``gutlb.py``), the memory update written out; the executor below (batched
first sublayer, stacked projections, compiled chunk step, streaming) is tested equal to it
(tests/test_tlb.py; GUTLB's: tests/test_universal.py).

A subclass gives the per-chunk stack (``chunk_stack``; streaming: ``stack_init_cache`` /
``stack_step``; its reference: ``reference_stack``) and summarises its per-chunk statistics (``chunk_statistics``); everything else
lives here once: the chunking, M^0, the memory update (``update_memory``), the output norms, the
compiled chunk step, streaming. Tokens of chunk t read only M^t, built from chunks < t, so a causal
stack keeps the model causal. A sequence whose chunk holds no real token keeps its old memory.

Chunking: fixed-size slices of g tokens, so chunk boundaries never depend on the padded length
(Alg. 2's torch.chunk(H, ceil(n/g)) gives the same chunks when g divides n); xPos restarts in
every chunk. TLB-FR (``tlb_fr.py``) cuts each sequence into its own k chunks instead.

Speed (``chunk_steps``, the one helper ``forward`` calls): what does not read the memory runs once for
all chunks (embedding, positions, xPos tables, and a stack's first memory-free sublayer:
``first_attention``); only the chunk step runs chunk by chunk. ``compile`` compiles that step once
(every chunk padded to g: one static shape) instead of the unrolled forward, reading its parameters
as one flat tensor (one gradient per chunk instead of one per parameter).

Streaming (causal): the stream is cut at the same multiples of g as ``forward``; a piece is split
where it crosses a chunk boundary. State, bounded by g and S:

    {"pos":    tokens already in the current chunk, 0 <= pos < g
     "memory": M^t (B, S, d), built from the completed chunks
     "stack":  the per-chunk stack's state (``stack_init_cache``), reset at every chunk boundary
     "chunk":  C_L of the current chunk's positions so far (B, pos, d), pre-LN}

    per piece within chunk t:  C_L rows = stack_step(C_0 rows, stack, M^t, xPos at pos..)
                               hidden = LN(C_L rows);  chunk += C_L rows
    once pos reaches g:        M^{t+1} = update_memory(M^t, chunk);  stack, chunk restart

``pooled`` of a step is ``forward``'s on the whole prefix: where the prefix ends inside a chunk,
forward updates the memory with that partial chunk too, so the step does the same on a copy, on
demand (``LazyPooled``): decoding token by token does not pay a memory update per token.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
from torch import Tensor, nn

from .base import Backbone, BackboneOutput, LazyPooled, StreamingUnsupported
from .layers import Rotary, positions_from_mask, rsa_gate_stats
from .layers.attention import stacked_qkv_weights
from .layers.dropout import Dropout
from .layers.feedforward import FeedForward, head_mlp
from .layers.memory import MemoryUpdate, init_slots, keep_where
from .layers.positional import RotaryTables

UPDATE_FFN = ("d_ff", "d_model")  # model.update_ffn: the memory update's FFN width


class ChunkRecurrent(Backbone):
    """Alg. 2 / 4's loop over chunks around a per-chunk stack that a subclass provides."""

    recurrence = "chunk"
    bounded_state = True  # the memory slots and at most one chunk's caches

    supports_streaming = True  # causal instances
    # the reference code's TLB / UTLB encoders read the raw tokens: no START / END (TLBEncoder.py,
    # UTLBEncoder.py forward: no augment_sequence, unlike UniversalTransformerEncoder.py lines 112-113)
    reference_start_end = False
    #: model.faithful=reference: the code's memory update FFN d -> d -> d, its head (Linear - ReLU on
    #: the summary and every position) and C_L with no final LayerNorm (module docstring)
    reference_options = {"update_ffn": "d_model", "classifier": "mlp", "final_norm": False}

    def __init__(self, vocab_size: int, causal: bool, d_model: int, chunk_size: int):
        super().__init__(vocab_size, causal, d_model)
        if chunk_size < 1:
            raise ValueError(f"{type(self).__name__} needs chunk_size >= 1, got {chunk_size}")
        self.chunk_size = chunk_size  # g
        self.embed = nn.Embedding(vocab_size, d_model)

    def build_memory(
        self,
        n_heads: int,
        d_ff: int,
        memory_slots: int,
        update_layers: int,
        *,
        update_ffn: str = "d_ff",
        classifier: str = "linear",
        final_norm: bool = True,
        **kw,
    ) -> None:
        """M^0, the U update layers (Alg. 2 lines 14-19), the output norms and the chunks' xPos; a
        subclass calls it where its parameters are initialised in order. ``update_ffn``: the memory
        update's FFN width, ``d_ff`` or ``d_model`` (d -> d -> d, the reference code's
        ``CrossTransformerBlock.py`` lines 19-23); ``classifier``: ``head_mlp``'s; ``final_norm``: the
        per-token outputs LayerNormed (``ln_out``) or, False, not (the code's). ``kw``: dropout,
        attn_dropout, backend."""
        d = self.d_model
        if update_ffn not in UPDATE_FFN:
            raise ValueError(f"update_ffn must be one of {', '.join(UPDATE_FFN)}, not {update_ffn!r}")
        width = d_ff if update_ffn == "d_ff" else d
        self.updates = nn.ModuleList(MemoryUpdate(d, n_heads, width, **kw) for _ in range(update_layers))
        self.memory0 = init_slots(memory_slots, d)  # M^0
        self.drop = Dropout(kw["dropout"])
        self.ln_out = nn.LayerNorm(d) if final_norm else nn.Identity()
        self.ln_mem = nn.LayerNorm(d)
        self.rotary = Rotary(d // n_heads, use_xpos=True)  # weightless: one for every layer
        self.classifier = head_mlp(d, classifier)  # Linear - ReLU on the pooled memory and per token, or None

    def family_reference_init(self) -> None:
        """``model.init=reference-full``'s chunk-model part: M^0 zero (``TLBEncoder.py`` line 33,
        ``UTLBEncoder.py`` line 27) and every feed-forward (the chunk blocks', GUTLB's gate, the memory
        update's) back at torch's default: ``TLBBlock.py``, ``GatedTLBBlock.py``, ``CrossTransformerBlock.py``
        call no init."""
        nn.init.zeros_(self.memory0)
        for module in self.modules():
            if isinstance(module, FeedForward):
                module.up.reset_parameters()
                module.down.reset_parameters()

    # ---- the per-chunk stack: a subclass's ------------------------------------------------------
    def chunk_stack(self, c0: Tensor, rope, mask: Tensor, memory: Tensor, a1: Tensor | None) -> tuple[Tensor, tuple]:
        """Alg. 2 lines 7-13 on one chunk: C_0 (B, g, d), its xPos tables, mask (B, g), M^t (B, S, d)
        -> (C_L (B, g, d) before ``ln_out``, the chunk's statistics); ``a1``: ``first_attention``'s
        output for this chunk, if any."""
        raise NotImplementedError

    def reference_stack(self, c0: Tensor, mask: Tensor, memory: Tensor, rope) -> tuple[Tensor, tuple]:
        """``chunk_stack`` as the paper prints it, eval mode (``reference_forward``): C_0 (B, g, d), mask
        (B, g), M^t (B, S, d), the chunk's xPos tables -> (C_L, the statistics ``chunk_statistics`` reads)."""
        raise NotImplementedError

    def stack_init_cache(self, batch_size: int, device=None):
        """The stack's streaming state at the start of a chunk."""
        raise NotImplementedError

    def stack_step(self, x: Tensor, cache, memory: Tensor, rope, key_scale: Tensor | None) -> tuple[Tensor, object]:
        """The stack on t new positions of the current chunk: C_0 rows (B, t, d), reading M^t, with the
        xPos tables of the chunk positions (``Rotary.continuing``) -> (C_L rows (B, t, d), the new state)."""
        raise NotImplementedError

    def self_attentions(self) -> list:
        """The stack's chunk self-attentions (their [W_q; W_k; W_v] stacked once per forward)."""
        return []

    def first_attention(self, chunks: Tensor, tables: RotaryTables, masks: Tensor, n: int) -> Tensor | None:
        """A memory-free first sublayer of the stack for the first n chunks at once (n, B, g, d), or None."""
        return None

    def chunk_statistics(self, stats: list, active: Tensor) -> tuple[dict, Tensor | None]:
        """The chunks' statistics (``chunk_stack``'s, in order) and which chunks have a real token
        (n, B) -> (forward's statistics, its aux loss or None)."""
        return {}, None

    # ---- the chunk recurrence ------------------------------------------------------------------
    def initial_memory(self, batch: int) -> Tensor:
        return self.memory0.expand(batch, -1, -1)  # M^0 (B, S, d)

    def summary(self, memory: Tensor) -> Tensor:
        """The sequence summary: LN(M) (B, S, d) averaged over slots (B, d), through ``classifier``."""
        pooled = self.ln_mem(memory).mean(dim=1)
        return pooled if self.classifier is None else self.classifier(pooled)

    def token_outputs(self, c_last: Tensor) -> Tensor:
        """C_L rows (B, n, d) -> the per-token outputs a task's head reads: ``ln_out`` (LN, or with
        ``final_norm=False`` C_L itself), through ``classifier``'s Linear - ReLU where it is ``mlp``."""
        hidden = self.ln_out(c_last)
        return hidden if self.classifier is None else self.classifier(hidden)

    def update_memory(self, memory: Tensor, c_last: Tensor, mask: Tensor | None = None, active: Tensor | None = None) -> Tensor:
        """Alg. 2 lines 14-20: M^t (B, S, d) attends to a chunk's C_L (B, n, d) (its real positions:
        ``mask`` (B, n)) through the U update layers -> M^{t+1}; the old memory where the chunk has no
        real token (``active`` (B,) False)."""
        new_memory = memory
        for update in self.updates:
            new_memory = update(new_memory, c_last, mask)
        return new_memory if active is None else keep_where(active, new_memory, memory)

    def chunk_step(self, c0: Tensor, rope, mask: Tensor, active: Tensor, memory: Tensor, a1: Tensor | None = None):
        """One iteration of Alg. 2's loop (lines 5-20): -> (C_L (B, g, d) before ``ln_out``, M^{t+1}, the
        chunk's statistics)."""
        c_last, stats = self.chunk_stack(c0, rope, mask, memory, a1)
        update = getattr(self, "_update_step", self.update_memory)  # compiled on its own by some subclasses
        return c_last, update(memory, c_last, mask, active), stats

    def forward_chunk(self, tokens: Tensor, mask: Tensor, memory: Tensor) -> tuple[Tensor, Tensor]:
        """One chunk (B, g) and M^t (B, S, d) -> (per-token states (B, g, d), M^{t+1})."""
        c0 = self.drop(self.embed(tokens))  # C_0 (B, g, d)
        rope = self.rotary.tables(positions_from_mask(mask))  # xPos restarts in every chunk
        c, new_memory, _ = self.chunk_step(c0, rope, mask, mask.any(-1), memory)
        return self.token_outputs(c), new_memory

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        B, T = tokens.shape
        mask = self.full_mask(tokens, mask)  # (B, T)
        chunks, masks, tables = self.split(tokens, mask)  # C_0 (n, B, g, d), (n, B, g), xPos (n, B, g, hd): lines 3-4
        active = masks.any(-1)  # (n, B): the chunk has a real token
        memory = self.initial_memory(B)  # M^0 (B, S, d): line 1
        outs, per_chunk = [], []
        with self.chunk_steps(chunks, tables, masks, active, T) as steps:
            for step in steps:  # line 5: for t, C_0 in enumerate(chunks)
                c_last, memory, chunk_stats = step(memory)  # C_L of chunk t (lines 7-13), M^{t+1} (lines 14-20)
                outs.append(c_last)
                per_chunk.append(chunk_stats)
        hidden = self.token_outputs(torch.cat(outs, dim=1)[:, :T])  # (B, T, d)
        pooled = self.summary(memory)  # (B, d) LN(final memory), mean over slots
        extra, aux = self.chunk_statistics(per_chunk, active)
        stats = {"n_chunks": float(len(outs)), **rsa_gate_stats(self), **extra}
        aux = self.zero_aux(hidden) if aux is None else aux
        return BackboneOutput(hidden=hidden, aux_loss=aux, stats=stats, pooled=pooled)

    def reference_forward(self, tokens: Tensor, mask: Tensor | None = None, chunk_size: int | None = None) -> BackboneOutput:
        """Alg. 2 (TLB) / Alg. 4 (GUTLB) as the paper prints them, eval mode: one chunk after another,
        the family's stack written out (``reference_stack``), then the memory update written out;
        ``forward``, the compiled chunk step and ``step`` are tested equal to it (tests/test_tlb.py; GUTLB:
        tests/test_universal.py). Comments: Alg. 2's lines (Alg. 4's). ``chunk_size``:
        g if not the model's (TLB-FR: each sequence's own)."""
        if self.training:
            raise RuntimeError("reference_forward is the eval-mode forward (no dropout): call model.eval() first")
        mask = self.full_mask(tokens, mask)
        (B, T), g = tokens.shape, chunk_size or self.chunk_size  # line 2: g the chunk size
        memory = self.initial_memory(B)  # line 1 (1): M^0
        h0 = self.embed(tokens)  # H_0
        outs, per_chunk, active = [], [], []
        for start in range(0, T, g):  # lines 3-5 (3-4, 6): k = ceil(len(H_0) / g) chunks of g tokens, the last one shorter
            c0, m = h0[:, start : start + g], mask[:, start : start + g]  # C_0 (B, g, d), its real tokens
            rope = self.rotary.tables(positions_from_mask(m))  # xPos restarts in every chunk
            c_last, chunk_stats = self.reference_stack(c0, m, memory, rope)  # lines 7-13 (8-20)
            new = memory  # line 15 (21): M^t_0 = M^t
            for update in self.updates:  # lines 16-19 (23-26), each pre-LN with a residual
                new = new + update.attn(update.ln_mem(new), context=update.ln_chunk(c_last), key_mask=m)  # Attention3_l(M^t_{l-1} -> C_L)
                new = new + update.ffn(update.ln_ffn(new))  # FeedForward_l
            memory = torch.where(m.any(-1).view(B, 1, 1), new, memory)  # line 20 (27): M^{t+1}; a padding chunk keeps M^t
            outs.append(c_last)
            per_chunk.append(chunk_stats)
            active.append(m.any(-1))
        hidden = self.token_outputs(torch.cat(outs, dim=1))  # (B, T, d): LN(C_L) of each chunk
        extra, aux = self.chunk_statistics(per_chunk, torch.stack(active))
        aux = self.zero_aux(hidden) if aux is None else aux
        return BackboneOutput(hidden=hidden, aux_loss=aux, stats=extra, pooled=self.summary(memory))

    def split(self, tokens: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, RotaryTables]:
        """Everything that does not read the memory, for every chunk at once: C_0 = Dropout(Embed(tokens))
        cut into chunks of g (the last one padded to g, masked), chunk-major (n, B, g, d) (chunk t's
        tensors contiguous and shaped alike whatever n is), their masks (n, B, g) and xPos tables (the
        positions restart in every chunk; each chunk's own xPos center, max / 2)."""
        B, T = tokens.shape
        g = self.chunk_size
        n = -(-T // g)  # number of chunks, ceil(T / g)
        pad = n * g - T
        c0 = self.drop(self.embed(tokens))  # (B, T, d)
        if pad:
            c0 = torch.cat((c0, c0.new_zeros(B, pad, c0.shape[-1])), dim=1)  # (B, n g, d)
            mask = torch.cat((mask, mask.new_zeros(B, pad)), dim=1)  # (B, n g)
        chunks = c0.view(B, n, g, -1).transpose(0, 1).contiguous()  # (n, B, g, d)
        masks = mask.view(B, n, g).transpose(0, 1).contiguous()  # (n, B, g)
        pos = positions_from_mask(masks)  # (n, B, g): 0.. within each chunk
        center = pos.amax(dim=(1, 2), keepdim=True) / 2  # (n, 1, 1)
        return chunks, masks, self.rotary.tables(pos, center)  # cos / sin / scale (n, B, g, hd)

    @contextlib.contextmanager
    def chunk_steps(self, chunks: Tensor, tables: RotaryTables, masks: Tensor, active: Tensor, T: int):
        """The speed machinery around ``chunk_step``: yields one callable per chunk, M^t -> (C_L, M^{t+1},
        statistics). Eager: the last chunk keeps its own length (outputs as chunk by chunk, bitwise) and
        the self-attentions' [W_q; W_k; W_v] are stacked once. Compiled (``compile``): every chunk g long
        (one static shape), the last one's padding masked, the parameters as one flat tensor."""
        n, _, g, _ = chunks.shape
        step = getattr(self, "_chunk_step", None)
        if step is None:
            widths, first = [min(g, T - s) for s in range(0, T, g)], None
            weights, step = stacked_qkv_weights(self.self_attentions()), self.chunk_step
        else:
            widths, first = [g] * n, Tensor.contiguous  # first: M^0 laid out as every later memory
            weights = contextlib.nullcontext()
            if getattr(self, "_flat_parameters", False):
                named = self.step_parameters()
                layout = tuple(name for name, _ in named), tuple(tuple(p.shape) for _, p in named)
                step = functools.partial(step, layout, torch.cat([p.reshape(-1) for _, p in named]))  # flat_chunk_step
        with weights:
            a1 = self.first_attention(chunks, tables, masks, sum(w == g for w in widths))  # (n_full, B, g, d) or None
            a1 = () if a1 is None else a1.unbind(0)  # unbind: one backward op (stack), not one per chunk

            def chunk(t: int, c: Tensor, w: int):
                def run(memory: Tensor):
                    rope = RotaryTables(*(None if x is None else x[t, :, :w].unsqueeze(1) for x in tables))  # B,1,w,hd
                    memory = memory if (t or first is None) else first(memory)
                    return step(c[:, :w], rope, masks[t, :, :w], active[t], memory, a1[t] if t < len(a1) else None)

                return run

            yield [chunk(t, c, w) for t, (c, w) in enumerate(zip(chunks.unbind(0), widths))]

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile`` (in place): compiles the chunk step once, reused by
        every chunk of every batch, instead of the whole forward, whose graph unrolls the chunk loop
        (one graph per padded length, minutes to compile each). The step compiled is ``flat_chunk_step``."""
        self._chunk_step = torch.compile(self.flat_chunk_step, *args, **kwargs)
        self._flat_parameters = True

    def step_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The parameters the compiled chunk step reads (``flat_chunk_step``)."""
        raise NotImplementedError

    def flat_chunk_step(self, layout: tuple, flat: Tensor, *args) -> tuple[Tensor, Tensor, tuple]:
        """``chunk_step`` reading its parameters as views of ONE flat tensor (``step_parameters``
        concatenated, once per forward; ``layout``: their names and shapes): each chunk's backward then
        returns one gradient, for ``flat``, so autograd sums the chunks' parameter gradients in one add
        per chunk instead of one per parameter, and splits the sum to the parameters once per step."""
        names, shapes = layout
        views = flat.split([math.prod(s) for s in shapes])
        params = {n: v.view(s) for n, v, s in zip(names, views, shapes)}
        with torch.nn.utils.stateless._reparametrize_module(self, params):
            return self.chunk_step(*args)

    # ---- streaming (causal) --------------------------------------------------------------------
    def init_state(self, batch_size: int, device=None) -> dict:
        if not (self.supports_streaming and self.causal):
            raise StreamingUnsupported(self.streaming_refusal())
        memory = self.memory0.detach().expand(batch_size, -1, -1).to(device or self.memory0.device).clone()  # M^0
        return {
            "pos": 0,
            "memory": memory,
            "stack": self.stack_init_cache(batch_size, memory.device),
            "chunk": memory.new_zeros(batch_size, 0, self.d_model),
        }

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        if not (self.supports_streaming and self.causal):
            raise StreamingUnsupported(self.streaming_refusal())
        B, g = tokens.shape[0], self.chunk_size
        pos, memory, cache, chunk = state["pos"], state["memory"], state["stack"], state["chunk"]
        outs, start = [], 0
        while start < tokens.shape[1]:
            piece = tokens[:, start : start + g - pos]  # never crosses a chunk boundary
            t = piece.shape[1]
            rope, key_scale = self.rotary.continuing(pos, t, tokens.device)  # xPos restarts in every chunk
            c, cache = self.stack_step(self.drop(self.embed(piece)), cache, memory, rope, key_scale)  # C_L (B, t, d)
            chunk = torch.cat((chunk, c), dim=1)  # (B, pos + t, d)
            outs.append(self.token_outputs(c))
            pos, start = pos + t, start + t
            if pos == g:  # chunk complete: M^{t+1} = MemoryUpdate(M^t, C_L); the next chunk starts afresh
                memory = self.update_memory(memory, chunk)
                pos, cache, chunk = 0, self.stack_init_cache(B, tokens.device), chunk.new_zeros(B, 0, self.d_model)
        hidden = torch.cat(outs, dim=1)  # (B, t, d)

        # this step's memory, chunk and pos, not the state's later ones
        def pool(memory: Tensor = memory, chunk: Tensor = chunk, pos: int = pos) -> Tensor:
            final = memory if pos == 0 else self.update_memory(memory, chunk)  # forward's trailing partial chunk
            return self.summary(final)  # (B, d), as forward's on the whole prefix

        # pooled on demand (mid-chunk it costs a memory update, ~20-25% of a step): computed where read
        out = LazyPooled(hidden, self.zero_aux(hidden), rsa_gate_stats(self), pool=pool)
        return out, {"pos": pos, "memory": memory, "stack": cache, "chunk": chunk}
