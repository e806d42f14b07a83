//! Builder tests from inline YAML custom resources: the flags, mounts, SANs, ports and labels
//! that matter to kcp, asserted one concern at a time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_operator::api::{CacheServer, FrontProxy, RootShard, Shard};
use kcp_operator::naming::Certificate;
use kcp_operator::pki::catalog;
use kcp_operator::render::children::{self, Child};
use kcp_operator::render::{config_map, deployment, service};
use kcp_operator::validate::{self, Error};

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    yaml_serde::from_str(yaml).expect("test CR parses")
}

fn root(extra_spec: &str) -> RootShard {
    parse(&format!(
        r#"
apiVersion: operator.kcp.io/v1alpha1
kind: RootShard
metadata: {{name: root, namespace: kcp, uid: u1}}
spec:
  external: {{hostname: kcp.example.com, port: 6443}}
  etcd: {{endpoints: ["http://etcd:2379"]}}
{extra_spec}"#
    ))
}

fn args_of(deployment: &k8s_openapi::api::apps::v1::Deployment) -> Vec<String> {
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec");
    pod.containers[0].args.clone().unwrap_or_default()
}

#[test]
fn root_shard_uses_its_service_url_and_honours_the_cluster_domain() {
    let config = validate::root_shard(&root("  clusterDomain: corp.internal\n")).expect("valid");
    let args = args_of(&deployment::server_deployment(&config, "r"));
    assert!(args.contains(
        &"--shard-base-url=https://root-rootshard.kcp.svc.corp.internal:6443".to_owned()
    ));
    assert!(args.contains(&"--shard-external-url=https://kcp.example.com:6443".to_owned()));
    assert!(
        !args.iter().any(|arg| arg.starts_with("--shard-name")),
        "the root shard has no shard name"
    );
    assert!(args.contains(&"--etcd-servers=http://etcd:2379".to_owned()));
}

#[test]
fn extra_args_come_last_so_they_override_generated_flags() {
    let config = validate::root_shard(&root("  extraArgs: [\"--enable-leader-election=false\"]\n"))
        .expect("valid");
    let args = args_of(&deployment::server_deployment(&config, "r"));
    assert_eq!(
        args.last().map(String::as_str),
        Some("--enable-leader-election=false")
    );
}

#[test]
fn server_certificate_names_service_external_host_and_base_url_host() {
    let config = validate::root_shard(&root(
        "  shardBaseURL: https://root.internal.example:6443\n",
    ))
    .expect("valid");
    let certificates = catalog::root_shard(&config).expect("catalog");
    let server = certificates
        .iter()
        .find(|c| c.certificate == Certificate::Server)
        .expect("server cert");
    for name in [
        "root-rootshard.kcp.svc.cluster.local",
        "kcp.example.com",
        "root.internal.example",
        "localhost",
    ] {
        assert!(
            server.request.dns_names.contains(&name.to_owned()),
            "{name} missing from {:?}",
            server.request.dns_names
        );
    }
    let admin = certificates
        .iter()
        .find(|c| c.certificate == Certificate::LogicalClusterAdmin)
        .expect("admin cert");
    assert_eq!(admin.request.common_name, "logical-cluster-admin");
    // Upstream's group alone: the server's bootstrap policy binds it (docs/operator.md).
    assert_eq!(
        admin.request.organizations,
        vec!["system:kcp:logical-cluster-admin"]
    );
}

#[test]
fn certificate_templates_add_names_and_set_lifetimes() {
    let config = validate::root_shard(&root(
        "  certificateTemplates:\n    server:\n      spec:\n        dnsNames: [extra.example]\n        ipAddresses: [\"10.0.0.1\"]\n        duration: 2160h\n",
    ))
    .expect("valid");
    let certificates = catalog::root_shard(&config).expect("catalog");
    let server = certificates
        .iter()
        .find(|c| c.certificate == Certificate::Server)
        .expect("server cert");
    assert!(
        server
            .request
            .dns_names
            .contains(&"extra.example".to_owned())
    );
    assert_eq!(
        server.request.ip_addresses,
        vec!["10.0.0.1".parse::<std::net::IpAddr>().expect("ip")]
    );
    assert_eq!(
        server.request.validity,
        std::time::Duration::from_secs(2160 * 3600)
    );
}

#[test]
fn a_brought_ca_is_mounted_under_its_own_name_and_never_generated() {
    let config = validate::root_shard(&root(
        "  certificates:\n    caSecretRef: {name: my-company-ca}\n",
    ))
    .expect("valid");
    let certificates = catalog::root_shard(&config).expect("catalog");
    assert!(
        certificates
            .iter()
            .all(|c| c.certificate != Certificate::RootCa)
    );
    let fragment = deployment::server_fragment(&config);
    let kcp_ca = fragment
        .mounts
        .iter()
        .find(|m| m.volume == "kcp-ca")
        .expect("root CA mount");
    assert_eq!(kcp_ca.source_name(), Some("my-company-ca"));
}

#[test]
fn shard_registers_with_the_root_and_uses_its_cas() {
    let shard: Shard = parse(
        r#"
metadata: {name: beta, namespace: kcp, uid: u2}
spec:
  rootShard: {ref: {name: root}}
  etcd: {managed: {replicas: 3}}
"#,
    );
    let config = validate::shard(&shard, Some(&root(""))).expect("valid");
    let fragment = deployment::server_fragment(&config);
    assert!(fragment.args.contains(&"--shard-name=beta".to_owned()));
    assert!(
        fragment
            .args
            .contains(&"--external-hostname=kcp.example.com".to_owned())
    );
    assert!(
        fragment
            .args
            .contains(&"--cache-kubeconfig=/etc/kcp/client-kubeconfig/kubeconfig".to_owned())
    );
    let etcd_servers = fragment
        .args
        .iter()
        .find(|a| a.starts_with("--etcd-servers="))
        .expect("etcd flag");
    assert_eq!(etcd_servers.matches("https://beta-shard-etcd-").count(), 3);
    let server_ca = fragment
        .mounts
        .iter()
        .find(|m| m.volume == "server-ca")
        .expect("server CA mount");
    assert_eq!(server_ca.source_name(), Some("root-rootshard-server-ca"));
    let etcd_cert = fragment
        .mounts
        .iter()
        .find(|m| m.volume == "etcd-client-cert")
        .expect("etcd client mount");
    assert_eq!(etcd_cert.source_name(), Some("beta-shard-etcd-client"));
}

/// Upstream kcp-operator#165 (shards silently used the root shard's cache) and #205 (a
/// CacheServer effectively mandatory): each combination gets the cache it names. A Shard uses
/// its own `cache.ref`, else its RootShard's CacheServer, else the root shard's embedded cache.
#[test]
fn every_cache_combination_reaches_the_cache_it_names() {
    let shard_with = |cache: &str| -> Shard {
        parse(&format!(
            "metadata: {{name: beta, namespace: kcp, uid: u2}}\nspec:\n  rootShard: {{ref: {{name: root}}}}\n  etcd: {{endpoints: [\"http://e:2379\"]}}\n{cache}"
        ))
    };
    let cache_of = |config: &validate::ServerConfig| {
        let fragment = deployment::server_fragment(config);
        let flag = fragment
            .args
            .iter()
            .find(|a| a.starts_with("--cache-kubeconfig="))
            .cloned();
        let mount = fragment
            .mounts
            .iter()
            .find(|m| m.volume == "cache-server-kubeconfig")
            .and_then(|m| m.source_name().map(str::to_owned));
        (flag, mount)
    };
    let own_cache = "--cache-kubeconfig=/etc/cache-server/kubeconfig/kubeconfig".to_owned();
    let root_kubeconfig = "--cache-kubeconfig=/etc/kcp/client-kubeconfig/kubeconfig".to_owned();
    let with_cache_server = root("  cache: {ref: {name: c}}\n");
    let embedded = root("");
    let cases = [
        (
            "root with a CacheServer",
            validate::root_shard(&with_cache_server).expect("valid"),
            (
                Some(own_cache.clone()),
                Some("c-cacheserver-client-kubeconfig"),
            ),
        ),
        (
            "root with its embedded cache",
            validate::root_shard(&embedded).expect("valid"),
            (None, None),
        ),
        (
            "shard of a root with a CacheServer",
            validate::shard(&shard_with(""), Some(&with_cache_server)).expect("valid"),
            (
                Some(own_cache.clone()),
                Some("c-cacheserver-client-kubeconfig"),
            ),
        ),
        (
            "shard of a root with its embedded cache",
            validate::shard(&shard_with(""), Some(&embedded)).expect("valid"),
            (Some(root_kubeconfig), None),
        ),
        (
            "shard with its own cache.ref",
            validate::shard(
                &shard_with("  cache: {ref: {name: d}}\n"),
                Some(&with_cache_server),
            )
            .expect("valid"),
            (Some(own_cache), Some("d-cacheserver-client-kubeconfig")),
        ),
    ];
    for (case, config, (flag, mount)) in cases {
        assert_eq!(
            cache_of(&config),
            (flag, mount.map(str::to_owned)),
            "{case}"
        );
    }
}

#[test]
fn shard_without_its_root_shard_is_a_reference_error() {
    let shard: Shard = parse(
        "metadata: {name: beta, namespace: kcp, uid: u2}\nspec:\n  rootShard: {ref: {name: gone}}\n  etcd: {endpoints: [\"http://e:2379\"]}\n",
    );
    let error = validate::shard(&shard, None).expect_err("missing root");
    assert_eq!(
        error,
        Error::ReferenceNotFound {
            kind: "RootShard",
            name: "gone".into()
        }
    );
    assert_eq!(error.reason(), "ReferenceNotFound");
}

#[test]
fn etcd_needs_exactly_one_source() {
    let mut both = root("");
    both.spec.common.etcd.managed = Some(Default::default());
    assert_eq!(
        validate::root_shard(&both).expect_err("ambiguous"),
        Error::AmbiguousEtcd
    );
}

#[test]
fn front_proxy_drops_each_group_in_its_own_flag_and_serves_the_external_port() {
    let proxy: FrontProxy = parse(
        r#"
metadata: {name: edge, namespace: kcp, uid: u3}
spec:
  rootShard: {ref: {name: root}}
  external: {hostname: edge.example.com, port: 8443}
  auth: {dropGroups: ["system:masters", "system:kcp:admin"]}
"#,
    );
    let config = validate::front_proxy(&proxy, Some(&root("  clusterDomain: corp.internal\n")))
        .expect("valid");
    let args = args_of(&deployment::front_proxy_deployment(&config, "r"));
    assert!(args.contains(&"--authentication-drop-groups=system:masters".to_owned()));
    assert!(args.contains(&"--authentication-drop-groups=system:kcp:admin".to_owned()));
    let service = service::front_proxy_service(&config);
    let port = &service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .expect("ports")[0];
    assert_eq!(port.port, 8443);
    let certificates = catalog::front_proxy(&config).expect("catalog");
    let server = certificates
        .iter()
        .find(|c| c.certificate == Certificate::Server)
        .expect("server cert");
    assert!(
        server
            .request
            .dns_names
            .contains(&"edge-frontproxy.kcp.svc.corp.internal".to_owned()),
        "clusterDomain honoured"
    );
    assert!(
        server
            .request
            .dns_names
            .contains(&"edge.example.com".to_owned())
    );
    let mappings = config_map::path_mappings(&config);
    assert_eq!(mappings[0].path, "/clusters/");
    assert_eq!(
        mappings[0].backend,
        "https://root-rootshard.kcp.svc.corp.internal:6443"
    );
}

#[test]
fn labels_select_only_the_component_instance() {
    let config = validate::root_shard(&root("")).expect("valid");
    let rendered = deployment::server_deployment(&config, "r");
    let selector = rendered
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .expect("selector");
    assert_eq!(
        selector
            .get("app.kubernetes.io/component")
            .map(String::as_str),
        Some("rootshard")
    );
    assert_eq!(
        selector
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("root")
    );
    let template_labels = rendered
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    assert!(
        template_labels
            .expect("labels")
            .contains_key("app.kubernetes.io/version")
    );
}

#[test]
fn single_replica_gets_no_anti_affinity_and_embedded_cache_stays_single() {
    let cache: CacheServer = parse("metadata: {name: c, namespace: kcp, uid: u4}\nspec: {}\n");
    let config = validate::cache_server(&cache).expect("valid");
    assert_eq!(config.replicas, 1);
    let rendered = deployment::cache_server_deployment(&config, "r");
    let pod = rendered.spec.and_then(|s| s.template.spec).expect("pod");
    assert!(pod.affinity.is_none());
    assert!(
        pod.containers[0]
            .args
            .clone()
            .unwrap_or_default()
            .contains(&"--embedded-etcd-directory=/var/etcd".to_owned())
    );
    let too_many: CacheServer =
        parse("metadata: {name: c, namespace: kcp, uid: u4}\nspec: {replicas: 2}\n");
    assert_eq!(
        validate::cache_server(&too_many).expect_err("embedded"),
        Error::EmbeddedCacheReplicas(2)
    );
}

#[test]
fn pod_template_keeps_image_pull_secrets_when_adding_host_aliases() {
    let config = validate::root_shard(&root(
        "  image: {imagePullSecrets: [{name: regcred}]}\n  deploymentTemplate:\n    spec:\n      template:\n        spec:\n          hostAliases: [{ip: 10.0.0.2, hostnames: [etcd]}]\n",
    ))
    .expect("valid");
    let pod = deployment::server_deployment(&config, "r")
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod");
    assert_eq!(pod.image_pull_secrets.expect("kept")[0].name, "regcred");
    assert!(pod.host_aliases.is_some());
}

/// The budgets of `children`: (maxUnavailable, selector labels) of each.
fn budgets(children: &[Child]) -> Vec<(String, String)> {
    children
        .iter()
        .filter_map(|child| match child {
            Child::PodDisruptionBudget(pdb) => {
                let spec = pdb.spec.clone().expect("spec");
                Some((
                    format!("{:?}", spec.max_unavailable),
                    format!("{:?}", spec.selector.and_then(|s| s.match_labels)),
                ))
            }
            _ => None,
        })
        .collect()
}

/// The pod labels of the Deployment among `children`.
fn deployment_labels(children: &[Child]) -> String {
    children
        .iter()
        .find_map(|child| match child {
            Child::Deployment(deployment) => Some(format!(
                "{:?}",
                deployment.spec.clone().expect("spec").selector.match_labels
            )),
            _ => None,
        })
        .expect("a Deployment")
}

/// Upstream kcp-operator#176 (no disruption budget): every kind with more than one replica gets
/// a PodDisruptionBudget of `maxUnavailable: 1` over its own pods, and none with one replica
/// (a budget would block every drain).
#[test]
fn a_disruption_budget_exactly_when_there_is_more_than_one_replica() {
    for replicas in [1, 2, 3] {
        let line = format!("  replicas: {replicas}\n");
        let root_config = validate::root_shard(&root(&line)).expect("valid");
        let shard: Shard = parse(&format!(
            "metadata: {{name: beta, namespace: kcp, uid: u2}}\nspec:\n  rootShard: {{ref: {{name: root}}}}\n  etcd: {{endpoints: [\"http://e:2379\"]}}\n{line}"
        ));
        let proxy: FrontProxy = parse(&format!(
            "metadata: {{name: edge, namespace: kcp, uid: u3}}\nspec:\n  rootShard: {{ref: {{name: root}}}}\n{line}"
        ));
        let cache: CacheServer = parse(&format!(
            "metadata: {{name: c, namespace: kcp, uid: u4}}\nspec:\n  etcd: {{endpoints: [\"http://e:2379\"]}}\n{line}"
        ));
        let rendered = [
            (
                "RootShard",
                children::server(&root_config, "r").expect("rendered"),
            ),
            (
                "Shard",
                children::server(
                    &validate::shard(&shard, Some(&root(""))).expect("valid"),
                    "r",
                )
                .expect("rendered"),
            ),
            (
                "FrontProxy",
                children::front_proxy(
                    &validate::front_proxy(&proxy, Some(&root(""))).expect("valid"),
                    "r",
                )
                .expect("rendered"),
            ),
            (
                "CacheServer",
                children::cache_server(&validate::cache_server(&cache).expect("valid"), "r")
                    .expect("rendered"),
            ),
        ];
        for (kind, children) in rendered {
            let budgets = budgets(&children);
            if replicas == 1 {
                assert!(budgets.is_empty(), "{kind} of one replica: {budgets:?}");
            } else {
                assert_eq!(
                    budgets,
                    [("Some(Int(1))".to_owned(), deployment_labels(&children))],
                    "{kind} of {replicas} replicas"
                );
            }
        }
    }
}
