//! Certificates made at test time with rcgen: a CA and a server certificate for `127.0.0.1`
//! and `localhost` signed by it, as PEM files, for `redis-server --tls-port`.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use super::free_port;

/// The test's CA and the server's certificate and key, as PEM files in a directory of their
/// own.
pub struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    pub fn generate(name: &str) -> Certificates {
        let dir = std::env::temp_dir().join(format!(
            "cutout-fleet-tls-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cutout-fleet test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.join("server.pem"), server.pem()).unwrap();
        std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
        Certificates { dir }
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// `redis-server`'s arguments for a TLS port with these certificates, clients not asked
    /// for a certificate.
    pub fn redis_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".to_owned(),
            tls_port.to_string(),
            "--tls-cert-file".to_owned(),
            self.path("server.pem"),
            "--tls-key-file".to_owned(),
            self.path("server.key"),
            "--tls-ca-cert-file".to_owned(),
            self.path("ca.pem"),
            "--tls-auth-clients".to_owned(),
            "no".to_owned(),
        ]
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
