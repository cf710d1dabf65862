//! [`KeyedLayer`] and key functions: [`KeyFn`], [`ByHost`] and its [`HostKey`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cutout::classify::DefaultClassifier;
use tower_layer::Layer;

use super::{KeyedBreakers, KeyedService};

/// Picks the key of a request. Any `Fn(&Req) -> K` is a key function.
pub trait KeyFn<Req> {
    /// The key type.
    type Key;
    /// The key of `request`.
    fn key(&self, request: &Req) -> Self::Key;
}

impl<Req, K, F> KeyFn<Req> for F
where
    F: Fn(&Req) -> K,
{
    type Key = K;
    fn key(&self, request: &Req) -> K {
        self(request)
    }
}

/// An HTTP request's destination: scheme, host and port. Its display is the breaker's id,
/// `scheme://host:port` (`https://api.example:443`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostKey {
    /// The scheme, lower case (`"http"` when the request has none).
    pub scheme: String,
    /// The host, lower case (from the URI, else the `Host` header; empty when neither).
    pub host: String,
    /// The port: explicit, else 443 for https and 80 otherwise.
    pub port: u16,
}

impl HostKey {
    /// The key of `request`: its URI's scheme and authority, or its `Host` header for
    /// origin-form requests (a server's view).
    pub fn of<B>(request: &http::Request<B>) -> HostKey {
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("http");
        let authority = uri.authority().cloned().or_else(|| {
            request
                .headers()
                .get(http::header::HOST)
                .and_then(|host| host.to_str().ok())
                .and_then(|host| host.parse::<http::uri::Authority>().ok())
        });
        match authority {
            Some(authority) => HostKey::new(scheme, authority.host(), authority.port_u16()),
            None => HostKey::new(scheme, "", None),
        }
    }

    /// The key of `scheme`, `host` and `port`, normalised once for every crate that keys
    /// breakers by host (cutout-reqwest's `host_key` too), so one host has one key however it
    /// is spelled: scheme and host in lower case; the port given, else 443 for `https` and 80
    /// otherwise; a DNS name without its trailing dot (`a.example.` is `a.example`); an IPv6
    /// address in brackets in its canonical form (`[0:0:0:0:0:0:0:1]` is `[::1]`); an IPv4
    /// address in dotted decimal however the URL standard lets it be spelled (`127.1`,
    /// `0x7f.0.0.1`, `2130706433` and `0177.0.0.1` are `127.0.0.1`, as a `reqwest::Url` reads
    /// them, while `http::Uri` keeps the spelling).
    ///
    /// ```
    /// use cutout_tower::keyed::HostKey;
    ///
    /// assert_eq!(HostKey::new("HTTPS", "API.example.", None).to_string(), "https://api.example:443");
    /// assert_eq!(HostKey::new("http", "[0:0:0:0:0:0:0:1]", Some(8080)).to_string(), "http://[::1]:8080");
    /// assert_eq!(HostKey::new("http", "0x7f.1", Some(80)).to_string(), "http://127.0.0.1:80");
    /// ```
    pub fn new(scheme: &str, host: &str, port: Option<u16>) -> HostKey {
        let scheme = scheme.to_ascii_lowercase();
        let default_port = if scheme == "https" { 443 } else { 80 };
        HostKey {
            host: canonical_host(host),
            port: port.unwrap_or(default_port),
            scheme,
        }
    }
}

impl HostKey {
    /// The key a breaker id names, if it is one: `scheme://host:port` with an explicit port or
    /// its scheme's default. `None` for anything else (a bare host, a path, an empty host).
    ///
    /// ```
    /// use cutout_tower::keyed::HostKey;
    ///
    /// let key = HostKey::parse("HTTPS://B.example").unwrap();
    /// assert_eq!(key.to_string(), "https://b.example:443");
    /// assert_eq!(HostKey::parse("b.example"), None);
    /// assert_eq!(HostKey::parse("https://b.example:443/health"), None);
    /// ```
    pub fn parse(id: &str) -> Option<HostKey> {
        let uri: http::Uri = id.parse().ok()?;
        let scheme = uri.scheme_str()?;
        let authority = uri.authority()?;
        let bare = uri.path().is_empty() || uri.path() == "/";
        if !bare || uri.query().is_some() || authority.host().is_empty() || id.ends_with('/') {
            return None;
        }
        Some(HostKey::new(scheme, authority.host(), authority.port_u16()))
    }
}

/// `host` in lower case, an IPv6 address bracketed in its canonical form, a DNS name without
/// its one trailing dot.
fn canonical_host(host: &str) -> String {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(v6) = bare.parse::<std::net::Ipv6Addr>() {
        return format!("[{v6}]");
    }
    let lower = host.to_ascii_lowercase();
    if let Some(v4) = whatwg_ipv4(&lower) {
        return v4.to_string();
    }
    match lower.strip_suffix('.') {
        Some(name) if !name.is_empty() && !name.ends_with('.') => name.to_owned(),
        _ => lower,
    }
}

/// `host` read as an IPv4 address the way the URL standard's host parser reads it (what a
/// `reqwest::Url` does before cutout-reqwest sees it; `http::Uri` keeps the spelling): one to
/// four dot-separated numbers, each decimal, octal (a leading `0`) or hexadecimal (`0x`), the
/// last filling the remaining bytes, one trailing dot allowed. `127.1`, `0x7f.0.0.1`,
/// `2130706433` and `0177.0.0.1` are all `127.0.0.1`. `None` when `host` does not end in a
/// number (a DNS name) or is not a valid address (the spelling is then kept as it is).
fn whatwg_ipv4(host: &str) -> Option<std::net::Ipv4Addr> {
    let mut parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    let last = parts.last()?;
    // "Ends in a number": only then is the host an IPv4 address at all.
    let ends_in_number = (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
        || ipv4_number(last).is_some();
    if !ends_in_number || parts.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = parts
        .iter()
        .map(|part| ipv4_number(part))
        .collect::<Option<_>>()?;
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 5 - numbers.len() as u32; // bytes the last number fills: 4, 3, 2 or 1
    if *last >= 256u64.pow(room) {
        return None;
    }
    let mut address = *last;
    for (i, &n) in init.iter().enumerate() {
        address += n << (8 * (3 - i as u32));
    }
    u32::try_from(address).ok().map(std::net::Ipv4Addr::from)
}

/// One part of an IPv4 host, as the URL standard's IPv4 number parser reads it: `0x`/`0X`
/// hexadecimal (empty after the prefix is 0), a leading `0` octal, else decimal. `None` when
/// it is not a number, or too large to be one part of an address.
fn ipv4_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        return Some(0);
    }
    if digits.len() > 12 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

impl fmt::Display for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

/// The default key function for `http::Request`: [`HostKey::of`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ByHost;

impl<B> KeyFn<http::Request<B>> for ByHost {
    type Key = HostKey;
    fn key(&self, request: &http::Request<B>) -> HostKey {
        HostKey::of(request)
    }
}

/// Wraps services in a [`KeyedService`]: one breaker per key of [`KeyedBreakers`].
///
/// ```
/// use cutout::Settings;
/// use cutout_tower::HttpClassifier;
/// use cutout_tower::keyed::{KeyedBreakers, KeyedLayer};
///
/// let hosts = KeyedBreakers::builder(Settings::default()).max_open(4).build();
/// let layer = KeyedLayer::per_host(hosts.clone()).classifier(HttpClassifier::new());
/// # let _ = layer;
/// ```
#[derive(Debug)]
pub struct KeyedLayer<K, F, C = DefaultClassifier> {
    breakers: KeyedBreakers<K>,
    key_fn: F,
    classifier: C,
    pause: Option<Duration>,
    label: Option<Arc<str>>,
}

impl KeyedLayer<HostKey, ByHost> {
    /// One breaker per destination of `http::Request`s: scheme, host and port.
    pub fn per_host(breakers: KeyedBreakers<HostKey>) -> Self {
        KeyedLayer::new(breakers, ByHost)
    }
}

impl<K, F> KeyedLayer<K, F> {
    /// One breaker per `key_fn(request)`.
    pub fn new(breakers: KeyedBreakers<K>, key_fn: F) -> Self {
        KeyedLayer {
            breakers,
            key_fn,
            classifier: DefaultClassifier,
            pause: None,
            label: None,
        }
    }
}

impl<K, F, C> KeyedLayer<K, F, C> {
    /// Uses `classifier` to decide what each result means.
    pub fn classifier<C2>(self, classifier: C2) -> KeyedLayer<K, F, C2> {
        KeyedLayer {
            breakers: self.breakers,
            key_fn: self.key_fn,
            classifier,
            pause: self.pause,
            label: self.label,
        }
    }

    /// What refusals are called before people outside (default `"the upstream"`): the 503
    /// body of [`respond::error_response`](crate::respond::error_response) names it, never
    /// the key's id (for [`HostKey`], an internal `scheme://host:port`). See
    /// [`KeyedService::label`].
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Waits `pause` (at most the refusal's retry-after) before a refused call fails (default:
    /// no pause; needs a tokio timer).
    pub fn refusal_pause(mut self, pause: Duration) -> Self {
        self.pause = Some(pause);
        self
    }

    /// The map of breakers, to observe and control keys.
    pub fn breakers(&self) -> &KeyedBreakers<K> {
        &self.breakers
    }

    /// The key function.
    pub fn key_fn(&self) -> &F {
        &self.key_fn
    }
}

/// Clones share the map of breakers.
impl<K, F: Clone, C: Clone> Clone for KeyedLayer<K, F, C> {
    fn clone(&self) -> Self {
        KeyedLayer {
            breakers: self.breakers.clone(),
            key_fn: self.key_fn.clone(),
            classifier: self.classifier.clone(),
            pause: self.pause,
            label: self.label.clone(),
        }
    }
}

impl<S, K, F: Clone, C: Clone> Layer<S> for KeyedLayer<K, F, C> {
    type Service = KeyedService<S, K, F, C>;

    fn layer(&self, inner: S) -> Self::Service {
        let service = KeyedService::new(
            inner,
            self.breakers.clone(),
            self.key_fn.clone(),
            self.classifier.clone(),
            self.pause,
        );
        match &self.label {
            Some(label) => service.label(Arc::clone(label)),
            None => service,
        }
    }
}
