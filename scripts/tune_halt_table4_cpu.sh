#!/usr/bin/env bash
# Tune every row of bench/tables/halt-table4-cpu.yaml per generated column by the tuning protocol
# (bench tune, sync successive halving by default for a grid, docs/tuning.md) and train the table's
# 5 final seeds: the commands of the table's header, in order. Rerunning it continues where it
# stopped (finished runs are read, stopped ones resume from their checkpoints).
#   scripts/tune_halt_table4_cpu.sh tune     # the two studies, t4cpu-listops and t4cpu-pathfinder20k
#   scripts/tune_halt_table4_cpu.sh table    # then the table (seeds 0-4 at the studies' best values)
# The rule of docs/tasks.md ("The LRA table on the CPU") applied once: the Pathfinder study at
# n_train 10,000 (t4cpu-pathfinder) left every row at chance on validation, so the column's
# data.n_train doubled to 20,000 and its study is t4cpu-pathfinder20k.
# CPU hours: docs/tasks.md, "The LRA table on the CPU" (the plan, and what each study and column took).
set -euo pipefail
BENCH=${BENCH:-python -m bench}
OUT=${OUT:-results}
JOBS=${JOBS:-2}
case "${1:-}" in
  tune)
    B=($BENCH tune --preset small --grid "train.lr=[3e-4,1e-3,3e-3]" --seed 100 --jobs "$JOBS" --out "$OUT"
       --models transformer,ut,gut,tlb,gutlb --set model.init=reference --set train.num_threads=1)
    "${B[@]}" --task lra-listops --study t4cpu-listops --set data.min_len=100 --set data.max_len=300 \
      --set data.n_train=10000 --set data.n_val=500 --set data.n_test=1000 --set "train.betas=[0.9, 0.98]"
    "${B[@]}" --task lra-pathfinder --study t4cpu-pathfinder20k --set data.size=20 --set data.difficulty=easy \
      --set data.n_train=20000 --set data.n_val=500 --set data.n_test=1000
    ;;
  table)
    $BENCH reproduce halt-table4-cpu --run --jobs "$JOBS" --out "$OUT"
    ;;
  *)
    echo "usage: scripts/tune_halt_table4_cpu.sh tune|table   (the two tuning studies, then the table's final seeds)" >&2
    exit 2
    ;;
esac
