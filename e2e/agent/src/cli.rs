//! The command line: `run`, `cleanup`, `network up|down` and the internal `exec`.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kcp_apimachinery::duration::parse_or_seconds;

use crate::kubelet_server::KubeletTls;
use crate::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "kcp-node-agent",
    about = "Runs the pods of Deployments and StatefulSets on a kcp host as local processes"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent until SIGTERM/SIGINT.
    Run(Box<RunArgs>),
    /// Remove what a crashed run left: processes in its pod namespaces, the namespaces, veths,
    /// virtual IPs and the bridge.
    Cleanup(CleanupArgs),
    /// Create or remove the bridge alone (so a server can bind its address before the agent runs).
    Network {
        #[command(subcommand)]
        action: NetworkAction,
    },
    /// Internal: become a container process as FILE describes.
    #[command(hide = true)]
    Exec {
        #[arg(long)]
        spec: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig of the host API admin (its server URL may end in /clusters/<name>).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// Where pod directories, logs, volumes and the address table live.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// YAML image map: repository -> entrypoint binary (and other command names).
    #[arg(long)]
    pub images: PathBuf,
    /// Name of the Linux bridge of the pod network (at most 15 characters).
    #[arg(long)]
    pub bridge: String,
    /// IPv4 subnet of the pod network; its first address is the bridge's.
    #[arg(long)]
    pub subnet: String,
    /// Address in-cluster clients reach the host API at (default: the bridge address).
    #[arg(long)]
    pub api_server_host: Option<Ipv4Addr>,
    /// Port in-cluster clients reach the host API at (default: the kubeconfig's port).
    #[arg(long)]
    pub api_server_port: Option<u16>,
    /// CA bundle pods get as ca.crt (default: the kubeconfig's CA).
    #[arg(long)]
    pub api_ca_file: Option<PathBuf>,
    /// The cluster domain of Service names (`<svc>.<ns>.svc.<domain>`).
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Upper bound of the restart back-off (e.g. 5m, 20s, 1500ms).
    #[arg(long, default_value = "5m", value_parser = parse_or_seconds)]
    pub max_backoff: Duration,
    /// The node name written to spec.nodeName of the pods this agent runs.
    #[arg(long, default_value = "kcp-node-agent")]
    pub node_name: String,
    /// How often everything is reconciled even without watch events.
    #[arg(long, default_value = "2s", value_parser = parse_or_seconds)]
    pub resync: Duration,
    /// Log lines as text or as JSON objects.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Port of the kubelet endpoints (container logs, exec, attach, port-forward), on the bridge
    /// address.
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
    /// Serving certificate of the kubelet port (with --tls-private-key-file and --client-ca-file;
    /// without them the kubelet endpoints are not served).
    #[arg(long, requires_all = ["tls_private_key_file", "client_ca_file"])]
    pub tls_cert_file: Option<PathBuf>,
    /// Key of --tls-cert-file.
    #[arg(long, requires_all = ["tls_cert_file", "client_ca_file"])]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA of the client certificates the kubelet port accepts (the API server's
    /// --kubelet-client-certificate); no other client is answered.
    #[arg(long, requires_all = ["tls_cert_file", "tls_private_key_file"])]
    pub client_ca_file: Option<PathBuf>,
}

impl RunArgs {
    /// kubelet's serving files, when all three were given.
    pub fn kubelet_tls(&self) -> Option<KubeletTls> {
        Some(KubeletTls {
            cert_file: self.tls_cert_file.clone()?,
            key_file: self.tls_private_key_file.clone()?,
            client_ca_file: self.client_ca_file.clone()?,
        })
    }
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    #[arg(long)]
    pub bridge: String,
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Keep the bridge (e.g. a server still listens on its address).
    #[arg(long)]
    pub keep_bridge: bool,
}

#[derive(Debug, Subcommand)]
pub enum NetworkAction {
    Up {
        #[arg(long)]
        bridge: String,
        #[arg(long)]
        subnet: String,
    },
    Down {
        #[arg(long)]
        bridge: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_parses() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "kcp-node-agent",
            "run",
            "--kubeconfig=/k",
            "--state-dir=/s",
            "--images=/i",
            "--bridge=kcpe2e3",
            "--subnet=10.213.3.0/24",
            "--max-backoff=2s",
        ])
        .expect("parses");
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.max_backoff, Duration::from_secs(2));
        assert_eq!(args.cluster_domain, "cluster.local");
        assert_eq!(args.port, 10250);
        assert!(args.kubelet_tls().is_none());
    }

    #[test]
    fn kubelet_serving_files_come_together() {
        let base = [
            "kcp-node-agent",
            "run",
            "--kubeconfig=/k",
            "--state-dir=/s",
            "--images=/i",
            "--bridge=b",
            "--subnet=10.213.3.0/24",
        ];
        let alone = base.iter().copied().chain(["--tls-cert-file=/c"]);
        assert!(Cli::try_parse_from(alone).is_err());
        let all = base.iter().copied().chain([
            "--tls-cert-file=/c",
            "--tls-private-key-file=/k",
            "--client-ca-file=/ca",
            "--port=10300",
        ]);
        let Command::Run(args) = Cli::try_parse_from(all).expect("parses").command else {
            panic!("not run")
        };
        let tls = args.kubelet_tls().expect("all three given");
        assert_eq!(tls.client_ca_file, PathBuf::from("/ca"));
        assert_eq!(args.port, 10300);
    }
}
