#!/usr/bin/env bash
# HALT Table 3 at the paper preset on the device machine, one lease at a time, in the background:
#   start      a `bench tune` study (halt-table3-tuned's settings), every trial a worker on the one GPU
#   seeds      `bench reproduce halt-table3-tuned --run` for the rows of MODELS: the tuned rows' missing
#              seeds, JOBS at once on the one GPU, from the committed studies and records
#   wait S     wait for it at most S seconds, then pack the studies, the records and the table (never
#              checkpoints: they cannot come back) into $OUT/tune.tgz
# Each device call re-syncs the working tree, so the work lives outside it (/tmp/lease-tune).
#   bash scripts/gpu/gpu_tune_lease.sh start && bash scripts/gpu/gpu_tune_lease.sh wait 480   # one device call
#   bash scripts/gpu/gpu_tune_lease.sh wait 500                                            # a later call, same lease
#   PRESET=smoke SETS=train.val_every_steps=2 bash scripts/gpu/gpu_tune_lease.sh start    # a dry run here, on the CPU
# Unpack here with `tar -xzf tune.tgz -C DIR` (DIR/studies/STUDY, DIR/runs/..., DIR/reproduce/...) and
# copy the new files into results/. Defaults: the Transformer row, the 4-value grid around the paper's
# lr, validated every 2500 steps so that successive halving can prune.
set -u
PY=${PYTHON:-python3}
PRESET=${PRESET:-paper}
MODELS=${MODELS:-transformer}
STUDY=${STUDY:-t3paper}
GRID=${GRID:-train.lr=[0.0001,0.0003,0.001,0.003]}
JOBS=${JOBS:-4}
SETS=${SETS:-train.val_every_steps=2500 train.progress_every_min=1}
TABLE=${TABLE:-halt-table3-tuned}
WORK=${WORK:-/tmp/lease-tune}; DEST=${OUT:-/tmp/lease-tune-out}
export PYTHONUNBUFFERED=1
mkdir -p "$WORK" "$DEST"

pack() {
  (cd "$WORK" && find studies runs reproduce -type f \( -name '*.json' -o -name '*.npz' -o -name '*.csv' -o -name '*.log' -o -name '*.yaml' -o -name '*.md' \) 2>/dev/null \
     | tar -czf "$DEST/tune.tgz" -T -)
  ls -la "$DEST"
}

case ${1:-} in
  start)
    command -v nvidia-smi > /dev/null && nvidia-smi -L
    args=()
    for s in $SETS; do args+=(--set "$s"); done
    echo "start $(date -u +%H:%M:%S): tune --models $MODELS --preset $PRESET --grid $GRID --jobs $JOBS ${SETS}"
    setsid nohup $PY -m bench.cli tune --models "$MODELS" --task flipflop --preset "$PRESET" --grid "$GRID" \
      --jobs "$JOBS" --study "$STUDY" --out "$WORK" "${args[@]}" > "$WORK/tune.log" 2>&1 < /dev/null &
    echo $! > "$WORK/tune.pid"
    ;;
  seeds)
    command -v nvidia-smi > /dev/null && nvidia-smi -L
    mkdir -p "$WORK/runs/flipflop/$PRESET"
    cp -r results/studies "$WORK/"
    cp -r "results/runs/flipflop/$PRESET/." "$WORK/runs/flipflop/$PRESET/"
    echo "seeds $(date -u +%H:%M:%S): reproduce $TABLE --run --models $MODELS --jobs $JOBS --runs-per-gpu $JOBS"
    proxy=(); [ "$PRESET" = paper ] || proxy=(--preset "$PRESET")   # a dry run at another preset
    setsid nohup $PY -m bench.cli reproduce "$TABLE" --run --models "$MODELS" --jobs "$JOBS" --runs-per-gpu "$JOBS" \
      "${proxy[@]}" --out "$WORK" > "$WORK/tune.log" 2>&1 < /dev/null &
    echo $! > "$WORK/tune.pid"
    ;;
  wait)
    limit=${2:-480}; t0=$(date +%s)
    pid=$(cat "$WORK/tune.pid")
    while kill -0 "$pid" 2> /dev/null && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
      sleep 30
      echo "-- $(date -u +%H:%M:%S)"; tail -q -n 1 "$WORK"/studies/"$STUDY"/logs/worker-*.log 2>/dev/null; tail -n 2 "$WORK/tune.log"
    done
    kill -0 "$pid" 2> /dev/null && echo "still running" || { echo "tune ended:"; tail -n 20 "$WORK/tune.log"; }
    pack
    ;;
  *) echo "gpu_tune_lease: start | seeds | wait SECONDS" >&2; exit 2 ;;
esac
