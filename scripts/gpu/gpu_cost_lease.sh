#!/usr/bin/env bash
# GPU backlog item 1 in one short lease: `bench cost` of the HALT families at the flip-flop paper widths
# (d 512, 8 heads, d_ff 2048, the preset's batch 16) at T = 512 / 1024 / 2048 on the GPU, eager fp32 and
# bf16, HALT Table 5's halting modes, every other family (eager fp32, T = 512), compiled fp32 at T = 512.
# Each `bench cost` is one process with its own time limit, in priority order, so a lease that ends early
# still returns what finished: after each, everything written so far is packed into $OUT/cost.tgz.
#   bash scripts/gpu/gpu_cost_lease.sh [STEP ...]   # on the device machine (the device tool's run); STEPs below
#   DEVICE=cpu PRESET=smoke SCALE=0.2 bash scripts/gpu/gpu_cost_lease.sh   # a dry run of the commands here
# Unpack here with `tar -xzf cost.tgz -C /tmp` (folder gpu/, one folder per step); what ran and what is
# left: results/cost/gpu/README.md. A 15-minute lease holds about two steps after the machine's start.
set -u
DEVICE=${DEVICE:-cuda}; PRESET=${PRESET:-paper}; SCALE=${SCALE:-1}
PY=${PYTHON:-python3}
DEST=${OUT:-/tmp/gpu-cost-out}; WORK=/tmp/gpu-cost; mkdir -p "$DEST" "$WORK/gpu"
export PYTHONUNBUFFERED=1
CORE=transformer,ut,gut,tlb,gutlb
OTHERS=nope,lstm,gru,rsa-transformer,transformer-star,xl,brt,tlb-fr,rsa-xl,rsa-brt,rsa-tlb,r-transformer
C="-m bench cost --task flipflop --preset $PRESET --device $DEVICE"
step() {  # step NAME SECONDS ARGS...: one bench cost, then pack what exists
  local name=$1 limit; limit=$(awk "BEGIN{print int($2 * $SCALE) + 1}"); shift 2
  echo "== $name ($limit s) $(date -u +%H:%M:%S)"
  timeout -k 5 "$limit" $PY $C --out "$WORK/gpu/$name" "$@" > "$WORK/gpu/$name.log" 2>&1
  echo "   rc $? $(date -u +%H:%M:%S)"; grep -v "^ " "$WORK/gpu/$name.log" | tail -n 12
  tar -czf "$DEST/cost.tgz" -C "$WORK" gpu
}
command -v nvidia-smi > /dev/null && nvidia-smi -L
$PY -c "import torch; print('torch', torch.__version__)"
# the steps: the arguments, else all, in this order (name, time limit in s, bench cost arguments)
run() {
  case $1 in
    fp32-512) step $1 100 --models $CORE --lengths 512 ;;
    bf16-512) step $1 150 --models $CORE --lengths 512 --dtype bf16 ;;
    fp32-1024) step $1 150 --models $CORE --lengths 1024 ;;
    bf16-1024) step $1 150 --models $CORE --lengths 1024 --dtype bf16 ;;
    fp32-2048) step $1 300 --models $CORE --lengths 2048 ;;
    compiled) step $1 150 --models $CORE --lengths 512 --compile ;;
    halting) step $1 60 --models gut --lengths 512 --halting --bounds 10,20,40 ;;
    others) step $1 150 --models $OTHERS --lengths 512 ;;
    *) echo "gpu_cost_lease: unknown step $1" >&2 ;;
  esac
}
for s in ${@:-fp32-512 halting bf16-512 fp32-1024 others bf16-1024 fp32-2048 compiled}; do run "$s"; done
ls -la "$DEST"
