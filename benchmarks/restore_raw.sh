#!/usr/bin/env bash
# Restore a committed real-GPU dataset's raw data kept out of main's tree (issue 21: the tree must stay small enough to
# travel to a GPU machine) into results/<NAME>/gpu/raw (ignored by git, made read-only), from the git tag TAG, else
# from COMMIT (the commit that added them, an ancestor of main: in every full clone, also without the tag). Nothing is
# done when gpu/raw is there already. Each such dataset's replay.sh calls it. Usage: restore_raw.sh NAME TAG COMMIT
set -euo pipefail
name="$1" tag="$2" commit="$3"
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -d "$root/results/$name/gpu/raw" ] && exit 0
ref="$tag"
git -C "$root" rev-parse -q --verify "refs/tags/$ref" > /dev/null 2>&1 || ref="$commit"
if ! git -C "$root" cat-file -e "$ref^{commit}" 2> /dev/null; then
  echo "results/$name: its raw data are in the git history of the fingrav repository (tag $tag, commit" \
    "${commit:0:7}); this copy has neither (a tarball or a shallow clone?): clone the whole repository" >&2
  exit 2
fi
git -C "$root" archive "$ref" "results/$name/gpu/raw" | tar -x -C "$root"
chmod -R a-w "$root/results/$name/gpu/raw"
