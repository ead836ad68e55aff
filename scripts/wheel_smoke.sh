#!/usr/bin/env bash
# The wheel as a user gets it (issue 28): build bench's wheel from the checkout's files, install
# it into a fresh venv in a temporary folder outside the checkout (torch first: $TORCH, the CPU
# build from local disk by default), and from another temporary folder run
#   bench --version, bench list, bench validate, bench run (transformer on parity, smoke preset),
#   bench reproduce --list
# then builds the plugin example of docs/plugins.md, installs it beside bench, and lists and validates it;
# failing on any error. Also checks the wheel holds bench only (no top-level models / tasks)
# with its registry.yaml, the task files (bench/tasks/*.yaml) and tables/. Run by CI after the test suite (.ci/run, `make wheel-smoke`).
#
#   bash scripts/wheel_smoke.sh            # PYTHON builds the wheel (needs setuptools; default .venv/bin/python)
#   TORCH= bash scripts/wheel_smoke.sh     # empty: let pip pick torch (a CUDA build: large)
#   KEEP=1 bash scripts/wheel_smoke.sh     # keep the temporary folder (its path is printed)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
BASE_PY="${BASE_PY:-python3}"          # the interpreter the fresh venv is made from
TORCH="${TORCH-torch==2.13.0}"
for var in PYTHON BASE_PY; do  # a relative path (make's .venv/bin/python) must survive the cd below
  case "${!var}" in /*) ;; */*) printf -v "$var" '%s' "$PWD/${!var}" ;; esac
done
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-wheel-smoke.XXXXXX")"
case "$WORK" in "$ROOT"/*) echo "wheel-smoke: $WORK is inside the checkout" >&2; exit 1 ;; esac
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$WORK"' EXIT; else echo "wheel-smoke: keeping $WORK"; fi
start=$(date +%s)
step() { echo "wheel-smoke [$(( $(date +%s) - start ))s] $*" >&2; }

# 1. the wheel, built from a copy of the checkout's files (tracked and untracked-not-ignored), so
#    nothing ignored (build/, *.egg-info, .venv) and no earlier build leaks into it
step "building the wheel"
mkdir -p "$WORK/src" "$WORK/dist"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf -) 2>/dev/null \
    | tar -x -C "$WORK/src"
else
  cp -a "$ROOT/." "$WORK/src"
fi
"$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/bench-*.whl)"
step "built $(basename "$WHEEL")"
"$PYTHON" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
assert tops == {"bench"}, f"the wheel installs more than bench: {sorted(tops)}"
for need in ("bench/registry.yaml", "bench/tables/rsa-table2.yaml", "bench/models/transformer.py", "bench/tasks/copy.py", "bench/tasks/copy.yaml", "bench/tasks/lra/lra.yaml"):
    assert need in names, f"the wheel lacks {need}"
assert not any(n.startswith("bench/") and "/tests/" in n for n in names)
print(f"wheel-smoke: the wheel holds bench/ only ({len(names)} files), with registry.yaml, the task files and tables/")
EOF

# 2. a fresh venv outside the checkout: torch first (pinned), then the wheel and its dependencies
step "creating a venv in $WORK/venv"
"$BASE_PY" -m venv "$WORK/venv"
VBIN="$WORK/venv/bin"
if [ -n "$TORCH" ]; then "$VBIN/python" -m pip install -q "$TORCH"; fi
"$VBIN/python" -m pip install -q "$WHEEL"
step "installed"

# 3. a user's first commands, from a folder that is not the checkout
mkdir -p "$WORK/cwd"
cd "$WORK/cwd"
unset BENCH_REGISTRY BENCH_OUT BENCH_NO_PLUGINS PYTHONPATH
export BENCH_DATA_DIR="$WORK/data"
where="$("$VBIN/python" -c 'import bench, os; print(os.path.dirname(bench.__file__))')"
case "$where" in "$WORK/venv/"*) ;; *) echo "wheel-smoke: bench imported from $where, not the venv" >&2; exit 1 ;; esac
if "$VBIN/python" -c 'import models' 2>/dev/null || "$VBIN/python" -c 'import tasks' 2>/dev/null; then
  echo "wheel-smoke: top-level models / tasks packages are importable" >&2; exit 1
fi
run() { step "$*"; "$@"; }
run "$VBIN/bench" --version
run "$VBIN/bench" list > "$WORK/list.txt"
grep -q "^transformer " "$WORK/list.txt" && grep -q "^parity " "$WORK/list.txt"
run "$VBIN/bench" validate
run "$VBIN/bench" run --model transformer --task parity --preset smoke --out "$WORK/out" --quiet
test -f "$WORK/out/runs/parity/smoke/transformer/seed0.json"
run "$VBIN/bench" reproduce --list > "$WORK/reproduce.txt"
grep -q "rsa-table2" "$WORK/reproduce.txt"
test ! -e "$WORK/cwd/results"   # nothing written as if this were a checkout

# 4. the plugin example of docs/plugins.md, installed beside it
step "the plugin of docs/plugins.md: building and installing mybench"
"$PYTHON" - "$ROOT/docs/plugins.md" "$WORK/plugin" <<'EOF'
import re, sys
from pathlib import Path
section, out = Path(sys.argv[1]).read_text(), Path(sys.argv[2])
for name, text in re.findall(r"`([\w./]+)`:\n\n```\w+\n(.*?)```", section, re.S):
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(text)
EOF
"$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/plugin-dist" "$WORK/plugin"
"$VBIN/python" -m pip install -q --no-deps "$WORK"/plugin-dist/mybench-*.whl
run "$VBIN/bench" list > "$WORK/list-plugin.txt"
grep -q "^my-gru " "$WORK/list-plugin.txt" && grep -q "^parity-start " "$WORK/list-plugin.txt"
run "$VBIN/bench" validate
step "ok: the wheel installs and runs outside the checkout"
