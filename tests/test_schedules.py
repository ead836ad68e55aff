"""Learning-rate schedules (the LambdaLR multiplier of bench/runner/module.py) at hand-computed steps.

The multiplier for optimizer step s, with W warm-up steps and N total steps:
  warm-up (s < W):  (s + 1) / W
  constant:         1
  linear:           1 - (s - W) / (N - W), floored at 0
  cosine:           (1 + cos(pi * (s - W) / (N - W))) / 2, flat at 0 after N
  inverse_sqrt:     sqrt(max(W, 1) / s) from s = max(W, 1) on
  step:             gamma ** floor(s / (steps_per_epoch * every))
"""

import math

import pytest

from bench.config import TrainConfig
from bench.runner.module import lr_lambda


def schedule(name, warmup=0, steps_per_epoch=10, total=10, **extra):
    return lr_lambda(TrainConfig(schedule=name, warmup_steps=warmup, **extra), steps_per_epoch, total)


def test_constant():
    assert [schedule("constant")(s) for s in (0, 1, 999)] == [1.0, 1.0, 1.0]
    # warm-up over 4 steps: 1/4, 2/4, 3/4, 4/4, then the schedule
    assert [schedule("constant", warmup=4)(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_linear():
    f = schedule("linear", total=10)
    assert [f(s) for s in (0, 5, 8, 10, 12)] == pytest.approx([1.0, 0.5, 0.2, 0.0, 0.0])
    g = schedule("linear", warmup=2, total=10)  # decays over the 8 steps after warm-up
    assert [g(s) for s in (0, 1, 2, 6, 9, 10)] == [0.5, 1.0, 1.0, 0.5, pytest.approx(0.125), 0.0]


def test_cosine():
    f = schedule("cosine", total=10)
    # s = 2: (1 + cos(0.2 pi)) / 2 = (1 + 0.8090169944) / 2
    assert f(0) == 1.0 and f(2) == pytest.approx(0.9045084972) and f(5) == pytest.approx(0.5)
    assert f(10) == pytest.approx(0.0, abs=1e-12) and f(15) == pytest.approx(0.0, abs=1e-12)
    g = schedule("cosine", warmup=5, total=15)  # half-way through the 10 decay steps at s = 10
    assert [g(s) for s in (0, 4, 5)] == [0.2, 1.0, 1.0]
    assert g(10) == pytest.approx(0.5) and g(15) == pytest.approx(0.0, abs=1e-12)


def test_inverse_sqrt():
    f = schedule("inverse_sqrt", warmup=4)
    assert [f(s) for s in (0, 3, 4)] == [0.25, 1.0, 1.0]
    assert f(16) == pytest.approx(0.5) and f(64) == pytest.approx(0.25)  # sqrt(4 / 16), sqrt(4 / 64)
    g = schedule("inverse_sqrt")  # no warm-up: 1 / sqrt(s) from s = 1 on
    assert [g(0), g(1)] == [1.0, 1.0] and g(4) == pytest.approx(0.5) and g(100) == pytest.approx(0.1)


def test_step_halves_every_n_epochs():
    f = schedule("step", steps_per_epoch=10, step_every_epochs=5, step_gamma=0.5)  # every 50 steps
    assert [f(s) for s in (0, 49, 50, 99, 100, 149, 150)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125]
    g = schedule("step", warmup=2, steps_per_epoch=3, step_every_epochs=1, step_gamma=0.1)
    assert [g(s) for s in (0, 1, 2, 3)] == [0.5, 1.0, 1.0, pytest.approx(0.1)]


def test_every_multiplier_is_within_0_and_1():
    for name in ("constant", "linear", "cosine", "inverse_sqrt", "step"):
        f = schedule(name, warmup=7, steps_per_epoch=3, total=40)
        assert all(0.0 <= f(s) <= 1.0 + 1e-12 for s in range(60)), name
        assert not any(math.isnan(f(s)) for s in range(60))
