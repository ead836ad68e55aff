#!/usr/bin/env bash
# One task's grid at the paper preset on one GPU, every (model, seed) a cell and all cells sharing the
# GPU (most of our families leave an H100 mostly idle: their steps are launch-bound). Interrupted? Run
# it again: finished cells are skipped, the others resume from their checkpoints.
#   bash scripts/gpu_grid.sh OUT TASK MODELS SEEDS [--set KEY=VALUE ...]
#   e.g. bash scripts/gpu_grid.sh results flipflop transformer,ut,gut,tlb,gutlb,tlb-fr 0    # [HALT Table 3]
#        bash scripts/gpu_grid.sh results copy-s brt,rsa-brt,tlb,rsa-tlb 0,1               # [RSA Fig. 5]
# In a short lease (a lent machine), start it detached and watch it:
#   setsid nohup bash scripts/gpu_grid.sh results flipflop transformer 0 > grid.log 2>&1 &
#   tail -n 3 results/logs/grid-*/*.log      # one line per validation: step, metric, elapsed, ETA
set -u
USAGE="usage: gpu_grid.sh OUT TASK MODELS SEEDS [--set KEY=VALUE ...]"
OUT=${1:?$USAGE}; TASK=${2:?$USAGE}; MODELS=${3:?$USAGE}; SEEDS=${4:?$USAGE}; shift 4
PY=${PYTHON:-python3}
CELLS=$(( $(echo "$MODELS" | tr ',' '\n' | wc -l) * $(echo "$SEEDS" | tr ',' '\n' | wc -l) ))
exec $PY -m bench compare --models "$MODELS" --tasks "$TASK" --preset paper --seeds "$SEEDS" --out "$OUT" \
  --run --jobs "$CELLS" --runs-per-gpu "$CELLS" "$@"
