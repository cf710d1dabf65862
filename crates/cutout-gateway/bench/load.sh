#!/usr/bin/env bash
# Load bench for cutout-gateway, on loopback only. Not a test: prints figures, side by side, from one run.
# Every gateway runs the shipped breaker defaults (no [breakers] section): what operators get.
#   1. direct vs gateway: wrk against the healthy upstream directly, then through the gateway
#      (breakers on): throughput and p99.
#   2. breakers on / off: ROUNDS alternating runs (on, off, on, off, ...) of ROUND_SECS each
#      against two gateways in front of the same upstream; the ratio on/off of throughput and of
#      p99 per pair of rounds, with median, min and max (the spread).
#      Each wrk run's non-2xx answers are counted: against the healthy upstream there must be none.
#   3. open breaker: a dead upstream, the breaker open, every request answered 503 + Retry-After:
#      the gateway with its access log on (the default) and off, against a bare axum handler
#      answering 503, two rounds with the three alternating; RSS and open descriptors of the
#      gateway before and after.
#   4. retries on / off: two gateways in front of the same cluster of three healthy hosts (the
#      upstream and two more), `retry = true` (the default) and `retry = false`, ROUNDS
#      alternating rounds of ROUND_SECS: what the retry path (a copy of each request's head,
#      the retry budget's counters) costs a healthy multi-host cluster.
# Needs wrk (apt-get install -y wrk). Usage: bash crates/cutout-gateway/bench/load.sh
# Knobs: ROUNDS (10), ROUND_SECS (5), SECS (10: each direct / 503 run), CONNS (50), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${ROUNDS:-10}
ROUND_SECS=${ROUND_SECS:-5}
SECS=${SECS:-10}
CONNS=${CONNS:-50}
THREADS=${THREADS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/gateway}
nice -n 19 cargo build --release -q -p cutout-gateway
BIN=$CARGO_TARGET_DIR/release/cutout-gateway
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

# Each gateway's admin listener is its port + 1.
UP=18482 DEAD=18499 BARE=18485 UP2=18486 UP3=18487
GW_ON=18480 GW_OFF=18470 GW_DEAD=18460 GW_QUIET=18450 GW_RETRY=18440 GW_NORETRY=18430

config() { # $1 file, $2 listen port, $3 upstream port, $4 breakers true/false, $5 access-log true/false
  cat > "$1" <<TOML
[gateway]
listen = "127.0.0.1:$2"
admin = "127.0.0.1:$(($2 + 1))"
attempt-timeout = "2s"
breakers = $4
access-log = $5
[[routes]]
prefix = "/"
cluster = "svc"
[clusters.svc]
upstreams = ["http://127.0.0.1:$3"]
TOML
}
trio() { # $1 file, $2 listen port, $3 retry true/false: a cluster of the three healthy upstreams
  cat > "$1" <<TOML
[gateway]
listen = "127.0.0.1:$2"
admin = "127.0.0.1:$(($2 + 1))"
attempt-timeout = "2s"
retry = $3
[[routes]]
prefix = "/"
cluster = "svc"
[clusters.svc]
upstreams = ["http://127.0.0.1:$UP", "http://127.0.0.1:$UP2", "http://127.0.0.1:$UP3"]
TOML
}
start() { # runs "$@" in the background; fails if it is not running half a second later
  "$@" 2>/dev/null >/dev/null & PIDS+=($!); LAST=$!; sleep 0.5
  kill -0 "$LAST" 2>/dev/null || { echo "not running: $*"; exit 1; }
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
# wrk's "Requests/sec" and its p99 (in ms) from a --latency report.
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() {
  awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }' "$1"
}
run() { # $1 port, $2 seconds, $3 report file
  wrk -t"$THREADS" -c"$CONNS" -d"$2s" --latency "http://127.0.0.1:$1/x" > "$3"
}
non2xx() { awk '/Non-2xx/ { n = $NF } END { print n + 0 }' "$1"; }
HEALTHY_NON2XX=0
healthy() { # $1 report file of a run against the healthy upstream: adds its non-2xx answers
  HEALTHY_NON2XX=$((HEALTHY_NON2XX + $(non2xx "$1")))
}
state() { # the cluster breaker's state and its opens so far, on the gateway whose admin port is $1
  printf '%s, opened %s times' \
    "$(curl -s "http://127.0.0.1:$1/healthz" | grep -o '"state":"[a-z_]*"' | head -1 | cut -d'"' -f4)" \
    "$(curl -s "http://127.0.0.1:$1/breakers" | grep -o '"to":"open"' | wc -l)"
}

start "$BIN" upstream 127.0.0.1:$UP
config "$TMP/on.toml" $GW_ON $UP true true
config "$TMP/off.toml" $GW_OFF $UP false true
start "$BIN" --config "$TMP/on.toml"; ON=$LAST
start "$BIN" --config "$TMP/off.toml"
for port in $UP $GW_ON $GW_OFF; do run $port 3 /dev/null; done # warm-up

echo "== 1. direct vs gateway (healthy upstream, ${SECS} s each)"
run $UP "$SECS" "$TMP/direct.txt"
run $GW_ON "$SECS" "$TMP/gateway.txt"; healthy "$TMP/gateway.txt"
printf '| | req/s | p99 (ms) |\n|---|---|---|\n'
printf '| direct (wrk → upstream) | %s | %s |\n' "$(rps "$TMP/direct.txt")" "$(p99 "$TMP/direct.txt")"
printf '| through the gateway, breakers on | %s | %s |\n' "$(rps "$TMP/gateway.txt")" "$(p99 "$TMP/gateway.txt")"
awk -v g="$(rps "$TMP/gateway.txt")" -v d="$(rps "$TMP/direct.txt")" 'BEGIN { printf "gateway / direct throughput: %.2f\n", g / d }'

echo
echo "== 2. breakers on / off, $ROUNDS alternating rounds of ${ROUND_SECS} s"
: > "$TMP/rounds.txt"
for r in $(seq 1 "$ROUNDS"); do
  run $GW_ON "$ROUND_SECS" "$TMP/r-on.txt"; healthy "$TMP/r-on.txt"
  run $GW_OFF "$ROUND_SECS" "$TMP/r-off.txt"; healthy "$TMP/r-off.txt"
  echo "$r $(rps "$TMP/r-on.txt") $(rps "$TMP/r-off.txt") $(p99 "$TMP/r-on.txt") $(p99 "$TMP/r-off.txt")" >> "$TMP/rounds.txt"
done
printf '| round | on req/s | off req/s | on/off | on p99 (ms) | off p99 (ms) |\n|---|---|---|---|---|---|\n'
awk '{ printf "| %s | %s | %s | %.3f | %s | %s |\n", $1, $2, $3, $2 / $3, $4, $5 }' "$TMP/rounds.txt"
awk '{ print $2 / $3 }' "$TMP/rounds.txt" | sort -n > "$TMP/ratios.txt"
awk '{ print $4 / $5 }' "$TMP/rounds.txt" | sort -n > "$TMP/p99ratios.txt"
summary() { # sorted values → "median m (min a, max b)"
  awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median %.3f (min %.3f, max %.3f, over %d rounds)", m, v[1], v[NR], NR }' "$1"
}
echo "throughput on/off: $(summary "$TMP/ratios.txt")"
echo "p99 on/off: $(summary "$TMP/p99ratios.txt")"
echo "healthy upstream, sections 1-2: $HEALTHY_NON2XX non-2xx answers through the gateways; breakers-on cluster breaker $(state $((GW_ON + 1)))"

echo
echo "== 3. open breaker (nothing listens on 127.0.0.1:$DEAD), ${SECS} s each"
config "$TMP/dead.toml" $GW_DEAD $DEAD true true
config "$TMP/quiet.toml" $GW_QUIET $DEAD true false
start "$BIN" --config "$TMP/dead.toml"; DEADGW=$LAST
start "$BIN" --config "$TMP/quiet.toml"; QUIET=$LAST
for port in $GW_DEAD $GW_QUIET; do
  for _ in 1 2 3 4 5 6; do curl -s -o /dev/null "http://127.0.0.1:$port/x" || true; done
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/x")
  [ "$code" = 503 ] || { echo "the breaker on :$port did not open ($code)"; exit 1; }
done
start "$BIN" bare503 127.0.0.1:$BARE
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$BARE/x")
[ "$code" = 503 ] || { echo "the bare handler answers $code"; exit 1; }
RSS0=$(rss $DEADGW); FD0=$(fds $DEADGW)
# Two rounds, the three servers alternating (bare, log on, log off), so that none of them
# always runs in the same phase of a shared machine.
for r in 1 2; do
  run $BARE "$SECS" "$TMP/bare-$r.txt"
  run $GW_DEAD "$SECS" "$TMP/dead-$r.txt"
  run $GW_QUIET "$SECS" "$TMP/quiet-$r.txt"
done
RSS1=$(rss $DEADGW); FD1=$(fds $DEADGW)
grep -hE "Non-2xx|Socket errors" "$TMP"/bare-*.txt "$TMP"/dead-*.txt "$TMP"/quiet-*.txt || true
printf '| | req/s round 1 | req/s round 2 | p99 (ms) round 1 / 2 |\n|---|---|---|---|\n'
row() { printf '| %s | %s | %s | %s / %s |\n' "$1" "$(rps "$TMP/$2-1.txt")" "$(rps "$TMP/$2-2.txt")" "$(p99 "$TMP/$2-1.txt")" "$(p99 "$TMP/$2-2.txt")"; }
row "bare axum 503" bare
row "gateway 503, access log on (default)" dead
row "gateway 503, access-log = false" quiet
ratio() { awk -v a="$(rps "$TMP/$1-1.txt")" -v b="$(rps "$TMP/$1-2.txt")" -v c="$(rps "$TMP/$2-1.txt")" -v d="$(rps "$TMP/$2-2.txt")" 'BEGIN { printf "%.2f", (a + b) / (c + d) }'; }
echo "gateway / bare: access log on $(ratio dead bare), off $(ratio quiet bare)"
echo "gateway (access log on) RSS ${RSS0} -> ${RSS1} kB over both rounds, open fds ${FD0} -> ${FD1}; breakers-on gateway RSS $(rss $ON) kB"
awk -v a="$(rps "$TMP/dead-1.txt")" -v b="$(rps "$TMP/dead-2.txt")" 'BEGIN { m = a < b ? a : b; printf "open-breaker 503s (access log on, slower round): %.0f req/s, target >= 50000: %s\n", m, (m >= 50000 ? "met" : "NOT met") }'

echo
echo "== 4. retries on / off, a cluster of three healthy hosts, $ROUNDS alternating rounds of ${ROUND_SECS} s"
start "$BIN" upstream 127.0.0.1:$UP2
start "$BIN" upstream 127.0.0.1:$UP3
trio "$TMP/retry.toml" $GW_RETRY true
trio "$TMP/noretry.toml" $GW_NORETRY false
start "$BIN" --config "$TMP/retry.toml"
start "$BIN" --config "$TMP/noretry.toml"
for port in $GW_RETRY $GW_NORETRY; do run $port 3 /dev/null; done # warm-up
TRIO_NON2XX=0
: > "$TMP/trio.txt"
for r in $(seq 1 "$ROUNDS"); do
  run $GW_RETRY "$ROUND_SECS" "$TMP/t-on.txt"
  run $GW_NORETRY "$ROUND_SECS" "$TMP/t-off.txt"
  TRIO_NON2XX=$((TRIO_NON2XX + $(non2xx "$TMP/t-on.txt") + $(non2xx "$TMP/t-off.txt")))
  echo "$r $(rps "$TMP/t-on.txt") $(rps "$TMP/t-off.txt") $(p99 "$TMP/t-on.txt") $(p99 "$TMP/t-off.txt")" >> "$TMP/trio.txt"
done
printf '| round | retry on req/s | retry off req/s | on/off | on p99 (ms) | off p99 (ms) |\n|---|---|---|---|---|---|\n'
awk '{ printf "| %s | %s | %s | %.3f | %s | %s |\n", $1, $2, $3, $2 / $3, $4, $5 }' "$TMP/trio.txt"
awk '{ print $2 / $3 }' "$TMP/trio.txt" | sort -n > "$TMP/tratios.txt"
awk '{ print $4 / $5 }' "$TMP/trio.txt" | sort -n > "$TMP/tp99ratios.txt"
echo "throughput retry on/off: $(summary "$TMP/tratios.txt")"
echo "p99 retry on/off: $(summary "$TMP/tp99ratios.txt")"
echo "three healthy hosts, section 4: $TRIO_NON2XX non-2xx answers through the gateways"
