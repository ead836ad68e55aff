#!/usr/bin/env bash
# One `bench run` on a lent GPU machine that re-syncs the working tree between calls and goes back
# soon after (the device tool): start the run detached with its --out outside the repository, wait
# until its record exists or WAIT_S seconds have passed, then copy the record, its curve and its log
# to $OUT (what comes back). Call it again with the same arguments while the run is going: it does
# not start a second one, it waits again and copies.
#   bash scripts/gpu/gpu_lease_run.sh WAIT_S MODEL TASK PRESET SEED [--set KEY=VALUE ...]
#   e.g. bash scripts/gpu/gpu_lease_run.sh 560 transformer flipflop paper 1 --set train.progress_every_min=1
# Packages the image lacks (`datasets`) travel as wheels in .whl/ (device README, Notes); they are
# installed into /tmp/site first when .whl/ is there. Carry datasets, dill and multiprocess only: the
# image's pyarrow (25.0.1 on 2026-11-26) serves datasets 5.2.0, and a carried pyarrow 26 beside it broke
# datasets' fingerprinting (PicklingError: MonthDayNano) (results/halt_flipflop.md).
set -u
USAGE="usage: gpu_lease_run.sh WAIT_S MODEL TASK PRESET SEED [--set KEY=VALUE ...]"
WAIT_S=${1:?$USAGE}; MODEL=${2:?$USAGE}; TASK=${3:?$USAGE}; PRESET=${4:?$USAGE}; SEED=${5:?$USAGE}; shift 5
RUNS=/tmp/lease-runs
LOG=$RUNS/$MODEL-$TASK-$PRESET-seed$SEED.log
DEST=${OUT:-$RUNS/out}
mkdir -p "$RUNS" "$DEST"
if [ -d .whl ] && [ ! -e /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed || { echo "gpu_lease_run: installing .whl/ failed" >&2; exit 1; }
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
running() { pgrep -f -- "--model $MODEL --task $TASK --preset $PRESET --seed $SEED " > /dev/null; }
record() { find "$RUNS/runs/$TASK/$PRESET/$MODEL" -maxdepth 1 -name "seed$SEED*.json" 2>/dev/null | head -n 1; }
if [ -z "$(record)" ] && ! running; then
  nvidia-smi -L; python3 -c "import torch, datasets; print('torch', torch.__version__, 'datasets', datasets.__version__)"
  setsid nohup python3 -m bench run --model "$MODEL" --task "$TASK" --preset "$PRESET" --seed "$SEED" --out "$RUNS" \
    "$@" > "$LOG" 2>&1 < /dev/null &
  echo "gpu_lease_run: started; log $LOG"
fi
start=$SECONDS
while [ -z "$(record)" ] && [ $((SECONDS - start)) -lt "$WAIT_S" ]; do
  sleep 10
  running || break
done
tail -n 15 "$LOG"
rec=$(record)
cp "$LOG" "$DEST/"
if [ -n "$rec" ]; then
  cp "$rec" "$DEST/"
  [ -f "${rec%.json}/metrics.csv" ] && cp "${rec%.json}/metrics.csv" "$DEST/$(basename "${rec%.json}")-metrics.csv"
  echo "gpu_lease_run: done: $rec"
elif running; then
  echo "gpu_lease_run: still running after ${WAIT_S}s; call again with the same arguments"
else
  echo "gpu_lease_run: the run ended without a record; see the log above" >&2; exit 1
fi
