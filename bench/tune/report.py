"""``bench tune --report``: expected best validation score against the number of trials per model
(Dodge et al., "Show Your Work", EMNLP 2019), and each trial's score against a tuned setting.

Expected maximum of n draws (with replacement) from the empirical distribution of N trial scores
v_(1) <= ... <= v_(N), whose CDF is F(v_(i)) = i / N:

    E[max_n] = sum_i v_(i) * ((i / N)^n - ((i - 1) / N)^n)

Only finished trials count: a pruned trial was not trained to the end, its score is not a draw
from the same distribution.
"""

from __future__ import annotations

from pathlib import Path

from ..records import write_atomic


def expected_max(scores: list[float], n: int) -> float:
    """Dodge et al.'s expected best of ``n`` trials given the observed ``scores``."""
    if not scores or n < 1:
        raise ValueError("expected_max needs at least one score and n >= 1")
    v, big_n = sorted(scores), len(scores)
    return sum(x * ((i / big_n) ** n - ((i - 1) / big_n) ** n) for i, x in enumerate(v, start=1))


def axis(rows: list[dict]) -> str | None:
    """The setting drawn on the second panel: train.lr when tuned, else the first numeric one."""
    keys = [
        k for r in rows for params, _ in r["trials"] for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return "train.lr" if "train.lr" in keys else (keys[0] if keys else None)


def table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Rows: models; columns: expected best validation (%) after 1 .. N trials (N: the most
    finished trials of any model); a model with fewer finished trials has blanks past its own N."""
    most = max((len(r["trials"]) for r in rows), default=0)
    headers = ["model", "finished", *(f"n={n}" for n in range(1, most + 1))]
    body = []
    for r in rows:
        scores = [s for _, s in r["trials"]]
        body.append(
            [
                r["model"],
                str(len(scores)),
                *(f"{100 * expected_max(scores, n):.1f}" if n <= len(scores) else "" for n in range(1, most + 1)),
            ]
        )
    return headers, body


def write_report(folder: Path, rows: list[dict], metric: str) -> tuple[Path, Path]:
    """report.md (the table) and report.png (expected best against trials; score against the
    setting) in the study's folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    from tabulate import tabulate

    headers, body = table(rows)
    key = axis(rows)
    fig, axes = plt.subplots(1, 2 if key else 1, figsize=(10 if key else 5.5, 3.8), squeeze=False)
    ax = axes[0][0]
    for r in rows:
        scores = [s for _, s in r["trials"]]
        if scores:
            ns = list(range(1, len(scores) + 1))
            ax.plot(ns, [100 * expected_max(scores, n) for n in ns], marker="o", label=r["model"])
    ax.set_xlabel("trials")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"expected best validation {metric} (%)")
    ax.set_title("expected best of n trials (Dodge et al. 2019)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if key:
        ax = axes[0][1]
        for r in rows:
            points = sorted((p[key], s) for p, s in r["trials"] if key in p)
            if points:
                ax.plot([x for x, _ in points], [100 * y for _, y in points], marker="o", label=r["model"])
        if key == "train.lr" or all(p[key] > 0 for r in rows for p, _ in r["trials"] if key in p):
            ax.set_xscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(f"validation {metric} (%)")
        ax.set_title(f"finished trials against {key}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    png = folder / "report.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    md = folder / "report.md"
    write_atomic(
        md,
        f"# Study {folder.name}: expected best validation {metric} (%) against trials\n\n"
        "Dodge et al. (2019): E[max of n trials] from the empirical distribution of the finished trials' "
        "validation scores (pruned trials left out).\n\n"
        + tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)
        + f"\n\n![report]({png.name})\n",
    )
    return md, png
