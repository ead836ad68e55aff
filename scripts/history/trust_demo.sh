#!/bin/bash
# Issue 29 demonstrations (as root: tmpfs and bind mounts): A copied folder eval, B eval from another
# directory, C two terminals, D truncated last.ckpt, E full disk, F run folder read-only mid-run,
# G a grid stopped by SIGTERM.  bash scripts/history/trust_demo.sh REPO WORKDIR abcdefg
# $1 = repo, $2 = work folder, $3 = which parts (abc: before/after; def: after only)
REPO=$1; W=$2; PARTS=$3
export PYTHONPATH=$REPO OMP_NUM_THREADS=1 BENCH_DATA_DIR=$W/data
B="/work/main/.venv/bin/python -m bench"
RUN="run --model transformer --task parity --preset smoke --quiet"
rm -rf $W; mkdir -p $W/sub; cd $W
rec() { find $1 -name 'seed*.json' | head -1; }
if [[ $PARTS == *a* ]]; then
  echo "== A. copied run folder whose checkpoint was deleted"
  $B $RUN --out o1 > /dev/null 2>&1; cp -r o1 o2; find o2 -name best.ckpt -delete
  $B eval $(rec o2) > a.out 2> a.err; echo "exit $?"; head -2 a.out; head -1 a.err
  echo "== B. a record evaluated from another directory (best.ckpt beside it)"
  R=$(rec o1); (cd sub && $B eval ../$R > ../b.out 2> ../b.err; echo "exit $?"); head -2 b.out; head -1 b.err
fi
if [[ $PARTS == *c* ]]; then
  echo "== C. two terminals: the same command twice, the second 9 s later"
  A="$RUN --set train.max_epochs=40 --out o3"
  $B $A > c1.out 2> c1.err & P1=$!; sleep 9
  $B $A > c2.out 2> c2.err & P2=$!
  wait $P1; E1=$?; wait $P2; E2=$?
  echo "exits $E1 $E2"; grep -h "bench:" c1.err c2.err | head -4
  R=$(rec o3); python3 - "$R" <<'PY'
import csv, json, sys
from pathlib import Path
r = Path(sys.argv[1]); rec = json.loads(r.read_text())
rows = list(csv.DictReader(open(r.with_suffix("") / "metrics.csv")))
steps = [row["step"] for row in rows if row.get("val_metric")]
print(f"record: steps_run {rec['steps_run']}, resumed_from {rec['resumed_from']}; metrics.csv {len(rows)} rows, "
      f"{len(steps)} validation rows for {len(set(steps))} distinct steps")
PY
fi
if [[ $PARTS == *d* ]]; then
  echo "== D. truncated last.ckpt"
  A="$RUN --set train.max_epochs=200 --out o4"
  $B $A > /dev/null 2>&1 & P=$!; until [ -n "$(find o4 -name last.ckpt 2>/dev/null)" ]; do sleep 1; done; sleep 3; kill -TERM $P; wait $P; echo "stopped by SIGTERM: exit $?"
  L=$(find o4 -name last.ckpt); S=$(stat -c %s $L); head -c $((S/2)) $L > $L.tmp && mv $L.tmp $L
  $B $A > d.out 2> d.err; echo "exit $?, stderr lines $(wc -l < d.err)"; cat d.err; ls $(dirname $L)
  $B $A --set train.max_epochs=20 --rerun > /dev/null 2> d2.err; echo "with --rerun (and 20 epochs): exit $?"
fi
if [[ $PARTS == *e* ]]; then
  echo "== E. full disk (a 256 KiB tmpfs) mid-run"
  mkdir -p tfull; mount -t tmpfs -o size=256k tmpfs tfull
  A="$RUN --set train.max_epochs=30 --out tfull"
  $B $A > e.out 2> e.err; echo "exit $?, stderr lines $(wc -l < e.err)"; cat e.err
  L=$(find tfull -name last.ckpt); ls -la $(dirname $L); /work/main/.venv/bin/python -c "import torch,sys; print('last.ckpt loads: step', torch.load(sys.argv[1], weights_only=False)['global_step'])" $L
  umount tfull
  echo "== F. the run folder turned read-only mid-run (a read-only bind mount over it)"
  mkdir -p tro
  A="$RUN --set train.max_epochs=300 --out tro"
  $B $A > f.out 2> f.err & P=$!; until [ -n "$(find tro -name last.ckpt 2>/dev/null)" ]; do sleep 1; done; sleep 3
  RF=$(dirname $(dirname $(find tro -name last.ckpt))); mount --bind $RF $RF && mount -o remount,bind,ro $RF && echo "remounted $RF read-only"
  wait $P; echo "exit $?, stderr lines $(wc -l < f.err)"; cat f.err
  L=$(find tro -name last.ckpt); /work/main/.venv/bin/python -c "import torch,sys; print('last.ckpt loads: step', torch.load(sys.argv[1], weights_only=False)['global_step'])" $L
  umount $RF; $B $A --set train.max_epochs=300 > /dev/null 2> f2.err & P=$!; sleep 1; echo "(writable again: the same command resumes; stopped after it started: only resumed_from is shown)"
  until grep -q "training into" f2.err 2>/dev/null; do sleep 1; done; sleep 5; kill -TERM $P; wait $P; echo "exit $?"; cat f2.err | tail -1
fi
if [[ $PARTS == *g* ]]; then
  echo "== G. a grid stopped by SIGTERM"
  $B compare --models transformer,lstm --tasks parity --preset smoke --set train.max_epochs=40 --run --out o5 > g.out 2> g.err & P=$!
  until [ -n "$(find o5 -name last.ckpt 2>/dev/null)" ]; do sleep 1; done; kill -TERM $P; wait $P; echo "exit $?"; tail -1 g.err
fi
