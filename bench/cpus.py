"""How many CPUs this process may use: not os.cpu_count() (the machine's), but the fewest of its
CPU affinity (taskset, cgroup cpusets, SLURM's binding), SLURM's allocation ($SLURM_CPUS_PER_TASK)
and the cgroup's CPU quota (cpu.max of cgroup v2, cfs_quota_us of v1: a container's --cpus)."""

from __future__ import annotations

import math
import os
from pathlib import Path


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _slurm() -> int | None:
    raw = os.environ.get("SLURM_CPUS_PER_TASK") if os.environ.get("SLURM_JOB_ID") else None
    return int(raw) if raw and raw.isdigit() and int(raw) > 0 else None


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """CPUs allowed by the cgroup's quota, rounded up; None without a quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]  # v2: "max 100000" or "200000 100000"
        if quota != "max":
            return max(1, math.ceil(int(quota) / int(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())  # v1: -1 without a quota
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def available_cpus() -> int:
    return max(1, min(n for n in (_affinity(), _slurm(), _cgroup_quota()) if n))


def default_threads(limit: int = 8) -> int:
    """train.num_threads=0: the CPUs this process may use, at most ``limit`` (more rarely help the
    small models here and slow down processes sharing the machine), and at most $OMP_NUM_THREADS
    where it is set (a whole number > 0): the usual way to say how many threads a process may take,
    which torch itself reads."""
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    cap = int(omp) if omp.isdigit() and int(omp) > 0 else limit
    return min(available_cpus(), limit, cap)
