#!/usr/bin/env bash
# Records the scripted day: two demo upstreams, the gateway on gateway.toml, load.py's
# callers for 30 minutes. Writes day.log.gz (the gateway's access log) here.
#   crates/cutout-lab/samples/day/run.sh [path/to/cutout-gateway]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gateway=${1:-$here/../../../../target/release/cutout-gateway}
log=$(mktemp)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$log"' EXIT
"$gateway" upstream 127.0.0.1:7101 >/dev/null 2>&1 & pids+=($!)
"$gateway" upstream 127.0.0.1:7102 >/dev/null 2>&1 & pids+=($!)
NO_COLOR=1 "$gateway" --config "$here/gateway.toml" 2>"$log" >/dev/null & pids+=($!)
sleep 2
python3 "$here/load.py" 8180 7101 7102
sleep 2
grep ' request request_id=' "$log" | gzip -9 > "$here/day.log.gz"
echo "wrote $here/day.log.gz: $(zcat "$here/day.log.gz" | wc -l) access lines"
