"""Formal-language generators checked against independent membership definitions."""

import re

import numpy as np
import pytest

from bench.tasks.formal_languages import D2, D4, Parity, Tomita3, Tomita5, Tomita6

DN_REGEX = {2: re.compile(r"(a(ab)*b)*"), 4: re.compile(r"(a(a(a(ab)*b)*b)*b)*")}


def in_tomita3(s: str) -> bool:
    """Run-length definition: no odd run of 1s immediately followed by an odd run of 0s."""
    runs = [(m.group()[0], len(m.group())) for m in re.finditer(r"0+|1+", s)]
    return not any(a == ("1") and la % 2 and b == "0" and lb % 2 for (a, la), (b, lb) in zip(runs, runs[1:]))


MEMBER = {
    Parity: lambda s: s.count("1") % 2 == 0,
    Tomita5: lambda s: s.count("0") % 2 == 0 and s.count("1") % 2 == 0,
    Tomita6: lambda s: (s.count("0") - s.count("1")) % 3 == 0,
    Tomita3: in_tomita3,
    D2: lambda s: DN_REGEX[2].fullmatch(s) is not None,
    D4: lambda s: DN_REGEX[4].fullmatch(s) is not None,
}


def decode(task, tokens):
    return "".join(task.vocab[t] for t in tokens)


def expected_labels(cls, s: str, from_empty: bool = False):
    """The label after every prefix of s (from the empty prefix on, if from_empty)."""
    member = MEMBER[cls]
    out = []
    for t in range(0 if from_empty else 1, len(s) + 1):
        prefix = s[:t]
        if cls in (Parity, Tomita5, Tomita6):
            out.append([0, 1] if member(prefix) else [1, 0])
        elif cls is Tomita3:
            out.append([int(member(prefix + c)) for c in "01"])
        else:  # D_n: c allowed iff prefix + c extends to a member by closing brackets
            n = 2 if cls is D2 else 4
            out.append([int(any(member(prefix + c + "b" * k) for k in range(n + 2))) for c in "ab"])
    return out


@pytest.mark.parametrize("cls", list(MEMBER))
@pytest.mark.parametrize("split", ["train", "bin1"])
def test_strings_and_labels_match_independent_definitions(cls, split):
    task = cls(n_train=150, n_val=20, n_test=60)
    data = task.generate(split, np.random.default_rng(task.split_seed(split)))
    assert len(data["tokens"]) == (150 if split == "train" else 60)
    lo, hi = (task.max_len + 1, task.bin1_max_len) if split == "bin1" else (task.min_len, task.max_len)
    for tokens, labels, length in zip(data["tokens"], data["labels"], data["length"]):
        s = decode(task, tokens)
        assert lo <= len(s) == length <= hi
        assert MEMBER[cls](s), f"{cls.__name__} generated a non-member: {s}"
        assert labels == expected_labels(cls, s)


@pytest.mark.parametrize("cls", list(MEMBER))
def test_start_symbol_reads_the_same_strings_one_position_later_labelled_from_the_empty_prefix(cls):
    plain, started = cls(n_train=80), cls(n_train=80, start_symbol=True)
    a = plain.generate("train", np.random.default_rng(0))
    b = started.generate("train", np.random.default_rng(0))
    assert started.vocab == [*plain.vocab, "<s>"]
    assert b["length"] == a["length"]
    for tokens, labels, plain_tokens in zip(b["tokens"], b["labels"], a["tokens"]):
        assert started.vocab[tokens[0]] == "<s>" and tokens[1:] == plain_tokens
        s = decode(plain, plain_tokens)
        assert labels == expected_labels(cls, s, from_empty=True)
    # by hand: the empty prefix is in Parity, Tomita 5 and 6; Tomita 3 and D_n allow 0 / 1 and only a next
    assert started.start_target() == {Parity: [0, 1], Tomita5: [0, 1], Tomita6: [0, 1], Tomita3: [1, 1], D2: [1, 0], D4: [1, 0]}[cls]


def test_worked_examples_in_docstring():
    assert Parity().targets("0110") == [[0, 1], [1, 0], [0, 1], [0, 1]]
    assert D2().targets("aabbab") == [[1, 1], [0, 1], [1, 1], [1, 0], [1, 1], [1, 0]]


def test_same_split_twice_is_identical_and_splits_differ():
    task = Tomita6(n_train=100, n_test=50)
    a = task.generate("bin0", np.random.default_rng(task.split_seed("bin0")))
    b = task.generate("bin0", np.random.default_rng(task.split_seed("bin0")))
    assert a == b
    assert task.split_seed("bin0") != task.split_seed("train")
    # resizing train never changes a test split
    assert Tomita6(n_train=999).split_seed("bin0") == task.split_seed("bin0")


def test_strings_unique_within_split():
    task = D4(n_train=300)
    data = task.generate("train", np.random.default_rng(0))
    strings = [tuple(t) for t in data["tokens"]]
    assert len(set(strings)) == len(strings)


def test_dn_sampler_covers_depths():
    task = D4()
    depths = set()
    for s in (task.sample(np.random.default_rng(i), 40) for i in range(50)):
        d = 0
        for c in s:
            d += 1 if c == "a" else -1
            depths.add(d)
    assert depths == {0, 1, 2, 3, 4}


def test_error_positions_script_finds_each_wrong_position_and_its_triple():
    """scripts/error_positions.py: hand-made predictions for two strings of lengths 3 and 2 (one
    pad): string 0 wrong at position 1 only, string 1 wrong at position 0; an error in the pad
    is not counted."""
    import torch
    from script_helpers import load_script

    script = load_script("scripts/error_positions.py")
    labels = torch.tensor([[[1, 1], [0, 1], [1, 0]], [[1, 0], [0, 1], [0, 0]]])
    pred = labels.clone()
    pred[0, 1] = torch.tensor([1, 1])  # string 0, position 1: allows a symbol the target forbids
    pred[1, 0] = torch.tensor([0, 0])  # string 1, position 0
    pred[1, 2] = torch.tensor([1, 1])  # padding: ignored
    mask = torch.tensor([[True, True, True], [True, True, False]])
    tokens = torch.tensor([[1, 1, 2], [2, 1, 0]])
    logits = 4.0 * pred - 2.0  # positive where a symbol is predicted allowed
    assert script.wrong_positions(logits, labels, mask, tokens) == [(0, 1, (0, 1), (1, 1), 1), (1, 0, (1, 0), (0, 0), 2)]
