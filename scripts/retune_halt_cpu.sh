#!/usr/bin/env bash
# Re-tune a HALT CPU table by the tuning protocol (bench tune --pruner sync, docs/tuning.md) and
# train its 5 final seeds: the studies of bench/tables/halt-table{1,3}-cpu-tuned2.yaml, then the
# table. One command per table; rerunning it continues where it stopped (finished runs are read,
# stopped ones resume from their checkpoints).
#   scripts/retune_halt_cpu.sh 3     # Table 3 (flip-flop); 1: Table 1 (ListOps)
# CPU hours: docs/tuning.md, "The re-tune by the protocol".
set -euo pipefail
BENCH=${BENCH:-python -m bench}
OUT=${OUT:-results}
JOBS=${JOBS:-2}
case "${1:-}" in
  3)
    B=($BENCH tune --task flipflop --preset small --set data.n_train=7500 --set train.max_epochs=4 --set model.init=reference
       --set data.n_test=1000 --grid "train.lr=[3e-4,1e-3,3e-3,1e-2]" --pruner sync --objective last_acc --seed 100
       --jobs "$JOBS" --out "$OUT")
    "${B[@]}" --study t3cpu2 --models transformer,ut,gut,tlb-fr
    "${B[@]}" --study t3cpu2-tlb3 --models tlb --set model.chunk_size=3
    "${B[@]}" --study t3cpu2-tlb25 --models tlb --set model.chunk_size=25
    "${B[@]}" --study t3cpu2-gutlb3 --models gutlb --set model.chunk_size=3 --set model.memory_slots=10 --set model.max_layers=6
    "${B[@]}" --study t3cpu2-gutlb25 --models gutlb --set model.chunk_size=25 --set model.memory_slots=10 --set model.max_layers=6
    $BENCH reproduce halt-table3-cpu-tuned2 --run --jobs "$JOBS" --out "$OUT"
    ;;
  1)
    B=($BENCH tune --task listops --preset small --set data.n_train=35000 --set train.max_epochs=5 --set model.init=reference
       --set "train.betas=[0.9,0.98]" --set data.n_test=1000 --set data.n_test_iid=1000 --grid "train.lr=[3e-4,1e-3,3e-3,1e-2]"
       --pruner sync --objective acc --seed 100 --jobs "$JOBS" --out "$OUT")
    "${B[@]}" --study t1cpu2 --models transformer,ut,gut,tlb,gutlb
    "${B[@]}" --study t1cpu2-ablations --models gut-no-global-halt,gut-no-gate,gut-no-transition
    $BENCH reproduce halt-table1-cpu-tuned2 --run --jobs "$JOBS" --out "$OUT"
    ;;
  *)
    echo "usage: scripts/retune_halt_cpu.sh 3|1   (the HALT CPU table to re-tune by the protocol)" >&2
    exit 2
    ;;
esac
