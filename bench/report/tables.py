"""The papers' tables as YAML (``bench/tables/*.yaml``, package data): the file schema, the kinds of
table (``KINDS``), loading a table by name with inheritance, and the check that a table names
only registry models and tasks. ``bench reproduce`` (bench/report/reproduce.py) puts our records
beside the numbers loaded here.

A table's ``kind`` (``results`` by default, ``cost``, ``checks``) is a class (bench/report/table_kind.py:
``TableKind``) that loads its part of the file, names what it reads, plans its missing runs,
builds its rows, judges its claims and writes its files: ``ResultsTable``
(bench/report/results_table.py), ``CostTable`` (bench/report/cost_table.py), ``ChecksTable``
(bench/report/checks.py). A new kind is one subclass and one line in ``KINDS`` below. The parts
of a table as used (``Table``, ``Column``, ``Row``, ``Claim``) and their parsing:
bench/report/table_parts.py.

Schema of a results table (lm-evaluation-harness style: short entries, a shared base)::

    title: "[RSA Table 2] formal languages ..."   # one line, shown by --list
    source: "[RSA Table 2], fractions as printed"  # where the paper's numbers come from
    base: other-table        # optional: inherit that file's keys; this file's are merged on top
    preset: paper            # the registry preset matching the paper (--preset P: a proxy, said so)
    seeds: [0, 1, 2]         # seeds expected per cell; only these are read and trained
    paper_seeds: 3           # optional: runs behind each printed mean ± std (the claims test the paper's
                             # numbers with it; absent: the paper's numbers get no test)
    metric: acc              # a metric of the record's split (acc, token_acc, last_acc), or
                             # minutes_per_epoch (train_time_s / epochs_run / 60)
    stat: mean               # mean (± std, the default) | median: the paper's statistic
    paper_units: percent     # how the paper prints: percent | fraction | minutes
    delta: points            # points: ours - paper (default) | ratio: ours / paper
    set: [train.max_epochs=5]    # optional overrides for every cell
    tuned: flipflop-small    # optional: bench tune studies (a name or a list; OUT/studies/NAME/best.json):
                             # each row whose model a study tuned, on that study's task and preset, with
                             # the study's --set equal to the table's + row's + column's set (tuned keys
                             # aside), is read and trained at the study's best values (after every other set)
    overlays: [flipflop-small]   # optional: bench tune studies whose registry overlays (OUT/studies/NAME/tuned.yaml)
                             # the rows may name models of (transformer-tuned: the Transformer at the study's
                             # best values), loaded with the table: a row keeps them at any other setting
                             # (a wider model at the lr tuned at the study's width); the tuned column says which
    tasks: [d2, d4]          # columns = every task x every split ...
    splits: [bin0, bin1]     #   ... or {paper: [...], small: [...]} when split names follow the preset
    columns:                 # ... or an explicit list instead of tasks x splits
      - {task: listops, split: test, label: "upper bound 10", set: [model.max_layers=10]}
      - {task: modular-arithmetic, split: ood, metric: length_avg_token_acc}  # a column's own metric
    state: [mqar]            # optional: a column per task named, each row's streaming state bytes after
                             # the task's longest test length (its records' stream_state)
    rows:
      - model: transformer   # a registry entry (prefer entries to `set`)
        label: "GUT Upperbound"      # optional, default the model name
        set: [model.mode=upperbound] # optional row overrides
        paper: [0.2, 0.2, 1, 0.08]   # in column order; or {task: [per split]}; a value may be
                                     # [mean, std]; null = not reported (the whole row may be null)
    claims:                  # optional: the paper's qualitative findings over cells (bench/report/claims.py
                             # judges each: holds / does not hold / inconclusive)
      - text: "TLB beats the Transformer on ListOps 500-600"
        source: "[HALT §6.4]"
        better: {model: tlb, split: len500_600}
        than: {model: transformer, split: len500_600}
      - text: "each GUT ablation loses to GUT near-IID"
        source: "[HALT §6.4]"
        split: test                  # claim-wide split(s), for sides that name none
        better: gut                  # a side: a model, a list (each of them), or {model(s), split(s)}
        than: [gut-no-global-halt, gut-no-gate, gut-no-transition]
        lower_is_better: false       # optional; true by default for minutes_per_epoch
      - text: "halting at bound 40 costs <= 0.6x no-halt when the model halts early"
        better: GUT                  # a ratio claim: better / than <= ratio_at_most (claims.py: RATIO_RULE)
        than: GUT No Halt Upperbound
        split: "upper bound 40"
        ratio_at_most: 0.6
        halt_depth_below: 20         # optional (cost tables): the better row's mean halting depth must
                                     # be below this, else the claim's premise is absent: inconclusive
      - text: "GUT fails less often than UT at p_i 0.98"
        split: T256_p98
        better: gut                  # a reliability claim: better's seeds learn (above chance) more often,
        than: ut                     # by Fisher's exact test on the learned counts (claims.py: RELIABILITY_RULE)
        fails_less: true
    questions:               # optional: open questions, written as claims; their tests are printed
      - text: "does UT track S5 at 4x the training length better than the Transformer?"
        source: "open"               # with the word "measured" and no verdict (bench/report/claims.py)
        split: len64
        better: ut
        than: transformer

A cost table (``kind: cost``; e.g. halt-table5-cpu) is measured, not trained: each cell is one
training step of the row's model with the cell's overrides, timed by bench/cost/ (the
machinery of ``bench cost``) at the shapes of its ``cost`` entry; ``bench reproduce NAME --run``
measures and writes the measurements beside the table (bench/report/cost_table.py: ``CostTable``)::

    kind: cost
    metric: minutes_per_epoch        # as the paper prints; paper_units: minutes
    cost: {length: 100, batch: 32, repeats: 5, warmup: 1, threads: 1, reference: "GUT No Halt Upperbound"}

A table of checks (``kind: checks``; nope-properties) lists a paper's stated properties instead
of cells; its entries are described in bench/report/checks.py.

A side's ``model`` is a row label, or the model of exactly one row; its ``split`` a column
label, or the split of exactly one column (a split named for another preset, in a table whose
splits follow the preset, maps by position: T512_p98 -> T128_p98 at the small preset). Every
model of ``better`` is compared with every model of ``than``, on each split pair (a list of
splits on both sides pairs by position; one split is used for every pair).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import UserError
from ..schema import suggest
from .checks import ChecksTable
from .cost_table import CostTable
from .results_table import ResultsTable
from .table_file import KIND_NAMES, TABLES_DIR, TableFile, _raw, read_table_file, table_names  # noqa: F401 - light to import
from .table_kind import TableKind
from .table_parts import Table

#: every kind of table by the name a file's ``kind`` gives
KINDS: dict[str, TableKind] = {kind.name: kind for kind in (ResultsTable(), CostTable(), ChecksTable())}


def kind_of(table: Table) -> TableKind:
    """The class of the table's kind."""
    return KINDS[table.kind]


def load_table(name: str, preset: str | None = None, folder: Path = TABLES_DIR) -> Table:
    """The table ``name`` with its columns for ``preset`` (default: the table's own); its kind loads
    its part of the file."""
    spec = read_table_file(name, folder, tuple(KINDS))
    table = Table(name=name, title=spec.title, source=spec.source, preset=spec.preset, seeds=spec.seeds, kind=spec.kind)
    kind_of(table).load(table, spec, dataclasses.asdict(spec), preset or table.preset, f"tables/{name}.yaml")
    return table


def table_of(name: str, where: str) -> Table:
    """The table a generated file's name (``table[--preset][--set-TAG]``) was made from, at its
    preset; one UserError line (``where``: the write-up block naming it) unless it names a table."""
    base, *rest = name.split("--")
    preset = rest[0] if rest and not rest[0].startswith("set-") else None
    if base not in table_names():
        raise UserError(
            f"{where}: bench:verdicts names {name!r}, but {base!r} is not a table; {suggest(base, table_names())} "
            "(the names of generated tables, as bench:table blocks take them)"
        )
    return load_table(base, preset)


def check_names(table: Table, registry) -> None:
    """Every model and task the table names is in the registry (else the registry's one-line error)."""
    models, tasks = kind_of(table).names(table)
    for model in models:
        registry.model_entry(model)
    for task in tasks:
        registry.task_entry(task)
