use std::ffi::OsString;
use std::fs;
use std::path::Path;

use super::*;
use crate::cli::{self, Invocation};
use crate::logging::LoggingFormat;
use kcp_storage::etcd::EtcdConfig;

/// `kcp start <args>` as the command line gives it.
fn start(args: &[&str]) -> Result<StartOptions, clap::Error> {
    let argv: Vec<OsString> = ["kcp", "start"]
        .iter()
        .chain(args)
        .map(OsString::from)
        .collect();
    match cli::parse(argv)? {
        Invocation::Start(options) => Ok(*options),
        other => panic!("{args:?} did not parse as start: {other:?}"),
    }
}

/// Parses and validates `kcp start <args>`; panics on any error (also used by other modules' tests).
pub(crate) fn validated(args: &[&str]) -> ValidatedOptions {
    start(args)
        .unwrap_or_else(|err| panic!("{args:?}: {err}"))
        .validate()
        .unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

fn invalid(args: &[&str]) -> OptionsError {
    match start(args).unwrap().validate() {
        Ok(options) => panic!("{args:?} validated: {options:?}"),
        Err(err) => err,
    }
}

fn usage_error(args: &[&str]) -> clap::Error {
    match start(args) {
        Ok(options) => panic!("{args:?} parsed: {options:?}"),
        Err(err) => {
            assert_eq!(err.exit_code(), 2, "{err}");
            err
        }
    }
}

/// Replaces `{d}` with `dir` and creates (empty) every file an argument names under `dir`, the way
/// the operator's Secret volumes would provide them.
fn materialize(dir: &Path, args: &[&str]) -> Vec<String> {
    let prefix = dir.display().to_string();
    args.iter()
        .map(|arg| {
            let arg = arg.replace("{d}", &prefix);
            if let Some(index) = arg.find(&prefix) {
                let path = Path::new(&arg[index..]);
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, "").unwrap();
            }
            arg
        })
        .collect()
}

/// Flags kcp-operator renders for every shard's TLS, CAs and service accounts (section 2.5).
const COMMON_SHARD_ARGS: &[&str] = &[
    "--root-ca-file={d}/etc/kcp/tls/ca/root/tls.crt",
    "--client-ca-file={d}/etc/kcp/tls/ca/client/tls.crt",
    "--requestheader-client-ca-file={d}/etc/kcp/tls/ca/requestheader-client/tls.crt",
    "--requestheader-allowed-names=kcp-front-proxy,kcp-root-shard-proxy",
    "--requestheader-username-headers=X-Remote-User",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    "--tls-private-key-file={d}/etc/kcp/tls/server/tls.key",
    "--tls-cert-file={d}/etc/kcp/tls/server/tls.crt",
    "--service-account-key-file={d}/etc/kcp/tls/service-account/tls.crt",
    "--service-account-private-key-file={d}/etc/kcp/tls/service-account/tls.key",
    "--service-account-lookup=false",
    "--shard-client-key-file={d}/etc/kcp/tls/client/tls.key",
    "--shard-client-cert-file={d}/etc/kcp/tls/client/tls.crt",
];

/// The root shard's own flags with every optional section the operator can add (section 2.5).
const ROOT_SHARD_ARGS: &[&str] = &[
    "--shard-base-url=https://root-kcp.kcp.svc.cluster.local:6443",
    "--shard-external-url=https://api.example.com:443",
    "--logical-cluster-admin-kubeconfig={d}/etc/kcp/logical-cluster-admin-kubeconfig/kubeconfig",
    "--external-logical-cluster-admin-kubeconfig={d}/etc/kcp/external-logical-cluster-admin-kubeconfig/kubeconfig",
    "--batteries-included=workspace-types",
    "--root-directory=",
    "--enable-leader-election=true",
    "--logging-format=json",
    "-v=4",
    "--cache-kubeconfig={d}/etc/cache-server/kubeconfig/kubeconfig",
    "--run-virtual-workspaces=false",
    "--shard-virtual-workspace-url=https://vw.example.com:6443",
    "--shard-virtual-workspace-ca-file={d}/etc/kcp/tls/ca/server/tls.crt",
    "--etcd-servers=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379",
    "--etcd-prefix=/kcp",
    "--etcd-certfile={d}/etc/etcd/tls/tls.crt",
    "--etcd-keyfile={d}/etc/etcd/tls/tls.key",
    "--etcd-cafile={d}/etc/etcd/tls/ca.crt",
    "--audit-policy-file={d}/etc/kcp/audit/policy/policy.yaml",
    "--audit-webhook-batch-buffer-size=10000",
    "--audit-webhook-batch-max-size=400",
    "--audit-webhook-batch-max-wait=30s",
    "--audit-webhook-batch-throttle-burst=15",
    "--audit-webhook-batch-throttle-enable",
    "--audit-webhook-batch-throttle-qps=10.5",
    "--audit-webhook-initial-backoff=10s",
    "--audit-webhook-mode=blocking-strict",
    "--audit-webhook-truncate-enabled",
    "--audit-webhook-truncate-max-batch-size=10485760",
    "--audit-webhook-truncate-max-event-sizes=102400",
    "--audit-webhook-version=audit.k8s.io/v1",
    "--audit-webhook-config-file={d}/etc/kcp/audit/webhook/kubeconfig",
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
    "--authorization-webhook-cache-authorized-ttl=5m0s",
    "--authorization-webhook-cache-unauthorized-ttl=30s",
    "--authorization-webhook-version=v1",
    "--authorization-webhook-config-file={d}/etc/kcp/authorization/webhook/kubeconfig",
    "--oidc-issuer-url=https://dex.example.com/realms/kcp",
    "--oidc-client-id=kcp",
    "--oidc-groups-claim=groups",
    "--oidc-username-claim=email",
    "--oidc-username-prefix=oidc:",
    "--oidc-groups-prefix=oidc:",
    "--oidc-ca-file={d}/etc/kcp/tls/oidc/ca.crt",
    "--authentication-token-webhook-cache-ttl=2m0s",
    "--authentication-token-webhook-version=v1",
    "--authentication-token-webhook-config-file={d}/etc/kcp/authentication/webhook/kubeconfig",
    "--token-auth-file={d}/etc/kcp/authentication/token/token.csv",
    "--service-account-lookup=false",
    "--service-account-key-file={d}/etc/kcp/tls/root/service-account/tls.crt",
    "--service-account-key-file={d}/etc/kcp/tls/shard-a/service-account/tls.crt",
];

/// A (non-root) shard's own flags (section 2.6).
const SHARD_ARGS: &[&str] = &[
    "--shard-name=shard-a",
    "--shard-base-url=https://shard-a-shard-kcp.kcp.svc.cluster.local:6443",
    "--shard-external-url=https://api.example.com:443",
    "--external-hostname=api.example.com",
    "--cache-kubeconfig={d}/etc/kcp/client-kubeconfig/kubeconfig",
    "--root-shard-kubeconfig-file={d}/etc/kcp/client-kubeconfig/kubeconfig",
    "--logical-cluster-admin-kubeconfig={d}/etc/kcp/logical-cluster-admin-kubeconfig/kubeconfig",
    "--external-logical-cluster-admin-kubeconfig={d}/etc/kcp/external-logical-cluster-admin-kubeconfig/kubeconfig",
    "--batteries-included=workspace-types",
    "--root-directory=",
    "--enable-leader-election=true",
    "--logging-format=json",
    "--mount-proxy-client-cert-file={d}/etc/kcp/tls/mounts-proxy/tls.crt",
    "--mount-proxy-client-key-file={d}/etc/kcp/tls/mounts-proxy/tls.key",
    "-v=2",
    "--etcd-servers=https://etcd.kcp.svc:2379",
];

#[test]
fn operator_root_shard_deployment_parses() {
    let dir = tempfile::tempdir().unwrap();
    let args = materialize(dir.path(), &[COMMON_SHARD_ARGS, ROOT_SHARD_ARGS].concat());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let parsed = start(&args).unwrap();
    assert_eq!(parsed.logging.format, LoggingFormat::Json);
    assert_eq!(parsed.logging.verbosity, 4);
    assert_eq!(parsed.authentication.service_account_key_file.len(), 3);
    assert!(!parsed.service_account_lookup);
    assert!(!parsed.run_virtual_workspaces);
    assert!(parsed.enable_leader_election);
    assert_eq!(
        parsed.authentication.request_header.allowed_names,
        ["kcp-front-proxy", "kcp-root-shard-proxy"]
    );
    assert_eq!(parsed.audit_webhook_mode, AuditWebhookMode::BlockingStrict);
    assert_eq!(parsed.audit_webhook_truncate_max_event_size, 102_400);
    assert!(parsed.audit_webhook_truncate_enabled);
    assert_eq!(parsed.audit_webhook_batch_throttle_qps, 10.5);
    assert_eq!(
        parsed.authorization_webhook_cache_authorized_ttl,
        Duration::from_secs(300)
    );
    assert_eq!(parsed.authorization_always_allow_paths.len(), 4);

    let options = parsed.validate().unwrap();
    assert_eq!(options.root_directory, None);
    assert_eq!(options.admin_kubeconfig_path, None);
    assert_eq!(options.shard_name, "root");
    assert_eq!(options.batteries.to_string(), "workspace-types");
    assert_eq!(options.etcd_prefix, "/kcp");
    let prefix = dir.path().display();
    assert_eq!(
        options.storage_config(),
        StorageConfig::Etcd(EtcdConfig {
            servers: vec![
                "https://etcd-0.etcd:2379".into(),
                "https://etcd-1.etcd:2379".into()
            ],
            ca_file: Some(format!("{prefix}/etc/etcd/tls/ca.crt").into()),
            cert_file: Some(format!("{prefix}/etc/etcd/tls/tls.crt").into()),
            key_file: Some(format!("{prefix}/etc/etcd/tls/tls.key").into()),
        })
    );
    assert_eq!(
        options.tls,
        Some(CertKeyFiles {
            cert_file: format!("{prefix}/etc/kcp/tls/server/tls.crt").into(),
            key_file: format!("{prefix}/etc/kcp/tls/server/tls.key").into(),
        })
    );
    let inactive = options.inactive_flags();
    assert!(
        inactive.contains(&"audit-webhook-truncate-max-event-size"),
        "audit-webhook-truncate-max-event-size not reported in {inactive:?}"
    );
    for flag in [
        "tls-cert-file",
        "client-ca-file",
        "etcd-servers",
        "shard-base-url",
        "batteries-included",
        "root-directory",
        "logging-format",
        "root-ca-file",
        "requestheader-client-ca-file",
        "service-account-key-file",
        "oidc-issuer-url",
        "authorization-webhook-config-file",
        "enable-leader-election",
        "cache-kubeconfig",
        "v",
    ] {
        assert!(!inactive.contains(&flag), "{flag} reported as inactive");
    }
}

#[test]
fn operator_shard_deployment_parses() {
    let dir = tempfile::tempdir().unwrap();
    let args = materialize(dir.path(), &[COMMON_SHARD_ARGS, SHARD_ARGS].concat());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let options = validated(&args);
    assert_eq!(options.shard_name, "shard-a");
    assert_eq!(
        options.external_hostname.as_deref(),
        Some("api.example.com")
    );
    assert_eq!(
        options.shard_base_url.as_ref().and_then(|url| url.host()),
        Some("shard-a-shard-kcp.kcp.svc.cluster.local")
    );
    assert!(
        options
            .inactive_flags()
            .contains(&"mount-proxy-client-cert-file")
    );
    assert!(
        !options
            .inactive_flags()
            .contains(&"root-shard-kubeconfig-file")
    );
    assert!(options.root_shard_kubeconfig_file.is_some());
}

#[test]
fn defaults_are_upstreams() {
    let options = validated(&[]);
    assert_eq!(options.bind_address, IpAddr::from([0, 0, 0, 0]));
    assert_eq!(options.secure_port, 6443);
    assert_eq!(options.tls, None);
    assert_eq!(options.client_ca_file, None);
    assert_eq!(options.root_directory, Some(PathBuf::from(".kcp")));
    assert_eq!(
        options.admin_kubeconfig_path,
        Some(PathBuf::from(".kcp/admin.kubeconfig"))
    );
    assert_eq!(options.shard_name, "root");
    assert_eq!(options.batteries.to_string(), "admin,workspace-types");
    assert_eq!(options.etcd_prefix, "/registry");
    assert_eq!(options.etcd_compaction_interval, Duration::from_secs(300));
    assert_eq!(
        options.storage_config(),
        StorageConfig::Embedded {
            path: PathBuf::from(".kcp/store.redb")
        }
    );
    assert!(options.inactive_flags().is_empty());
    let parsed = start(&[]).unwrap();
    assert_eq!(
        parsed.authorization_always_allow_paths,
        ["/healthz", "/readyz", "/livez"]
    );
    assert!(parsed.run_controllers && parsed.anonymous_auth && !parsed.enable_leader_election);
}

#[test]
fn flag_syntax_follows_pflag() {
    let parsed = start(&[
        "--secure-port",
        "7000",
        "--bind-address=127.0.0.1",
        "--run-controllers=f",
        "--enable-home-workspaces=False",
        "--enable-leader-election",
        "-v",
        "3",
        "--shard-name=a",
        "--shard-name=b",
    ])
    .unwrap();
    assert_eq!(parsed.serving.secure_port, 7000);
    assert_eq!(parsed.serving.bind_address, IpAddr::from([127, 0, 0, 1]));
    assert!(!parsed.run_controllers);
    assert!(!parsed.enable_home_workspaces);
    assert!(parsed.enable_leader_election);
    assert_eq!(parsed.logging.verbosity, 3);
    assert_eq!(parsed.shard_name, "b", "the last occurrence wins");
    assert_eq!(start(&["--v=5"]).unwrap().logging.verbosity, 5);
    assert_eq!(start(&["-v=6"]).unwrap().logging.verbosity, 6);
    assert_eq!(
        start(&["--feature-gates=WorkspaceMounts=true,CacheAPIs=false"])
            .unwrap()
            .feature_gates,
        [
            ("WorkspaceMounts".into(), true),
            ("CacheAPIs".into(), false)
        ]
    );
    assert_eq!(
        start(&["--cache-server-kubeconfig-file=/x"])
            .unwrap()
            .cache_kubeconfig,
        Some(PathBuf::from("/x"))
    );
}

#[test]
fn bad_command_lines_are_usage_errors() {
    usage_error(&["--etcd-server=http://127.0.0.1:2379"]);
    usage_error(&["--no-such-flag"]);
    // A Go boolean takes its value only after `=`; a separate word is a stray argument.
    usage_error(&["--enable-leader-election", "false"]);
    usage_error(&["--enable-leader-election=maybe"]);
    usage_error(&["--secure-port=65536"]);
    usage_error(&["--bind-address=localhost"]);
    usage_error(&["--logging-format=yaml"]);
    usage_error(&["--shard-base-url=root-kcp:6443"]);
    usage_error(&["--oidc-issuer-url=http://dex"]);
    usage_error(&["--feature-gates=WorkspaceMounts"]);
    usage_error(&["--tls-min-version=VersionTLS14"]);
    usage_error(&["--tls-cipher-suites=TLS_NOPE"]);
    usage_error(&["--authorization-webhook-version=v2"]);
}

#[test]
fn durations_use_go_syntax() {
    let parsed = start(&[
        "--etcd-compaction-interval=1h30m",
        "--shutdown-delay-duration=1.5s",
        "--authorization-webhook-cache-unauthorized-ttl=0",
    ])
    .unwrap();
    assert_eq!(
        parsed.etcd.etcd_compaction_interval,
        Duration::from_secs(5400)
    );
    assert_eq!(parsed.shutdown_delay_duration, Duration::from_millis(1500));
    assert_eq!(
        parsed.authorization_webhook_cache_unauthorized_ttl,
        Duration::ZERO
    );
    let err = usage_error(&["--etcd-compaction-interval=5"]);
    assert!(err.to_string().contains("missing unit"), "{err}");
    usage_error(&["--shutdown-delay-duration=-1s"]);
    usage_error(&["--audit-webhook-batch-max-wait=5d"]);
}

#[test]
fn the_object_count_limit_is_off_by_default_and_scanned_every_minute() {
    let options = validated(&[]);
    assert_eq!(options.logical_cluster_total_object_limit, 0);
    assert_eq!(
        options.logical_cluster_object_count_scan_interval,
        Duration::from_secs(60)
    );
    let options = validated(&[
        "--logical-cluster-total-object-limit=500",
        "--logical-cluster-object-count-scan-interval=1s",
    ]);
    assert_eq!(options.logical_cluster_total_object_limit, 500);
    assert_eq!(
        options.logical_cluster_object_count_scan_interval,
        Duration::from_secs(1)
    );
    usage_error(&["--logical-cluster-total-object-limit=-1"]);
    assert!(matches!(
        invalid(&["--logical-cluster-object-count-scan-interval=0s"]),
        OptionsError::ObjectCountScanInterval
    ));
}

#[test]
fn batteries_are_resolved_and_drive_the_admin_kubeconfig() {
    let options = validated(&["--batteries-included=+user,-workspace-types"]);
    assert_eq!(options.batteries.to_string(), "admin,user");
    assert!(options.admin_kubeconfig_path.is_some());

    let options = validated(&["--batteries-included=-admin"]);
    assert_eq!(options.admin_kubeconfig_path, None);

    let options = validated(&["--kubeconfig-path=/tmp/k/admin.kubeconfig"]);
    assert_eq!(
        options.admin_kubeconfig_path,
        Some(PathBuf::from("/tmp/k/admin.kubeconfig"))
    );
    assert!(matches!(
        invalid(&["--batteries-included=+user,admin"]),
        OptionsError::Batteries(BatteriesError::MixedPrefixes { .. })
    ));
    assert!(matches!(
        invalid(&["--batteries-included=root-compute-workspace"]),
        OptionsError::Batteries(BatteriesError::Unknown { .. })
    ));
}

#[test]
fn storage_is_embedded_unless_etcd_servers() {
    let options = validated(&["--root-directory=/var/lib/kcp"]);
    assert_eq!(
        options.storage_config(),
        StorageConfig::Embedded {
            path: PathBuf::from("/var/lib/kcp/store.redb")
        }
    );
    let options = validated(&[
        "--etcd-servers=http://127.0.0.1:2379",
        "--etcd-servers=http://127.0.0.1:2381",
        "--storage-backend=etcd3",
        "--root-directory=",
    ]);
    assert_eq!(
        options.storage_config(),
        StorageConfig::Etcd(EtcdConfig {
            servers: vec![
                "http://127.0.0.1:2379".into(),
                "http://127.0.0.1:2381".into()
            ],
            ca_file: None,
            cert_file: None,
            key_file: None,
        })
    );
    assert!(matches!(
        invalid(&["--storage-backend=etcd3"]),
        OptionsError::EtcdWithoutServers
    ));
    assert!(matches!(
        invalid(&[
            "--storage-backend=embedded",
            "--etcd-servers=http://127.0.0.1:2379"
        ]),
        OptionsError::EmbeddedWithEtcdServers
    ));
    assert!(matches!(
        invalid(&["--root-directory="]),
        OptionsError::EmbeddedWithoutRootDirectory
    ));
    let dir = tempfile::tempdir().unwrap();
    let ca = materialize(dir.path(), &["--etcd-cafile={d}/ca.crt"]);
    assert!(matches!(
        invalid(&[ca[0].as_str()]),
        OptionsError::EtcdFlagWithoutEtcd("etcd-cafile")
    ));
}

#[test]
fn files_must_exist_and_come_in_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("--client-ca-file={}/nope.crt", dir.path().display());
    assert!(matches!(
        invalid(&[missing.as_str()]),
        OptionsError::Unreadable {
            flag: "client-ca-file",
            ..
        }
    ));
    let directory = format!("--token-auth-file={}", dir.path().display());
    assert!(matches!(
        invalid(&[directory.as_str()]),
        OptionsError::NotAFile {
            flag: "token-auth-file",
            ..
        }
    ));
    let cert = materialize(dir.path(), &["--tls-cert-file={d}/tls.crt"]);
    assert!(matches!(
        invalid(&[cert[0].as_str()]),
        OptionsError::Unpaired {
            given: "tls-cert-file",
            missing: "tls-private-key-file"
        }
    ));
    let key = materialize(dir.path(), &["--shard-client-key-file={d}/client.key"]);
    assert!(matches!(
        invalid(&[key[0].as_str()]),
        OptionsError::Unpaired {
            given: "shard-client-key-file",
            missing: "shard-client-cert-file"
        }
    ));
    // An empty value means "not given", as in pflag.
    assert_eq!(
        validated(&["--tls-cert-file=", "--client-ca-file="]).tls,
        None
    );
}

#[test]
fn cross_flag_rules() {
    assert!(matches!(
        invalid(&["--shard-name=shard-a"]),
        OptionsError::NonRootWithoutRootKubeconfig(name) if name == "shard-a"
    ));
    let root_kubeconfig = tempfile::NamedTempFile::new().unwrap();
    let root_flag = format!(
        "--root-shard-kubeconfig-file={}",
        root_kubeconfig.path().display()
    );
    assert!(matches!(
        invalid(&["--shard-name=shard-a", root_flag.as_str()]),
        OptionsError::NonRootWithoutCache(name) if name == "shard-a"
    ));
    assert!(matches!(
        invalid(&["--shard-name= "]),
        OptionsError::EmptyShardName
    ));
    assert!(matches!(
        invalid(&["--oidc-issuer-url=https://dex"]),
        OptionsError::OidcIncomplete
    ));
    assert!(matches!(
        invalid(&["--oidc-client-id=kcp"]),
        OptionsError::OidcIncomplete
    ));
    assert!(matches!(
        invalid(&["--audit-webhook-batch-throttle-qps=0"]),
        OptionsError::AuditThrottleQps
    ));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = materialize(dir.path(), &["--logical-cluster-admin-kubeconfig={d}/k"]);
    assert!(matches!(
        invalid(&[kubeconfig[0].as_str()]),
        OptionsError::LogicalClusterAdminWithoutExternalUrl
    ));
}

#[test]
fn aliases_report_the_canonical_flag() {
    let options = validated(&["--audit-webhook-truncate-max-event-sizes=10"]);
    assert_eq!(
        options.inactive_flags(),
        ["audit-webhook-truncate-max-event-size"]
    );
}

/// Every flag is either active or in the inactive list, so adding a flag forces a decision, and
/// the inactive list names no flag that does not exist.
#[test]
fn every_flag_is_classified() {
    const ACTIVE: &[&str] = &[
        "anonymous-auth",
        "api-audiences",
        "authentication-token-webhook-cache-ttl",
        "authentication-token-webhook-config-file",
        "authentication-token-webhook-version",
        "authorization-always-allow-paths",
        "authorization-webhook-cache-authorized-ttl",
        "authorization-webhook-cache-unauthorized-ttl",
        "authorization-webhook-config-file",
        "authorization-webhook-version",
        "batteries-included",
        "bind-address",
        "cache-kubeconfig",
        "client-ca-file",
        "enable-leader-election",
        "etcd-cafile",
        "etcd-certfile",
        "etcd-compaction-interval",
        "etcd-keyfile",
        "etcd-prefix",
        "etcd-servers",
        "external-hostname",
        "external-logical-cluster-admin-kubeconfig",
        "kubeconfig-path",
        "kubelet-certificate-authority",
        "kubelet-client-certificate",
        "kubelet-client-key",
        "leader-election-name",
        "leader-election-namespace",
        "logging-format",
        "logical-cluster-admin-kubeconfig",
        "logical-cluster-object-count-scan-interval",
        "logical-cluster-total-object-limit",
        "max-logical-clusters",
        "oidc-ca-file",
        "oidc-client-id",
        "oidc-groups-claim",
        "oidc-groups-prefix",
        "oidc-issuer-url",
        "oidc-required-claim",
        "oidc-signing-algs",
        "oidc-username-claim",
        "oidc-username-prefix",
        "requestheader-allowed-names",
        "requestheader-client-ca-file",
        "requestheader-extra-headers-prefix",
        "requestheader-group-headers",
        "requestheader-uid-headers",
        "requestheader-username-headers",
        "root-ca-file",
        "root-directory",
        "root-shard-kubeconfig-file",
        "run-controllers",
        "run-virtual-workspaces",
        "secure-port",
        "service-account-issuer",
        "service-account-key-file",
        "service-account-lookup",
        "service-account-private-key-file",
        "service-account-signing-key-file",
        "shard-base-url",
        "shard-external-url",
        "shard-name",
        "shard-virtual-workspace-url",
        "storage-backend",
        "tls-cert-file",
        "tls-private-key-file",
        "token-auth-file",
        "v",
    ];
    let command = StartOptions::augment_args(clap::Command::new("start"));
    let flags: BTreeSet<&str> = command
        .get_arguments()
        .filter_map(|arg| arg.get_long())
        .collect();
    for flag in &flags {
        let active = ACTIVE.contains(flag);
        let inactive = inactive::NOT_YET_ACTIVE.contains(flag);
        assert!(
            active != inactive,
            "--{flag}: active {active}, inactive {inactive}"
        );
    }
    for flag in inactive::NOT_YET_ACTIVE.iter().chain(ACTIVE) {
        assert!(flags.contains(flag), "--{flag} is listed but not a flag");
    }
}
