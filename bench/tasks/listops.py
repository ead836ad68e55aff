"""ListOps (Nangia & Bowman 2018) with the length / argument splits of [HALT §6.4, Table 1].

A sample is a nested list of operations over digits; the label is its value (10 classes):

    tokens: <start> [MAX 2 9 [MIN 4 7 ] 0 ] <end>        label: 9
            MIN(4, 7) = 4, then MAX(2, 9, 4, 0) = 9

Operators: MIN, MAX, MED (median; for an even count the floor of the mean of the two middle
values, i.e. ``int(np.median(x))`` as in the original generator) and SM (sum mod 10).
``length`` is the number of ListOps tokens, without START / END.

Generator ("make_data.py" of Nangia & Bowman, and LRA's copy of it): a node at depth < max_depth
becomes a list with probability 1 - leaf_prob (else a random digit), a list has
uniform(2, max_args) children and a uniform operator. We force the root to be a list (a bare
digit is a trivial sample that dedup would keep only ten of anyway) and reject trees outside
[min_len, max_len]. Because every node decides independently of its siblings, the trees can be
grown level by level for thousands of trees at once with numpy (same distribution as the
recursive generator, ~100x faster); runaway trees are dropped as soon as they pass max_len.

Deduplication keeps the first occurrence in generation order (a dict, never set order).
Train and the short in-distribution eval splits are made disjoint by a stable content hash:
``crc32(tokens) % 20`` = 0 is reserved for val, 1 for the test splits, the rest for train.
The near-IID test mixes short trees (which the hash must keep out of train) with long ones
(which train cannot hold): it thins both by the hash alike, so that its length mix is the
generator's (~90% of trees <= 100 tokens), not one skewed 20:1 towards the long trees.
"""

from __future__ import annotations

import zlib

import numpy as np

from .base import Task, TaskError

OPS = ("[MIN", "[MAX", "[MED", "[SM")
VOCAB = ["<pad>", "<start>", "<end>", *[str(d) for d in range(10)], *OPS, "]"]
DIGIT0 = 3  # token id of "0"
OP0 = DIGIT0 + 10  # token id of "[MIN"
CLOSE = OP0 + len(OPS)  # token id of "]"
START, END = 1, 2

# split -> generator settings (min_len, max_len, max_args, leaf_prob, max_depth).
# Train / val / near-IID follow the original generator (leaf 0.75, args <= 5, depth <= 20);
# the length and argument splits raise the branching probability (and cap the depth so that
# tree sizes concentrate) only so that rejection sampling accepts often enough (measured:
# 2-16% of trees land in the window; their lengths are what is being tested); LRA uses LRA's
# own settings (args <= 10, depth <= 10, lengths 500-2000).
SPLITS = {
    "train": (1, 100, 5, 0.75, 20),
    "val": (1, 100, 5, 0.75, 20),
    "test": (1, 1000, 5, 0.75, 20),
    "len200_300": (200, 300, 5, 0.64, 10),
    "len500_600": (500, 600, 5, 0.64, 12),
    "len900_1000": (900, 1000, 5, 0.64, 14),
    "args10": (100, 1000, 10, 0.80, 20),
    "args15": (100, 1000, 15, 0.86, 20),
    "lra": (500, 2000, 10, 0.75, 10),
}
HASH_BUCKETS = 20  # crc32 % 20: 0 -> val, 1 -> tests, 2..19 -> train (lengths <= train max)


def grow_trees(
    rng: np.random.Generator, n: int, max_args: int, leaf_prob: float, max_depth: int, max_len: int, min_len: int = 1, min_args: int = 2
):
    """Grow n random ListOps trees level by level; return (tokens list, values, lengths).

    Trees outside [min_len, max_len] are dropped (returned lists hold only the survivors)."""
    # per level: tree id, parent index (into previous level), branch flag, nargs, op / digit
    levels = []
    tree = np.arange(n)
    parent = np.full(n, -1)
    size_so_far = np.zeros(n, dtype=np.int64)  # tokens committed so far, per tree
    alive = np.ones(n, dtype=bool)
    depth = 1
    while len(tree):
        m = len(tree)
        r = rng.random(m)
        branch = (r >= leaf_prob) if depth < max_depth else np.zeros(m, dtype=bool)
        if depth == 1:
            branch[:] = True  # root is always a list
        nargs = np.where(branch, rng.integers(min_args, max_args + 1, m), 0)
        sym = np.where(branch, rng.integers(0, len(OPS), m), rng.integers(0, 10, m))
        # tokens this level adds: "[OP" + "]" for lists, the digit for leaves
        np.add.at(size_so_far, tree, np.where(branch, 2, 1))
        alive &= size_so_far <= max_len
        levels.append((tree, parent, branch, nargs, sym))
        # children of live lists, in parent order (keeps preorder within a level)
        grow = branch & alive[tree]
        idx = np.flatnonzero(grow)
        parent = np.repeat(idx, nargs[idx])
        tree = tree[parent]
        depth += 1

    # bottom-up: subtree sizes and values
    sizes, values = [None] * len(levels), [None] * len(levels)
    for d in range(len(levels) - 1, -1, -1):
        tr, _, branch, nargs, sym = levels[d]
        size = np.ones(len(tr), dtype=np.int64)
        val = np.where(branch, 0, sym)
        if d + 1 < len(levels) and len(levels[d + 1][0]):
            ctr, cpar, *_ = levels[d + 1]
            csize, cval = sizes[d + 1], values[d + 1]
            has = np.flatnonzero(np.bincount(cpar, minlength=len(tr)) > 0)
            starts = np.searchsorted(cpar, has)  # children are contiguous, sorted by parent
            counts = np.bincount(cpar, minlength=len(tr))[has]
            size[has] = 2 + np.add.reduceat(csize, starts)
            op = sym[has]
            mn = np.minimum.reduceat(cval, starts)
            mx = np.maximum.reduceat(cval, starts)
            sm = np.add.reduceat(cval, starts) % 10
            srt = np.sort(cpar * 10 + cval) % 10  # values sorted within each parent's group
            md = (srt[starts + (counts - 1) // 2] + srt[starts + counts // 2]) // 2
            val[has] = np.choose(op, [mn, mx, md, sm])
        sizes[d], values[d] = size, val
    # top-down: offset of each node inside its tree's token sequence
    lengths = sizes[0]
    keep = alive & (lengths >= min_len)
    base = np.concatenate([[0], np.cumsum(np.where(keep, lengths, 0))])
    buf = np.zeros(int(base[-1]), dtype=np.int16)
    offs = np.zeros(n, dtype=np.int64)
    prev_offs = offs  # the level above's offsets (set at the end of each level)
    for d, (tr, par, branch, _nargs, sym) in enumerate(levels):
        if d > 0:
            # offset = parent offset + 1 + sizes of earlier siblings
            excl = np.cumsum(sizes[d]) - sizes[d]
            first = np.searchsorted(par, par)  # index of the first sibling
            offs = prev_offs[par] + 1 + excl - excl[first]
        ok = keep[tr]
        pos = base[tr[ok]] + offs[ok]
        buf[pos] = np.where(branch[ok], OP0 + sym[ok], DIGIT0 + sym[ok])
        b = branch[ok]
        buf[pos[b] + sizes[d][ok][b] - 1] = CLOSE
        prev_offs = offs
    kept = np.flatnonzero(keep)
    toks = [buf[base[i] : base[i + 1]] for i in kept]
    return toks, values[0][kept], lengths[kept]


def sample_split(rng, n, min_len, max_len, max_args, leaf_prob, max_depth, bucket=None, bucket_max_len=100, batch=4096):
    """Rejection-sample n distinct trees with min_len <= length <= max_len.

    bucket: hash bucket this split may use for lengths <= bucket_max_len ("train" = any bucket
    >= 2, or 0 / 1), so that short samples never appear in two of train / val / test. A val / test
    split whose window straddles bucket_max_len (near-IID: 1-1000) is thinned by the hash at every
    length: filtering only its short trees would keep 1 in 20 of them and every long one."""
    seen: dict[bytes, None] = {}
    toks_out, labels, lengths = [], [], []
    tries = 0
    thin_every_length = bucket not in (None, "train") and min_len < bucket_max_len < max_len
    while len(toks_out) < n:
        toks, vals, lens = grow_trees(rng, batch, max_args, leaf_prob, max_depth, max_len, min_len)
        for t, v, L in zip(toks, vals, lens):
            key = t.tobytes()
            if key in seen:
                continue
            if bucket is not None and (L <= bucket_max_len or thin_every_length):
                h = zlib.crc32(key) % HASH_BUCKETS
                if (h >= 2) != (bucket == "train") or (bucket != "train" and h != bucket):
                    continue
            seen[key] = None
            toks_out.append(t)
            labels.append(int(v))
            lengths.append(int(L))
            if len(toks_out) == n:
                break
        tries += batch
        if tries > 2000 * max(n, 100):
            raise TaskError(f"listops: could not draw {n} trees with length in [{min_len}, {max_len}] (accepted {len(toks_out)})")
    return toks_out, labels, lengths


def evaluate(tokens) -> int:
    """Value of a ListOps token sequence (ids or strings), by a stack machine."""
    stack: list[list] = []
    result = None
    for t in tokens:
        s = VOCAB[t] if not isinstance(t, str) else t
        if s in ("<start>", "<end>", "<pad>"):
            continue
        if s in OPS:
            stack.append([s])
        elif s == "]":
            op, *xs = stack.pop()
            v = {"[MIN": min(xs), "[MAX": max(xs), "[SM": sum(xs) % 10, "[MED": int(np.median(xs))}[op]
            if stack:
                stack[-1].append(v)
            else:
                result = v
        else:
            if stack:
                stack[-1].append(int(s))
            else:
                result = int(s)
    return result


class ListOps(Task):
    """ListOps with near-IID, length, argument and LRA-style test splits."""

    kind = "classify"
    num_classes = 10
    version = "2"  # 2: the near-IID test keeps the generator's length mix (sample_split)

    def __init__(
        self,
        n_train: int = 90000,
        n_val: int = 2000,
        n_test: int = 2000,
        n_test_iid: int | None = None,
        test_splits: list | None = None,
        start_end: bool = True,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        self.n_train, self.n_val, self.n_test = n_train, n_val, n_test
        self.n_test_iid = n_test if n_test_iid is None else n_test_iid
        names = [s for s in SPLITS if s not in ("train", "val")]
        self._tests = list(test_splits) if test_splits is not None else names
        bad = [s for s in self._tests if s not in SPLITS]
        if bad:
            raise TaskError(f"listops: unknown test split(s) {bad}; choose from {names}")
        self.start_end = start_end

    @property
    def vocab(self):
        return VOCAB

    def test_splits(self):
        return self._tests

    def split_config(self, split):
        return SPLITS[split]

    def split_size(self, split):
        return {"train": self.n_train, "val": self.n_val, "test": self.n_test_iid}.get(split, self.n_test)

    def generate(self, split, rng):
        min_len, max_len, max_args, leaf_p, max_depth = self.split_config(split)
        bucket = "train" if split == "train" else (0 if split == "val" else 1)
        toks, labels, lengths = sample_split(rng, self.split_size(split), min_len, max_len, max_args, leaf_p, max_depth, bucket)
        if self.start_end:
            toks = [np.concatenate([[START], t, [END]]).astype(np.int16) for t in toks]
        return {"tokens": toks, "label": np.asarray(labels, dtype=np.int64), "length": np.asarray(lengths, dtype=np.int64)}

    def length_bin(self, length):
        edges = (100, 200, 300, 500, 600, 900, 1000, 2000)
        lo = 0
        for e in edges:
            if length <= e:
                return f"{lo + 1 if lo else 1}-{e}"
            lo = e
        return f">{edges[-1]}"
