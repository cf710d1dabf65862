#!/usr/bin/env bash
# Remakes claims/runs/: every scenario a claim of claims.toml reads, over 20 seeds, as its
# file says (<scenario>.json.gz) and against a dependency that sheds a call that would wait
# longer than half its callers' timeout for a worker (<scenario>+shedding.json.gz, the same
# run with --set dependency.max-queue-wait=...). The JSON is cutout-lab's --json, gzipped.
#
#   crates/cutout-lab/claims/run.sh            every scenario
#   crates/cutout-lab/claims/run.sh brownout   one scenario
#
# Then `cargo test -p cutout-lab --test claims` checks every claim against the new runs.
set -euo pipefail
cd "$(dirname "$0")/../../.."
claims=crates/cutout-lab/claims
cargo build --release -q -p cutout-lab
if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  mapfile -t scenarios < <(sed -n 's/^scenario = "\(.*\)"$/\1/p' "$claims/claims.toml" | sort -u)
fi
mkdir -p "$claims/runs" target/cutout-lab/claims
for s in "${scenarios[@]}"; do
  file=crates/cutout-lab/scenarios/$s.toml
  # The callers' timeout, [fleet]'s only duration named `timeout`: shed at half of it.
  timeout=$(sed -n 's/^timeout = "\(.*\)"$/\1/p' "$file" | head -1)
  case "$timeout" in
    1s) shed=500ms ;;
    2s) shed=1s ;;
    *) echo "$file: timeout $timeout: say here what half of it is" >&2; exit 1 ;;
  esac
  for variant in plain shedding; do
    name=$s
    set_args=()
    if [ "$variant" = shedding ]; then
      name=$s+shedding
      set_args=(--set "dependency.max-queue-wait=$shed")
    fi
    echo "$name" >&2
    target/release/cutout-lab "$file" --seeds 20 "${set_args[@]}" \
      --json "target/cutout-lab/claims/$name.json" --svg "target/cutout-lab/claims/$name.svg" \
      > "target/cutout-lab/claims/$name.txt"
    gzip -9 -n -c "target/cutout-lab/claims/$name.json" > "$claims/runs/$name.json.gz"
  done
done
