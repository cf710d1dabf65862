//! How a cluster connects to its upstreams: plain HTTP or TLS (rustls: system or configured roots, SNI, an optional client certificate), HTTP/1.1, HTTP/2 or either by ALPN.
//!
//! | `protocol` | `http://` upstreams | `https://` upstreams |
//! |---|---|---|
//! | `auto` (default) | HTTP/1.1 | ALPN offers `h2` and `http/1.1`, the upstream chooses |
//! | `http1` | HTTP/1.1 | HTTP/1.1 (no ALPN offered) |
//! | `h2` | HTTP/2 with prior knowledge (h2c) | HTTP/2 (ALPN `h2`) |
//! | `h2c` | HTTP/2 with prior knowledge | refused (`GW-CFG-010`): h2c is cleartext |
//!
//! A TLS upstream's certificate is verified against `tls-roots` (a PEM file of CA
//! certificates) or, without it, the system's roots; the name checked and sent as SNI is the
//! upstream URL's host unless `tls-server-name` says otherwise. `tls-client-cert` and
//! `tls-client-key` (both or neither) present a client certificate.

use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::RootCertStore;
use rustls_pki_types::ServerName;

use crate::error::ConfigError;
use crate::tls::{PemPair, provider, read_certs, read_key};

/// The connector every cluster's client (and its health checks) connects with: TCP, then
/// TLS for `https://` upstreams.
pub type Connector = HttpsConnector<HttpConnector>;

/// The HTTP version a cluster speaks to its upstreams (`protocol`; see the
/// [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1 to `http://`, ALPN to `https://`.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only (prior knowledge over cleartext, ALPN `h2` over TLS).
    H2,
}

impl Protocol {
    /// Whether the client must speak HTTP/2 (no HTTP/1.1 fallback).
    pub fn h2_only(self) -> bool {
        self == Protocol::H2
    }
}

/// A cluster's TLS settings for its `https://` upstreams, read and checked.
#[derive(Clone)]
pub struct UpstreamTls {
    config: Arc<rustls::ClientConfig>,
    server_name: Option<ServerName<'static>>,
    /// What it was made of (the roots' and the client pair's DER, the server name): two
    /// settings are equal when they were made of the same, so that a reload rebuilds a
    /// cluster whose files changed under the same keys and keeps one whose files did not.
    made_of: Vec<Vec<u8>>,
}

impl PartialEq for UpstreamTls {
    fn eq(&self, other: &Self) -> bool {
        self.made_of == other.made_of
    }
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// What a cluster's `tls-*` keys say, before the files are read.
#[derive(Debug, Clone, Default)]
pub struct TlsKeys {
    /// `tls-roots` and its key's path.
    pub roots: Option<(std::path::PathBuf, String)>,
    /// `tls-server-name` and its key's path.
    pub server_name: Option<(String, String)>,
    /// `tls-client-cert` and `tls-client-key`.
    pub client: Option<PemPair>,
}

impl UpstreamTls {
    /// Reads the files `keys` names: `GW-CFG-012` for a file that cannot be read,
    /// `GW-CFG-013` for roots without a CA certificate or a client pair that does not match,
    /// `GW-CFG-004` for a server name that is no DNS name or IP address.
    pub fn load(keys: &TlsKeys) -> Result<UpstreamTls, ConfigError> {
        let mut roots = RootCertStore::empty();
        let mut made_of = vec![b"roots".to_vec()];
        match &keys.roots {
            Some((path, key)) => {
                let certs = read_certs(key, path)?;
                made_of.extend(certs.iter().map(|c| c.to_vec()));
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(ConfigError::new(
                        "GW-CFG-013",
                        key,
                        &path.display().to_string(),
                        "holds no usable CA certificate; allowed PEM CERTIFICATE blocks of \
                         the upstreams' certificate authorities",
                    ));
                }
            }
            None => {
                made_of.push(b"system".to_vec());
                // Roots the system store cannot give (none installed) make every TLS upstream
                // fail its handshake, which the breakers count; the gateway still starts.
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| ConfigError::new("GW-CFG-013", "", "", &error.to_string()))?
            .with_root_certificates(roots);
        let config = match &keys.client {
            None => builder.with_no_client_auth(),
            Some(pair) => {
                let certs = read_certs(&pair.cert_key, &pair.cert)?;
                let key = read_key(&pair.key_key, &pair.key)?;
                made_of.push(b"client".to_vec());
                made_of.extend(certs.iter().map(|c| c.to_vec()));
                made_of.push(key.secret_der().to_vec());
                // A pair that does not match is found here, not at the first handshake.
                pair.load()?;
                builder.with_client_auth_cert(certs, key).map_err(|error| {
                    ConfigError::new(
                        "GW-CFG-013",
                        &pair.key_key,
                        &pair.key.display().to_string(),
                        &format!("the client certificate cannot be used ({error})"),
                    )
                })?
            }
        };
        let server_name = match &keys.server_name {
            None => None,
            Some((name, key)) => Some(ServerName::try_from(name.clone()).map_err(|_| {
                ConfigError::new(
                    "GW-CFG-004",
                    key,
                    name,
                    "allowed a DNS name or an IP address, such as \"api.internal\"",
                )
            })?),
        };
        if let Some((name, _)) = &keys.server_name {
            made_of.push(b"server name".to_vec());
            made_of.push(name.as_bytes().to_vec());
        }
        Ok(UpstreamTls {
            config: Arc::new(config),
            server_name,
            made_of,
        })
    }

    /// Settings for a cluster without `https://` upstreams: no roots (never used).
    pub fn none() -> UpstreamTls {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map(|b| {
                b.with_root_certificates(RootCertStore::empty())
                    .with_no_client_auth()
            })
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(RootCertStore::empty())
                    .with_no_client_auth()
            });
        UpstreamTls {
            config: Arc::new(config),
            server_name: None,
            made_of: Vec::new(),
        }
    }

    /// A connector for `protocol`: `TCP_NODELAY`, `connect_timeout`, then TLS for `https://`
    /// URLs with the ALPN `protocol` asks for.
    pub fn connector(&self, protocol: Protocol, connect_timeout: Duration) -> Connector {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        http.enforce_http(false);
        let mut builder = HttpsConnectorBuilder::new()
            .with_tls_config((*self.config).clone())
            .https_or_http();
        if let Some(name) = &self.server_name {
            builder = builder.with_server_name_resolver(FixedServerNameResolver::new(name.clone()));
        }
        match protocol {
            Protocol::Auto => builder.enable_all_versions().wrap_connector(http),
            Protocol::Http1 => builder.enable_http1().wrap_connector(http),
            Protocol::H2 => builder.enable_http2().wrap_connector(http),
        }
    }
}
