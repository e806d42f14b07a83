//! File paths inside the containers, the same ones upstream kcp-operator mounts so that the
//! upstream kcp image and this project's server read the same flags.

pub const ROOT_CA_DIR: &str = "/etc/kcp/tls/ca/root";
pub const SERVER_CA_DIR: &str = "/etc/kcp/tls/ca/server";
pub const CLIENT_CA_DIR: &str = "/etc/kcp/tls/ca/client";
pub const SERVICE_ACCOUNT_CA_DIR: &str = "/etc/kcp/tls/ca/service-account";
pub const REQUESTHEADER_CLIENT_CA_DIR: &str = "/etc/kcp/tls/ca/requestheader-client";
pub const CA_BUNDLE_DIR: &str = "/etc/kcp/tls/ca/ca-bundle";
pub const SERVER_CERT_DIR: &str = "/etc/kcp/tls/server";
pub const SERVICE_ACCOUNT_CERT_DIR: &str = "/etc/kcp/tls/service-account";
pub const CLIENT_CERT_DIR: &str = "/etc/kcp/tls/client";
pub const MOUNTS_PROXY_CERT_DIR: &str = "/etc/kcp/tls/mounts-proxy";
pub const LOGICAL_CLUSTER_ADMIN_CERT_DIR: &str = "/etc/kcp/tls/logical-cluster-admin";
pub const EXTERNAL_LOGICAL_CLUSTER_ADMIN_CERT_DIR: &str =
    "/etc/kcp/tls/external-logical-cluster-admin";
pub const LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR: &str = "/etc/kcp/logical-cluster-admin-kubeconfig";
pub const EXTERNAL_LOGICAL_CLUSTER_ADMIN_KUBECONFIG_DIR: &str =
    "/etc/kcp/external-logical-cluster-admin-kubeconfig";
pub const CLIENT_KUBECONFIG_DIR: &str = "/etc/kcp/client-kubeconfig";
pub const ETCD_CLIENT_CERT_DIR: &str = "/etc/etcd/tls";
pub const CACHE_KUBECONFIG_DIR: &str = "/etc/cache-server/kubeconfig";
pub const CACHE_CA_DIR: &str = "/etc/cache-server/tls/ca/root";
pub const CACHE_CLIENT_CERT_DIR: &str = "/etc/cache-server/tls/client-certificate";
pub const CACHE_SERVER_CERT_DIR: &str = "/etc/cache-server/tls/server";
pub const CACHE_ETCD_CERT_DIR: &str = "/etc/cache-server/etcd";
pub const CACHE_EMBEDDED_ETCD_DIR: &str = "/var/etcd";
pub const FRONT_PROXY_KUBECONFIG_DIR: &str = "/etc/kcp-front-proxy/kubeconfig";
pub const FRONT_PROXY_CLIENT_CERT_DIR: &str = "/etc/kcp-front-proxy/kubeconfig-client-cert";
pub const FRONT_PROXY_SERVER_CERT_DIR: &str = "/etc/kcp-front-proxy/tls";
pub const FRONT_PROXY_REQUESTHEADER_CERT_DIR: &str = "/etc/kcp-front-proxy/requestheader-client";
pub const FRONT_PROXY_CLIENT_CA_DIR: &str = "/etc/kcp-front-proxy/client-ca";
pub const FRONT_PROXY_CONFIG_DIR: &str = "/etc/kcp-front-proxy/config";
pub const FRONT_PROXY_ROOT_CA_DIR: &str = "/etc/kcp/tls/ca";
pub const AUDIT_POLICY_DIR: &str = "/etc/kcp/audit/policy";
pub const AUDIT_WEBHOOK_DIR: &str = "/etc/kcp/audit/webhook";
pub const AUTHORIZATION_WEBHOOK_DIR: &str = "/etc/kcp/authorization/webhook";
pub const AUTHENTICATION_WEBHOOK_DIR: &str = "/etc/kcp/authentication/webhook";
pub const TOKEN_AUTH_DIR: &str = "/etc/kcp/authentication/token";
pub const OIDC_CA_DIR: &str = "/etc/kcp/tls/oidc";
pub const ETCD_DATA_DIR: &str = "/var/lib/etcd";
pub const ETCD_SERVER_CERT_DIR: &str = "/etc/etcd/pki/server";
pub const ETCD_PEER_CERT_DIR: &str = "/etc/etcd/pki/peer";

pub const KUBECONFIG_FILE: &str = "kubeconfig";
pub const PATH_MAPPING_FILE: &str = "path-mapping.yaml";

/// `<dir>/<file>`.
pub fn file(dir: &str, name: &str) -> String {
    format!("{dir}/{name}")
}
