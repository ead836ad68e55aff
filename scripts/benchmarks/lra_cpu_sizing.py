"""CPU seconds per training step of the halt-table4-cpu rows (docs/tasks.md, "The LRA table on the CPU").

    OMP_NUM_THREADS=1 python scripts/benchmarks/lra_cpu_sizing.py TASK LENGTH MODELS [SECTION.KEY=VALUE ...]
    e.g. python scripts/benchmarks/lra_cpu_sizing.py lra-listops 297 transformer,ut,gut,tlb,gutlb data.min_len=100 data.max_len=300
         python scripts/benchmarks/lra_cpu_sizing.py lra-pathfinder 402 transformer,ut,gut,tlb,gutlb data.size=20 data.difficulty=easy

For each model: the training step `bench run` builds at the small preset with the reference init
(bench/cost/step.py: TrainingStep; forward, head + loss, backward, clipping, optimizer), on a
batch of 32 random sequences of LENGTH tokens (every position real, so the halting families run
every step: an upper bound), timed in CPU seconds of this process (``time.process_time``, one
thread: robust to other processes sharing the cores); prints the minimum of 2 steps after a warm-up.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(task: str, length: int, models: list[str], extra: list[str]) -> None:
    import torch

    from bench.config import resolve_run
    from bench.cost.common import Setup, random_batch
    from bench.cost.step import TrainingStep
    from bench.registry import Registry

    torch.set_num_threads(1)
    registry = Registry()
    for model in models:
        config = resolve_run(registry, model, task, "small", ["model.init=reference", *extra])
        step = TrainingStep(config, Setup(task=task, preset="small", lengths=[length]))
        batch = random_batch(step.task, 32, length, torch.device("cpu"), torch.Generator().manual_seed(0))
        step(batch)  # warm-up
        times = []
        for _ in range(2):
            t = time.process_time()
            step(batch)
            times.append(time.process_time() - t)
        print(f"{task} T={length} {model}: {min(times):.3f} CPU s/step (of {', '.join(f'{x:.3f}' for x in times)})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4:])
