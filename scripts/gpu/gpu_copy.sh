#!/usr/bin/env bash
# Copy task at the paper's sizes [RSA §4.4, App. E.4, Fig. 5] on one GPU: BRT vs RSA-BRT, TLB vs
# RSA-TLB, on the S (6,400) or L (12,800) training set (scripts/gpu/gpu_grid.sh with these models).
# One model per maximum length (docs/tasks.md): other lengths with --set data.max_len=L.
#   bash scripts/gpu/gpu_copy.sh OUT SEEDS [TASK] [--set ...]   e.g.  bash scripts/gpu/gpu_copy.sh results 0,1 copy-s
set -u
OUT=${1:?usage: gpu_copy.sh OUT SEEDS [copy-s|copy-l] [--set KEY=VALUE ...]}; SEEDS=${2:?seeds, e.g. 0,1}; shift 2
TASK=copy-s
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then TASK=$1; shift; fi
exec bash "$(dirname "$0")/gpu_grid.sh" "$OUT" "$TASK" "${MODELS:-brt,rsa-brt,tlb,rsa-tlb}" "$SEEDS" "$@"
