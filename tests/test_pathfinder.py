"""Pathfinder: the label is exactly whether the drawn path connects the two dots."""

from collections import deque

import numpy as np
import pytest

from bench.tasks.base import TaskError
from bench.tasks.pathfinder import DIFFICULTY, LRA_FILES, PIX0, SIZE, Pathfinder, render_batch


def connected(img: np.ndarray, a, b) -> bool:
    """Flood fill (8-connectivity) over lit pixels from dot centre a to dot centre b."""
    seen = np.zeros_like(img, dtype=bool)
    todo = deque([(a[1], a[0])])
    seen[a[1], a[0]] = True
    while todo:
        y, x = todo.popleft()
        if (x, y) == (b[0], b[1]):
            return True
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                v, u = y + dy, x + dx
                if 0 <= v < SIZE and 0 <= u < SIZE and img[v, u] and not seen[v, u]:
                    seen[v, u] = True
                    todo.append((v, u))
    return False


@pytest.mark.parametrize("difficulty", list(DIFFICULTY))
def test_label_matches_connectivity(difficulty):
    segments, distractors = DIFFICULTY[difficulty]
    img, label, dots, gapfree = render_batch(np.random.default_rng(3), 300, segments, distractors)
    assert len(label) > 200 and 0.35 < label.mean() < 0.65
    for im, lab, d, g in zip(img, label, dots, gapfree):
        assert connected(g, d[0], d[1]) == bool(lab)
        lit = im > 0
        assert not (lit & ~g).any()  # the dashed drawing is a subset of the gap-free one
        for x, y in d:  # both dots are drawn as 3x3 squares
            assert lit[y - 1 : y + 2, x - 1 : x + 2].all()


def test_task_tokens_and_determinism():
    task = Pathfinder(n_train=40, n_val=10, n_test=10, difficulty="intermediate")
    a = task.generate("train", np.random.default_rng(task.split_seed("train")))
    b = task.generate("train", np.random.default_rng(task.split_seed("train")))
    assert a["tokens"].shape == (40, SIZE * SIZE + 2)
    assert np.array_equal(a["tokens"], b["tokens"]) and np.array_equal(a["label"], b["label"])
    px = a["tokens"][:, 1:-1]
    assert set(np.unique(px)) <= {PIX0, PIX0 + 255}
    assert task.vocab_size == 3 + 256


def test_difficulty_is_named_as_lra_names_its_sets():
    """LRA's splits easy / intermediate / hard are its curv_baseline / curv_contour_length_9 / _14
    files (lra_benchmarks/data/pathfinder.py); the LRA column is pathfinder32_hard, the default."""
    assert LRA_FILES == {"easy": "curv_baseline", "intermediate": "curv_contour_length_9", "hard": "curv_contour_length_14"}
    assert [DIFFICULTY[d][0] for d in LRA_FILES] == [6, 9, 14]  # pieces per path grow with LRA's contour length
    assert Pathfinder().lra_name == "pathfinder32_hard"
    assert Pathfinder(difficulty="intermediate").lra_name == "pathfinder32_inter"  # LRA's task_registry spelling
    with pytest.raises(TaskError, match="'baseline' is ambiguous: LRA's curv_baseline files are its 'easy' split"):
        Pathfinder(difficulty="baseline")


def test_smaller_images_for_a_proxy():
    task = Pathfinder(n_train=8, n_val=4, n_test=4, difficulty="easy", size=16)
    d = task.generate("test", np.random.default_rng(0))
    assert task.lra_name == "pathfinder16_easy" and d["tokens"].shape == (4, 16 * 16 + 2)
