#!/usr/bin/env bash
# The rows the tuning protocol's rules against the trivial level re-tune (docs/tuning.md, "Against
# the trivial level"; which picks the rules change: results/protocol-rules-replay.md): each in a
# study of its own, with the first study's settings, grid and seeds (so its pick reads as the row's
# in the table, which names the new study after the first: a later study re-tunes the cells both
# tuned), then the final seeds of the tables. Rerunning it continues where it stopped.
#   scripts/retune_trivial_level.sh tune     # pl-mqar-retune (the Transformer on MQAR), t4cpu-listops-retune (GUT on LRA ListOps)
#   scripts/retune_trivial_level.sh table    # then the two tables' cells at the new picks
# Both studies keep their first study's validation size (MQAR 300, LRA ListOps 500 examples; the
# tables' rows were selected on those), which --val-reason records.
# CPU hours: docs/tuning.md, "Re-tuned against the trivial level".
set -euo pipefail
BENCH=${BENCH:-python -m bench}
OUT=${OUT:-results}
JOBS=${JOBS:-2}
case "${1:-}" in
  tune)
    $BENCH tune --preset small --set data.n_test=1000 --models transformer --grid "train.lr=[3e-4,1e-3,3e-3,1e-2]" --pruner sync \
      --seed 100 --jobs "$JOBS" --out "$OUT" --study pl-mqar-retune --task mqar --objective token_acc \
      --val-reason "the probe table's rows select on the preset's 300 validation sequences; the re-tune keeps the table's settings"
    $BENCH tune --preset small --grid "train.lr=[3e-4,1e-3,3e-3]" --seed 100 --jobs "$JOBS" --out "$OUT" --models gut \
      --set model.init=reference --set train.num_threads=1 --task lra-listops --study t4cpu-listops-retune \
      --set data.min_len=100 --set data.max_len=300 --set data.n_train=10000 --set data.n_val=500 --set data.n_test=1000 \
      --set "train.betas=[0.9, 0.98]" \
      --val-reason "the LRA table's rows select on 500 validation trees (t4cpu-listops); the re-tune keeps the table's settings"
    ;;
  table)
    $BENCH reproduce probes-linear-cpu-tuned --run --jobs "$JOBS" --out "$OUT"
    $BENCH reproduce halt-table4-cpu --run --jobs "$JOBS" --out "$OUT"
    ;;
  *)
    echo "usage: scripts/retune_trivial_level.sh tune|table   (the two re-tuning studies, then the tables' final seeds)" >&2
    exit 2
    ;;
esac
