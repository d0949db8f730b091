#!/usr/bin/env bash
# Applies ICN's nccl-tests patch series (0001-*.patch ...) to a pristine checkout of the pinned
# release (see PINNED). Refuses any other tree: wrong version string, wrong git commit, or a
# modified file the series touches. Re-running on a tree patched by this same series is a no-op.
#
#   apply.sh [--check] <nccl-tests-dir>
#     --check   verify the tree and dry-run the series; change nothing
#
# Exit codes: 0 applied / already applied / check passed, 1 usage, 2 tree refused,
#             3 the series did not apply.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check_only=0
if [[ "${1:-}" == "--check" ]]; then check_only=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--check] <nccl-tests-dir>" >&2
  exit 1
fi
tree="$1"
if [[ ! -d "$tree" ]]; then echo "apply.sh: '$tree' is not a directory" >&2; exit 1; fi
tree="$(cd "$tree" && pwd)"

pinned() { awk -v k="$1" '$1 == k { print $2; exit }' "$here/PINNED"; }
want_tag="$(pinned tag)"
want_commit="$(pinned commit)"
want_version="$(pinned version)"
mapfile -t patches < <(ls "$here"/[0-9][0-9][0-9][0-9]-*.patch 2>/dev/null | sort)
if [[ ${#patches[@]} -eq 0 ]]; then echo "apply.sh: no patches next to $0" >&2; exit 1; fi
series_id="$(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)"
marker="$tree/.icn-nccl-tests-patches"

refuse() { echo "apply.sh: refusing $tree: $*" >&2; echo "apply.sh: expected nccl-tests $want_tag ($want_commit), unmodified" >&2; exit 2; }

if [[ ! -f "$tree/src/common.h" ]]; then refuse "no src/common.h (not an nccl-tests tree)"; fi
version="$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$tree/src/common.h")"
if [[ "$version" != "$want_version" ]]; then refuse "version is '${version:-unknown}', not $want_version"; fi

if [[ -f "$marker" ]]; then
  if [[ "$(cat "$marker")" == "$series_id" ]]; then
    echo "apply.sh: $tree already carries this patch series"
    exit 0
  fi
  refuse "it carries a different ICN patch series (marker $marker); start from a fresh checkout"
fi

# A git checkout must sit on the pinned commit (the tag may be absent in a shallow clone).
if git -C "$tree" rev-parse --show-toplevel >/dev/null 2>&1 &&
   [[ "$(git -C "$tree" rev-parse --show-toplevel)" == "$tree" ]]; then
  head="$(git -C "$tree" rev-parse HEAD)"
  if [[ "$head" != "$want_commit" ]]; then refuse "git HEAD is $head"; fi
fi

# Tarball or git: the files the series edits must be byte-identical to the release.
while read -r kind sum path; do
  [[ "$kind" == "sha256" ]] || continue
  if [[ ! -f "$tree/$path" ]]; then refuse "missing $path"; fi
  have="$(sha256sum "$tree/$path" | cut -d' ' -f1)"
  if [[ "$have" != "$sum" ]]; then refuse "$path differs from the release (sha256 $have)"; fi
done < "$here/PINNED"

# Applies the series one patch at a time to directory $1 (later patches edit what earlier ones
# added). git apply works outside repositories too; the ceiling keeps it from adopting an
# enclosing repository (it would then resolve paths from that repository's root).
apply_series() {
  local dir="$1" p
  for p in "${patches[@]}"; do
    if command -v git >/dev/null 2>&1; then
      (cd "$dir" && GIT_CEILING_DIRECTORIES="$(dirname "$dir")" git apply --whitespace=nowarn "$p") || return 1
    else
      (cd "$dir" && patch -p1 -s -N < "$p") || return 1
    fi
  done
}

# Dry run on a scratch copy (sources only) so a failure leaves the real tree untouched.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(cd "$tree" && tar --exclude=./.git --exclude='./build*' -cf - .) | (cd "$scratch" && tar -xf -)
if ! apply_series "$scratch" >/dev/null 2>&1; then
  echo "apply.sh: the series does not apply to $tree" >&2
  exit 3
fi
if [[ $check_only -eq 1 ]]; then
  echo "apply.sh: $tree is nccl-tests $want_version at the pinned state; ${#patches[@]} patches apply cleanly"
  exit 0
fi
if ! apply_series "$tree"; then echo "apply.sh: applying the series to $tree failed" >&2; exit 3; fi
echo "$series_id" > "$marker"
echo "apply.sh: applied ${#patches[@]} patches to $tree (nccl-tests $want_version + ICN: mixed_traffic_perf, moe_alltoallv_perf, net-plugin info in -J)"
