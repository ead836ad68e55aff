#!/usr/bin/env bash
# Tune every row of bench/tables/probes-linear-cpu.yaml per probe by the tuning protocol (bench tune
# --pruner sync, docs/tuning.md) and train the 5 final seeds of probes-linear-cpu-tuned: one study
# per probe, then the table. Rerunning it continues where it stopped (finished runs are read,
# stopped ones resume from their checkpoints).
#   scripts/tune_probes_linear_cpu.sh
# CPU hours: docs/linear_recurrence.md, "The probe table: plan".
set -euo pipefail
BENCH=${BENCH:-python -m bench}
OUT=${OUT:-results}
JOBS=${JOBS:-2}
MODELS=transformer,lstm,linear-transformer,deltanet,deltanet-neg,gated-deltanet,retnet,gla,mamba2,mamba2-neg,mlstm,rwkv7,ut,gut,tlb,gutlb
B=($BENCH tune --preset small --set data.n_test=1000 --models "$MODELS" --grid "train.lr=[3e-4,1e-3,3e-3,1e-2]" --pruner sync --seed 100
   --jobs "$JOBS" --out "$OUT")
"${B[@]}" --study pl-mqar --task mqar --objective token_acc
"${B[@]}" --study pl-parity --task parity --set data.max_len=16 --set data.bin1_max_len=128 --objective token_acc
"${B[@]}" --study pl-z60 --task z60 --set train.max_epochs=30 --objective token_acc
"${B[@]}" --study pl-modarith --task modular-arithmetic --set data.n_train=5000 --objective "token_acc@lengths"
$BENCH reproduce probes-linear-cpu-tuned --run --jobs "$JOBS" --out "$OUT"
