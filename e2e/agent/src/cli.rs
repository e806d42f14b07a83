//! The command line: `run`, `cleanup`, `network up|down` and the internal `exec`.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kcp_apimachinery::duration::parse_or_seconds;

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
    }
}
