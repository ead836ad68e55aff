#!/usr/bin/env bash
# The GPU checks in one go, on a machine with a CUDA device and the set-up of docs/getting-started.md:
#   bash scripts/gpu/gpu_check.sh [OUT_DIR] [--quick | --only PART,PART...]
#   (default OUT_DIR results/perf/gpu-<date>; --quick: every part but the whole suite)
# Parts, in order:
#   tests-gpu          the CUDA tests (`pytest -m gpu`: every model CUDA == CPU, bf16 autocast, REM FFT ==
#                      dense, SDPA kernels == math, xformers == SDPA when xformers is installed, bench run in bf16);
#   rsa-*              RSA vs plain attention step time and memory (scripts/benchmarks/bench_rsa.py) in fp32 and bf16, at
#                      the benchmark's default sizes and at the copy task's paper sizes [RSA App. E.4];
#   rsa-compile-bf16   the same at the copy task's sizes, eager and torch.compile side by side;
#   peer-bf16, peer-fp32  our Transformer vs x-transformers (and our xformers backend) at d=512, 6 layers,
#                      T=512 / 2048, eager and compiled, with MFU (scripts/benchmarks/bench_peer.py);
#   halting            ACT halting overhead (scripts/benchmarks/bench_halting.py);
#   tests-all          the whole test suite with the GPU visible.
# Each part writes its log (and Markdown table) to OUT_DIR; a failing part does not stop the rest.
set -u
OUT_DIR=${1:-results/perf/gpu-$(date +%Y%m%d)}
MODE=${2:-}
ONLY=${3:-}
PY=${PYTHON:-python3}
$PY -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null \
  || { echo "gpu_check: $PY's torch sees no CUDA device; install a CUDA build of torch (docs/getting-started.md, GPU users)" >&2; exit 2; }
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
status=0
part() {  # part NAME TIMEOUT_S CMD...: run CMD, log to OUT_DIR/NAME.log, remember a failure
  local name=$1 limit=$2; shift 2
  if [ "$MODE" = --only ] && [[ ",$ONLY," != *",$name,"* ]]; then return; fi
  if [ "$MODE" = --quick ] && [ "$name" = tests-all ]; then return; fi
  echo "== $name: $*"
  timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  echo "== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}

{ nvidia-smi -L; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; } \
  > "$OUT_DIR/env.log" 2>&1; cat "$OUT_DIR/env.log"

part tests-gpu 240 $PY -m pytest -m gpu tests/ -q -rs
# the benchmark's default (small, launch-bound) model, then the copy task's paper sizes
part rsa-fp32 120 $PY scripts/benchmarks/bench_rsa.py --device cuda --batch 8 --reps 20 --dense-max 2048 --out "$OUT_DIR/rsa_fp32.md"
part rsa-bf16 120 $PY scripts/benchmarks/bench_rsa.py --device cuda --dtype bf16 --batch 8 --reps 20 --dense-max 2048 --out "$OUT_DIR/rsa_bf16.md"
for dt in fp32 bf16; do
  part rsa-copy-paper-$dt 150 $PY scripts/benchmarks/bench_rsa.py --device cuda --dtype $dt --batch 16 --layers 4 --heads 8 \
    --d-ff 512 --kinds 4,2,2,0,0,0 --reps 20 --dense-max 512 --out "$OUT_DIR/rsa_copy_paper_$dt.md"
done
part rsa-compile-bf16 300 $PY scripts/benchmarks/bench_rsa.py --device cuda --dtype bf16 --batch 16 --layers 4 --heads 8 \
  --d-ff 512 --kinds 4,2,2,0,0,0 --reps 20 --dense-max 0 --compile --out "$OUT_DIR/rsa_compile_bf16.md"
for dt in bf16 fp32; do
  part peer-$dt 300 $PY scripts/benchmarks/bench_peer.py --device cuda --dtype $dt --lengths 512,2048 --batch 8 --compile \
    --out "$OUT_DIR/peer_$dt.md"
done
part halting 100 $PY scripts/benchmarks/bench_halting.py --device cuda --batch 64 --d-model 256
part tests-all 420 $PY -m pytest -q
exit $status
