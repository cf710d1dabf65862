//! The Redis side: the keys, the layout, the script, and the one-round-trip pipeline of a tick.
//!
//! Each watched breaker's publish-and-read is one call of the script and a `GET` of its key;
//! a tick pipelines them all.
//!
//! # Keys
//! One key per breaker: `{<prefix>:<breaker id>}`, with `%`, `{` and `}` written `%25`,
//! `%7B` and `%7D` in both, and `:` written `%3A` in the prefix (the default prefix
//! `cutout:fleet` and the breaker `payments` give `{cutout%3Afleet:payments}`). The first
//! unescaped `:` ends the prefix, so no two (prefix, id) pairs meet: prefix `shop` with
//! breaker `pay:card` is `{shop:pay:card}`, prefix `shop:pay` with breaker `card` is
//! `{shop%3Apay:card}`. The braces make the whole name a Redis Cluster hash tag: a breaker's
//! key, and any key a later version adds for it under the same tag, hashes to one slot.
//!
//! # Layout
//! The key holds a string: a ring of time buckets that sums every pod's report, so that a
//! round reads the fleet's sums without reading any pod's report.
//! - A header of four little-endian `i64`: a magic word (`CTFL` and the layout's version), the
//!   bucket length in ms, the window in buckets, and the key's birth (µs on Redis's clock).
//! - Two windows of buckets, each six `i64`: the bucket's epoch (Redis's time in ms divided
//!   by the bucket length) and the sums of its shares: calls, failures, slow calls, pods,
//!   pods holding an open slot. A bucket's place in the ring is its epoch modulo the ring's
//!   length; one that holds an older epoch than its place asks for counts for nothing and is
//!   reset by the first writer of the new epoch.
//!
//! The window is the staleness bound cut in 4 buckets (the default 1 s bound: 250 ms
//! buckets, a ring of 8, 416 bytes). Every pod's report (its trip window's counts, as
//! [`Local`](crate::report::Local) says) is one *share* in one bucket: in each round the
//! script moves the pod's share into the bucket of Redis's current time, taking what the pod
//! held in its previous bucket out of that one (the pod says what it held: its
//! [`Ledger`](crate::report::Ledger)) and adding the new report in, with a pods count of 1.
//! So every bucket holds the sum of the shares of the pods whose last round fell in it,
//! and the window's buckets hold each pod that published within the window exactly once.
//! A read sums the 4 buckets of the window: 24 numbers, whatever the fleet's size.
//! - **This pod's own counts, once.** The script moves the share before the read, so the
//!   window holds this round's report of this pod (its snapshot of this round, as the old
//!   layout's reader put it) and none of its older ones; nothing is subtracted on the reader's
//!   side.
//! - **Departed pods.** A pod that stops (gone, cut off from Redis) leaves its last share in
//!   its last bucket, which leaves the window between ¾ and 1 staleness bound after its last
//!   round. A live pod stays counted as long as its rounds are less than ¾ of the bound
//!   apart (750 ms at the defaults: a missed tick always, two depending on where its rounds
//!   fall in the buckets; the old layout's bound was the whole second). The 4 buckets
//!   before the window say how many pods left it lately
//!   ([`FleetView::stale_pods`](crate::FleetView::stale_pods)); nothing has to be deleted.
//! - **The open cap.** A pod's share carries 1 while its breaker holds an open slot, so the
//!   window's open count is the fleet's; a fleet trip under a cap first *claims* a slot: the
//!   same script, which writes the share with the flag only if fewer than `cap` other pods
//!   hold one in the window (atomic: at most `cap` claims pass, however many pods see the
//!   outage in the same round). A breaker that cannot open (disabled, or anything but
//!   closed) never claims, so it takes no slot from a pod that can.
//! - **Expiry.** The first writer of each bucket (and the one that creates the key) sets
//!   the key's expiry to the retention (`PEXPIRE`): the key goes a retention after the last
//!   round of the last pod.
//! - **Geometry.** A new key takes the bucket length and window of the pod that creates it;
//!   an existing key keeps its own, and every pod reads and writes by the key's (pods with
//!   another staleness bound share the first one's).
//!
//! # Fleet recovery
//! A second key per breaker, `{<prefix>:<breaker id>}:recovery` (the ring's key and
//! `:recovery`: the same hash tag, so the same Redis Cluster slot, and never a ring's key,
//! which ends with `}`), holds a string of three little-endian `i64`: a magic word (`CTFR`
//! and its layout's version), the latest recovery's date and the next free release slot, both
//! µs on Redis's clock (24 bytes). The same script call reads and writes it, only for a round
//! that publishes a recovery or asks for a slot (a closed pod's round, the common one, does
//! not touch it):
//! - **Publish.** The pod sends its close's age (ms on its own clock); the script dates it
//!   `TIME − age` and keeps the latest date.
//! - **Ask.** The pod sends its opening's age, what is left of its own break, and the spacing
//!   of its fleet's budget. The script grants the slot `max(next free, now)` only if the
//!   latest recovery is dated after the opening (else stale) and the slot comes before the
//!   pod's own break ends; the next free slot then moves one spacing on. The answer carries
//!   Redis's clock (µs), the latest recovery's date and the slot (0: none).
//! - **Expiry.** Each write sets the key's expiry to the retention, as the ring's.
//!
//! Its cost does not depend on the pods either: a `GET` of 24 bytes and at most one `SET`, in
//! the rounds that publish or ask. Why a separate key and not more bytes in the ring: a pod of
//! the version before reads the ring of a pod of this one as its own (the ring's layout and
//! version are unchanged), so a fleet can be upgraded pod by pod; and the ring's writes stay
//! what they were. A key of another type, or a string of another format, under the recovery
//! key is answered `CUTOUT_FOREIGN_KEY <type>` before any write, as for the ring (only in a
//! round that would read it). The `recovery` module says what is published when, how the
//! spacing follows from the budget, and what Redis's loss does.
//!
//! # Consistency
//! Each script call is atomic, and judged on Redis's clock alone (`TIME` in the script): the
//! pods' clocks never matter. The read is a `GET` right after the call, in the same round
//! trip: it sees this pod's write and any later one, a consistent state of the whole ring.
//! The sums are exact (each live pod's last report, once) as long as every pod knows what
//! it holds. A pod knows only what a reply confirmed: its ledger is the share the last
//! answered round wrote, under the key's birth, and is forgotten whenever a round fails (a
//! timeout, a dropped connection: the call may or may not have run), a key's reply is an
//! error, or the connection is replaced (another server may hold other data). The script
//! takes a share out only of the bucket and key life the ledger names, only if that bucket
//! still holds that epoch, and never more than the bucket holds.
//! - **A lost increment** (the call never ran): nothing changed in Redis; the pod's previous
//!   share stays where it was, and counts until its next successful round moves it or it
//!   leaves the window (within one staleness bound).
//! - **A duplicated one** (a timeout after the call did run, and the next round): the next
//!   round runs without a ledger and adds the pod's report without taking anything out, so
//!   the pod's share may count twice, once in the bucket the lost reply wrote and once in
//!   the new one, until the older copy leaves the window: the sums over-count by at most one
//!   earlier report of that pod (its calls, failures, slow calls, 1 pod, its open flag), for
//!   at most one staleness bound after the failed round. No other pod's counts are ever
//!   taken out. For a trip that is one pod's window weighed twice for up to a second: the
//!   fleet's ratio moves towards that pod's, and the minimum calls can be reached by that
//!   window's calls counted twice; an open count one too high can hold a claim back. (The
//!   task never sends a call twice: a retried call, with its ledger, would take its old
//!   share out twice, up to the bucket's content, and that is why it does not retry.)
//! - **Redis lost the data** (a restart, a failover to a replica that missed writes, a
//!   `FLUSHALL`): the connection is replaced and the ledgers forgotten, or the key was
//!   written anew with another birth, in which no ledger holds anything: the first round of
//!   each pod adds its report, and the window is whole again one round after.
//!
//! # Why a script
//! Moving a share needs what the bucket holds now (is it still the epoch the pod wrote in,
//! is it a new epoch to reset, is the open cap reached): a read and a write that no other
//! pod's round may come between. The script does both, in one `EVALSHA` per breaker, all of
//! them pipelined in one round trip per tick. It also leaves other programs' data alone: a
//! key of another type answers `CUTOUT_FOREIGN_KEY <type>`, and a string that is not a ring
//! of this layout (its magic word, its length) `CUTOUT_FOREIGN_KEY string`, both before any
//! write (the task logs a warning, and that breaker decides on its own calls).
//!
//! The script is loaded once per connection (`SCRIPT LOAD`) and reloaded, within the same
//! round, if Redis answers `NOSCRIPT` (a `SCRIPT FLUSH`, a failover to a replica that never
//! saw it); only the calls that answered `NOSCRIPT` are sent again, so that no call runs
//! twice. Its cost does not depend on the number of pods: `TIME`, a `GET` of the 416-byte
//! ring, one `SETRANGE` of one or two buckets, and a `PEXPIRE` by the first writer of each
//! bucket (BENCHMARKS.md, "Fleet signals at scale", has the figures at 10 to 10,000 pods).
//!
//! # Redis Cluster
//! A script call names one key (`KEYS[1]`) and the read is of that key: each breaker's part
//! of a round is valid under Redis Cluster's slot rules (one slot, the key's hash tag). The
//! pipeline of a tick is not: it holds every watched breaker's calls, whose keys are in
//! different slots, on one connection to one node, and this crate does not follow `MOVED`.
//! Against a cluster, use one node's address for breakers whose keys that node serves, or a
//! cluster-aware proxy that routes each command by its key; a call a node refuses fails that
//! breaker's part of the round (a server error: degraded, local decisions).

use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::builder::Config;
use crate::error::{Code, FleetError, Kind};
use crate::report::{Outcome, Request, Ring};

/// The code the script answers for a key that holds something else than a ring.
pub(crate) const FOREIGN: &str = "CUTOUT_FOREIGN_KEY";

/// The key of a breaker's ring (see the module's docs).
pub(crate) fn key(prefix: &str, id: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + id.len() + 3);
    key.push('{');
    escape(prefix, true, &mut key);
    key.push(':');
    escape(id, false, &mut key);
    key.push('}');
    key
}

fn escape(text: &str, colon: bool, out: &mut String) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            ':' if colon => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

/// Moves this pod's share of the ring into the bucket of Redis's current time, or claims an
/// open slot (see the module's docs; [`report::apply`](crate::report::apply) is the same in
/// Rust, step for step).
///
/// `KEYS[1]`: the ring; `KEYS[2]` (only in a round that asks fleet recovery anything): the
/// breaker's recovery key. `ARGV`: the bucket length (ms) and window (buckets) for a new
/// key, the time to live (ms), the cap (0: publish), the report (`calls failures slow
/// open`), the ledger: the key's birth it was written in (empty: none), its epoch and `calls
/// failures slow open`; and, with `KEYS[2]`, fleet recovery's: the age of a close to publish
/// (ms; empty: none), and for a slot asked for the opening's age (ms; empty: none), the own
/// break's remainder (ms) and the spacing (µs). Returns `{now_ms,
/// epoch, wrote, born, now_us, recovered_us, slot_us}` (the last two 0 when the round asked
/// nothing of the recovery key, or none was granted), or the error `CUTOUT_FOREIGN_KEY
/// <type>` and no write when a key it reads holds something else.
pub(crate) const SCRIPT: &str = r"
local t = redis.call('TIME')
local key = KEYS[1]
local value = redis.pcall('GET', key)
if type(value) == 'table' then
  if string.sub(tostring(value.err), 1, 9) == 'WRONGTYPE' then
    return redis.error_reply('CUTOUT_FOREIGN_KEY ' .. redis.call('TYPE', key)['ok'])
  end
  return value
end
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local us = t[1] * 1000000 + t[2]
local magic, ms, m, born
if value then
  if #value >= 32 then magic, ms, m, born = struct.unpack('<llll', value) end
  if magic ~= 5574644803 or ms < 1 or m < 1 or m > 64 or born < 0
      or #value ~= 32 + 96 * m then
    return redis.error_reply('CUTOUT_FOREIGN_KEY string')
  end
end
local publish = #ARGV > 14 and ARGV[15] ~= ''
local ask = #ARGV > 14 and ARGV[16] ~= ''
local rec, nxt = 0, 0
local rkey = KEYS[2]
if publish or ask then
  local rv = redis.pcall('GET', rkey)
  if type(rv) == 'table' then
    if string.sub(tostring(rv.err), 1, 9) == 'WRONGTYPE' then
      return redis.error_reply('CUTOUT_FOREIGN_KEY ' .. redis.call('TYPE', rkey)['ok'])
    end
    return rv
  end
  if rv then
    local rmagic
    if #rv == 24 then rmagic, rec, nxt = struct.unpack('<lll', rv) end
    if rmagic ~= 5675308099 or rec < 0 or nxt < 0 then
      return redis.error_reply('CUTOUT_FOREIGN_KEY string')
    end
  end
end
if not value then
  ms = tonumber(ARGV[1]); m = tonumber(ARGV[2]); born = us
  value = struct.pack('<llll', 5574644803, ms, m, born) .. string.rep('\0', 96 * m)
  redis.call('SET', key, value, 'PX', ARGV[3])
end
local written, slot = false, 0
if publish then
  local at = us - tonumber(ARGV[15]) * 1000
  if at > rec then rec = at; written = true end
end
if ask then
  local opened = us - tonumber(ARGV[16]) * 1000
  if rec > 0 and rec > opened then
    local at = math.max(nxt, us)
    if at < us + tonumber(ARGV[17]) * 1000 then
      slot = at; nxt = at + tonumber(ARGV[18]); written = true
    end
  end
end
if written then
  redis.call('SET', rkey, struct.pack('<lll', 5675308099, rec, nxt), 'PX', ARGV[3])
end
local b = math.floor(now / ms)
local ring = 2 * m
local at = 33 + (b % ring) * 48
local e, c, f, s, p, o = struct.unpack('<llllll', value, at)
local reset = e ~= b
if reset then c, f, s, p, o = 0, 0, 0, 0, 0 end
local have = ARGV[9] ~= '' and tonumber(ARGV[9]) == born
local x, lc, lf, ls, lo = 0, 0, 0, 0, 0
if have then
  x, lc, lf, ls, lo = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]),
    tonumber(ARGV[13]), tonumber(ARGV[14])
end
local open = tonumber(ARGV[8])
local cap = tonumber(ARGV[4])
if cap > 0 then
  local n = 0
  for k = b - m + 1, b do
    local ke, _, _, _, _, ko = struct.unpack('<llllll', value, 33 + (k % ring) * 48)
    if ke == k then n = n + ko end
  end
  if have and x > b - m and x <= b then
    local xe = struct.unpack('<l', value, 33 + (x % ring) * 48)
    if xe == x then n = n - lo end
  end
  if n >= cap then return {now, b, 0, born, us, rec, slot} end
  open = 1
end
local head = ''
local from = at
if have and x == b then
  if not reset then
    c = c - math.min(c, lc); f = f - math.min(f, lf); s = s - math.min(s, ls)
    p = p - math.min(p, 1); o = o - math.min(o, lo)
  end
elseif have then
  local xat = 33 + (x % ring) * 48
  local xe, xc, xf, xs, xp, xo = struct.unpack('<llllll', value, xat)
  if xe == x then
    head = struct.pack('<llllll', x, xc - math.min(xc, lc), xf - math.min(xf, lf),
      xs - math.min(xs, ls), xp - math.min(xp, 1), xo - math.min(xo, lo))
    if xat + 48 == at then
      from = xat
    else
      redis.call('SETRANGE', key, xat - 1, head)
      head = ''
    end
  end
end
local bucket = struct.pack('<llllll', b, c + ARGV[5], f + ARGV[6], s + ARGV[7], p + 1, o + open)
if head ~= '' or bucket ~= string.sub(value, at, at + 47) then
  redis.call('SETRANGE', key, from - 1, head .. bucket)
end
if reset then redis.call('PEXPIRE', key, ARGV[3]) end
return {now, b, 1, born, us, rec, slot}
";

/// A connection with the script loaded on it.
pub(crate) struct Link {
    conn: MultiplexedConnection,
    sha: String,
}

/// One breaker's part of a round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Publish<'a> {
    pub(crate) key: &'a str,
    /// The breaker's recovery key (`recovery::key` of `key`).
    pub(crate) recovery_key: &'a str,
    pub(crate) request: &'a Request,
}

/// What Redis answered for one breaker.
#[derive(Debug)]
pub(crate) enum KeyReply {
    /// The script's answer and the ring read right after it.
    Ring { outcome: Outcome, ring: Ring },
    /// The key holds another type, or a string of another format (named): nothing was
    /// written.
    Foreign(String),
    /// An answer of a shape the script never gives, or a ring that is not the one the script
    /// wrote in (deleted and written anew in between).
    Malformed,
    /// A server error for this key (`OOM`, `READONLY`, ...).
    Error(FleetError),
}

fn timed_out(what: &str, limit: Duration) -> FleetError {
    FleetError::new(Kind::Timeout, format!("{what} took longer than {limit:?}"))
}

/// Where the task connects: one address, or the primary Redis Sentinel names on each
/// connect.
pub(crate) enum Target {
    /// The URL's address, resolved again on every connect.
    Direct(Box<redis::Client>),
    /// `redis+sentinel://`: the sentinels are asked for the primary of a name on every
    /// connect (the client asks them in turn and checks that the node it names says it is a
    /// primary), so a reconnect after a failover goes to the new one.
    #[cfg(feature = "sentinel")]
    Sentinel(Box<redis::sentinel::SentinelClient>),
}

/// Connects (bounded by the connect timeout, the handshake included) and loads the script
/// (bounded by the round timeout). Through Sentinel, the lookup of the primary comes first,
/// bounded by a connect timeout of its own.
pub(crate) async fn connect(target: &mut Target, config: &Config) -> Result<Link, FleetError> {
    match target {
        Target::Direct(client) => connect_to(client, config).await,
        #[cfg(feature = "sentinel")]
        Target::Sentinel(sentinel) => {
            let limit = config.connect_timeout;
            let client = tokio::time::timeout(limit, sentinel.async_get_client())
                .await
                .map_err(|_| timed_out(&format!("asking the {}", config.addr), limit))?
                .map_err(|error| {
                    use redis::ErrorKind as K;
                    if matches!(
                        error.kind(),
                        K::MasterNameNotFoundBySentinel | K::EmptySentinelList
                    ) {
                        FleetError::with_code(
                            Code::NoPrimary,
                            format!(
                                "{}: none names a primary of that name that says it is one",
                                config.addr
                            ),
                        )
                    } else {
                        FleetError::from_redis(&error)
                            .context(&format!("asking the {}", config.addr))
                    }
                })?;
            connect_to(&client, config).await.map_err(|error| {
                let primary = client.get_connection_info().addr().to_string();
                error.context(&format!("the primary the sentinels named, {primary}"))
            })
        }
    }
}

async fn connect_to(client: &redis::Client, config: &Config) -> Result<Link, FleetError> {
    // The rounds' timeouts are ours (`tokio::time::timeout` around each, which drops the
    // connection when it fires), so that their errors say what timed out; the client's own
    // response timeout is off. Its connection timeout stays on, as a second bound.
    let options = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(None);
    let connecting = client.get_multiplexed_async_connection_with_config(&options);
    let Ok(connected) = tokio::time::timeout(config.connect_timeout, connecting).await else {
        // Over TLS, a plain Redis port takes the `ClientHello` for the start of a command
        // and waits for its end: the handshake times out. Said as what it is.
        #[cfg(feature = "tls")]
        if let Some(error) = plain_behind_tls(client, config).await {
            return Err(error);
        }
        return Err(timed_out("connecting", config.connect_timeout));
    };
    let mut conn = match connected {
        Ok(conn) => conn,
        Err(error) => {
            #[cfg(feature = "tls")]
            if let redis::ConnectionAddr::TcpTls { host, port, .. } =
                client.get_connection_info().addr()
            {
                if let Some(failure) = plain_behind_tls(client, config).await {
                    return Err(failure);
                }
                if let Some(failure) =
                    crate::tls::handshake_failure(&error, &format!("{host}:{port}"))
                {
                    return Err(failure);
                }
            }
            let error = FleetError::from_redis(&error);
            if error.code_of() == Code::Protocol {
                // The handshake's answer is not the Redis protocol: not a Redis server.
                return Err(not_redis(client, config).await);
            }
            return Err(error.context("connecting"));
        }
    };
    let sha = load_script(&mut conn, config.timeout).await?;
    Ok(Link { conn, sha })
}

/// The error for a server whose answer to the connect was not the Redis protocol: what it
/// looks like, from its answer to a `PING` on a connection of its own (bounded by the
/// connect timeout). Its bytes are looked at, never shown: they may be anything.
async fn not_redis(client: &redis::Client, config: &Config) -> FleetError {
    let answer = tokio::time::timeout(
        config.connect_timeout,
        first_bytes(client.get_connection_info().addr()),
    )
    .await
    .ok()
    .flatten();
    let looks = match answer.as_deref() {
        Some(bytes) if bytes.starts_with(b"HTTP/") => "it answers as an HTTP server does",
        // A TLS alert record (content type 21, version 3.x).
        Some([0x15, 0x03, ..]) => "it answers as a TLS server does (a rediss:// port?)",
        _ => "its answer is not the Redis protocol",
    };
    FleetError::with_code(
        Code::NotRedis,
        format!(
            "{}: {looks}; check the host and port of the URL",
            client.get_connection_info().addr()
        ),
    )
}

/// For a `rediss://` client whose connect failed: the `FLEET-RUN-009` error if its port
/// answers a plain `PING` as a Redis server does (`+PONG`, or an error such as `-NOAUTH`),
/// bounded by the connect timeout; `None` otherwise.
#[cfg(feature = "tls")]
async fn plain_behind_tls(client: &redis::Client, config: &Config) -> Option<FleetError> {
    let redis::ConnectionAddr::TcpTls { host, port, .. } = client.get_connection_info().addr()
    else {
        return None;
    };
    let plain = redis::ConnectionAddr::Tcp(host.clone(), *port);
    let answer = tokio::time::timeout(config.connect_timeout, first_bytes(&plain))
        .await
        .ok()
        .flatten()?;
    matches!(answer.first(), Some(b'+' | b'-')).then(|| {
        FleetError::with_code(
            Code::Tls,
            format!(
                "TLS with {host}:{port}: the server does not speak TLS on this port: it \
                 answers as a plain Redis port does (a redis:// URL, or the server's \
                 --tls-port?)"
            ),
        )
    })
}

/// Sends `PING` and returns the first bytes of the answer, if any.
async fn first_bytes(addr: &redis::ConnectionAddr) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    async fn exchange<S: AsyncReadExt + AsyncWriteExt + Unpin>(mut stream: S) -> Option<Vec<u8>> {
        stream.write_all(b"PING\r\n").await.ok()?;
        let mut buffer = vec![0u8; 16];
        let n = stream.read(&mut buffer).await.ok()?;
        buffer.truncate(n);
        Some(buffer)
    }
    match addr {
        redis::ConnectionAddr::Tcp(host, port) => {
            exchange(
                tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .ok()?,
            )
            .await
        }
        #[cfg(unix)]
        redis::ConnectionAddr::Unix(path) => {
            exchange(tokio::net::UnixStream::connect(path).await.ok()?).await
        }
        _ => None,
    }
}

async fn load_script(
    conn: &mut MultiplexedConnection,
    limit: Duration,
) -> Result<String, FleetError> {
    let mut load = redis::cmd("SCRIPT");
    load.arg("LOAD").arg(SCRIPT);
    tokio::time::timeout(limit, load.query_async::<String>(conn))
        .await
        .map_err(|_| timed_out("loading the script", limit))?
        .map_err(|error| FleetError::from_redis(&error))
}

impl Link {
    /// A round with nothing to publish: `PING`, so that health still follows Redis.
    pub(crate) async fn ping(&mut self, limit: Duration) -> Result<(), FleetError> {
        let ping = redis::cmd("PING");
        tokio::time::timeout(limit, ping.query_async::<String>(&mut self.conn))
            .await
            .map_err(|_| timed_out("PING", limit))?
            .map(drop)
            .map_err(|error| FleetError::from_redis(&error))
    }

    /// One round trip: every breaker's script call and read, pipelined. The whole round, a
    /// reload of the script included, is bounded by `limit`. The replies are in the order of
    /// `publishes`.
    pub(crate) async fn exchange(
        &mut self,
        publishes: &[Publish<'_>],
        limit: Duration,
    ) -> Result<Vec<KeyReply>, FleetError> {
        let round = async {
            let mut values = self.pipeline(publishes).await?;
            let missing: Vec<usize> = (0..publishes.len())
                .filter(|&i| values.get(2 * i).is_some_and(is_noscript))
                .collect();
            if !missing.is_empty() {
                // Only the calls that did not run go again: a call that ran must not run
                // twice (its ledger would take its old share out a second time).
                self.sha = load_script(&mut self.conn, limit).await?;
                let again: Vec<Publish<'_>> = missing.iter().map(|&i| publishes[i]).collect();
                let redone = self.pipeline(&again).await?;
                if redone.len() != 2 * again.len() {
                    return Err(replies(redone.len(), 2 * again.len()));
                }
                let mut redone = redone.into_iter();
                for &i in &missing {
                    if let (Some(script), Some(read)) = (redone.next(), redone.next()) {
                        values[2 * i] = script;
                        values[2 * i + 1] = read;
                    }
                }
            }
            Ok::<_, FleetError>(values)
        };
        let values = tokio::time::timeout(limit, round)
            .await
            .map_err(|_| timed_out("a round", limit))??;
        if values.len() != 2 * publishes.len() {
            return Err(replies(values.len(), 2 * publishes.len()));
        }
        let mut values = values.into_iter();
        let mut replies = Vec::with_capacity(publishes.len());
        while let (Some(script), Some(read)) = (values.next(), values.next()) {
            replies.push(key_reply(script, read));
        }
        Ok(replies)
    }

    async fn pipeline(&mut self, publishes: &[Publish<'_>]) -> Result<Vec<Value>, FleetError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for publish in publishes {
            let command = pipe.cmd("EVALSHA").arg(&self.sha);
            // The recovery key only for a round that reads it (its `ARGV` has the four
            // recovery arguments then): a closed pod's round names one key, as before.
            if publish.request.recovery.any() {
                command.arg(2).arg(publish.key).arg(publish.recovery_key);
            } else {
                command.arg(1).arg(publish.key);
            }
            command.arg(&publish.request.args()[..]);
            pipe.cmd("GET").arg(publish.key);
        }
        pipe.query_async::<Vec<Value>>(&mut self.conn)
            .await
            .map_err(|error| FleetError::from_redis(&error))
    }
}

fn replies(got: usize, sent: usize) -> FleetError {
    FleetError::new(
        Kind::Protocol,
        format!("{got} replies to a pipeline of {sent} commands"),
    )
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(error) if error.code() == "NOSCRIPT")
}

/// The script's answer and the `GET` after it, for one breaker.
fn key_reply(script: Value, read: Value) -> KeyReply {
    let outcome = match script {
        Value::ServerError(error) if error.code() == FOREIGN => {
            return KeyReply::Foreign(error.details().unwrap_or("unknown").to_owned());
        }
        Value::ServerError(error) => {
            let error: redis::RedisError = error.into();
            return KeyReply::Error(FleetError::from_redis(&error));
        }
        Value::Array(parts) => match parts.as_slice() {
            [now, epoch, wrote, born, now_us, recovered, slot] => match (
                (number(now), number(epoch), number(wrote), number(born)),
                (number(now_us), number(recovered), number(slot)),
            ) {
                (
                    (Some(now_ms), Some(epoch), Some(wrote @ 0..=1), Some(born)),
                    (Some(now_us), Some(recovered_us), Some(slot_us)),
                ) => Outcome {
                    now_ms,
                    epoch: i64::try_from(epoch).unwrap_or(i64::MAX),
                    wrote: wrote == 1,
                    born,
                    now_us,
                    recovered_us,
                    slot_us,
                },
                _ => return KeyReply::Malformed,
            },
            _ => return KeyReply::Malformed,
        },
        _ => return KeyReply::Malformed,
    };
    match read {
        Value::BulkString(bytes) => match Ring::parse(&bytes) {
            Some(ring) if ring.born == outcome.born => KeyReply::Ring { outcome, ring },
            _ => KeyReply::Malformed,
        },
        _ => KeyReply::Malformed,
    }
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

/// A connection that runs rounds for any number of simulated pods, through the task's own
/// pipeline (for cutout-bench; see [`sim`](crate::sim)).
pub struct Connection {
    link: Link,
    timeout: Duration,
}

impl Connection {
    /// Connects to the Redis at `url` and loads the script, each bounded by `timeout`.
    pub async fn connect(url: &str, timeout: Duration) -> Result<Connection, FleetError> {
        // The configuration a fleet of these timeouts would run with, built and checked by
        // the fleet's own builder (its task is stopped at once, unused).
        let fleet = crate::Fleet::builder(url)
            .pod("sim")
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        let config = fleet.config().clone();
        drop(fleet);
        let client = redis::Client::open(url)
            .map_err(|error| FleetError::new(Kind::Url, error.to_string()))?;
        let link = connect_to(&client, &config).await?;
        Ok(Connection { link, timeout })
    }

    /// One round trip: each (key, request)'s script call and read, pipelined, as a tick
    /// sends them.
    pub async fn rounds(
        &mut self,
        calls: &[(&str, &Request)],
    ) -> Result<Vec<crate::sim::Reply>, FleetError> {
        let recovery_keys: Vec<String> = calls
            .iter()
            .map(|(key, _)| crate::recovery::key(key))
            .collect();
        let publishes: Vec<Publish<'_>> = calls
            .iter()
            .zip(&recovery_keys)
            .map(|(&(key, request), recovery_key)| Publish {
                key,
                recovery_key,
                request,
            })
            .collect();
        let replies = self.link.exchange(&publishes, self.timeout).await?;
        Ok(replies.into_iter().map(crate::sim::Reply).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(bytes: &[u8]) -> Value {
        Value::BulkString(bytes.to_vec())
    }

    #[test]
    fn no_two_prefix_and_id_pairs_share_a_key() {
        let pairs = [
            ("shop", "pay:card"),
            ("shop:pay", "card"),
            ("shop:", "pay:card"),
            ("shop", ":pay:card"),
            ("a%3A", "b"),
            ("a:", "b"),
            ("a", "%3Ab"),
            ("{a}", "b"),
            ("a", "}b{"),
            ("a}", "b"),
            ("cutout:fleet", "payments"),
        ];
        let keys: std::collections::HashSet<String> =
            pairs.iter().map(|(prefix, id)| key(prefix, id)).collect();
        assert_eq!(keys.len(), pairs.len(), "{keys:?}");
        assert_eq!(key("cutout:fleet", "payments"), "{cutout%3Afleet:payments}");
        assert_eq!(key("shop", "pay:card"), "{shop:pay:card}");
        assert_eq!(key("shop:pay", "card"), "{shop%3Apay:card}");
        // The whole key is its hash tag: one `{` first, one `}` last, none between.
        for key in &keys {
            assert!(key.starts_with('{') && key.ends_with('}'), "{key}");
            assert_eq!(key.matches(['{', '}']).count(), 2, "{key}");
        }
    }

    #[test]
    fn the_script_and_its_twin_agree_on_the_magic_word() {
        assert!(SCRIPT.contains(&crate::report::MAGIC.to_string()));
        assert_eq!(&crate::report::MAGIC.to_le_bytes()[..5], b"CTFL\x01");
        assert!(SCRIPT.contains(&crate::recovery::MAGIC.to_string()));
        assert_eq!(&crate::recovery::MAGIC.to_le_bytes()[..5], b"CTFR\x01");
    }

    #[test]
    fn replies_are_read_or_refused_never_trusted() {
        let mut value = None;
        let request = Request {
            geometry: crate::report::Geometry::new(1_000, 60_000),
            cap: 0,
            report: crate::report::Counts::default(),
            ledger: None,
            closed: true,
            recovery: crate::recovery::Args::default(),
        };
        let applied =
            crate::report::apply(&mut value, &mut None, &request, 1_700_000_000_123_456).unwrap();
        let ring = value.unwrap();
        let script = |born: u64| {
            Value::Array(vec![
                Value::Int(1_700_000_000_123),
                Value::Int(applied.outcome.epoch),
                Value::Int(1),
                Value::Int(i64::try_from(born).unwrap()),
                Value::Int(1_700_000_000_123_456),
                Value::Int(0),
                Value::Int(0),
            ])
        };
        match key_reply(script(applied.outcome.born), bulk(&ring)) {
            KeyReply::Ring { outcome, ring } => {
                assert_eq!(outcome, applied.outcome);
                assert_eq!(ring.sums(outcome.epoch).pods, 1);
            }
            other => panic!("{other:?}"),
        }
        for (script, read) in [
            (Value::Nil, bulk(&ring)),
            (Value::Okay, bulk(&ring)),
            (Value::Array(vec![Value::Int(1)]), bulk(&ring)),
            (
                Value::Array(vec![
                    Value::Int(1),
                    Value::Int(1),
                    Value::Int(2),
                    Value::Int(1),
                    Value::Int(1),
                    Value::Int(0),
                    Value::Int(0),
                ]),
                bulk(&ring),
            ),
            // The layout before fleet recovery answered four numbers.
            (
                Value::Array(vec![
                    Value::Int(1_700_000_000_123),
                    Value::Int(applied.outcome.epoch),
                    Value::Int(1),
                    Value::Int(i64::try_from(applied.outcome.born).unwrap()),
                ]),
                bulk(&ring),
            ),
            (script(applied.outcome.born), Value::Nil),
            (script(applied.outcome.born), bulk(b"garbage")),
            // Another life of the key between the script and the read.
            (script(applied.outcome.born + 1), bulk(&ring)),
        ] {
            assert!(matches!(key_reply(script, read), KeyReply::Malformed));
        }
    }
}
