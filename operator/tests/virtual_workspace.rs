//! VirtualWorkspace builders from inline YAML: which shard the server reaches, which CAs sign its
//! certificates, which client CA it trusts and what an unusable target becomes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_operator::api::{RootShard, Shard, VirtualWorkspace};
use kcp_operator::naming::{Certificate, Kind};
use kcp_operator::pki::catalog::{self, Issuer};
use kcp_operator::render::deployment;
use kcp_operator::validate::{self, Error};

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    yaml_serde::from_str(yaml).expect("test CR parses")
}

fn root() -> RootShard {
    parse(
        r#"
apiVersion: operator.kcp.io/v1alpha1
kind: RootShard
metadata: {name: root, namespace: kcp, uid: u1}
spec:
  external: {hostname: kcp.example.com, port: 6443}
  etcd: {endpoints: ["http://etcd:2379"]}
"#,
    )
}

fn shard() -> Shard {
    parse(
        r#"
apiVersion: operator.kcp.io/v1alpha1
kind: Shard
metadata: {name: beta, namespace: kcp, uid: u2}
spec:
  rootShard: {ref: {name: root}}
  shardBaseURL: https://beta.internal.example:6443
  etcd: {endpoints: ["http://etcd:2379"]}
"#,
    )
}

fn vw(target: &str, extra_spec: &str) -> VirtualWorkspace {
    parse(&format!(
        r#"
apiVersion: operator.kcp.io/v1alpha1
kind: VirtualWorkspace
metadata: {{name: vw, namespace: kcp, uid: u3}}
spec:
  target: {target}
  external: {{hostname: vw.example.com, port: 8443}}
{extra_spec}"#
    ))
}

fn for_shard(extra_spec: &str) -> validate::VirtualWorkspaceConfig {
    let target = validate::shard(&shard(), Some(&root())).expect("valid shard");
    validate::virtual_workspace(&vw("{shardRef: {name: beta}}", extra_spec), &target)
        .expect("valid")
}

#[test]
fn the_target_is_exactly_one_of_root_shard_and_shard() {
    let both = vw("{shardRef: {name: beta}, rootShardRef: {name: root}}", "");
    let none = vw("{}", "");
    assert_eq!(
        validate::target_reference(&both),
        Err(Error::NoVirtualWorkspaceTarget)
    );
    assert_eq!(
        validate::target_reference(&none),
        Err(Error::NoVirtualWorkspaceTarget)
    );
    let root_target = vw("{rootShardRef: {name: root}}", "");
    assert_eq!(
        validate::target_reference(&root_target),
        Ok((Kind::RootShard, "root"))
    );
}

#[test]
fn the_server_reaches_its_shard_at_the_shard_base_url() {
    let config = for_shard("");
    assert_eq!(config.shard_url, "https://beta.internal.example:6443");
    assert_eq!(config.external_url(), "https://vw.example.com:8443");
    assert_eq!(config.replicas, 2, "upstream's default");
    let on_root = validate::virtual_workspace(
        &vw("{rootShardRef: {name: root}}", ""),
        &validate::root_shard(&root()).expect("valid root"),
    )
    .expect("valid");
    assert_eq!(
        on_root.shard_url,
        "https://root-rootshard.kcp.svc.cluster.local:6443"
    );
}

#[test]
fn certificates_come_from_the_root_shards_cas() {
    let config = for_shard("");
    let certificates = catalog::virtual_workspace(&config).expect("catalog");
    let server = certificates
        .iter()
        .find(|c| c.certificate == Certificate::Server)
        .expect("server certificate");
    assert_eq!(
        server.issuer,
        Issuer::Secret("root-rootshard-server-ca".into())
    );
    for name in [
        "vw-virtualworkspace.kcp.svc.cluster.local",
        "vw.example.com",
        "localhost",
    ] {
        assert!(
            server.request.dns_names.contains(&name.to_owned()),
            "{name} missing from {:?}",
            server.request.dns_names
        );
    }
    let client = certificates
        .iter()
        .find(|c| c.certificate == Certificate::Client)
        .expect("client certificate");
    assert_eq!(
        client.issuer,
        Issuer::Secret("root-rootshard-client-ca".into())
    );
    assert_eq!(client.request.common_name, "vw-virtual-workspace");
    assert_eq!(client.request.organizations, vec!["system:masters"]);
}

#[test]
fn clients_are_verified_against_the_root_client_ca_unless_a_bundle_is_brought() {
    let source = |config: &validate::VirtualWorkspaceConfig| {
        deployment::virtual_workspace_fragment(config)
            .mounts
            .iter()
            .find(|m| m.volume == "client-ca")
            .and_then(|m| m.source_name().map(str::to_owned))
            .expect("client CA mount")
    };
    assert_eq!(source(&for_shard("")), "root-rootshard-client-ca");
    assert_eq!(
        source(&for_shard("  clientCABundleRef: {name: partner-ca}\n")),
        "vw-virtualworkspace-merged-client-ca"
    );
}

#[test]
fn only_flags_kcp_virtual_workspaces_accepts_are_rendered() {
    let args = deployment::virtual_workspace_fragment(&for_shard("  extraArgs: [\"-v=4\"]\n")).args;
    let known = [
        "--kubeconfig=",
        "--bind-address=",
        "--secure-port=",
        "--tls-cert-file=",
        "--tls-private-key-file=",
        "--client-ca-file=",
        "--root-directory=",
        "--requestheader-client-ca-file=",
        "--requestheader-allowed-names=",
        "--requestheader-username-headers=",
        "--requestheader-group-headers=",
        "--requestheader-extra-headers-prefix=",
        "-v=",
    ];
    for arg in &args {
        assert!(
            known.iter().any(|flag| arg.starts_with(flag)),
            "{arg} is not a flag of kcp virtual-workspaces"
        );
    }
    assert!(args.contains(&"--secure-port=6443".to_owned()));
    assert_eq!(args.last().map(String::as_str), Some("-v=4"));
}

#[test]
fn a_shard_served_by_a_virtual_workspace_advertises_it_and_runs_none_in_process() {
    let mut served = shard();
    served.spec.common.kcp_virtual_workspace =
        Some(k8s_openapi::api::core::v1::LocalObjectReference { name: "vw".into() });
    let config = validate::shard(&served, Some(&root())).expect("valid shard");
    assert_eq!(
        validate::with_virtual_workspace(config.clone(), None),
        Err(Error::ReferenceNotFound {
            kind: "VirtualWorkspace",
            name: "vw".into()
        })
    );
    let vw = vw("{shardRef: {name: beta}}", "");
    let config = validate::with_virtual_workspace(config, Some(&vw)).expect("resolved");
    let args = deployment::server_fragment(&config).args;
    for expected in [
        "--run-virtual-workspaces=false",
        "--shard-virtual-workspace-url=https://vw.example.com:8443",
        "--shard-virtual-workspace-ca-file=/etc/kcp/tls/ca/server/tls.crt",
    ] {
        assert!(
            args.contains(&expected.to_owned()),
            "{expected} missing: {args:?}"
        );
    }
    let unserved = validate::shard(&shard(), Some(&root())).expect("valid shard");
    let unserved = validate::with_virtual_workspace(unserved, None).expect("nothing to resolve");
    assert!(
        !deployment::server_fragment(&unserved)
            .args
            .iter()
            .any(|arg| arg.contains("virtual-workspace")),
        "in-process virtual workspaces by default"
    );
}
