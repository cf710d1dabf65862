#!/usr/bin/env bash
# Load check for cutout-gateway (acceptance 3), on loopback only. Not a test: prints figures.
#   1. dead upstream: the gateway's 503s (breaker open) vs a bare axum handler answering 503,
#      with RSS and open file descriptors sampled over a DURATION_DEAD run;
#   2. healthy upstream: median and p99 latency with breakers on vs disabled.
# Needs wrk (apt-get install -y wrk). Usage: bash crates/cutout-gateway/bench/load.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
DURATION_DEAD=${DURATION_DEAD:-60}
DURATION_HEALTHY=${DURATION_HEALTHY:-20}
CONNS=${CONNS:-50}
THREADS=${THREADS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/gateway}
nice -n 19 cargo build --release -q -p cutout-gateway
BIN=$CARGO_TARGET_DIR/release/cutout-gateway
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

config() { # $1 upstream port, $2 breakers true/false
  cat > "$TMP/gw.toml" <<TOML
[gateway]
listen = "127.0.0.1:18480"
admin = "127.0.0.1:18490"
attempt-timeout = "2s"
breakers = $2
[[routes]]
prefix = "/"
cluster = "svc"
[clusters.svc]
upstreams = ["http://127.0.0.1:$1"]
[breakers.defaults]
minimum-calls = 5
failure-ratio = 0.5
window-duration = "10s"
break-duration = "30s"
consecutive-failures = "off"
adaptive = false
TOML
}
start() { "$@" 2>/dev/null & PIDS+=($!); LAST=$!; sleep 0.5; }
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
pct() { awk -v p="$2" '$1 == p {print $2}' "$1"; }

echo "== dead upstream (nothing listens on 127.0.0.1:18499)"
config 18499 true
start "$BIN" --config "$TMP/gw.toml"; GW=$LAST
for _ in 1 2 3 4 5 6; do curl -s -o /dev/null http://127.0.0.1:18480/x || true; done
echo "first answers: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18480/x) (breaker open)"
echo "gateway at start: rss ${RSS0:=$(rss $GW)} kB, fds ${FD0:=$(fds $GW)}"
wrk -t"$THREADS" -c"$CONNS" -d"$((DURATION_DEAD / 2))s" --latency http://127.0.0.1:18480/x > "$TMP/dead1.txt"
RSS1=$(rss $GW); FD1=$(fds $GW)
wrk -t"$THREADS" -c"$CONNS" -d"$((DURATION_DEAD / 2))s" --latency http://127.0.0.1:18480/x > "$TMP/dead2.txt"
sleep 1
RSS2=$(rss $GW); FD2=$(fds $GW)
grep -E "Non-2xx|Socket errors" "$TMP/dead2.txt" || true
stop $GW
echo "gateway 503: $(rps "$TMP/dead1.txt") then $(rps "$TMP/dead2.txt") req/s; rss kB $RSS0 -> $RSS1 -> $RSS2; fds $FD0 -> $FD1 -> $FD2"

start "$BIN" bare503 127.0.0.1:18481; BARE=$LAST
wrk -t"$THREADS" -c"$CONNS" -d"$((DURATION_DEAD / 2))s" --latency http://127.0.0.1:18481/x > "$TMP/bare.txt"
stop $BARE
echo "bare axum 503: $(rps "$TMP/bare.txt") req/s"

echo "== healthy upstream"
start "$BIN" upstream 127.0.0.1:18482; UP=$LAST
for mode in true false; do
  config 18482 $mode
  start "$BIN" --config "$TMP/gw.toml"; GW=$LAST
  wrk -t"$THREADS" -c"$CONNS" -d5s http://127.0.0.1:18480/x > /dev/null # warm-up
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION_HEALTHY}s" --latency http://127.0.0.1:18480/x > "$TMP/h-$mode.txt"
  stop $GW
  echo "breakers=$mode: $(rps "$TMP/h-$mode.txt") req/s, p50 $(pct "$TMP/h-$mode.txt" 50%), p99 $(pct "$TMP/h-$mode.txt" 99%)"
done
