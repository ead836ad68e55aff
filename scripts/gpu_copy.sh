#!/usr/bin/env bash
# Copy task at the paper's sizes [RSA §4.4, App. E.4] on one GPU: BRT vs RSA-BRT, TLB vs RSA-TLB,
# every (model, seed) its own process, all at once (these models leave an H100 mostly idle, so
# parallel runs cost little). Records go to OUT/runs/copy/paper/<model>/.
#   bash scripts/gpu_copy.sh OUT SEEDS [--set ...]     e.g.  bash scripts/gpu_copy.sh results 0,1 --set train.max_epochs=8
set -u
OUT=${1:?usage: gpu_copy.sh OUT SEEDS [--set KEY=VALUE ...]}; SEEDS=${2:?seeds, e.g. 0,1}; shift 2
PY=${PYTHON:-python3}
MODELS=${MODELS:-brt rsa-brt tlb rsa-tlb}
mkdir -p "$OUT/logs"
# Generate the cached splits once, before the parallel runs would race to write them.
$PY -c "import bench; from bench.data import load_split; t = bench.build_task('copy', preset='paper'); [load_split(t, s) for s in t.splits()]" \
  || exit 1
for m in $MODELS; do
  for s in ${SEEDS//,/ }; do
    $PY -m bench.cli run --model "$m" --task copy --preset paper --seed "$s" --out "$OUT" --quiet "$@" \
      > "$OUT/logs/copy-$m-$s.log" 2>&1 &
  done
done
wait
grep -h "" "$OUT"/logs/copy-*.log | tail -n 40
