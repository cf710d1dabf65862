//! `rediss://` (feature `tls`): the TLS provider, the fleet's own CA file, and what a failed handshake means.

use std::path::Path;

use crate::error::{Code, FleetError};

/// Installs rustls's `ring` provider as the process's default when none is installed yet: the
/// Redis client builds its TLS settings with the default provider, and finds none when the
/// application compiled in no provider of its own, or two.
pub(crate) fn install_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one meanwhile: then that one is used, as it should be.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The PEM bytes of the CA file at `path`, checked to hold at least one certificate
/// (`FLEET-CFG-005` otherwise, naming the path).
pub(crate) fn read_ca(path: &Path) -> Result<Vec<u8>, FleetError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let bad = |what: String| {
        FleetError::with_code(
            Code::CaFile,
            format!("tls_ca_file = {}: {what}", path.display()),
        )
    };
    let pem = std::fs::read(path).map_err(|error| bad(format!("cannot be read: {error}")))?;
    let mut certificates = 0;
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        certificate.map_err(|error| bad(format!("not a PEM certificate: {error}")))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err(bad(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned(),
        ));
    }
    Ok(pem)
}

/// The error of a connect over TLS that failed in its handshake (`FLEET-RUN-009`, saying
/// why: a certificate no root signs, one that does not name the host, a server that does not
/// speak TLS on that port), or `None` when the failure is not the handshake's.
pub(crate) fn handshake_failure(error: &redis::RedisError, addr: &str) -> Option<FleetError> {
    let failure = rustls_error(error)
        .map(|error| {
            use rustls::{CertificateError as C, Error as E};
            let why = match error {
                E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
                    "the server's certificate is signed by no trusted root: give its CA with \
                     tls_ca_file (a private CA is not in the system's roots)"
                }
                E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                    "the server's certificate does not name the URL's host"
                }
                E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
                    "the server's certificate has expired"
                }
                E::InvalidCertificate(_) => "the server's certificate is not valid",
                E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
                    "the server does not speak TLS on this port (a plain redis:// port?)"
                }
                E::AlertReceived(_) => {
                    "the server refused the handshake (does it ask for a client certificate?)"
                }
                _ => "the handshake failed",
            };
            format!("{why} ({error})")
        })
        .or_else(|| {
            closed_in_handshake(error).then(|| {
                "the server closed the connection during the handshake: it does not speak \
                 TLS on this port (a plain redis:// port?)"
                    .to_owned()
            })
        })?;
    Some(FleetError::with_code(
        Code::Tls,
        format!("TLS with {addr}: {failure}"),
    ))
}

/// The errors in `error`'s chain, the ones the client and the I/O errors wrap included
/// (`io::Error::source` skips the error it wraps, and the client keeps its cause behind an
/// `Arc`, which a downcast does not see through).
fn chain(error: &redis::RedisError) -> Vec<&(dyn std::error::Error + 'static)> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut found: Vec<&(dyn std::error::Error + 'static)> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    // Bounded: a chain is a few errors long.
    while let Some(error) = next.take() {
        if found.len() >= 16 {
            break;
        }
        found.push(error);
        if let Some(shared) = error.downcast_ref::<Shared>() {
            next = Some(shared.as_ref());
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            next = io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static));
        } else {
            next = error.source();
        }
    }
    found
}

/// The rustls error in `error`'s chain (the TLS stream hands it over inside an I/O error).
fn rustls_error(error: &redis::RedisError) -> Option<&rustls::Error> {
    chain(error)
        .into_iter()
        .find_map(|error| error.downcast_ref::<rustls::Error>())
}

/// Whether the server closed the connection before the handshake ended (a plain Redis port
/// answers the `ClientHello` with an error and closes it).
fn closed_in_handshake(error: &redis::RedisError) -> bool {
    chain(error).into_iter().any(|error| {
        error.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            )
        })
    })
}
