//! The Redis side: the connect, the script, and the one-round-trip pipeline of a tick.
//!
//! Each watched breaker's publish-and-read is one call of the script; a tick pipelines them
//! all.
//!
//! # Layout
//! One hash per breaker, `<prefix>:<breaker id>`, with one field per pod (the pod's id)
//! holding `calls failures slow open unix_ms`: the breaker's trip-window counts while closed
//! (zeros otherwise), 1 when it holds an open slot, and when it was written, in milliseconds
//! on Redis's clock. The breaker's own window already buckets time, so a pod's report is
//! its window, overwritten every tick: the hash holds one field per live pod, a reader sums
//! them in one `HGETALL`, and a pod that goes away stops counting once its field is older
//! than the staleness bound. Readers delete fields older than the retention, and the key
//! expires (`PEXPIRE`) a retention after its last writer.
//!
//! # Why a script
//! Each breaker's publish and read is one `EVALSHA` of [`SCRIPT`], all of them pipelined in
//! one round trip per tick. The script, rather than a pipelined `HSET` + `PEXPIRE` +
//! `HGETALL`, because:
//! - a key under the prefix that holds something else than a hash (another program's string,
//!   a list) must be left alone: `HSET` would fail on it, but `PEXPIRE` would still put an
//!   expiry on someone else's data. The script checks the type first and answers
//!   `CUTOUT_FOREIGN_KEY <type>` without writing anything.
//! - the time in each report is Redis's (`TIME`), and readers judge staleness against the
//!   `TIME` of the same call: the pods' clocks, however skewed, never matter.
//! - a stale field is deleted only if it still holds the value the reader saw (`HGET`
//!   compared, then `HDEL`, atomically), so a pod that comes back just then keeps its report.
//!
//! The script is loaded once per connection (`SCRIPT LOAD`) and reloaded, within the same
//! round, if Redis answers `NOSCRIPT` (a `SCRIPT FLUSH`, a failover to a replica that never
//! saw it). It touches one key (cluster-safe on its own), but a pipeline across slots is not:
//! Redis Cluster is not supported.

use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::builder::Config;
use crate::error::{Code, FleetError, Kind};

/// The code the script answers for a key that holds something else than a hash.
pub(crate) const FOREIGN: &str = "CUTOUT_FOREIGN_KEY";

/// Publish this pod's report and read the hash back.
///
/// `KEYS[1]`: the breaker's hash. `ARGV[1]`: this pod's field. `ARGV[2]`: `calls failures
/// slow open`. `ARGV[3]`: the key's time to live, in ms. `ARGV[4..]`: (field, value) pairs to
/// delete if unchanged. Returns `{now_ms, HGETALL}`, or the error `CUTOUT_FOREIGN_KEY <type>` and
/// no write when the key holds another type.
pub(crate) const SCRIPT: &str = r"
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
  return redis.error_reply('CUTOUT_FOREIGN_KEY ' .. kind)
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. now)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
for i = 4, #ARGV - 1, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return {now, redis.call('HGETALL', KEYS[1])}
";

/// A connection with the script loaded on it.
pub(crate) struct Link {
    conn: MultiplexedConnection,
    sha: String,
}

/// One breaker's part of a round.
pub(crate) struct Publish<'a> {
    pub(crate) key: &'a str,
    pub(crate) value: String,
    pub(crate) forget: &'a [(Vec<u8>, Vec<u8>)],
}

/// What Redis answered for one breaker.
#[derive(Debug)]
pub(crate) enum KeyReply {
    /// The hash, read right after this pod's report was written.
    Hash {
        now_ms: u64,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// The key holds another type (named): nothing was written.
    Foreign(String),
    /// An answer of a shape the script never gives.
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
    Direct(redis::Client),
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
    let connected = tokio::time::timeout(config.connect_timeout, connecting)
        .await
        .map_err(|_| timed_out("connecting", config.connect_timeout))?;
    let mut conn = match connected {
        Ok(conn) => conn,
        Err(error) => {
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

    /// One round trip: every breaker's script call, pipelined. The whole round, a reload of
    /// the script included, is bounded by `limit`. The replies are in the order of
    /// `publishes`.
    pub(crate) async fn exchange(
        &mut self,
        pod: &str,
        ttl_ms: u64,
        publishes: &[Publish<'_>],
        limit: Duration,
    ) -> Result<Vec<KeyReply>, FleetError> {
        let round = async {
            let mut values = self.pipeline(pod, ttl_ms, publishes).await?;
            if values.iter().any(is_noscript) {
                self.sha = load_script(&mut self.conn, limit).await?;
                values = self.pipeline(pod, ttl_ms, publishes).await?;
            }
            Ok::<_, FleetError>(values)
        };
        let values = tokio::time::timeout(limit, round)
            .await
            .map_err(|_| timed_out("a round", limit))??;
        if values.len() != publishes.len() {
            return Err(FleetError::new(
                Kind::Protocol,
                format!(
                    "{} replies to a pipeline of {} commands",
                    values.len(),
                    publishes.len()
                ),
            ));
        }
        Ok(values.into_iter().map(key_reply).collect())
    }

    async fn pipeline(
        &mut self,
        pod: &str,
        ttl_ms: u64,
        publishes: &[Publish<'_>],
    ) -> Result<Vec<Value>, FleetError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for publish in publishes {
            let call = pipe
                .cmd("EVALSHA")
                .arg(&self.sha)
                .arg(1)
                .arg(publish.key)
                .arg(pod)
                .arg(&publish.value)
                .arg(ttl_ms);
            for (field, value) in publish.forget {
                call.arg(field.as_slice()).arg(value.as_slice());
            }
        }
        pipe.query_async::<Vec<Value>>(&mut self.conn)
            .await
            .map_err(|error| FleetError::from_redis(&error))
    }
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(error) if error.code() == "NOSCRIPT")
}

fn key_reply(value: Value) -> KeyReply {
    match value {
        Value::ServerError(error) if error.code() == FOREIGN => {
            KeyReply::Foreign(error.details().unwrap_or("unknown").to_owned())
        }
        Value::ServerError(error) => {
            let error: redis::RedisError = error.into();
            KeyReply::Error(FleetError::from_redis(&error))
        }
        Value::Array(mut parts) if parts.len() == 2 => {
            let fields = parts.pop();
            let now = parts.pop();
            match (now.as_ref().and_then(number), fields) {
                (Some(now_ms), Some(Value::Array(flat))) if flat.len() % 2 == 0 => {
                    let mut fields = Vec::with_capacity(flat.len() / 2);
                    let mut flat = flat.into_iter();
                    while let (Some(field), Some(value)) = (flat.next(), flat.next()) {
                        match (bytes(field), bytes(value)) {
                            (Some(field), Some(value)) => fields.push((field, value)),
                            _ => return KeyReply::Malformed,
                        }
                    }
                    KeyReply::Hash { now_ms, fields }
                }
                _ => KeyReply::Malformed,
            }
        }
        _ => KeyReply::Malformed,
    }
}

fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(text) => Some(text.into_bytes()),
        _ => None,
    }
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn replies_are_read_or_refused_never_trusted() {
        let reply = key_reply(Value::Array(vec![
            bulk("1700000000123"),
            Value::Array(vec![bulk("pod-a"), bulk("1 0 0 0 1700000000100")]),
        ]));
        match reply {
            KeyReply::Hash { now_ms, fields } => {
                assert_eq!(now_ms, 1_700_000_000_123);
                assert_eq!(fields.len(), 1);
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            Value::Nil,
            Value::Okay,
            Value::Array(vec![bulk("x"), Value::Array(vec![])]),
            Value::Array(vec![bulk("1"), Value::Array(vec![bulk("odd")])]),
            Value::Array(vec![bulk("1"), bulk("not an array")]),
            Value::Array(vec![bulk("1"), Value::Array(vec![Value::Nil, bulk("v")])]),
        ] {
            assert!(matches!(key_reply(bad), KeyReply::Malformed));
        }
    }
}
