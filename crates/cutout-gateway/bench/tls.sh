#!/usr/bin/env bash
# TLS and HTTP/2 bench for cutout-gateway, on loopback only. Not a test: prints figures from one run.
# Three gateways on the shipped defaults (no [breakers] section) in front of the same healthy
# `cutout-gateway upstream` (HTTP/1.1), differing only in their listener:
#   h1 plain  wrk        → plain listener        (the baseline)
#   h1 TLS    wrk https  → tls-cert listener (ALPN http/1.1)
#   h2 TLS    h2load     → tls-cert listener (ALPN h2), -m1: one request at a time per connection, as wrk
#   h2c       h2load     → h2c = true listener (prior knowledge), -m1
# ROUNDS rounds of ROUND_SECS each, the four alternating in each round; per row the median
# req/s and its min and max. Certificates: a throwaway CA and leaf made with openssl.
# Needs wrk, h2load (apt-get install -y wrk nghttp2-client) and openssl.
# Usage: bash crates/cutout-gateway/bench/tls.sh
# Knobs: ROUNDS (5), ROUND_SECS (5), CONNS (50), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${ROUNDS:-5}
ROUND_SECS=${ROUND_SECS:-5}
CONNS=${CONNS:-50}
THREADS=${THREADS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/gateway}
nice -n 19 cargo build --release -q -p cutout-gateway
BIN=$CARGO_TARGET_DIR/release/cutout-gateway
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

UP=18382 GW_PLAIN=18380 GW_TLS=18370 GW_H2C=18360

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=bench CA" -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$TMP/gw.key" -out "$TMP/gw.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$TMP/san.ext"
openssl x509 -req -in "$TMP/gw.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
  -days 1 -extfile "$TMP/san.ext" -out "$TMP/gw.crt" 2>/dev/null

config() { # $1 file, $2 listen port, $3 extra [gateway] keys
  cat > "$1" <<TOML
[gateway]
listen = "127.0.0.1:$2"
admin = "127.0.0.1:$(($2 + 1))"
$3
[[routes]]
prefix = "/"
cluster = "svc"
[clusters.svc]
upstreams = ["http://127.0.0.1:$UP"]
TOML
}
start() { # runs "$@" in the background; fails if it is not running half a second later
  "$@" 2>/dev/null >/dev/null & PIDS+=($!); LAST=$!; sleep 0.5
  kill -0 "$LAST" 2>/dev/null || { echo "not running: $*"; exit 1; }
}
wrk_rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
wrk_bad() { awk '/Non-2xx|Socket errors/ { n += $NF } END { print n + 0 }' "$1"; }
# h2load: "finished in 5.00s, 12345.67 req/s, ..." and "status codes: N 2xx, ..."
h2_rps() { awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$1"; }
h2_bad() { awk '/^status codes:/ { print $5 + $7 + $9 }' "$1"; }

start "$BIN" upstream 127.0.0.1:$UP
config "$TMP/plain.toml" $GW_PLAIN ""
config "$TMP/tls.toml" $GW_TLS "tls-cert = \"$TMP/gw.crt\"
tls-key = \"$TMP/gw.key\""
config "$TMP/h2c.toml" $GW_H2C "h2c = true"
for f in plain tls h2c; do start "$BIN" --config "$TMP/$f.toml"; done

h1_plain() { wrk -t"$THREADS" -c"$CONNS" -d"$1s" "http://127.0.0.1:$GW_PLAIN/x" > "$2"; }
h1_tls() { wrk -t"$THREADS" -c"$CONNS" -d"$1s" "https://127.0.0.1:$GW_TLS/x" > "$2"; }
h2_tls() { h2load -t"$THREADS" -c"$CONNS" -m1 -D"$1" "https://127.0.0.1:$GW_TLS/x" > "$2"; }
h2c() { h2load -t"$THREADS" -c"$CONNS" -m1 -D"$1" "http://127.0.0.1:$GW_H2C/x" > "$2"; }
for k in h1_plain h1_tls h2_tls h2c; do $k 2 /dev/null; done # warm-up

BAD=0
: > "$TMP/rounds.txt"
for r in $(seq 1 "$ROUNDS"); do
  h1_plain "$ROUND_SECS" "$TMP/a.txt"; h1_tls "$ROUND_SECS" "$TMP/b.txt"
  h2_tls "$ROUND_SECS" "$TMP/c.txt"; h2c "$ROUND_SECS" "$TMP/d.txt"
  BAD=$((BAD + $(wrk_bad "$TMP/a.txt") + $(wrk_bad "$TMP/b.txt") + $(h2_bad "$TMP/c.txt") + $(h2_bad "$TMP/d.txt")))
  echo "$r $(wrk_rps "$TMP/a.txt") $(wrk_rps "$TMP/b.txt") $(h2_rps "$TMP/c.txt") $(h2_rps "$TMP/d.txt")" >> "$TMP/rounds.txt"
done
printf '| round | h1 plain (wrk) | h1 TLS (wrk) | h2 TLS (h2load) | h2c (h2load) |\n|---|---|---|---|---|\n'
awk '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$TMP/rounds.txt"
summary() { # $1: printf format; sorted values → "median m (min a, max b)"
  sort -n | awk -v f="$1" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median " f " (min " f ", max " f ")", m, v[1], v[NR] }'
}
for c in 2 3 4 5; do
  name=$(echo "h1-plain h1-TLS h2-TLS h2c" | cut -d' ' -f$((c - 1)))
  printf '%s req/s: %s; / h1 plain: %s\n' "$name" \
    "$(awk -v c=$c '{ print $c }' "$TMP/rounds.txt" | summary %.0f)" \
    "$(awk -v c=$c '{ printf "%.3f\n", $c / $2 }' "$TMP/rounds.txt" | summary %.3f)"
done
echo "non-2xx or errors over all runs: $BAD"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
