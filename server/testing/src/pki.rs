//! Throwaway TLS material for a peer that demands client certificates (etcd with
//! `--client-cert-auth`, the node agent's kubelet port).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// PEM files written into a directory: a CA, a server certificate (for 127.0.0.1/localhost unless
/// named otherwise) and a client certificate, all signed by the CA.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TlsFiles {
    /// kube-apiserver's flags for reaching kubelets with this material: the client certificate
    /// and the CA of their serving certificates.
    pub fn kubelet_client_flags(&self) -> Vec<String> {
        vec![
            format!(
                "--kubelet-client-certificate={}",
                self.client_cert.display()
            ),
            format!("--kubelet-client-key={}", self.client_key.display()),
            format!("--kubelet-certificate-authority={}", self.ca.display()),
        ]
    }

    /// kubelet's serving flags with this material: the server certificate, and the CA of the
    /// client certificates it accepts.
    pub fn kubelet_serving_flags(&self) -> Vec<String> {
        vec![
            format!("--tls-cert-file={}", self.server_cert.display()),
            format!("--tls-private-key-file={}", self.server_key.display()),
            format!("--client-ca-file={}", self.ca.display()),
        ]
    }
}

pub fn write_tls_files(dir: &Path) -> TlsFiles {
    write_tls_files_for(dir, &["127.0.0.1", "localhost"])
}

/// Like [`write_tls_files`], with a server certificate for `server_names` (addresses or names).
pub fn write_tls_files_for(dir: &Path, server_names: &[&str]) -> TlsFiles {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kcp-testing CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();

    let leaf = |sans: Vec<String>, name: &str, usage: ExtendedKeyUsagePurpose| {
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let server = leaf(
        server_names.iter().map(|name| (*name).to_owned()).collect(),
        "server",
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let client = leaf(Vec::new(), "kcp", ExtendedKeyUsagePurpose::ClientAuth);

    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    TlsFiles {
        ca: write("ca.pem", &ca.pem()),
        server_cert: write("server.pem", &server.0),
        server_key: write("server-key.pem", &server.1),
        client_cert: write("client.pem", &client.0),
        client_key: write("client-key.pem", &client.1),
    }
}
