"""The parts of scripts/against_authors.py (bench against the [HALT] authors' encoders), one job a
module; run the script, not this package:

    their_code   the authors' code from the mirror, patched and shimmed for the CPU; einops
    pairs        the models compared and the sizes both sides are built at
    weight_map   their parameters -> bench's, by explicit name rules, and the copy
    regimes      the batches compared (and flip-flop's per-token one)
    comparison   one comparison: both models built, weights copied, run, the row of differences
    report       results/against_authors.md from the rows
"""
