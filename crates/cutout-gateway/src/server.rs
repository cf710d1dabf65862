//! Listeners: binding with clear errors, serving a router within the configured limits, draining with a deadline, and the process signals.
//!
//! Each listener ([`serve_with`]) accepts connections up to its own `max-connections` (more are
//! accepted and closed at once, with a rate-limited log line, unless a source holding more
//! than its share makes room: [`crate::share`]), serves each with hyper's HTTP/1
//! server (with [`serve_protocols`]: after a TLS handshake bounded by the same timeout, HTTP/1.1
//! or HTTP/2 by ALPN, or HTTP/2 prior knowledge beside HTTP/1.1 on a plain `h2c` listener)
//! under its `header-read-timeout`, closes a connection on which no byte moved for
//! `idle-timeout`, and on shutdown stops accepting, lets in-flight requests finish for at most
//! `shutdown-timeout` (hyper's graceful shutdown of each connection: an idle one closes, a
//! busy one finishes its request and its response, flushed, first), then closes what is left.
//!
//! # Half-closed requests are answered
//! An HTTP/1 client may shut its write side down once its request is sent and still read the
//! answer (a *half-close*: `shutdown(SHUT_WR)`, `curl` with a request piped from a file, many
//! load balancers' health checks). The listener answers it (hyper's `half_close`): the end of
//! the client's stream after a whole request is not the client leaving, and is never counted
//! as a give-up. Its price: a client that *closed* its connection sends the same end of stream,
//! and the two are told apart only when the answer is written to it, so until then such a
//! request runs on in its connection as a patient client's would (its attempt bounded by the
//! attempt timeout and `request-timeout`, its connection slot by `max-connections`) and its
//! upstream's work is not cancelled; the breakers judge its own outcome either way (see
//! [`crate::attempt`]). A client whose answer cannot be written (it left, or reset its
//! connection) is found gone at that write. After the answer to a half-closed request, the
//! connection is closed.
//! Both of the gateway's listeners answer half-closed requests ([`ListenerLimits::half_close`]);
//! [`serve`], the way the demo upstreams are served, does not: there a caller's end of stream
//! cancels its request, as most services do.
//!
//! Signals: SIGTERM and Ctrl-C (SIGINT) shut down ([`shutdown_signal`]); SIGHUP reloads the
//! configuration file ([`reload_on_hangup`], [`crate::reload`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as AutoBuilder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::budget::{RequestBudget, Slot};
use crate::config::{GatewayConfig, Limits};
use crate::error::StartError;
use crate::gateway::Gateway;
use crate::refusal::{Refusal, note};
use crate::share::{Book, Conn, Entry, InFlight, Source};
use crate::tls::ListenerTls;

/// How long a listener waits after `accept` failed (out of file descriptors, say) before it
/// tries again: long enough not to spin, short enough to recover quickly.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The limits one listener serves within (from [`Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Open connections at most; more are accepted and closed at once.
    pub max_connections: usize,
    /// hyper's header-read timeout.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moves for this long is closed.
    pub idle_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_timeout: Duration,
    /// Whether a client's end of stream after a whole request still gets the answer (hyper's
    /// `half_close`; see the [module docs](self)). `false`: it ends the request, as hyper's
    /// default server does.
    pub half_close: bool,
    /// How long a request past the listener's request budget (an HTTP/2 stream: see
    /// [`crate::budget`]) waits for a slot: `request-timeout`.
    pub request_wait: Duration,
}

impl ListenerLimits {
    /// The proxy listener's limits.
    pub fn proxy(limits: &Limits) -> ListenerLimits {
        ListenerLimits {
            max_connections: limits.max_connections,
            ..ListenerLimits::admin(limits)
        }
    }

    /// The admin listener's limits.
    pub fn admin(limits: &Limits) -> ListenerLimits {
        ListenerLimits {
            max_connections: limits.admin_max_connections,
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            shutdown_timeout: limits.shutdown_timeout,
            half_close: true,
            request_wait: limits.request_timeout,
        }
    }
}

impl Default for ListenerLimits {
    /// The proxy listener's default limits.
    fn default() -> Self {
        ListenerLimits::proxy(&Limits::default())
    }
}

/// The local address of the connection a request came on, in the request's extensions (the
/// peer's is axum's [`ConnectInfo<SocketAddr>`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// Binds `addr`, naming the listener (`what`) and the address in the error.
pub async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { what, addr, source })
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT). SIGHUP is not its business: [`reload_on_hangup`]
/// handles it (call it as well, before the first SIGHUP may come). Call it inside the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = signal(SignalKind::terminate());
        let interrupt = signal(SignalKind::interrupt());
        async move {
            let wait = |s: io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(terminate) => tracing::info!("SIGTERM received"),
                () = wait(interrupt) => tracing::info!("SIGINT received"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Reloads `gateway`'s configuration file on each SIGHUP ([`crate::reload`]); without a
/// gateway (the helper modes), a SIGHUP is logged and ignored. The handler is installed at
/// once, not when a task first runs, so a SIGHUP during start-up does not kill the process.
/// Call it inside the runtime; the task it spawns runs until the runtime ends.
pub fn reload_on_hangup(gateway: Option<Arc<Gateway>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: reload with POST /reload instead");
            return;
        };
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                match &gateway {
                    Some(gateway) => {
                        tracing::info!("SIGHUP received: reloading the configuration");
                        let gateway = Arc::clone(gateway);
                        let _ = tokio::task::spawn_blocking(move || {
                            crate::reload::reload(&gateway, "SIGHUP")
                        })
                        .await;
                    }
                    None => tracing::warn!("SIGHUP received and ignored: nothing to reload"),
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = gateway;
}

/// Serves `router` on `listener` with the default limits until `shutdown` resolves, then
/// drains open requests (for at most the default `shutdown-timeout`). As a plain service, the
/// way an upstream is served (the demo upstreams): a caller's end of stream mid-request ends
/// the request (no half-close, hyper's default), so a caller that leaves cancels its request.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = ListenerLimits {
        half_close: false,
        ..ListenerLimits::default()
    };
    serve_with("listener", listener, router, limits, shutdown).await
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then stops
/// accepting, lets in-flight requests finish for at most `limits.shutdown_timeout`, and closes
/// the connections left. `what` names the listener in log lines (`proxy`, `admin`).
///
/// Requests carry the peer's address as axum's [`ConnectInfo<SocketAddr>`] and the local one
/// as [`LocalAddr`] in their extensions. Plain HTTP/1.1 ([`serve_protocols`] for TLS and
/// HTTP/2).
pub async fn serve_with(
    what: &'static str,
    listener: TcpListener,
    router: axum::Router,
    limits: ListenerLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    serve_protocols(
        what,
        listener,
        router,
        limits,
        Protocols::default(),
        shutdown,
    )
    .await
}

/// What a listener speaks besides plain HTTP/1.1.
#[derive(Debug, Clone, Default)]
pub struct Protocols {
    /// TLS with this certificate (ALPN `h2` and `http/1.1`): every connection's handshake
    /// first, within `header-read-timeout`, then HTTP/1.1 or HTTP/2 as the client chose.
    pub tls: Option<ListenerTls>,
    /// On a plain listener: HTTP/2 with prior knowledge too (a connection that opens with
    /// HTTP/2's preface), HTTP/1.1 for the others.
    pub h2c: bool,
}

/// Marks a request that came over TLS (in its extensions), so the proxy says
/// `X-Forwarded-Proto: https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverTls;

/// [`serve_with`], speaking `protocols`. The limits hold for every protocol:
/// `max-connections` and the fair share count connections (an HTTP/2 connection with many
/// streams is one), a TLS handshake must end within `header-read-timeout` (else the
/// connection is closed, and logged as a header-read timeout), `idle-timeout` watches the
/// bytes under TLS. On HTTP/2, `header-read-timeout` bounds the handshake only (hyper's
/// HTTP/2 server has no per-request head timer); `idle-timeout` and `request-timeout` bound
/// the rest. A connection asked to make room closes when no request is in flight on it; on
/// HTTP/2 that is a GOAWAY, which lets the client's streams in flight finish.
pub async fn serve_protocols(
    what: &'static str,
    listener: TcpListener,
    router: axum::Router,
    limits: ListenerLimits,
    protocols: Protocols,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    // Connections and the HTTP/2 streams beyond each one's first share the slots
    // (crate::budget).
    let budget = RequestBudget::new(limits.max_connections, limits.request_wait);
    let slots = Arc::clone(budget.slots());
    let book = Arc::new(Book::default());
    // Told to every connection when the drain begins: each shuts down gracefully.
    let (draining, drain) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .half_close(limits.half_close);
    let mut auto = AutoBuilder::new(TokioExecutor::new());
    auto.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .half_close(limits.half_close);
    auto.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(crate::budget::H2_MAX_CONCURRENT_STREAMS);
    let mut shutdown = pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) if is_connection_error(&error) => continue,
                    Err(error) => {
                        note(Refusal::AcceptError, what, format_args!(
                            "cannot accept a connection on {local}: {error}; retrying in {}",
                            cutout::HumanDuration(ACCEPT_BACKOFF)
                        ));
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let source = Source::of(peer.ip());
                let slot = match Arc::clone(&slots).try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) => match book.make_room(source) {
                        Some(from) => {
                            note(Refusal::FairShare, what, format_args!(
                                "{} connections open on {local} ({what} limit); asked an idle \
                                 one of {from} ({} open) to close for one from {peer}",
                                limits.max_connections,
                                book.held_by(from)
                            ));
                            None
                        }
                        None => {
                            note(Refusal::MaxConnections, what, format_args!(
                                "{} connections open on {local} ({what} limit); closed the one \
                                 from {peer}",
                                limits.max_connections
                            ));
                            drop(stream);
                            continue;
                        }
                    },
                };
                let mut drain = drain.clone();
                let (http, router, book, slots) =
                    (http.clone(), router.clone(), Arc::clone(&book), Arc::clone(&slots));
                let (auto, protocols, budget) = (auto.clone(), protocols.clone(), budget.clone());
                connections.spawn(async move {
                    let slot = match slot {
                        Some(slot) => slot,
                        None => match room(&slots, &book, source, &mut drain).await {
                            Some(slot) => slot,
                            None if *drain.borrow() => return,
                            None => {
                                note(Refusal::MaxConnections, what, format_args!(
                                    "{} connections open on {local} ({what} limit); no idle \
                                     connection freed a slot within {}: closed the one from \
                                     {peer}",
                                    limits.max_connections,
                                    cutout::HumanDuration(ROOM_WAIT)
                                ));
                                return;
                            }
                        },
                    };
                    let _slot = budget.hold(slot);
                    let entry = book.enter(source);
                    let _ = stream.set_nodelay(true);
                    let watched = Watched {
                        stream,
                        conn: Arc::clone(entry.conn()),
                        preface: Some(0),
                    };
                    let conn = Arc::clone(entry.conn());
                    let tls = protocols.tls.is_some();
                    // An upgraded connection's tunnel comes back here to run (crate::tunnel).
                    let (tunnels, tunnel) = crate::tunnel::channel();
                    let service = TowerToHyperService::new(tower::service_fn(
                        move |mut request: http::Request<Incoming>| {
                            request.extensions_mut().insert(ConnectInfo(peer));
                            request.extensions_mut().insert(LocalAddr(local));
                            if tls {
                                request.extensions_mut().insert(OverTls);
                            }
                            if request.headers().contains_key(http::header::UPGRADE) {
                                request.extensions_mut().insert(tunnels.clone());
                            }
                            // In flight until its response body is sent or dropped: never
                            // closed to make room until then.
                            let in_flight = conn.request();
                            let router = router.clone();
                            // Alone on its connection (every HTTP/1.1 request), it needs no
                            // slot of its own and touches no shared budget state.
                            let budget = (!in_flight.alone()).then(|| budget.clone());
                            async move {
                                let slot = match budget {
                                    None => None,
                                    Some(budget) => match budget.admit(what).await {
                                        Ok(slot) => Some(slot),
                                        Err(busy) => return Ok(refused(*busy, request.headers())),
                                    },
                                };
                                let response = router.oneshot(request).await?;
                                Ok::<_, std::convert::Infallible>(response.map(|body| {
                                    axum::body::Body::new(CountedBody {
                                        body,
                                        _in_flight: in_flight,
                                        _slot: slot,
                                    })
                                }))
                            }
                        },
                    ));
                    // Each protocol's connection, run to its end the same way.
                    macro_rules! serve {
                        ($connection:expr) => {
                            drive(
                                what,
                                $connection,
                                |connection| connection.graceful_shutdown(),
                                limits.idle_timeout,
                                &entry,
                                drain,
                            )
                            .await
                        };
                    }
                    match &protocols.tls {
                        None if !protocols.h2c => {
                            let io = TokioIo::new(watched);
                            let connection = http.serve_connection(io, service).with_upgrades();
                            serve!(connection);
                        }
                        None => {
                            let connection =
                                auto.serve_connection_with_upgrades(TokioIo::new(watched), service);
                            serve!(connection);
                        }
                        Some(tls) => {
                            let handshake = tokio::time::timeout(
                                limits.header_read_timeout,
                                tls.acceptor().accept(watched),
                            );
                            // A connection in its handshake has no request in flight: asked to
                            // make room, or drained, it closes at once (else a client that
                            // never finishes its handshakes would keep others out until
                            // header-read-timeout).
                            let handshake = tokio::select! {
                                done = handshake => done,
                                () = entry.conn().evicted() => {
                                    tracing::debug!(
                                        listener = what,
                                        "closed in its TLS handshake to make room"
                                    );
                                    return;
                                }
                                Ok(()) = drain.changed() => return,
                            };
                            let stream = match handshake {
                                Ok(Ok(stream)) => {
                                    if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                                        entry.conn().mark_h2();
                                    }
                                    stream
                                }
                                Ok(Err(error)) => {
                                    tracing::debug!(listener = what, %error, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    note(
                                        Refusal::HeaderReadTimeout,
                                        what,
                                        "a connection did not complete its TLS handshake \
                                         within header-read-timeout; closed",
                                    );
                                    return;
                                }
                            };
                            let connection =
                                auto.serve_connection_with_upgrades(TokioIo::new(stream), service);
                            serve!(connection);
                        }
                    }
                    tunnel.run(entry.conn(), limits.idle_timeout).await;
                });
            }
        }
    }
    drop(listener);
    let open = connections.len();
    let _ = draining.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_timeout, drained)
        .await
        .is_err()
    {
        tracing::warn!(
            listener = what,
            "shutdown-timeout ({}) passed with requests still in flight: closing their \
             connections ({open} were open when the drain began)",
            cutout::HumanDuration(limits.shutdown_timeout)
        );
    }
    connections.shutdown().await;
    Ok(())
}

/// Errors of one connection that `accept` reports and that say nothing about the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Runs one connection until it ends, or until no byte has moved on it for `idle`. Shuts it
/// down gracefully (`shut_down`: hyper's, which closes an idle connection and lets a busy one
/// finish its request and flush its response first) when the drain begins, or when it is
/// asked to make room for another source's connection while no request is in flight on it
/// ([`crate::share`]; a request in flight declines). Its caller holds its listener slot and
/// its place in the book until it ends, and the tunnel of an upgraded connection after it
/// ([`crate::tunnel`]).
#[allow(clippy::too_many_arguments)]
async fn drive<C, E>(
    what: &'static str,
    connection: C,
    shut_down: impl Fn(Pin<&mut C>),
    idle: Duration,
    entry: &Entry,
    mut drain: watch::Receiver<bool>,
) where
    C: Future<Output = Result<(), E>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = entry.conn();
    let mut connection = pin!(connection);
    let mut closing = false;
    // An HTTP/2 connection asked to make room and shut down: when it is dropped if it has not
    // closed by then with no stream in flight (see [`H2_EVICT_GRACE`]).
    let mut grace: Option<Instant> = None;
    if *drain.borrow_and_update() {
        shut_down(connection.as_mut());
        closing = true;
    }
    // A year stands for "never" when `idle` is too large to add to an instant.
    let deadline = |activity: &Conn| {
        activity
            .last_moved()
            .checked_add(idle)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    };
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                match result.map_err(Into::into) {
                    Err(error) if is_timeout(&*error) => note(
                        Refusal::HeaderReadTimeout,
                        what,
                        "a connection did not send a complete request head within \
                         header-read-timeout; closed",
                    ),
                    Err(error) => tracing::debug!(listener = what, %error, "connection ended"),
                    Ok(()) => {}
                }
                return;
            }
            Ok(()) = drain.changed(), if !closing => {
                shut_down(connection.as_mut());
                closing = true;
            }
            // The service runs inside `connection`, in this task: no request can begin between
            // this check and the shutdown's start.
            () = entry.conn().evicted(), if !closing => {
                if entry.conn().busy() {
                    entry.conn().decline();
                } else {
                    shut_down(connection.as_mut());
                    closing = true;
                    if entry.conn().is_h2() {
                        grace = Some(Instant::now() + H2_EVICT_GRACE);
                    }
                }
            }
            () = tokio::time::sleep_until(grace.unwrap_or_else(Instant::now)), if grace.is_some() => {
                if entry.conn().busy() {
                    grace = Some(Instant::now() + H2_EVICT_GRACE);
                } else {
                    tracing::debug!(
                        listener = what,
                        "an HTTP/2 connection asked to make room did not close within {}; dropped",
                        cutout::HumanDuration(H2_EVICT_GRACE)
                    );
                    return;
                }
            }
            () = tokio::time::sleep_until(deadline(activity)) => {
                if deadline(activity) <= Instant::now() {
                    note(
                        Refusal::IdleTimeout,
                        what,
                        "a connection moved no byte for idle-timeout; closed",
                    );
                    return;
                }
            }
        }
    }
}

/// How long an HTTP/2 connection asked to make room (and sent its GOAWAY) may take to close
/// before it is dropped, once no stream is in flight on it. hyper's graceful shutdown of
/// HTTP/2 closes the connection only when the client acknowledges the shutdown's PING; a
/// silent client never does, and would hold its slot until `idle-timeout`. HTTP/1.1 needs no
/// such bound (an idle connection closes at once; one still flushing its last response is
/// left to finish it), which is why the connection's protocol is told first.
const H2_EVICT_GRACE: Duration = Duration::from_millis(250);

/// Whether a connection's error is hyper's header-read timeout.
fn is_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout)
}

/// How long a newcomer for which room is being made waits for a slot, asking again every
/// [`ROOM_STEP`] (the connection asked may have declined: a request began on it).
const ROOM_WAIT: Duration = Duration::from_secs(1);
const ROOM_STEP: Duration = Duration::from_millis(50);

/// A slot for a newcomer from `source` at a full listener, once an asked connection has
/// closed: the semaphore hands a freed slot to the first waiter, not to a later
/// `try_acquire`. `None` after [`ROOM_WAIT`].
async fn room(
    slots: &Arc<Semaphore>,
    book: &Book,
    source: Source,
    drain: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let until = Instant::now() + ROOM_WAIT;
    let acquire = Arc::clone(slots).acquire_owned();
    let mut acquire = pin!(acquire);
    loop {
        if *drain.borrow() {
            return None;
        }
        let step = (Instant::now() + ROOM_STEP).min(until);
        match tokio::time::timeout_at(step, acquire.as_mut()).await {
            Ok(Ok(slot)) => return Some(slot),
            Ok(Err(_)) => return None,
            Err(_) if Instant::now() >= until => return None,
            Err(_) => {
                book.make_room(source);
            }
        }
    }
}

/// The 503 of a stream the request budget refused ([`crate::budget`]), in gRPC's shape for a
/// gRPC call.
fn refused(answer: http::Response<String>, headers: &http::HeaderMap) -> axum::response::Response {
    if crate::grpc_answer::is_grpc_content(headers) {
        crate::grpc_answer::shaped(answer)
    } else {
        answer.map(axum::body::Body::from)
    }
}

/// A response body that keeps its request counted as in flight until it is sent or dropped.
struct CountedBody {
    body: axum::body::Body,
    _in_flight: InFlight,
    /// Its own slot, when it is an HTTP/2 stream beyond its connection's first
    /// ([`crate::budget`]).
    _slot: Option<Slot>,
}

impl http_body::Body for CountedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A TCP stream that records on its [`Conn`] when bytes move.
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
    /// How many bytes of HTTP/2's preface the first bytes read have matched so far, however
    /// they were split into reads; `None` once decided (matched, or not the preface).
    preface: Option<usize>,
}

/// The start of the HTTP/2 client preface ("PRI * HTTP/2.0…"): no HTTP/1.1 request begins so.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.touch();
            if let Some(matched) = self.preface {
                let want = &H2_PREFACE[matched..];
                let got = &buf.filled()[before..];
                let n = got.len().min(want.len());
                self.preface = if got[..n] != want[..n] {
                    None
                } else if n == want.len() {
                    self.conn.mark_h2();
                    None
                } else {
                    Some(matched + n)
                };
            }
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.touch();
        }
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// `GW-WARN-002` when the open-file limit (`ulimit -n`) may be too low for the connection
/// limits: every proxied connection can hold an upstream connection too, and every detached
/// attempt one more, so the gateway may need about 2 × `max-connections` + the clusters'
/// `max-detached-attempts` + `admin-max-connections` + 64 descriptors. Past the limit,
/// `accept` fails (logged, rate-limited) and both listeners stop taking connections.
pub fn descriptor_warning(config: &GatewayConfig) -> Option<String> {
    let detached: usize = config
        .clusters
        .values()
        .map(|c| c.max_detached_attempts)
        .fold(0, usize::saturating_add);
    let need = (2 * config.limits.max_connections)
        .saturating_add(detached)
        .saturating_add(config.limits.admin_max_connections + 64);
    let soft = open_file_limit()?;
    (soft < need as u64).then(|| {
        format!(
            "GW-WARN-002: the open-file limit is {soft} but gateway.max-connections = {}, \
             gateway.admin-max-connections = {} and {detached} detached attempts \
             (max-detached-attempts, all clusters) may need about {need} descriptors; raise \
             `ulimit -n` (or LimitNOFILE) or lower max-connections",
            config.limits.max_connections, config.limits.admin_max_connections
        )
    })
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// Binds both listeners of `gateway` (the configured addresses), starts its health checks
/// ([`crate::health`]), then serves them until `shutdown` resolves, each within its limits
/// (the checks stop when shutdown begins). `ready` is called with the bound addresses
/// (proxy, admin) once both are listening. Configuration warnings ([`GatewayConfig::warnings`],
/// [`descriptor_warning`]) are logged first.
pub async fn run(
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr, SocketAddr),
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = gateway.config();
    for warning in config
        .warnings()
        .into_iter()
        .chain(descriptor_warning(&config))
    {
        tracing::warn!("{warning}");
    }
    let limits = config.limits;
    let proxy = bind("proxy", config.listen).await?;
    let admin = bind("admin", config.admin).await?;
    let (proxy_addr, admin_addr) = (proxy.local_addr()?, admin.local_addr()?);
    gateway.set_listening(proxy_addr, admin_addr);
    ready(proxy_addr, admin_addr);
    // The proxy stops first; the admin listener answers (`/readyz`: 503) until the proxy's
    // drain is over, so that a load balancer sees the gateway draining instead of gone.
    let (tx, rx) = watch::channel(false);
    let (admin_tx, admin_rx) = watch::channel(false);
    let wait = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let protocols = Protocols {
        tls: config.tls.clone(),
        h2c: config.h2c,
    };
    let proxy_task = tokio::spawn(serve_protocols(
        "proxy",
        proxy,
        crate::proxy::app(Arc::clone(&gateway)),
        ListenerLimits::proxy(&limits),
        protocols,
        wait(rx.clone()),
    ));
    let admin_task = tokio::spawn(serve_with(
        "admin",
        admin,
        crate::admin::app(Arc::clone(&gateway)),
        ListenerLimits::admin(&limits),
        wait(admin_rx),
    ));
    let checks = crate::health::start(&gateway, &rx);
    if !checks.is_empty() {
        tracing::info!(hosts = checks.len(), "health checks started");
    }
    shutdown.await;
    gateway.set_draining();
    // Read now: a reload may have changed it since the start.
    let delay = gateway.config().drain_delay;
    if !delay.is_zero() {
        // Still serving, `/readyz` already 503: load balancers take the gateway out of
        // rotation before its listener closes.
        tracing::info!(
            "shutting down: /readyz says draining; serving on for drain-delay ({})",
            cutout::HumanDuration(delay)
        );
        tokio::time::sleep(delay).await;
    }
    tracing::info!(
        "shutting down: draining open requests for at most {}",
        cutout::HumanDuration(limits.shutdown_timeout)
    );
    let _ = tx.send(true);
    // The checks stop with the proxy; whatever is left is aborted.
    drop(checks);
    let proxied = proxy_task.await;
    let _ = admin_tx.send(true);
    proxied??;
    admin_task.await??;
    tracing::info!("stopped");
    Ok(())
}
