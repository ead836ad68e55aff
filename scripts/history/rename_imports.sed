# Issue 28: models/ and tasks/ moved into bench/. The rewrite applied in the rename commit (fc07fe0), for code
# written against the old layout (e.g. another branch, when merging):
#   git ls-files | grep -v '^results/' | grep -E '\.(py|md|ya?ml|toml|sh)$|Makefile$' | xargs sed -E -i -f scripts/history/rename_imports.sed
# Imports, 'module:Class' targets, dotted module.Class references, python -m; prose paths (models/x.py)
# were rewritten apart: s#(^|[^/[:alnum:]_.-])(models|tasks)/#\1bench/\2/#g (and backticked `models.x`).
s/^([[:space:]]*)from (models|tasks)([. ])/\1from bench.\2\3/
s/^([[:space:]]*)import (models|tasks)([. ]|$)/\1import bench.\2\3/
s/(^|[^.[:alnum:]_/-])(models|tasks)\.([a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*)([.:][A-Z_])/\1bench.\2.\3\5/g
s/(python -m )(models|tasks)\./\1bench.\2./g
