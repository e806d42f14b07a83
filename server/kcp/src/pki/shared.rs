//! One PKI for several processes on one machine (`kcp sharded`), as upstream's
//! `sharded-test-server` generates one for its shards and cache server.
//!
//! Every process serves with the same certificate (signed by one server CA, for `localhost`,
//! `127.0.0.1` and `::1`) and trusts the same client CA, which also signs one admin client
//! certificate in `system:masters` (for the shards directly), one for `kcp-admin` in
//! `system:kcp:admin` (for the front-proxy, which drops `system:masters` as upstream's does) and
//! one for the workspace scheduler in `system:kcp:logical-cluster-admin` and one for the shards
//! towards the front-proxy in `system:kcp:external-logical-cluster-admin`; the
//! shards also share one service-account signing key, so they all accept the tokens any of them
//! issues (upstream's shards share theirs too). A separate request-header CA signs the
//! front-proxy's client certificate (CN `kcp-front-proxy`), the only identity the shards accept
//! `X-Remote-*` headers from. The files are kept in one directory with the names `kcp start` uses
//! for its own generated material, and they are reused on the next run under the same rules (see
//! the parent module), so kubeconfigs handed out earlier keep working after a restart.

use std::path::{Path, PathBuf};

use super::{
    ADMIN, ADMIN_FILE_STEM, AuthorityName, CLIENT_CA, ClientIdentity, LeafProfile, PemPair,
    PkiError, SERVER_CA, SERVICE_ACCOUNT_KEY_FILE, SERVING_FILE_STEM, Store, loopback_names,
};

/// The front-proxy's identity towards the shards (their `--requestheader-allowed-names`).
pub const FRONT_PROXY_USER: &str = "kcp-front-proxy";

/// Signs the front-proxy's client certificate; the shards' `--requestheader-client-ca-file`.
const REQUEST_HEADER_CA: AuthorityName = AuthorityName {
    file_stem: "requestheader-client-ca",
    common_name: "kcp-requestheader-client-ca",
};
const FRONT_PROXY_FILE_STEM: &str = "front-proxy-client";
const FRONT_PROXY: ClientIdentity = ClientIdentity {
    user: FRONT_PROXY_USER,
    groups: &[],
    what: "front-proxy client certificate",
};

/// The admin through the front-proxy: upstream's `kcp-admin` in `system:kcp:admin`, which is
/// bound to `cluster-admin` in every workspace.
const KCP_ADMIN_FILE_STEM: &str = "kcp-admin";
const KCP_ADMIN: ClientIdentity = ClientIdentity {
    user: "kcp-admin",
    groups: &[kcp_rbac::bootstrap::KCP_ADMIN_GROUP],
    what: "kcp-admin client certificate",
};

/// Another shard's workspace scheduler (`--logical-cluster-admin-kubeconfig`): upstream's
/// `system:kcp:logical-cluster-admin`, whose bootstrap policy is all it needs.
const LOGICAL_CLUSTER_ADMIN_FILE_STEM: &str = "logical-cluster-admin";
const LOGICAL_CLUSTER_ADMIN: ClientIdentity = ClientIdentity {
    user: "logical-cluster-admin",
    groups: &[kcp_rbac::bootstrap::LOGICAL_CLUSTER_ADMIN],
    what: "logical-cluster-admin client certificate",
};

/// The shards through the front-proxy (`--external-logical-cluster-admin-kubeconfig`):
/// upstream's `system:kcp:external-logical-cluster-admin`, which the proxy passes on and whose
/// bootstrap policy lets it read service accounts and their token secrets in every workspace.
const EXTERNAL_LOGICAL_CLUSTER_ADMIN_FILE_STEM: &str = "external-logical-cluster-admin";
const EXTERNAL_LOGICAL_CLUSTER_ADMIN: ClientIdentity = ClientIdentity {
    user: "external-logical-cluster-admin",
    groups: &[kcp_rbac::bootstrap::EXTERNAL_LOGICAL_CLUSTER_ADMIN],
    what: "external-logical-cluster-admin client certificate",
};

/// Where the shared PKI's files are (the directory's layout, known before anything is generated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPkiFiles {
    /// The CA clients trust for every process (`ca.crt`).
    pub server_ca: PathBuf,
    /// The serving certificate and key every process uses (`apiserver.crt`, `apiserver.key`).
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The CA every process verifies client certificates against (`client-ca.crt`).
    pub client_ca: PathBuf,
    /// The key service-account tokens are signed and verified with (`sa.key`).
    pub service_account_key: PathBuf,
    /// The CA of the front-proxy's client certificate (`requestheader-client-ca.crt`).
    pub request_header_ca: PathBuf,
    /// The front-proxy's client certificate and key towards the shards.
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
}

impl SharedPkiFiles {
    pub fn in_dir(dir: &Path) -> SharedPkiFiles {
        let (server_ca, _) = Store::paths(dir, SERVER_CA.file_stem);
        let (serving_cert, serving_key) = Store::paths(dir, SERVING_FILE_STEM);
        let (client_ca, _) = Store::paths(dir, CLIENT_CA.file_stem);
        let (request_header_ca, _) = Store::paths(dir, REQUEST_HEADER_CA.file_stem);
        let (front_proxy_client_cert, front_proxy_client_key) =
            Store::paths(dir, FRONT_PROXY_FILE_STEM);
        SharedPkiFiles {
            server_ca,
            serving_cert,
            serving_key,
            client_ca,
            service_account_key: dir.join(SERVICE_ACCOUNT_KEY_FILE),
            request_header_ca,
            front_proxy_client_cert,
            front_proxy_client_key,
        }
    }
}

/// What clients of the processes need: the CA to trust and the admin's client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPki {
    pub server_ca_pem: String,
    /// CN `shard-admin`, O `system:masters` (`admin.crt`, `admin.key`).
    pub admin: PemPair,
    /// CN `kcp-admin`, O `system:kcp:admin` (`kcp-admin.crt`, `kcp-admin.key`).
    pub kcp_admin: PemPair,
    /// CN `logical-cluster-admin`, O `system:kcp:logical-cluster-admin`
    /// (`logical-cluster-admin.crt`, `logical-cluster-admin.key`).
    pub logical_cluster_admin: PemPair,
    /// CN `external-logical-cluster-admin`, O `system:kcp:external-logical-cluster-admin`
    /// (`external-logical-cluster-admin.crt`, `.key`).
    pub external_logical_cluster_admin: PemPair,
}

/// Generates the shared PKI in `dir`, or reuses what is there and still fits.
pub fn ensure(dir: &Path) -> Result<SharedPki, PkiError> {
    let store = Store {
        dir: Some(dir.to_owned()),
    };
    let server_ca = store.authority(SERVER_CA)?;
    store.leaf(
        &server_ca,
        SERVING_FILE_STEM,
        &LeafProfile::Serving {
            names: loopback_names(),
        },
    )?;
    let client_ca = store.authority(CLIENT_CA)?;
    let admin = store.leaf(&client_ca, ADMIN_FILE_STEM, &LeafProfile::Client(ADMIN))?;
    let kcp_admin = store.leaf(
        &client_ca,
        KCP_ADMIN_FILE_STEM,
        &LeafProfile::Client(KCP_ADMIN),
    )?;
    let logical_cluster_admin = store.leaf(
        &client_ca,
        LOGICAL_CLUSTER_ADMIN_FILE_STEM,
        &LeafProfile::Client(LOGICAL_CLUSTER_ADMIN),
    )?;
    let external_logical_cluster_admin = store.leaf(
        &client_ca,
        EXTERNAL_LOGICAL_CLUSTER_ADMIN_FILE_STEM,
        &LeafProfile::Client(EXTERNAL_LOGICAL_CLUSTER_ADMIN),
    )?;
    let request_header_ca = store.authority(REQUEST_HEADER_CA)?;
    store.leaf(
        &request_header_ca,
        FRONT_PROXY_FILE_STEM,
        &LeafProfile::Client(FRONT_PROXY),
    )?;
    store.service_account_key()?;
    Ok(SharedPki {
        server_ca_pem: server_ca.cert_pem,
        admin,
        kcp_admin,
        logical_cluster_admin,
        external_logical_cluster_admin,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chain, verify_client, verify_server};
    use super::*;

    #[test]
    fn one_ca_signs_the_serving_certificate_and_the_admin_is_a_master() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ensure(dir.path()).unwrap();
        let files = SharedPkiFiles::in_dir(dir.path());
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        assert_eq!(read(&files.server_ca), pki.server_ca_pem);
        let serving = read(&files.serving_cert);
        for name in ["localhost", "127.0.0.1", "::1"] {
            verify_server(&pki.server_ca_pem, &serving, name).unwrap();
        }
        verify_client(&read(&files.client_ca), &pki.admin.cert_pem).unwrap();
        let admin_chain = chain(&pki.admin.cert_pem);
        let (_, admin) = x509_parser::parse_x509_certificate(&admin_chain[0]).unwrap();
        let groups: Vec<_> = admin
            .subject()
            .iter_organization()
            .map(|o| o.as_str().unwrap())
            .collect();
        assert_eq!(groups, ["system:masters"]);
        assert_eq!(
            read(&files.serving_key),
            read(&dir.path().join("apiserver.key"))
        );
        assert!(read(&files.service_account_key).contains("PRIVATE KEY"));
    }

    #[test]
    fn the_front_proxy_has_its_own_ca_and_neither_the_proxy_admin_nor_the_scheduler_is_a_master() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ensure(dir.path()).unwrap();
        let files = SharedPkiFiles::in_dir(dir.path());
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        let subject = |pem: &str| {
            let der = chain(pem).remove(0);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let names = |it: Vec<&str>| it.into_iter().map(str::to_owned).collect::<Vec<_>>();
            (
                names(
                    cert.subject()
                        .iter_common_name()
                        .map(|n| n.as_str().unwrap())
                        .collect(),
                ),
                names(
                    cert.subject()
                        .iter_organization()
                        .map(|o| o.as_str().unwrap())
                        .collect(),
                ),
            )
        };
        let proxy = read(&files.front_proxy_client_cert);
        verify_client(&read(&files.request_header_ca), &proxy).unwrap();
        // Signed by the request-header CA only: as a plain client it proves nothing.
        assert!(verify_client(&read(&files.client_ca), &proxy).is_err());
        assert_eq!(subject(&proxy), (vec![FRONT_PROXY_USER.to_owned()], vec![]));
        verify_client(&read(&files.client_ca), &pki.kcp_admin.cert_pem).unwrap();
        assert_eq!(
            subject(&pki.kcp_admin.cert_pem),
            (
                vec!["kcp-admin".to_owned()],
                vec!["system:kcp:admin".to_owned()]
            )
        );
        verify_client(&read(&files.client_ca), &pki.logical_cluster_admin.cert_pem).unwrap();
        assert_eq!(
            subject(&pki.logical_cluster_admin.cert_pem),
            (
                vec!["logical-cluster-admin".to_owned()],
                vec!["system:kcp:logical-cluster-admin".to_owned()]
            )
        );
        verify_client(
            &read(&files.client_ca),
            &pki.external_logical_cluster_admin.cert_pem,
        )
        .unwrap();
        assert_eq!(
            subject(&pki.external_logical_cluster_admin.cert_pem),
            (
                vec!["external-logical-cluster-admin".to_owned()],
                vec!["system:kcp:external-logical-cluster-admin".to_owned()]
            )
        );
    }

    #[test]
    fn a_second_run_reuses_everything() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure(dir.path()).unwrap();
        let files = SharedPkiFiles::in_dir(dir.path());
        let read = |path: &Path| std::fs::read_to_string(path).unwrap();
        let serving = read(&files.serving_cert);
        let service_account_key = read(&files.service_account_key);
        let second = ensure(dir.path()).unwrap();
        assert_eq!(first, second);
        assert_eq!(read(&files.serving_cert), serving);
        assert_eq!(read(&files.service_account_key), service_account_key);
    }
}
