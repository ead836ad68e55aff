"""Pathfinder (Linsley et al. 2018; LRA's 32x32 version), drawn procedurally [HALT §6.7].

An image shows two endpoint dots and several dashed, gently curving paths; the label says
whether one path connects the two dots. The image is flattened row-major into 1024 pixel
tokens (intensity v -> token 3 + v), wrapped in START / END.

    A real sample, drawn by ``render_batch(default_rng(0), 4, segments=6, n_distractors=1,
    size=16)`` ('#' = 255, '.' = 0; the full task uses 32x32):

    ................    label 1: the dot at (x 12, y 6) starts the dashed path that runs
    ................    down and left to the dot at (10, 14); the other path (top left) is a
    ................    distractor. A negative puts the second dot on the far end of a
    ..####.####.....    different path instead; every image has the same number of paths
    ....#...........    and dots, so only connectivity separates the classes.
    ......#....###..
    .....##....###..    tokens: <start> 3 3 3 ... 258 258 258 ... 3 <end>  (pixel v -> 3 + v)
    .....#.....###..
    ....#......#....
    ....#......#....
    ....#.....#.....
    ....#.....#.....
    ..........#.....
    .........###....
    .........###....
    .........###....

Each path is a chain of ``segments`` straight pieces of ``seg_len`` pixels whose heading turns
by at most ``max_turn`` radians per piece; pieces alternate drawn / skipped by the dash pattern
(``dash`` drawn, ``gap`` skipped). Paths never touch: a sample is redrawn when a path (with its
dots) comes within ``sep`` pixels of another one or leaves the image, so the label equals
pixel connectivity of the gap-free drawing (checked by the tests with a flood fill).
``difficulty`` takes LRA's names for its three Pathfinder sets (lra_benchmarks/data/pathfinder.py:
split ``easy`` = the files curv_baseline, ``intermediate`` = curv_contour_length_9, ``hard`` =
curv_contour_length_14) and draws paths of the matching contour length: 6, 9 and 14 pieces of
1.5 px (with 2, 2 and 1 distractors: longer paths leave less room on a 32x32 canvas). The LRA
column of [HALT Table 4] is ``pathfinder32_hard`` (LRA's task_registry name; the reference code
reads curv_contour_length_14 only, preprocess/process_pathfinder_lra_sparse.py), this task's
default; ``lra_name`` gives the name of an instance. ``size`` (default 32) draws smaller images
for CPU proxies (``pathfinder16_*``: not an LRA set). Vectorised over whole batches of images.
"""

from __future__ import annotations

import numpy as np

from .base import Task, TaskError

SIZE = 32
VOCAB = ["<pad>", "<start>", "<end>", *[str(v) for v in range(256)]]
PIX0, START, END = 3, 1, 2
# difficulty (LRA's split names) -> (pieces per path, distractor paths); 14 pieces leave room
# for one distractor; LRA_FILES: the release's folder of each split (pathfinder32/<folder>/)
DIFFICULTY = {"easy": (6, 2), "intermediate": (9, 2), "hard": (14, 1)}
LRA_FILES = {"easy": "curv_baseline", "intermediate": "curv_contour_length_9", "hard": "curv_contour_length_14"}


def _dilate(m: np.ndarray, r: int) -> np.ndarray:
    """Binary dilation of [..., S, S] masks by a (2r+1)^2 square (max-pool, stride 1)."""
    out = m.copy()
    for _ in range(r):
        cur = out.copy()
        out[..., 1:, :] |= cur[..., :-1, :]
        out[..., :-1, :] |= cur[..., 1:, :]
        cur = out.copy()
        out[..., :, 1:] |= cur[..., :, :-1]
        out[..., :, :-1] |= cur[..., :, 1:]
    return out


def _one_path(rng, n, segments, seg_len, max_turn, size):
    """One random path per image: vertices (n, K+1, 2) as (x, y), and whether it stays inside
    the image with room for a 3x3 dot (a pixel rint(p) lies in [1, S-2] iff p lies in
    [0.5, S-1.5], a convex box, so checking the vertices checks every point between them)."""
    start = rng.uniform(2, size - 3, size=(n, 1, 2))
    # initial heading within 90 degrees of the direction to the centre, so that long paths
    # fit the small canvas more often (rejection stays cheap)
    centre = np.arctan2(size / 2 - start[..., 1], size / 2 - start[..., 0])  # (n, 1)
    heading = (
        centre + rng.uniform(-np.pi / 2, np.pi / 2, size=(n, 1)) + np.cumsum(rng.uniform(-max_turn, max_turn, size=(n, segments)), axis=-1)
    )  # (n, K)
    step = seg_len * np.stack([np.cos(heading), np.sin(heading)], -1)  # (n, K, 2)
    verts = np.concatenate([start, start + np.cumsum(step, axis=1)], axis=1)  # (n, K+1, 2)
    inside = ((verts >= 0.5) & (verts <= size - 1.5)).all(axis=(1, 2))
    return verts, inside


def _pixels(verts, seg_len):
    """Pixels (m, K, sub, 2) along each piece, sampled <= 0.5 px apart (so 8-connected)."""
    sub = int(np.ceil(seg_len * 2)) + 1
    step = np.diff(verts, axis=1)  # (m, K, 2)
    pts = verts[:, :-1, None] + np.linspace(0, 1, sub)[:, None] * step[:, :, None]
    return np.rint(pts).astype(np.int64)


DOT = np.array([(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)])  # 3x3 dot offsets


def _paint(img, rows, xy):
    """img[rows[i], y, x] = True for every (x, y) in xy[i] (xy: (m, k, 2))."""
    if len(rows):
        img[np.repeat(rows, xy.shape[1]), xy[..., 1].ravel(), xy[..., 0].ravel()] = True


def render_batch(
    rng: np.random.Generator,
    n: int,
    segments: int = 9,
    n_distractors: int = 2,
    seg_len: float = 1.5,
    max_turn: float = 0.5,
    dash: int = 2,
    gap: int = 1,
    sep: int = 1,
    tries: int = 40,
    size: int = SIZE,
):
    """Draw n images; return (images uint8 [m,S,S], labels [m], dot centres [m,2,(x,y)],
    gap-free drawings [m,S,S] bool) for the m <= n images whose paths all found room.

    Paths are placed one after another (path 0 carries the first dot; the second dot goes on
    the far end of path 0 for positives, of path 1 for negatives; then the distractors). A path
    that leaves the image or comes within `sep` pixels of an earlier one is redrawn, up to
    `tries` times, only for the images that need it."""
    label = rng.integers(0, 2, size=n)
    gapfree = np.zeros((n, size, size), dtype=bool)
    image = np.zeros((n, size, size), dtype=bool)
    halo = np.zeros((n, size, size), dtype=bool)  # earlier paths dilated by sep
    dots = np.zeros((n, 2, 2), dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    drawn = (np.arange(segments) % (dash + gap)) < dash  # dash pattern over pieces
    for p in range(2 + n_distractors):
        need = np.flatnonzero(valid)
        for _ in range(tries):
            if not len(need):
                break
            verts, inside = _one_path(rng, len(need), segments, seg_len, max_turn, size)
            tried, verts = need[inside], verts[inside]  # only paths inside get rasterised
            m = len(tried)
            if not m:
                continue
            pix = _pixels(verts, seg_len)  # (m, K, sub, 2)
            ends = np.rint(verts[:, [0, -1]]).astype(np.int64)  # (m, 2, 2)
            # which ends of this path carry a dot: (m, 2) bool
            has_dot = np.zeros((m, 2), dtype=bool)
            if p == 0:
                has_dot[:, 0] = True
            if p <= 1:
                has_dot[:, 1] = (label[tried] == 1) == (p == 0)
            # body = path pixels + its dots (dots of dot-less ends collapse onto the end point)
            dot_px = np.where(has_dot[:, :, None, None], ends[:, :, None] + DOT, ends[:, :, None])
            body = np.concatenate([pix.reshape(m, -1, 2), dot_px.reshape(m, -1, 2)], 1)
            ok = ~halo[tried[:, None], body[..., 1], body[..., 0]].any(1)  # clear of others
            acc, pix, body, dot_px = tried[ok], pix[ok], body[ok], dot_px[ok]
            fresh = np.zeros((len(acc), size, size), dtype=bool)
            _paint(fresh, np.arange(len(acc)), body)
            gapfree[acc] |= fresh
            halo[acc] |= _dilate(fresh, sep)
            _paint(image, acc, pix[:, drawn].reshape(len(acc), int(drawn.sum()) * pix.shape[2], 2))
            for j in (0, 1):  # only real dots (a dot-less end is left as the dash drew it)
                d = has_dot[ok, j]
                _paint(image, acc[d], dot_px[d, j])
            if p == 0:
                dots[acc, 0] = ends[ok, 0]
            second = has_dot[ok, 1]
            dots[acc[second], 1] = ends[ok][second, 1]
            need = need[~np.isin(need, acc)]
        valid[need] = False
    img = image[valid].astype(np.uint8) * 255
    return img, label[valid], dots[valid], gapfree[valid]


class Pathfinder(Task):
    """Is there a path between the two dots? Binary classification of 1024 pixel tokens."""

    kind = "classify"
    num_classes = 2
    version = "1"

    def __init__(
        self,
        n_train: int = 160000,
        n_val: int = 20000,
        n_test: int = 20000,
        difficulty: str = "hard",
        n_distractors: int | None = None,
        seg_len: float = 1.5,
        max_turn: float = 0.5,
        dash: int = 2,
        gap: int = 1,
        size: int = SIZE,
        start_end: bool = True,
        data_seed: int = 1234,
    ):
        super().__init__(data_seed)
        if difficulty == "baseline":
            raise TaskError(
                "pathfinder: difficulty 'baseline' is ambiguous: LRA's curv_baseline files are its 'easy' split; "
                "the 9-piece contours (curv_contour_length_9) are 'intermediate'; choose easy, intermediate or hard"
            )
        if difficulty not in DIFFICULTY:
            raise TaskError(f"pathfinder: difficulty must be one of {list(DIFFICULTY)} (LRA's names), got {difficulty!r}")
        if not 8 <= size <= 256:
            raise TaskError(f"pathfinder: size is the image side in pixels, 8-256 (LRA: 32), got {size}")
        self.difficulty, self.size = difficulty, size
        self.sizes = {"train": n_train, "val": n_val, "test": n_test}
        segments, distractors = DIFFICULTY[difficulty]
        if n_distractors is not None:
            distractors = n_distractors
        self.draw = dict(segments=segments, n_distractors=distractors, seg_len=seg_len, max_turn=max_turn, dash=dash, gap=gap)
        self.start_end = start_end

    @property
    def lra_name(self) -> str:
        """LRA's name of this set, e.g. pathfinder32_hard (task_registry.py; 'inter' for intermediate)."""
        return f"pathfinder{self.size}_{'inter' if self.difficulty == 'intermediate' else self.difficulty}"

    @property
    def vocab(self):
        return VOCAB

    def test_splits(self):
        return ["test"]

    def generate(self, split, rng):
        if split not in self.sizes:
            raise TaskError(f"pathfinder: unknown split {split!r}")
        n = self.sizes[split]
        imgs, labels, got = [], [], 0
        for _ in range(1000):
            if got >= n:
                break
            img, lab, _, _ = render_batch(rng, 4096, **self.draw, size=self.size)
            imgs.append(img)
            labels.append(lab)
            got += len(lab)
        else:
            raise TaskError(f"pathfinder: too few valid images for {self.draw}")
        img = np.concatenate(imgs)[:n].reshape(n, self.size * self.size).astype(np.int16) + PIX0
        if self.start_end:
            img = np.concatenate([np.full((n, 1), START, np.int16), img, np.full((n, 1), END, np.int16)], 1)
        return {"tokens": img, "label": np.concatenate(labels)[:n].astype(np.int64)}
