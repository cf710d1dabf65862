//! TLS on the proxy listener: PEM files read with coded errors, a certificate that can be swapped at run time, and the acceptor (ALPN h2 and http/1.1).
//!
//! The listener's certificate comes from `gateway.tls-cert` (a PEM chain, leaf first) and
//! `gateway.tls-key` (a PEM private key: PKCS#8, PKCS#1 or SEC1). They are read when the
//! configuration is read, so `--check` reports a missing file (`GW-CFG-012`) or one that
//! holds no usable certificate or key, or a key that is not the certificate's (`GW-CFG-013`).
//!
//! The certificate is served through [`ReloadableCert`], a rustls certificate resolver whose
//! pair can be replaced while the gateway runs ([`ReloadableCert::reload`] reads the files
//! again; [`ReloadableCert::replace`] takes a pair already loaded): a handshake that begins
//! after the swap gets the new certificate, connections already open keep theirs. A failed
//! reload keeps the old pair.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::error::ConfigError;

/// The crypto provider every TLS configuration of the gateway uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The bytes of the file `path` names, for key `key` (`GW-CFG-012` when it cannot be read).
fn read(key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|error| {
        ConfigError::new(
            "GW-CFG-012",
            key,
            &path.display().to_string(),
            &format!("the file cannot be read ({error}); allowed a readable PEM file"),
        )
    })
}

fn invalid(key: &str, path: &Path, why: &str) -> ConfigError {
    ConfigError::new("GW-CFG-013", key, &path.display().to_string(), why)
}

/// The PEM certificates of the file `path` names, for key `key`, in order: `GW-CFG-012` when
/// it cannot be read, `GW-CFG-013` when it holds none or a bad PEM block.
pub fn read_certs(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bytes = read(key, path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|error| {
            invalid(
                key,
                path,
                &format!("not valid PEM ({error}); allowed PEM CERTIFICATE blocks"),
            )
        })?;
    if certs.is_empty() {
        return Err(invalid(
            key,
            path,
            "holds no certificate; allowed a file of PEM CERTIFICATE blocks",
        ));
    }
    Ok(certs)
}

/// The PEM private key of the file `path` names, for key `key` (the first one in it).
pub fn read_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let bytes = read(key, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| {
        invalid(
            key,
            path,
            &format!(
                "holds no usable private key ({error}); allowed a PEM PRIVATE KEY (PKCS#8), \
                 RSA PRIVATE KEY or EC PRIVATE KEY block"
            ),
        )
    })
}

/// A certificate file and its private key's file (`cert_key`, `key_key`: the configuration
/// keys that name them, for errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    /// The certificate chain's file.
    pub cert: PathBuf,
    /// The private key's file.
    pub key: PathBuf,
    /// The key naming the certificate's file (`gateway.tls-cert`).
    pub cert_key: String,
    /// The key naming the private key's file (`gateway.tls-key`).
    pub key_key: String,
}

impl PemPair {
    /// The chain and its signing key, read and checked to belong together.
    pub fn load(&self) -> Result<CertifiedKey, ConfigError> {
        let certs = read_certs(&self.cert_key, &self.cert)?;
        let key = read_key(&self.key_key, &self.key)?;
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|error| {
                invalid(
                    &self.key_key,
                    &self.key,
                    &format!("the private key cannot be used ({error})"),
                )
            })?;
        let certified = CertifiedKey::new(certs, signing);
        certified.keys_match().map_err(|error| {
            invalid(
                &self.key_key,
                &self.key,
                &format!(
                    "the private key is not the one of {} ({error}); allowed the key of the \
                     certificate's leaf",
                    self.cert.display()
                ),
            )
        })?;
        Ok(certified)
    }
}

/// The listener's certificate, replaceable at run time (see the [module docs](self)).
pub struct ReloadableCert {
    files: PemPair,
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for ReloadableCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadableCert")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadableCert {
    /// Reads `files` (the errors of [`PemPair::load`]).
    pub fn load(files: PemPair) -> Result<ReloadableCert, ConfigError> {
        let first = files.load()?;
        Ok(ReloadableCert {
            files,
            current: RwLock::new(Arc::new(first)),
        })
    }

    /// The files it reads.
    pub fn files(&self) -> &PemPair {
        &self.files
    }

    /// Reads the files again and serves the new pair from the next handshake on; on an error
    /// the pair served stays as it was.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let fresh = self.files.load()?;
        self.replace(fresh);
        Ok(())
    }

    /// Serves `pair` from the next handshake on.
    pub fn replace(&self, pair: CertifiedKey) {
        let pair = Arc::new(pair);
        match self.current.write() {
            Ok(mut current) => *current = pair,
            Err(poisoned) => *poisoned.into_inner() = pair,
        }
    }

    /// The pair served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A TLS listener's settings: its certificate and the acceptor built on it.
#[derive(Clone)]
pub struct ListenerTls {
    cert: Arc<ReloadableCert>,
    acceptor: TlsAcceptor,
}

impl fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerTls")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl ListenerTls {
    /// Reads `files` and builds the acceptor: TLS 1.2 and 1.3, no client certificates, ALPN
    /// `h2` then `http/1.1` (a client that offers no ALPN speaks HTTP/1.1).
    pub fn load(files: PemPair) -> Result<ListenerTls, ConfigError> {
        let cert = Arc::new(ReloadableCert::load(files)?);
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| {
                ConfigError::new("GW-CFG-013", "gateway.tls-cert", "", &error.to_string())
            })?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&cert) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ListenerTls {
            cert,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The certificate, to reload or replace ([`ReloadableCert::reload`]).
    pub fn cert(&self) -> &Arc<ReloadableCert> {
        &self.cert
    }

    /// The acceptor (the handshake of each connection).
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }

    /// Reads the certificate files again (see [`ReloadableCert::reload`]).
    pub fn reload(&self) -> Result<(), ConfigError> {
        self.cert.reload()
    }
}
