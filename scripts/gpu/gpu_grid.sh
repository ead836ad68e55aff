#!/usr/bin/env bash
# One task's grid at the paper preset on one GPU, every (model, seed) a cell and all cells sharing the
# GPU (most of our families leave an H100 mostly idle: their steps are launch-bound). Interrupted? Run
# it again: finished cells are skipped, the others resume from their checkpoints.
#   bash scripts/gpu/gpu_grid.sh OUT TASK MODELS SEEDS [--set KEY=VALUE ...]
#   e.g. bash scripts/gpu/gpu_grid.sh results flipflop transformer,ut,gut,tlb,gutlb,tlb-fr 0    # [HALT Table 3]
#        bash scripts/gpu/gpu_grid.sh results copy-s brt,rsa-brt,tlb,rsa-tlb 0,1               # [RSA Fig. 5]
# In a short lease (a lent machine), start it detached with OUT outside the repository (a machine
# whose tree is re-synced between calls deletes files there that git neither tracks nor ignores,
# records and curves included: results/halt_flipflop.md), watch it, copy records out as they finish:
#   setsid nohup bash scripts/gpu/gpu_grid.sh /tmp/results flipflop transformer 0 --set train.progress_every_min=1 > grid.log 2>&1 &
#   tail -n 2 /tmp/results/logs/grid-*/*.log   # a line a minute: step, loss, elapsed, ETA; one per validation
set -u
USAGE="usage: gpu_grid.sh OUT TASK MODELS SEEDS [--set KEY=VALUE ...]"
OUT=${1:?$USAGE}; TASK=${2:?$USAGE}; MODELS=${3:?$USAGE}; SEEDS=${4:?$USAGE}; shift 4
PY=${PYTHON:-python3}
CELLS=$(( $(echo "$MODELS" | tr ',' '\n' | wc -l) * $(echo "$SEEDS" | tr ',' '\n' | wc -l) ))
exec $PY -m bench compare --models "$MODELS" --tasks "$TASK" --preset paper --seeds "$SEEDS" --out "$OUT" \
  --run --jobs "$CELLS" --runs-per-gpu "$CELLS" "$@"
