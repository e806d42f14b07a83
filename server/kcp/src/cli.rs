//! What the process was asked to do, from its whole argument vector.
//!
//! kcp is one multi-call binary: upstream images start `/kcp start`, `/kcp-front-proxy`,
//! `/cache-server` and `/virtual-workspaces`, so an image can link these names to this file and
//! the program name picks the component. Under the name `kcp` (or any other name), subcommands
//! pick it instead (`kcp start`, `kcp front-proxy`, `kcp cache-server`, `kcp virtual-workspaces`). Keeping this decision in one pure function lets tests
//! drive it without spawning processes.

use std::ffi::OsString;
use std::path::Path;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cache_server::CacheServerOptions;
use crate::front_proxy::{self, FrontProxyOptions};
use crate::options::StartOptions;
use crate::sharded::ShardedOptions;
use crate::virtual_workspaces_server::{self, VirtualWorkspacesOptions};

/// A component of upstream kcp that has its own entrypoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    FrontProxy,
    CacheServer,
    VirtualWorkspaces,
}

impl Component {
    /// The program name upstream images use for this component.
    fn program(self) -> &'static str {
        match self {
            Component::FrontProxy => "kcp-front-proxy",
            Component::CacheServer => "cache-server",
            Component::VirtualWorkspaces => "virtual-workspaces",
        }
    }

    fn from_program(path: &OsString) -> Option<Self> {
        let name = Path::new(path).file_name()?.to_str()?;
        [
            Component::FrontProxy,
            Component::CacheServer,
            Component::VirtualWorkspaces,
        ]
        .into_iter()
        .find(|component| component.program() == name)
    }
}

/// What to do.
#[derive(Debug)]
pub enum Invocation {
    /// Run a shard.
    Start(Box<StartOptions>),
    /// Run the cache server.
    CacheServer(Box<CacheServerOptions>),
    /// Run the front-proxy.
    FrontProxy(Box<FrontProxyOptions>),
    /// Run a shard's virtual workspaces on their own port.
    VirtualWorkspaces(Box<VirtualWorkspacesOptions>),
    /// Print this text (`kcp start options`) and exit 0.
    PrintStartFlags(String),
    /// Run a sharded topology on this machine (`kcp sharded`).
    Sharded(Box<ShardedOptions>),
}

#[derive(Debug, Parser)]
#[command(
    name = "kcp",
    version,
    about = "kcp: a multi-tenant Kubernetes control plane",
    subcommand_required = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: CliCommand,
}

#[derive(Debug, Subcommand)]
enum CliCommand {
    /// Run a kcp shard (the root shard by default) with its API server.
    #[command(args_override_self = true)]
    Start {
        #[command(subcommand)]
        print: Option<StartSubcommand>,
        #[command(flatten)]
        options: Box<StartOptions>,
    },
    /// Run the front-proxy: one endpoint that authenticates clients and routes every workspace
    /// to its shard.
    #[command(args_override_self = true)]
    FrontProxy(Box<FrontProxyOptions>),
    /// Run the cache server that shards replicate objects into.
    #[command(args_override_self = true)]
    CacheServer(Box<CacheServerOptions>),
    /// Serve a shard's virtual workspaces (/services/...) on a port of their own.
    #[command(args_override_self = true)]
    VirtualWorkspaces(Box<VirtualWorkspacesOptions>),
    /// Run a cache server, a root shard and further shards on 127.0.0.1 with one generated PKI,
    /// until SIGTERM or Ctrl-C.
    Sharded(Box<ShardedOptions>),
}

/// `cache-server` as the program name: the cache server's flags alone.
#[derive(Debug, Parser)]
#[command(
    name = "cache-server",
    version,
    about = "kcp's cache server",
    args_override_self = true
)]
struct CacheServerCli {
    #[command(flatten)]
    options: Box<CacheServerOptions>,
}

/// `kcp-front-proxy` as the program name: the front-proxy's flags alone.
#[derive(Debug, Parser)]
#[command(
    name = "kcp-front-proxy",
    version,
    about = "kcp's front-proxy",
    args_override_self = true
)]
struct FrontProxyCli {
    #[command(flatten)]
    options: Box<FrontProxyOptions>,
}

/// `virtual-workspaces` as the program name: the standalone virtual workspaces' flags alone.
#[derive(Debug, Parser)]
#[command(
    name = "virtual-workspaces",
    version,
    about = "kcp's virtual workspaces",
    args_override_self = true
)]
struct VirtualWorkspacesCli {
    #[command(flatten)]
    options: Box<VirtualWorkspacesOptions>,
}

#[derive(Debug, Subcommand)]
enum StartSubcommand {
    /// Print the flags of `kcp start` and exit.
    Options,
}

/// Decides what the argument vector (program name first) asks for. Errors are clap's: printing one
/// and exiting with its code gives usage errors exit code 2, and help and version exit code 0.
pub fn parse(args: Vec<OsString>) -> Result<Invocation, clap::Error> {
    match args.first().and_then(Component::from_program) {
        Some(Component::CacheServer) => {
            return Ok(Invocation::CacheServer(
                CacheServerCli::try_parse_from(args)?.options,
            ));
        }
        Some(Component::FrontProxy) => {
            let command = with_front_proxy_port(FrontProxyCli::command());
            let matches = command.try_get_matches_from(args)?;
            return Ok(Invocation::FrontProxy(
                FrontProxyCli::from_arg_matches(&matches)?.options,
            ));
        }
        Some(Component::VirtualWorkspaces) => {
            let command = with_virtual_workspaces_port(VirtualWorkspacesCli::command());
            let matches = command.try_get_matches_from(args)?;
            return Ok(Invocation::VirtualWorkspaces(
                VirtualWorkspacesCli::from_arg_matches(&matches)?.options,
            ));
        }
        None => {}
    }
    let command = Cli::command()
        .mut_subcommand("front-proxy", with_front_proxy_port)
        .mut_subcommand("virtual-workspaces", with_virtual_workspaces_port);
    let matches = command.try_get_matches_from(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    match cli.command {
        CliCommand::Start {
            print: Some(StartSubcommand::Options),
            ..
        } => {
            let mut command = Cli::command();
            // Building propagates the program name, so the usage line reads `kcp start`.
            command.build();
            let help = command
                .find_subcommand_mut("start")
                .map(|start| start.render_long_help().to_string())
                .unwrap_or_default();
            Ok(Invocation::PrintStartFlags(help))
        }
        CliCommand::Start { print: None, .. } => {
            let start_matches = matches
                .subcommand_matches("start")
                .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
            Ok(Invocation::Start(Box::new(StartOptions::from_matches(
                start_matches,
            )?)))
        }
        CliCommand::FrontProxy(options) => Ok(Invocation::FrontProxy(options)),
        CliCommand::CacheServer(options) => Ok(Invocation::CacheServer(options)),
        CliCommand::VirtualWorkspaces(options) => Ok(Invocation::VirtualWorkspaces(options)),
        CliCommand::Sharded(options) => Ok(Invocation::Sharded(options)),
    }
}

/// The standalone virtual workspaces' `--secure-port` defaults to upstream's 6444.
fn with_virtual_workspaces_port(command: clap::Command) -> clap::Command {
    command.mut_arg("secure_port", |arg| {
        arg.default_value(virtual_workspaces_server::DEFAULT_SECURE_PORT)
    })
}

/// The front-proxy's `--secure-port` defaults to upstream's 443, not the shards' 6443 that the
/// shared serving flags default to.
fn with_front_proxy_port(command: clap::Command) -> clap::Command {
    command.mut_arg("secure_port", |arg| {
        arg.default_value(front_proxy::DEFAULT_SECURE_PORT)
    })
}

/// Whether this build runs the component upstream images start as `program`, or the subcommand
/// `program` (`kcp sharded` starts its components from this same executable).
pub fn builds(program: &str) -> bool {
    Component::from_program(&OsString::from(program)).is_some()
        || Cli::command().find_subcommand(program).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharded::plan::CacheMode;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// What kcp-operator renders for a FrontProxy (operator/src/render/deployment.rs
    /// `front_proxy_fragment`, with auth, group filters and logging set).
    const OPERATOR_FRONT_PROXY_ARGS: &[&str] = &[
        "--secure-port=6443",
        "--root-kubeconfig=/etc/kcp-front-proxy/kubeconfig/kubeconfig",
        "--shards-kubeconfig=/etc/kcp-front-proxy/kubeconfig/kubeconfig",
        "--tls-private-key-file=/etc/kcp-front-proxy/tls/tls.key",
        "--tls-cert-file=/etc/kcp-front-proxy/tls/tls.crt",
        "--mapping-file=/etc/kcp-front-proxy/config/path-mapping.yaml",
        "--client-ca-file=/etc/kcp-front-proxy/client-ca/tls.crt",
        "--requestheader-client-ca-file=/etc/kcp/tls/requestheader-client-ca/tls.crt",
        "--requestheader-allowed-names=kcp-front-proxy",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--authentication-drop-groups=system:masters",
        "--authentication-drop-groups=team:*",
        "--authentication-pass-on-groups=team:a",
        "--authentication-pass-on-groups=system:authenticated",
        "-v=4",
        "--oidc-issuer-url=https://issuer.example",
        "--oidc-client-id=kcp",
        "--oidc-groups-claim=groups",
        "--oidc-username-claim=email",
        "--oidc-username-prefix=oidc:",
        "--oidc-groups-prefix=oidc:",
        "--oidc-ca-file=/etc/kcp/tls/oidc/ca.crt",
        "--authentication-token-webhook-cache-ttl=1m",
        "--authentication-token-webhook-version=v1",
        "--authentication-token-webhook-config-file=/etc/kcp/authentication/webhook/kubeconfig",
        "--token-auth-file=/etc/kcp/token-auth/token.csv",
        "--service-account-key-file=/etc/kcp/sa/tls.key",
    ];

    fn front_proxy(list: &[&str]) -> Box<FrontProxyOptions> {
        match parse(args(list)) {
            Ok(Invocation::FrontProxy(options)) => options,
            other => panic!("{list:?}: {other:?}"),
        }
    }

    #[test]
    fn the_front_proxy_parses_by_program_name_and_by_subcommand() {
        for program in [&["/kcp-front-proxy"][..], &["kcp", "front-proxy"][..]] {
            let list = [program, OPERATOR_FRONT_PROXY_ARGS].concat();
            let options = front_proxy(&list);
            assert_eq!(options.serving.secure_port, 6443);
            assert_eq!(options.logging.verbosity, 4);
            assert_eq!(
                options.mapping_file,
                Path::new("/etc/kcp-front-proxy/config/path-mapping.yaml")
            );
            assert_eq!(
                options.authentication_drop_groups,
                ["system:masters", "team:*"]
            );
            assert_eq!(
                options.authentication_pass_on_groups,
                ["team:a", "system:authenticated"]
            );
            assert_eq!(
                options.authentication.request_header.allowed_names,
                ["kcp-front-proxy"]
            );
            options.validate().unwrap();
        }
    }

    #[test]
    fn the_front_proxy_has_upstreams_defaults() {
        let options = front_proxy(&[
            "kcp",
            "front-proxy",
            "--mapping-file=/m.yaml",
            "--shards-kubeconfig=/s.kubeconfig",
        ]);
        assert_eq!(options.serving.secure_port, 443);
        assert_eq!(options.root_directory, Path::new(".kcp"));
        assert_eq!(options.root_kubeconfig, None);
        assert_eq!(
            options.authentication_drop_groups,
            [
                "system:masters",
                "system:kcp:logical-cluster-admin",
                "system:kcp:initializer:*",
                "system:kcp:terminator:*"
            ]
        );
        assert!(options.authentication_pass_on_groups.is_empty());
        let options = front_proxy(&[
            "kcp-front-proxy",
            "--mapping-file=/m.yaml",
            "--shards-kubeconfig=/s.kubeconfig",
            "--authentication-drop-groups=a,b",
        ]);
        assert_eq!(options.serving.secure_port, 443);
        assert_eq!(options.authentication_drop_groups, ["a", "b"]);
    }

    #[test]
    fn the_front_proxy_names_what_is_missing_or_unknown() {
        let missing = parse(args(&["kcp", "front-proxy", "--shards-kubeconfig=/s"])).unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        assert!(missing.to_string().contains("--mapping-file"), "{missing}");
        let unknown = parse(args(&[
            "kcp-front-proxy",
            "--mapping-file=/m",
            "--shards-kubeconfig=/s",
            "--shard-name=x",
        ]))
        .unwrap_err();
        assert_eq!(unknown.exit_code(), 2);
        assert!(
            unknown.to_string().contains("unexpected argument"),
            "{unknown}"
        );
        let half = front_proxy(&[
            "kcp-front-proxy",
            "--mapping-file=/m",
            "--shards-kubeconfig=/s",
            "--tls-cert-file=/c",
        ]);
        assert!(half.validate().is_err());
        let oidc = front_proxy(&[
            "kcp-front-proxy",
            "--mapping-file=/m",
            "--shards-kubeconfig=/s",
            "--oidc-issuer-url=https://issuer.example",
        ]);
        assert!(oidc.validate().is_err());
    }

    #[test]
    fn the_cache_server_parses_by_subcommand_and_by_program_name() {
        for list in [
            &["kcp", "cache-server", "--secure-port=0", "--etcd-prefix=/c"][..],
            &[
                "/usr/local/bin/cache-server",
                "--secure-port=0",
                "--etcd-prefix=/c",
            ][..],
        ] {
            let Ok(Invocation::CacheServer(options)) = parse(args(list)) else {
                panic!("{list:?} must parse as the cache server");
            };
            assert_eq!(
                (options.serving.secure_port, options.etcd_prefix.as_str()),
                (0, "/c")
            );
            assert_eq!(options.root_directory, std::path::Path::new(".kcp-cache"));
        }
        let Ok(Invocation::CacheServer(options)) = parse(args(&["cache-server"])) else {
            panic!("no flags must parse");
        };
        assert_eq!(
            (options.serving.secure_port, options.etcd_prefix.as_str()),
            (6443, "/cache")
        );
        for list in [
            &["kcp", "cache-server", "--no-such-flag"][..],
            &["cache-server", "--shard-name=x"][..],
        ] {
            let error = parse(args(list)).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{list:?}");
            assert!(error.to_string().contains("unexpected argument"), "{error}");
        }
    }

    #[test]
    fn virtual_workspaces_parse_by_subcommand_and_program_name() {
        for list in [
            &["kcp", "virtual-workspaces", "--kubeconfig=shard.kubeconfig"][..],
            &["/virtual-workspaces", "--kubeconfig", "shard.kubeconfig"][..],
        ] {
            let Ok(Invocation::VirtualWorkspaces(options)) = parse(args(list)) else {
                panic!("{list:?} must parse as the virtual workspaces");
            };
            assert_eq!(options.kubeconfig, std::path::Path::new("shard.kubeconfig"));
            assert_eq!(options.serving.secure_port, 6444, "upstream's port");
        }
        // What kcp-operator renders for a VirtualWorkspace (operator/src/render/deployment.rs
        // `virtual_workspace_fragment`, with logging set).
        let Ok(Invocation::VirtualWorkspaces(options)) = parse(args(&[
            "/virtual-workspaces",
            "--kubeconfig=/etc/kcp/client-kubeconfig/kubeconfig",
            "--bind-address=0.0.0.0",
            "--secure-port=6443",
            "--tls-cert-file=/etc/kcp/tls/server/tls.crt",
            "--tls-private-key-file=/etc/kcp/tls/server/tls.key",
            "--client-ca-file=/etc/kcp/tls/ca/client/tls.crt",
            "--root-directory=",
            "--requestheader-client-ca-file=/etc/kcp/tls/ca/requestheader-client/tls.crt",
            "--requestheader-allowed-names=kcp-front-proxy,kcp-root-shard-proxy",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "-v=4",
        ])) else {
            panic!("the operator's VirtualWorkspace arguments must parse");
        };
        assert_eq!(options.serving.secure_port, 6443);
        let missing = parse(args(&["virtual-workspaces"])).unwrap_err();
        assert_eq!(missing.exit_code(), 2, "--kubeconfig is required");
    }

    #[test]
    fn the_cache_server_takes_the_operators_flags() {
        let parsed = |list: &[&str]| match parse(args(list)) {
            Ok(Invocation::CacheServer(options)) => options,
            other => panic!("{list:?}: {other:?}"),
        };
        // What kcp-operator renders for a CacheServer with its embedded store.
        let options = parsed(&[
            "/cache-server",
            "--tls-cert-file=/etc/cache-server/tls/tls.crt",
            "--tls-private-key-file=/etc/cache-server/tls/tls.key",
            "--root-directory=",
            "--client-ca-file=/etc/cache-server/ca/tls.crt",
            "--embedded-etcd-directory=/var/lib/cache/etcd",
            "--v=2",
        ]);
        options.validate().unwrap();
        assert_eq!(options.logging.verbosity, 2);
        let half = parsed(&["cache-server", "--tls-cert-file=/a"]);
        assert!(half.validate().is_err());
        let nowhere = parsed(&["cache-server", "--root-directory="]);
        assert!(nowhere.validate().is_err());
        let etcd = parsed(&[
            "cache-server",
            "--root-directory=",
            "--etcd-servers=https://e:2379",
        ]);
        etcd.validate().unwrap();
    }

    #[test]
    fn start_options_prints_the_flags() {
        let Ok(Invocation::PrintStartFlags(text)) = parse(args(&["kcp", "start", "options"]))
        else {
            panic!("kcp start options must print the flags");
        };
        assert!(text.contains("Usage: kcp start"), "{text}");
        for flag in [
            "--root-directory",
            "--batteries-included",
            "--etcd-servers",
            "-v, --v",
        ] {
            assert!(text.contains(flag), "{flag} missing from:\n{text}");
        }
    }

    #[test]
    fn usage_errors_exit_2_and_help_exits_0() {
        let exit_code = |list: &[&str]| match parse(args(list)) {
            Err(err) => err.exit_code(),
            Ok(invocation) => panic!("{list:?} parsed as {invocation:?}"),
        };
        assert_eq!(exit_code(&["kcp", "start", "--no-such-flag"]), 2);
        assert_eq!(exit_code(&["kcp", "stop"]), 2);
        assert_eq!(exit_code(&["kcp"]), 2);
        assert_eq!(exit_code(&["kcp", "start", "--secure-port=70000"]), 2);
        assert_eq!(exit_code(&["kcp", "start", "--help"]), 0);
        assert_eq!(exit_code(&["kcp", "--version"]), 0);
    }

    #[test]
    fn builds_knows_every_component_and_subcommand() {
        for program in [
            "kcp-front-proxy",
            "cache-server",
            "front-proxy",
            "start",
            "virtual-workspaces",
        ] {
            assert!(builds(program), "{program}");
        }
        assert!(!builds("workspaces"));
    }

    #[test]
    fn sharded_parses_its_flags() {
        let Ok(Invocation::Sharded(options)) = parse(args(&[
            "kcp",
            "sharded",
            "--shards=3",
            "--root-directory=/tmp/x",
            "--secure-port=0",
            "--etcd-servers=http://a:2379,http://b:2379",
        ])) else {
            panic!("kcp sharded must parse");
        };
        assert_eq!(options.shards, 3);
        assert_eq!(options.secure_port, 0);
        assert_eq!(options.root_directory, Path::new("/tmp/x"));
        assert_eq!(options.etcd_servers, ["http://a:2379", "http://b:2379"]);
        assert_eq!(options.cache, CacheMode::Standalone);
        let Ok(Invocation::Sharded(in_process)) =
            parse(args(&["kcp", "sharded", "--cache=in-process"]))
        else {
            panic!("--cache=in-process must parse");
        };
        assert_eq!(in_process.cache, CacheMode::InProcess);
        let Ok(Invocation::Sharded(defaults)) = parse(args(&["kcp", "sharded"])) else {
            panic!("kcp sharded must parse without flags");
        };
        assert_eq!(
            (defaults.shards, defaults.secure_port),
            (2, 6443),
            "{defaults:?}"
        );
        assert_eq!(defaults.root_directory, Path::new(".kcp-sharded"));
        assert!(parse(args(&["kcp", "sharded", "--shards=0"])).is_err());
    }

    #[test]
    fn start_parses_into_options() {
        let Ok(Invocation::Start(options)) = parse(args(&["kcp", "start", "--shard-name=alpha"]))
        else {
            panic!("kcp start must parse");
        };
        assert_eq!(options.shard_name, "alpha");
    }
}
