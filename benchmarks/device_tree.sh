#!/usr/bin/env bash
# What travels to the GPU machine of the development workplace (the `device` tool): the checkout's tracked files and
# its untracked files that git does not ignore, at most 64 MiB with the carried wheels. The committed datasets are
# larger than that together, and no device call reads them. This script keeps them from travelling without touching
# them or any commit:
#
#   bash benchmarks/device_tree.sh slim      # before device calls
#   bash benchmarks/device_tree.sh size      # MiB that would travel now (apparent size; 4 KiB blocks in brackets)
#   bash benchmarks/device_tree.sh restore   # right after them
#
# `slim` takes the folders in SLIM out of git's *index in this checkout only* (`git rm --cached`: every file stays on
# disk, byte for byte) and drops their exceptions (`!/results/NAME/`) from the working tree's .gitignore, whose
# `/results/*` then ignores them (.git/info/exclude cannot: a .gitignore exception outranks it), so that the tool sees
# them neither as tracked nor as untracked. `restore` puts the index entries and .gitignore back from HEAD. Nothing is deleted,
# moved or committed, and a clone or a tarball of the repository always has every dataset. A commit made while slim
# would record the datasets' deletion: `slim` installs a pre-commit hook that refuses every commit until `restore`.
set -euo pipefail
cd "$(dirname "$0")/.."
git_dir="$(git rev-parse --git-dir)"
marker="$git_dir/fingrav-device-slim"
hook="$(git rev-parse --git-path hooks/pre-commit)"
# the largest committed datasets (raw data of the 2026-11/12 H200 runs, ~140 MB); no device call reads results/
SLIM=(results/h200 results/h200-adaptive results/h200-sustained results/h200-db2 results/h200-db3 results/h200-db4
  results/h200-db5 results/h200-db6 results/h200-placement results/h200-probe-ab)

size() {
  { git ls-files -z; git ls-files -z --others --exclude-standard; } | python3 -c '
import os, sys
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n and os.path.isfile(n)]
names += [os.path.join(r, f) for r, _, fs in os.walk(".whl") for f in fs] if os.path.isdir(".whl") else []
app = sum(os.path.getsize(n) for n in names)
blk = sum(-(-os.path.getsize(n) // 4096) * 4096 for n in names)
print(f"{app / 2**20:.1f} MiB travel with .whl ({blk / 2**20:.1f} MiB in 4 KiB blocks), {len(names)} files")'
}

case "${1:-}" in
  slim)
    if [ -e "$marker" ]; then echo "already slim (restore first)" >&2; exit 1; fi
    git diff --cached --quiet || { echo "staged changes: commit or unstage them first" >&2; exit 1; }
    git diff --quiet -- .gitignore || { echo ".gitignore has changes: commit them first" >&2; exit 1; }
    if [ -e "$hook" ]; then echo "$hook exists: not replacing it, so nothing would stop a commit; stopping" >&2; exit 1; fi
    # the guard first: nothing below runs unless a commit is already refused
    mkdir -p "$(dirname "$hook")"
    printf '#!/bin/sh\necho "benchmarks/device_tree.sh slim is in effect: run it with restore before committing" >&2\nexit 1\n' > "$hook"
    chmod +x "$hook"
    touch "$marker"
    git rm -r -q --cached -- "${SLIM[@]}"
    for p in "${SLIM[@]}"; do sed -i "\|^!/$p/\$|d" .gitignore; done
    size
    ;;
  restore)
    [ -e "$marker" ] || { echo "not slim" >&2; exit 0; }
    git reset -q -- "${SLIM[@]}"
    git checkout -- .gitignore
    rm -f "$hook" "$marker"
    if git status --porcelain -- results | grep -q '^D\|^ D'; then echo "a dataset file is missing" >&2; exit 1; fi
    size
    ;;
  size) size ;;
  *) echo "usage: device_tree.sh slim|restore|size" >&2; exit 2 ;;
esac
