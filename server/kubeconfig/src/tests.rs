//! The model against the files kubectl, `kcp start` and the operator write, and kubectl's rules
//! for finding the file and reading certificate material.

use super::*;

const CONFIG: &str = r#"
apiVersion: v1
kind: Config
preferences: {colors: true}
extensions:
- name: my-extension
  extension: {answer: 42}
clusters:
- name: base
  cluster:
    server: https://kcp.example:6443/clusters/root:org
    certificate-authority-data: Q0E=
    tls-server-name: kcp.example
    proxy-url: http://proxy:3128
contexts:
- name: admin
  context: {cluster: base, user: admin, namespace: ns1}
- name: lonely
  context: {cluster: nowhere}
current-context: admin
users:
- name: admin
  user: {token: secret, exec: {command: foo}}
"#;

#[test]
fn reads_and_writes_back_what_it_does_not_model() {
    let config = Kubeconfig::from_yaml(CONFIG).unwrap();
    assert_eq!(config.current_context, "admin");
    assert_eq!(config.other["preferences"]["colors"], Value::Bool(true));
    let cluster = config.cluster("base").unwrap();
    assert_eq!(cluster.tls_server_name.as_deref(), Some("kcp.example"));
    assert_eq!(cluster.other["proxy-url"], "http://proxy:3128");
    assert_eq!(
        config.user("admin").unwrap().token.as_deref(),
        Some("secret")
    );

    let again = Kubeconfig::from_yaml(&config.to_yaml().unwrap()).unwrap();
    assert_eq!(again, config);
    assert_eq!(again.other["extensions"][0]["extension"]["answer"], 42);
    assert_eq!(again.user("admin").unwrap().other["exec"]["command"], "foo");
}

#[test]
fn empty_documents_and_null_lists_are_empty_configs() {
    assert_eq!(Kubeconfig::from_yaml("").unwrap(), Kubeconfig::default());
    assert_eq!(
        Kubeconfig::from_yaml("# nothing yet\n").unwrap(),
        Kubeconfig::default()
    );
    let nulls = Kubeconfig::from_yaml(
        "apiVersion: v1\nclusters: null\ncontexts: null\nusers: null\ncurrent-context: \"\"\n",
    )
    .unwrap();
    assert!(nulls.clusters.is_empty() && nulls.contexts.is_empty() && nulls.users.is_empty());
    assert!(matches!(
        Kubeconfig::from_yaml("[1, 2]"),
        Err(KubeconfigError::Parse(_))
    ));
}

#[test]
fn select_resolves_context_cluster_and_user() {
    let config = Kubeconfig::from_yaml(CONFIG).unwrap();
    let selected = config.select(None).unwrap();
    assert_eq!(selected.context_name, "admin");
    assert_eq!(selected.cluster_name, "base");
    assert_eq!(
        selected.server(),
        "https://kcp.example:6443/clusters/root:org"
    );
    assert_eq!(selected.context.namespace.as_deref(), Some("ns1"));
    assert_eq!(selected.user.token.as_deref(), Some("secret"));
    assert_eq!(
        config.select(Some("nope")),
        Err(SelectError::UnknownContext("nope".into()))
    );
    assert_eq!(
        config.select(Some("lonely")),
        Err(SelectError::UnknownCluster("nowhere".into()))
    );
    assert_eq!(Kubeconfig::new().select(None), Err(SelectError::NoContext));
}

#[test]
fn set_replaces_by_name_or_appends() {
    let mut config = Kubeconfig::from_yaml(CONFIG).unwrap();
    let mut cluster = config.cluster("base").unwrap().clone();
    cluster.server = "https://other".into();
    config.set_cluster("base", cluster.clone());
    config.set_cluster("new", cluster);
    assert_eq!(config.clusters.len(), 2);
    assert_eq!(config.cluster("base").unwrap().server, "https://other");
    config.set_context("admin", Context::default());
    config.set_context("x", Context::default());
    config.set_user("admin", User::default());
    config.set_user("y", User::default());
    assert_eq!(config.contexts.len(), 3);
    assert_eq!(config.users.len(), 2);
    assert_eq!(config.user("admin"), Some(&User::default()));
}

/// The operator's kubeconfig Secrets keep their bytes: a changed Secret restarts components.
#[test]
fn writes_fields_in_the_operators_order() {
    let mut config = Kubeconfig::new();
    config.set_cluster(
        "cache",
        Cluster {
            server: "https://cache:6443".into(),
            certificate_authority: Some("/etc/ca/tls.crt".into()),
            ..Cluster::default()
        },
    );
    config.set_user(
        "cache",
        User {
            client_certificate: Some("/etc/c/tls.crt".into()),
            client_key: Some("/etc/c/tls.key".into()),
            ..User::default()
        },
    );
    config.set_context(
        "cache",
        Context {
            cluster: "cache".into(),
            user: "cache".into(),
            ..Context::default()
        },
    );
    config.current_context = "cache".into();
    assert_eq!(
        config.to_yaml().unwrap(),
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cache\n  cluster:\n    server: https://cache:6443\n    certificate-authority: /etc/ca/tls.crt\nusers:\n- name: cache\n  user:\n    client-certificate: /etc/c/tls.crt\n    client-key: /etc/c/tls.key\ncontexts:\n- name: cache\n  context:\n    cluster: cache\n    user: cache\ncurrent-context: cache\n"
    );
}

#[test]
fn locate_prefers_flag_then_env_then_home() {
    let home = Path::new("/home/u");
    let flag = locate(Some(Path::new("/x")), Some("/a:/b"), Some(home));
    assert_eq!(flag, Some(PathBuf::from("/x")));
    let env = locate(None, Some(":/a:/b"), Some(home));
    assert_eq!(env, Some(PathBuf::from("/a")));
    let default = locate(None, Some(""), Some(home));
    assert_eq!(default, Some(PathBuf::from("/home/u/.kube/config")));
    assert_eq!(locate(Some(Path::new("")), None, None), None);
}

#[test]
fn material_is_embedded_or_a_file_relative_to_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.crt"), "FILE CA").unwrap();
    let kubeconfig = dir.path().join("config");
    let config = Kubeconfig::from_yaml(
        "clusters:\n- name: c\n  cluster:\n    server: https://localhost\n    certificate-authority: ca.crt\n- name: d\n  cluster:\n    certificate-authority: ca.crt\n    certificate-authority-data: Q0E=\n",
    )
    .unwrap();
    let base = dir_of(&kubeconfig);
    assert_eq!(
        config.cluster("c").unwrap().ca_pem(base).unwrap(),
        Some(b"FILE CA".to_vec())
    );
    assert_eq!(
        config.cluster("d").unwrap().ca_pem(base).unwrap(),
        Some(b"CA".to_vec())
    );
    assert_eq!(User::default().client_key_pem(base).unwrap(), None);
    let absolute = dir.path().join("ca.crt");
    assert_eq!(
        material("x", None, absolute.to_str(), Path::new("/elsewhere")).unwrap(),
        Some(b"FILE CA".to_vec())
    );
    assert!(matches!(
        material("client-key-data", Some("!!"), None, base),
        Err(KubeconfigError::Base64 {
            field: "client-key-data",
            ..
        })
    ));
    assert!(matches!(
        material("x", None, Some("missing"), base),
        Err(KubeconfigError::Read { .. })
    ));
    assert_eq!(dir_of(Path::new("config")), Path::new(""));
}
