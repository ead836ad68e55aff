"""Temporal Latent Bottleneck (Didolkar et al., 2022) as simplified in [HALT §4.2, Alg. 2].

    chunks = split(H_0) into chunks of g tokens          (TLB-FR: into k = 5 chunks [HALT §6.6])
    M^0 = learned slots (S, d)
    for t, C_0 in enumerate(chunks):
        for l = 1..L:                                       # chunk processing
            A_l = C_{l-1} + Attention1_l(C_{l-1})           #   self-attention, xPos restarting per chunk
            A_l = A_l + Attention2_l(A_l -> M^t)            #   read the past (no positions)
            C_l = A_l + FFN_l(A_l)
        M^t_0 = M^t
        for l = 1..U:                                       # recurrent memory update
            M^t_l = M^t_{l-1} + Attention3_l(M^t_{l-1} -> C_L);  M^t_l += FFN_l(M^t_l)
        M^{t+1} = M^t_U
    per-token output: LN(C_L) of each chunk;  sequence summary: mean over slots of LN(M^final)

(Every "+ f(.)" is pre-LN with a residual [HALT §3]; ``bench.models.layers.memory`` holds the read
and update layers.) Tokens of chunk t read only M^t, built from chunks < t, and the chunk
self-attention is causal when the task requires it, so a causal TLB never lets position t see
positions > t. A chunk made only of padding keeps the old memory (as in the reference code).

Chunking: fixed-size slices of g tokens, so chunk boundaries do not depend on the padded
length (Alg. 2's torch.chunk(H, ceil(n/g)) gives the same chunks when g divides n). TLB-FR
slices into ceil(T/k)-token chunks, i.e. exactly torch.chunk(H, k); its boundaries depend on
the padded length T of the batch (never on token content).

Cost (issue 25: kernel launches, not arithmetic, bound a chunk-recurrent step): ``forward`` does
everything that does not read the memory once for all chunks (embedding, dropout, positions, xPos
tables, layer 1's self-attention sublayer, ``ln_out``) and runs only the recurrence, ``chunk_states``,
chunk by chunk; ``compile`` compiles that chunk step once instead of the unrolled forward.

Streaming (causal TLB): the stream is cut at the same multiples of g as ``forward``; a piece is
split where it crosses a chunk boundary. State, bounded by g and S:

    {"pos":    tokens already in the current chunk, 0 <= pos < g
     "memory": M^t (B, S, d), built from the completed chunks
     "stack":  the per-chunk state of the chunk-processing stack (TLB: one KV cache per layer,
               keys rotated at positions 0..pos-1 of the chunk, with RSA's REM state), reset at
               every chunk boundary as the chunk's attention and REM restart
     "chunk":  C_L of the current chunk's positions so far (B, pos, d), pre-LN}

    per piece within chunk t:  C_L rows = stack_step(C_0 rows, stack, M^t, xPos at pos..)
                               hidden = LN(C_L rows);  chunk += C_L rows
    once pos reaches g:        M^{t+1} = update_memory(M^t, chunk);  stack, chunk restart

The chunk stack is two overridable methods, ``stack_init_cache(batch_size, device)`` and
``stack_step(x, cache, memory, rope, key_scale) -> (C_L rows, cache)``; the chunk bookkeeping
(splitting, resets, collecting C_L, the memory update) lives in ``step`` only, so GUTLB streams
by overriding the stack methods. ``pooled`` of a step is ``forward``'s on the whole prefix:
where the prefix ends inside a chunk, forward updates the memory with that partial chunk too, so
the step does the same on a copy (the state keeps M^t until the chunk completes), on demand: a
step's output computes it when first read (``LazyPooled``), so decoding token by token does not
pay a memory update per token.
"""
from __future__ import annotations

import contextlib
import functools
import math

import torch
from torch import Tensor, nn

from .base import Backbone, BackboneOutput, LazyPooled, StreamingUnsupported
from .layers import Rotary, TransformerBlock, positions_from_mask, rsa_gate_stats
from .layers.attention import stacked_qkv_weights
from .layers.dropout import Dropout
from .layers.memory import MemoryUpdate, init_slots, keep_where
from .layers.positional import RotaryTables


class TLB(Backbone):
    supports_streaming = True  # causal instances; TLB-FR (n_chunks > 0) cannot

    def __init__(
        self,
        vocab_size: int,
        causal: bool,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        chunk_size: int = 20,
        n_chunks: int = 0,
        memory_slots: int = 20,
        update_layers: int = 1,
        attn_backend: str = "sdpa",
        rsa: dict | None = None,
    ):
        super().__init__(vocab_size, causal, d_model)
        if chunk_size < 1 and n_chunks < 1:
            raise ValueError("TLB needs chunk_size >= 1 (or n_chunks >= 1 for TLB-FR)")
        self.chunk_size, self.n_chunks = chunk_size, n_chunks
        kw = dict(dropout=dropout, attn_dropout=attn_dropout, backend=attn_backend)
        self.embed = nn.Embedding(vocab_size, d_model)
        # chunk-processing layers: Attention1 (self, xPos) -> Attention2 (memory read) -> FFN
        self.layers = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, rsa=rsa, read=True, **kw) for _ in range(n_layers))
        self.updates = nn.ModuleList(MemoryUpdate(d_model, n_heads, d_ff, **kw) for _ in range(update_layers))
        self.memory0 = init_slots(memory_slots, d_model)  # M^0
        self.drop = Dropout(dropout)
        self.ln_out = nn.LayerNorm(d_model)
        self.ln_mem = nn.LayerNorm(d_model)
        self.rotary = Rotary(d_model // n_heads, use_xpos=True)  # weightless: one for every layer

    def chunk_length(self, T: int) -> int:
        """g for TLB; ceil(T / k) for TLB-FR (n_chunks = k > 0 takes precedence)."""
        return math.ceil(T / self.n_chunks) if self.n_chunks > 0 else self.chunk_size

    def initial_memory(self, batch: int) -> Tensor:
        return self.memory0.expand(batch, -1, -1)  # (B, S, d)

    def forward_chunk(self, tokens: Tensor, mask: Tensor, memory: Tensor) -> tuple[Tensor, Tensor]:
        """One chunk (B, g) and M^t (B, S, d) -> (per-token states (B, g, d), M^{t+1})."""
        c0 = self.drop(self.embed(tokens))  # C_0 (B, g, d)
        rope = self.rotary.tables(positions_from_mask(mask))  # xPos restarts in every chunk; shared by the layers
        c, new_memory, _ = self.chunk_states(c0, rope, mask, mask.any(-1), memory)
        return self.ln_out(c), new_memory

    def chunk_states(
        self, c0: Tensor, rope, mask: Tensor, active: Tensor, memory: Tensor, a1: Tensor | None = None
    ) -> tuple[Tensor, Tensor, tuple]:
        """Alg. 2's recurrent part of one chunk: C_0 (B, g, d), its xPos tables, mask (B, g), whether each
        sequence has a real token in it (B,) and M^t (B, S, d) -> (C_L (B, g, d) before ``ln_out``, M^{t+1},
        the chunk's statistics: none for TLB, GUTLB's halting). ``a1``: A_1 = C_0 + Attention1_1(C_0)
        (B, g, d) when ``forward`` computed it for every chunk at once."""
        c = c0
        key_mask = None if self.causal else mask  # causal + right padding: real tokens never see pads
        layers = iter(self.layers)
        if a1 is not None:  # layer 1 resumes at its memory read (Attention2) and FFN
            first = next(layers)
            c = first.ffn_residual(first.read(a1, memory))
        for layer in layers:
            c = layer(c, memory=memory, rope=rope, key_mask=key_mask, causal=self.causal)
        new_memory = memory
        for update in self.updates:
            new_memory = update(new_memory, c, mask)
        return c, keep_where(active, new_memory, memory), ()

    def self_attentions(self) -> list:
        """The chunk self-attentions (Attention1 of every layer; GUTLB: its one block's)."""
        block = getattr(self, "block", None)
        return [layer.attn for layer in self.layers] + ([block.attn] if block is not None else [])

    def compile(self, *args, **kwargs) -> None:
        """``train.compile`` / ``bench cost --compile`` (``backbone.compile()``, in place): compiles the
        chunk step ``chunk_states``, compiled once and reused by every chunk of every batch (``forward``
        then pads the last chunk to g and masks it: one static shape), instead of the whole forward,
        whose graph unrolls the chunk loop (one graph per padded length, minutes to compile each).
        The step compiled is ``flat_chunk_states``: its parameters come as one flat tensor."""
        self._chunk_step = torch.compile(self.flat_chunk_states, *args, **kwargs)
        self._step_reads_flat = True  # forward passes it the flat parameters (GUTLB's own compile: not)

    def step_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """The parameters the compiled chunk step reads: the layers' and the memory updates', less
        layer 1's self-attention sublayer (compiled, every chunk is g long, so ``first_attention`` runs
        it outside the step for every chunk)."""
        first = {id(p) for m in (self.layers[0].attn, self.layers[0].ln_attn) for p in m.parameters()} if self.layers else set()
        return [(n, p) for n, p in self.named_parameters() if n.startswith(("layers.", "updates.")) and id(p) not in first]

    def flat_chunk_states(self, flat: Tensor, *args) -> tuple[Tensor, Tensor, tuple]:
        """``chunk_states`` reading its parameters as views of ONE flat tensor (``step_parameters``
        concatenated, once per forward): each chunk's backward then returns one gradient, for ``flat``,
        so autograd sums the chunks' parameter gradients in one add per chunk instead of one per
        parameter, and splits the sum to the parameters once per step."""
        names, shapes = self._flat_layout
        views = flat.split([math.prod(s) for s in shapes])
        params = {n: v.view(s) for n, v, s in zip(names, views, shapes)}
        with torch.nn.utils.stateless._reparametrize_module(self, params):
            return self.chunk_states(*args)

    def first_attention(self, chunks: Tensor, tables: RotaryTables, masks: Tensor, n: int) -> Tensor | None:
        """Layer 1's self-attention sublayer reads no memory (Alg. 2: A_1 = C_0 + Attention1_1(C_0)):
        one batched call over the first n chunks, rows (t, b), instead of one call per chunk. Chunks
        C_0 (N, B, g, d), their xPos tables (N, B, g, hd) and masks (N, B, g) -> A_1 (n, B, g, d), or
        None (no layer stack (GUTLB) or n = 0). ``forward`` leaves a shorter last chunk its own call
        (eager: bitwise as chunk by chunk, no padded keys)."""
        if not self.layers or n == 0:
            return None
        _, B, g, d = chunks.shape
        layer = self.layers[0]
        x = chunks[:n].reshape(n * B, g, d)  # (n B, g, d)
        rope = RotaryTables(*(None if v is None else v[:n].reshape(n * B, 1, g, v.shape[-1]) for v in tables))
        key_mask = None if self.causal else masks[:n].reshape(n * B, g)
        a = layer.attn(layer.ln_attn(x), rope=rope, key_mask=key_mask, causal=self.causal)  # pre-LN (TransformerBlock.mix)
        return (x + layer.drop(a)).view(n, B, g, d)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> BackboneOutput:
        B, T = tokens.shape
        # TLB-FR's chunk length follows the longest real sequence (trailing padding never changes
        # the chunking): a data-dependent shape, so it reads the lengths (one host sync). TLB's doesn't.
        longest = T if (self.n_chunks <= 0 or mask is None) else int(mask.sum(-1).max())
        mask = self.full_mask(tokens, mask)  # (B, T)
        g = self.chunk_length(longest)
        # Everything that does not read the memory, for every chunk at once (one call each instead of
        # one per chunk): C_0 = Dropout(Embed(tokens)), the chunk positions (restarting per chunk), their
        # xPos tables, and which sequences have a real token in each chunk. The last chunk is padded to g.
        n = -(-T // g)  # number of chunks, ceil(T / g)
        pad = n * g - T
        c0 = self.drop(self.embed(tokens))  # (B, T, d)
        if pad:  # the last chunk padded to g (masked)
            c0 = torch.cat((c0, c0.new_zeros(B, pad, c0.shape[-1])), dim=1)  # (B, n g, d)
            mask = torch.cat((mask, mask.new_zeros(B, pad)), dim=1)  # (B, n g)
        # chunk-major (n, B, g, ...): chunk t's tensors are contiguous and shaped alike whatever n is
        chunks = c0.view(B, n, g, -1).transpose(0, 1).contiguous()  # (n, B, g, d)
        masks = mask.view(B, n, g).transpose(0, 1).contiguous()  # (n, B, g)
        pos = positions_from_mask(masks)  # (n, B, g): 0.. within each chunk
        center = pos.amax(dim=(1, 2), keepdim=True) / 2  # (n, 1, 1): each chunk's own xPos center, max/2
        tables = self.rotary.tables(pos, center)  # cos / sin / scale (n, B, g, hd)
        active = masks.any(-1)  # (n, B)
        memory = self.initial_memory(B)  # M^0 (B, S, d)
        step = getattr(self, "_chunk_step", None)  # the compiled chunk step (``compile``), if any
        if step is None:  # eager: the last chunk keeps its own length (outputs as chunk by chunk, bitwise)
            step, widths = self.chunk_states, [min(g, T - s) for s in range(0, T, g)]
            stacked = stacked_qkv_weights(self.self_attentions())  # [W_q; W_k; W_v] once per forward
        else:  # compiled: every chunk g long (one static shape), the last one's padding masked
            widths = [g] * n
            memory = memory.contiguous()  # M^0 laid out as every later memory (no second graph for chunk 0)
            stacked = contextlib.nullcontext()
            if getattr(self, "_step_reads_flat", False):  # the step's parameters as one tensor (one gradient per chunk)
                named = self.step_parameters()
                self._flat_layout = [n for n, _ in named], [tuple(p.shape) for _, p in named]
                step = functools.partial(step, torch.cat([p.reshape(-1) for _, p in named]))  # flat_chunk_states
        n_full = sum(w == g for w in widths)
        outs, extras = [], []
        with stacked:
            a1 = self.first_attention(chunks, tables, masks, n_full)  # (n_full, B, g, d) or None
            a1 = () if a1 is None else a1.unbind(0)  # unbind: one backward op (stack), not one per chunk
            for t, (c, w) in enumerate(zip(chunks.unbind(0), widths)):
                rope = RotaryTables(*(None if x is None else x[t, :, :w].unsqueeze(1) for x in tables))  # (B, 1, w, hd)
                a1_t = a1[t] if t < len(a1) else None
                h, memory, extra = step(c[:, :w], rope, masks[t, :, :w], active[t], memory, a1_t)
                outs.append(h)
                extras.append(extra)
        self._chunk_extras = extras  # the chunks' statistics (GUTLB's halting), read by a subclass's forward
        hidden = self.ln_out(torch.cat(outs, dim=1)[:, :T])  # (B, T, d)
        pooled = self.ln_mem(memory).mean(dim=1)  # (B, d) LN(final memory), mean over slots
        stats = {"n_chunks": float(len(outs)), **rsa_gate_stats(self)}
        return BackboneOutput(hidden=hidden, aux_loss=self.zero_aux(hidden), stats=stats, pooled=pooled)

    # ---- streaming (causal) ------------------------------------------------------------------
    def update_memory(self, memory: Tensor, c_last: Tensor, mask: Tensor | None = None) -> Tensor:
        """Alg. 2's recurrent memory update: M^t (B, S, d) attends to a chunk's C_L (B, n, d),
        through the U update layers -> M^{t+1} (B, S, d)."""
        for update in self.updates:
            memory = update(memory, c_last, mask)
        return memory

    def stack_init_cache(self, batch_size: int, device=None) -> list:
        """The chunk stack's state at the start of a chunk: an empty KV cache per layer (RSA: a
        zero REM state, the REM restarting in every chunk as forward's per-chunk attention does)."""
        return [layer.init_cache(batch_size, device) for layer in self.layers]

    def stack_step(self, x: Tensor, cache: list, memory: Tensor, rope, key_scale: Tensor | None) -> tuple[Tensor, list]:
        """The L chunk-processing layers on t new positions of the current chunk: x = C_0 (B, t, d),
        ``memory`` = M^t (B, S, d) read by every layer, ``rope`` / ``key_scale`` the xPos tables of
        the chunk positions (``Rotary.continuing``) -> (C_L (B, t, d), pre-LN; the new cache)."""
        caches = []
        for layer, layer_cache in zip(self.layers, cache):
            x, layer_cache = layer.step(x, layer_cache, memory=memory, rope=rope, key_scale=key_scale)
            caches.append(layer_cache)
        return x, caches

    def streaming_refusal(self) -> str:
        if self.n_chunks > 0:
            return f"{type(self).__name__} with n_chunks={self.n_chunks} cannot stream: its chunk length ceil(n / k) needs the whole length n"
        return super().streaming_refusal()

    def check_streams(self) -> None:
        """Causal, fixed chunks, and a class whose stack streams (GUTLB's until it overrides the stack)."""
        if not (self.supports_streaming and self.causal and self.n_chunks <= 0):
            raise StreamingUnsupported(self.streaming_refusal())

    def init_state(self, batch_size: int, device=None) -> dict:
        self.check_streams()
        memory = self.memory0.detach().expand(batch_size, -1, -1).to(device or self.memory0.device).clone()  # M^0
        return {"pos": 0, "memory": memory, "stack": self.stack_init_cache(batch_size, memory.device),
                "chunk": memory.new_zeros(batch_size, 0, self.d_model)}

    def step(self, tokens: Tensor, state: dict) -> tuple[BackboneOutput, dict]:
        self.check_streams()
        B, g = tokens.shape[0], self.chunk_size
        pos, memory, cache, chunk = state["pos"], state["memory"], state["stack"], state["chunk"]
        outs, start = [], 0
        while start < tokens.shape[1]:
            piece = tokens[:, start : start + g - pos]  # never crosses a chunk boundary
            t = piece.shape[1]
            rope, key_scale = self.rotary.continuing(pos, t, tokens.device)  # xPos restarts in every chunk
            c, cache = self.stack_step(self.drop(self.embed(piece)), cache, memory, rope, key_scale)  # C_L (B, t, d)
            chunk = torch.cat((chunk, c), dim=1)  # (B, pos + t, d)
            outs.append(self.ln_out(c))
            pos, start = pos + t, start + t
            if pos == g:  # chunk complete: M^{t+1} = MemoryUpdate(M^t, C_L); the next chunk starts afresh
                memory = self.update_memory(memory, chunk)
                pos, cache, chunk = 0, self.stack_init_cache(B, tokens.device), chunk.new_zeros(B, 0, self.d_model)
        hidden = torch.cat(outs, dim=1)  # (B, t, d)

        def pool(memory: Tensor = memory, chunk: Tensor = chunk, pos: int = pos) -> Tensor:  # this step's, not the state's later ones
            final = memory if pos == 0 else self.update_memory(memory, chunk)  # forward's trailing partial chunk
            return self.ln_mem(final).mean(dim=1)  # (B, d), as forward's on the whole prefix

        # pooled on demand (mid-chunk it costs a memory update, ~20-25% of a step): computed where read
        out = LazyPooled(hidden, self.zero_aux(hidden), rsa_gate_stats(self), pool=pool)
        return out, {"pos": pos, "memory": memory, "stack": cache, "chunk": chunk}
