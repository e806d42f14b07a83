//! Command lines of both binaries, mirroring upstream's cobra commands
//! (`cli/pkg/workspace/cmd/cmd.go`): `kubectl ws [<workspace>|use|current|create|create-context|tree]`
//! and `kubectl create workspace`, which kubectl runs as `kubectl-create-workspace`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::client::Overrides;

/// The kubeconfig flags upstream keeps from kubectl's set.
#[derive(Args, Debug, Clone, Default)]
pub struct ConnectionArgs {
    /// Path to the kubeconfig file
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The name of the kubeconfig user to use
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Bearer token for authentication to the API server
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// Path to a cert file for the certificate authority
    #[arg(long, global = true)]
    pub certificate_authority: Option<PathBuf>,
    /// If true, the server's certificate will not be checked for validity
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
}

impl ConnectionArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            token: self.token.clone(),
            certificate_authority: self.certificate_authority.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
        }
    }
}

/// `kubectl ws`: manages kcp workspaces.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl ws",
    version,
    about = "Manages kcp workspaces",
    after_help = "A workspace is <name>, <relative:path>, :<absolute:path>, .. (parent), - (previous), ~ (home), : (root) or . (current); no argument goes home."
)]
pub struct WsCli {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Print only the name of the workspace, e.g. for integration into the shell prompt
    #[arg(long)]
    pub short: bool,
    /// The workspace to enter (same as `use`)
    pub workspace: Option<String>,
    #[command(subcommand)]
    pub command: Option<WsCommand>,
}

#[derive(Subcommand, Debug)]
pub enum WsCommand {
    /// Uses the given workspace as the current workspace. Using - means previous workspace, .. means parent workspace, . mean current, ~ means home workspace
    #[command(visible_alias = "cd")]
    Use {
        workspace: String,
        /// Print only the name of the workspace
        #[arg(long)]
        short: bool,
    },
    /// Print the current workspace. Same as 'kubectl ws .'.
    Current {
        /// Print only the name of the workspace
        #[arg(long)]
        short: bool,
    },
    /// Creates a new workspace
    Create(CreateArgs),
    /// Create a kubeconfig context for the current workspace
    CreateContext {
        /// The context name (default: the workspace path)
        name: Option<String>,
        /// Overwrite the context if it already exists
        #[arg(long)]
        overwrite: bool,
    },
    /// Print the current workspace tree.
    Tree(TreeArgs),
}

/// Flags of `kubectl ws create` and `kubectl create workspace`.
#[derive(Args, Debug, Clone)]
pub struct CreateArgs {
    /// The name of the workspace to create
    pub name: String,
    /// A workspace type. The default type depends on where this child workspace is created.
    #[arg(long = "type", default_value = "")]
    pub workspace_type: String,
    /// Immediately enter the created workspace
    #[arg(long)]
    pub enter: bool,
    /// Ignore if the workspace already exists. Requires none or absolute type path.
    #[arg(long)]
    pub ignore_existing: bool,
    /// A label selector to select the scheduling location of the created workspace.
    #[arg(long, default_value = "")]
    pub location_selector: String,
    /// Create a kubeconfig context for the new workspace with the given name.
    #[arg(long, default_value = "")]
    pub create_context: String,
    /// Workspace path to target instead of the current one (':root:a' absolute, 'a' relative, '..')
    #[arg(short = 'w', long)]
    pub workspace: Option<String>,
}

/// Flags of `kubectl ws tree`.
#[derive(Args, Debug, Clone)]
pub struct TreeArgs {
    /// Show full workspace names
    #[arg(short, long)]
    pub full: bool,
    /// Show workspace and logical cluster status for each node
    #[arg(long)]
    pub wide: bool,
    /// Workspace path to target instead of the current one
    #[arg(short = 'w', long)]
    pub workspace: Option<String>,
}

/// `kubectl create workspace` (the `kubectl-create-workspace` plugin).
#[derive(Parser, Debug)]
#[command(
    name = "kubectl create workspace",
    version,
    about = "Creates a new workspace"
)]
pub struct CreateWorkspaceCli {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub create: CreateArgs,
}

/// `kubectl kcp`: kcp's APIs-as-a-service commands (upstream `cmd/kubectl-kcp`).
#[derive(Parser, Debug)]
#[command(
    name = "kubectl kcp",
    bin_name = "kubectl kcp",
    version,
    arg_required_else_help = true,
    about = "kubectl plugin for kcp",
    long_about = "kubectl plugin for kcp: binds APIExports into the current workspace, answers their permission claims and turns CRDs into APIResourceSchemas."
)]
pub struct KcpCli {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(subcommand)]
    pub command: KcpCommand,
}

#[derive(Subcommand, Debug)]
pub enum KcpCommand {
    /// Bind different types into current workspace.
    #[command(subcommand, arg_required_else_help = true)]
    Bind(BindCommand),
    /// Operations related to viewing or updating permission claims
    #[command(subcommand, arg_required_else_help = true, after_help = CLAIMS_EXAMPLES)]
    Claims(ClaimsCommand),
    /// CRD related operations
    #[command(subcommand, arg_required_else_help = true)]
    Crd(CrdCommand),
}

#[derive(Subcommand, Debug)]
pub enum BindCommand {
    /// Bind to an APIExport
    #[command(after_help = BIND_EXAMPLES)]
    Apiexport(BindArgs),
}

const BIND_EXAMPLES: &str = "Examples:
  # Bind the APIExport \"my-export\" of the \"root:my-service\" workspace as \"my-binding\"
  kubectl kcp bind apiexport root:my-service:my-export --name my-binding

  # ... accepting its claims on secrets and configmaps
  kubectl kcp bind apiexport root:my-service:my-export --accept-permission-claim secrets.core,configmaps.core

  # ... rejecting them
  kubectl kcp bind apiexport root:my-service:my-export --reject-permission-claim secrets.core,configmaps.core";

/// Flags of `kubectl kcp bind apiexport` (upstream `BindOptions`).
#[derive(Args, Debug, Clone)]
pub struct BindArgs {
    /// The APIExport to bind: <workspace_path:apiexport-name>
    #[arg(
        value_name = "workspace_path:apiexport-name",
        default_value = "",
        hide_default_value = true
    )]
    pub export: String,
    /// Name of the APIBinding to create.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub name: String,
    /// Duration to wait for APIBinding to be created successfully.
    #[arg(long, default_value = "30s", value_parser = kcp_apimachinery::duration::parse)]
    pub timeout: std::time::Duration,
    /// List of accepted permission claims for the APIBinding. Format: --accept-permission-claim resource.group
    #[arg(long = "accept-permission-claim", value_delimiter = ',')]
    pub accept: Vec<String>,
    /// List of rejected permission claims for the APIBinding. Format: --reject-permission-claim resource.group
    #[arg(long = "reject-permission-claim", value_delimiter = ',')]
    pub reject: Vec<String>,
    /// Accept all permission claims from the APIExport.
    #[arg(long = "accept-all-permission-claims")]
    pub accept_all: bool,
    /// Reject all permission claims from the APIExport.
    #[arg(long = "reject-all-permission-claims")]
    pub reject_all: bool,
    /// Workspace path to target instead of the current one (':root:a' absolute, 'a' relative, '..')
    #[arg(short = 'w', long)]
    pub workspace: Option<String>,
}

const CLAIMS_EXAMPLES: &str = "Examples:
  # The permission claims of one APIBinding and their state
  kubectl kcp claims get apibinding cert-manager

  # ... of every APIBinding in the current workspace
  kubectl kcp claims get apibinding

  # Accept the claim on secrets, or on a resource of another group
  kubectl kcp claims accept cert-manager --resource=secrets
  kubectl kcp claims accept cert-manager --resource=gateways.networking.istio.io

  # Reject the claim with this identity hash
  kubectl kcp claims reject cert-manager --identity-hash=5fdf7c7aaf407fd1594566869803f565bb84d22156cef5c445d2ee13ac2cfca6";

#[derive(Subcommand, Debug)]
pub enum ClaimsCommand {
    /// Operations related to fetching APIs with respect to permission claims
    #[command(subcommand, arg_required_else_help = true)]
    Get(ClaimsGetCommand),
    /// Accept permission claims of an APIBinding
    Accept(ClaimAnswerArgs),
    /// Reject permission claims of an APIBinding
    Reject(ClaimAnswerArgs),
}

#[derive(Subcommand, Debug)]
pub enum ClaimsGetCommand {
    /// Get claims related to apibinding
    Apibinding {
        /// The APIBinding (all APIBindings of the workspace when omitted)
        name: Option<String>,
        /// Workspace path to target instead of the current one
        #[arg(short = 'w', long)]
        workspace: Option<String>,
    },
}

/// Flags of `kubectl kcp claims accept|reject`.
#[derive(Args, Debug, Clone)]
pub struct ClaimAnswerArgs {
    /// The APIBinding whose claims change
    #[arg(default_value = "", hide_default_value = true)]
    pub name: String,
    /// Resource group of permission claim. Format: --resource resource.group
    #[arg(long, default_value = "", hide_default_value = true)]
    pub resource: String,
    /// Identity hash of the resource. Format: --identity-hash id
    #[arg(long, default_value = "", hide_default_value = true)]
    pub identity_hash: String,
    /// Workspace path to target instead of the current one
    #[arg(short = 'w', long)]
    pub workspace: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum CrdCommand {
    /// Snapshot a CRD and convert it to an APIResourceSchema
    #[command(after_help = SNAPSHOT_EXAMPLES)]
    Snapshot(SnapshotArgs),
}

const SNAPSHOT_EXAMPLES: &str = "Examples:
  # widgets.example.io with prefix 'today' becomes the APIResourceSchema today.widgets.example.io
  kubectl kcp crd snapshot -f crd.yaml --prefix 2022-05-07 > api-resource-schema.yaml

  # Convert a CRD from STDIN
  kubectl get crd foo -o yaml | kubectl kcp crd snapshot -f - --prefix today > output.yaml";

/// Flags of `kubectl kcp crd snapshot`.
#[derive(Args, Debug, Clone)]
pub struct SnapshotArgs {
    /// Path to a file containing the CRD to convert to an APIResourceSchema, or - for stdin
    #[arg(short = 'f', long, default_value = "", hide_default_value = true)]
    pub filename: String,
    /// Prefix to use for the APIResourceSchema's name, before <resource>.<group>
    #[arg(long, default_value = "", hide_default_value = true)]
    pub prefix: String,
    /// Output format. Valid values are 'json' and 'yaml'
    #[arg(short = 'o', long, default_value = "yaml")]
    pub output: String,
}
