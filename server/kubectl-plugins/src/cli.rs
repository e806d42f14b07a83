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
