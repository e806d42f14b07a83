//! Managed etcd objects from inline YAML custom resources: TLS for clients and peers, stable
//! member names, volumes and the membership a starting member reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::apps::v1::StatefulSet;
use kcp_operator::api::RootShard;
use kcp_operator::etcd::{self, ClusterState, Observed};
use kcp_operator::naming::Certificate;
use kcp_operator::pki::{Usage, catalog};
use kcp_operator::render::children::Child;
use kcp_operator::validate::{self, Etcd, ManagedEtcd, ServerConfig};

fn config(managed: &str) -> ServerConfig {
    let root: RootShard = yaml_serde::from_str(&format!(
        r#"
metadata: {{name: root, namespace: kcp, uid: u1}}
spec:
  external: {{hostname: kcp.example.com, port: 6443}}
  etcd:
    managed: {managed}
"#
    ))
    .expect("test CR parses");
    validate::root_shard(&root).expect("valid")
}

fn managed(config: &ServerConfig) -> &ManagedEtcd {
    match &config.etcd {
        Etcd::Managed(managed) => managed,
        other => panic!("expected a managed etcd, got {other:?}"),
    }
}

fn bootstrap(config: &ServerConfig) -> Vec<Child> {
    let fresh = Observed {
        statefulset_replicas: None,
        cluster_state: None,
        members: None,
    };
    let plan = etcd::plan(config.names(), managed(config).replicas, &fresh);
    etcd::objects::children(&config.owner, managed(config), &plan, "r")
}

fn statefulset(children: &[Child]) -> &StatefulSet {
    children
        .iter()
        .find_map(|child| match child {
            Child::StatefulSet(set) => Some(set),
            _ => None,
        })
        .expect("a StatefulSet")
}

#[test]
fn members_talk_tls_to_clients_and_peers_under_stable_names() {
    let config = config("{replicas: 3}");
    let children = bootstrap(&config);
    let set = statefulset(&children);
    let spec = set.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("root-rootshard-etcd"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    let container = &spec.template.spec.as_ref().expect("pod").containers[0];
    let args = container.args.clone().unwrap_or_default();
    for expected in [
        "--name=$(POD_NAME)",
        "--advertise-client-urls=https://$(POD_NAME).root-rootshard-etcd.kcp.svc.cluster.local:2379",
        "--initial-advertise-peer-urls=https://$(POD_NAME).root-rootshard-etcd.kcp.svc.cluster.local:2380",
        "--client-cert-auth=true",
        "--peer-client-cert-auth=true",
        "--cert-file=/etc/etcd/pki/server/tls.crt",
        "--peer-cert-file=/etc/etcd/pki/peer/tls.crt",
        "--trusted-ca-file=/etc/etcd/pki/server/ca.crt",
    ] {
        assert!(args.contains(&expected.to_owned()), "missing {expected}");
    }
    let mounts: Vec<(String, String)> = container
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.name, m.mount_path))
        .collect();
    assert!(mounts.contains(&("data".into(), "/var/lib/etcd".into())));
    let secrets: Vec<String> = spec
        .template
        .spec
        .as_ref()
        .and_then(|pod| pod.volumes.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.secret.and_then(|s| s.secret_name))
        .collect();
    assert_eq!(
        secrets,
        ["root-rootshard-etcd-server", "root-rootshard-etcd-peer"]
    );
    // The catalog issues exactly the Secrets the pods mount, with names that cover every member.
    let issued = catalog::managed_etcd(config.names());
    for secret in &secrets {
        let spec = issued.iter().find(|c| &c.secret == secret).expect("issued");
        assert!(
            spec.request
                .dns_names
                .contains(&"*.root-rootshard-etcd.kcp.svc.cluster.local".to_owned())
        );
    }
}

#[test]
fn the_headless_service_publishes_members_before_they_are_ready() {
    let children = bootstrap(&config("{replicas: 3}"));
    let service = children
        .iter()
        .find_map(|child| match child {
            Child::Service(service) => Some(service),
            _ => None,
        })
        .expect("service");
    let spec = service.spec.as_ref().expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    let ports: Vec<i32> = spec.ports.iter().flatten().map(|p| p.port).collect();
    assert_eq!(ports, [2379, 2380]);
}

#[test]
fn volumes_follow_the_storage_spec_and_go_with_removed_members() {
    let config = config("{replicas: 1, storage: {size: 20Gi, storageClassName: fast}}");
    let children = bootstrap(&config);
    let spec = statefulset(&children).spec.clone().expect("spec");
    let claim = &spec.volume_claim_templates.expect("claims")[0];
    let claim_spec = claim.spec.as_ref().expect("claim spec");
    assert_eq!(claim_spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        claim_spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.as_str()),
        Some("20Gi")
    );
    let retention = spec
        .persistent_volume_claim_retention_policy
        .expect("retention");
    assert_eq!(retention.when_scaled.as_deref(), Some("Delete"));
    assert_eq!(retention.when_deleted.as_deref(), Some("Retain"));
    assert!(
        !children
            .iter()
            .any(|child| matches!(child, Child::PodDisruptionBudget(_))),
        "one member gets no disruption budget"
    );
}

#[test]
fn a_joining_member_reads_the_grown_membership_as_an_existing_cluster() {
    let config = config("{replicas: 3}");
    let names = config.names();
    let running = Observed {
        statefulset_replicas: Some(1),
        cluster_state: Some(ClusterState::New),
        members: Some(vec![etcd::Member {
            id: 7,
            name: names.etcd_member_name(0),
            peer_urls: vec![names.etcd_peer_url(0)],
        }]),
    };
    let plan = etcd::plan(names, 3, &running);
    let map = etcd::objects::cluster_config_map(&config.owner, &plan);
    let data = map.data.expect("data");
    assert_eq!(
        data["initial-cluster"],
        "root-rootshard-etcd-0=https://root-rootshard-etcd-0.root-rootshard-etcd.kcp.svc.cluster.local:2380,\
         root-rootshard-etcd-1=https://root-rootshard-etcd-1.root-rootshard-etcd.kcp.svc.cluster.local:2380"
    );
    assert_eq!(data["initial-cluster-state"], "existing");
    let set = etcd::objects::statefulset(&config.owner, managed(&config), plan.replicas, "r");
    assert_eq!(set.spec.and_then(|s| s.replicas), Some(2));
}

/// etcd's gRPC gateway connects to its own member with the serving certificate, which the member
/// then verifies as a client certificate.
#[test]
fn the_serving_certificate_also_authenticates_the_members_own_gateway() {
    let config = config("{replicas: 1, storage: {size: 1Gi}}");
    let certificates = catalog::managed_etcd(config.names());
    for certificate in [Certificate::EtcdServer, Certificate::EtcdPeer] {
        let spec = certificates
            .iter()
            .find(|spec| spec.certificate == certificate)
            .expect("issued");
        assert_eq!(
            spec.request.usages,
            vec![Usage::ServerAuth, Usage::ClientAuth],
            "{certificate:?}"
        );
    }
}
