//! The commands, each following its upstream counterpart in `cli/pkg/workspace/plugin`,
//! `cli/pkg/bind`, `cli/pkg/claims` or `cli/pkg/crd`. [`Session`] is what they share: the
//! kubeconfig, the selected context and an API client.

mod bind;
mod claims;
mod context;
mod create;
mod selector;
mod snapshot;
mod tree;
mod use_ws;

use std::time::Duration;

use crate::apibinding::{APIS_GROUP, BindingVersion};
use crate::claims::ClaimState;
use crate::cli::{
    BindCommand, ClaimsCommand, ClaimsGetCommand, ConnectionArgs, CrdCommand, CreateWorkspaceCli,
    KcpCli, KcpCommand, WsCli, WsCommand,
};
use crate::client::{ApiClient, Overrides};
use crate::error::Error;
use crate::kubeconfig::{self, Kubeconfig, Selected};
use crate::path::{ClusterPath, ClusterUrl, resolve_dots};

/// The kubeconfig and connection a command works with.
#[derive(Debug, Clone)]
pub struct Session {
    kubeconfig: Kubeconfig,
    selected: Selected,
    overrides: Overrides,
}

impl Session {
    pub fn load(connection: &ConnectionArgs) -> Result<Self, Error> {
        let env = std::env::var("KUBECONFIG").ok();
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let path = kubeconfig::locate(
            connection.kubeconfig.as_deref(),
            env.as_deref(),
            home.as_deref(),
        )?;
        let kubeconfig = Kubeconfig::load(&path)?;
        let mut selected = kubeconfig.select(connection.context.as_deref())?;
        if let Some(user) = connection.user.as_deref() {
            selected.user = kubeconfig
                .user(user)
                .cloned()
                .ok_or_else(|| Error::msg(format!("user {user:?} not found in kubeconfig")))?;
        }
        Ok(Self {
            kubeconfig,
            selected,
            overrides: connection.overrides(),
        })
    }

    pub fn server(&self) -> &str {
        self.selected.server()
    }

    pub fn client(&self) -> Result<ApiClient, Error> {
        ApiClient::new(&self.selected, self.kubeconfig.dir(), &self.overrides)
    }

    /// The workspace the selected server points to.
    pub fn current(&self) -> Result<ClusterUrl, Error> {
        let host = self.server();
        ClusterUrl::parse(host).ok().flatten().ok_or_else(|| {
            Error::msg(format!(
                "current URL {host:?} does not point to a workspace"
            ))
        })
    }

    /// What the apis.kcp.io commands start with: the client, the workspace (after `-w`) and the
    /// APIBinding version discovery prefers there (upstream's `PreferredVersion`).
    async fn connect_apis(
        &mut self,
        workspace: Option<&str>,
    ) -> Result<(ApiClient, ClusterPath, BindingVersion), Error> {
        self.target_workspace(workspace)?;
        let current = self.current()?;
        let client = self.client()?;
        let version = client
            .preferred_version(&current.path, APIS_GROUP, "apibindings")
            .await
            .and_then(|v| BindingVersion::parse(&v))
            .map_err(|e| e.context("service discovery failed"))?;
        Ok((client, current.path, version))
    }

    /// Upstream's `--workspace/-w` override: run against another workspace without touching
    /// the kubeconfig (`:abs:path`, `rel:path`, `.`, `..`).
    fn target_workspace(&mut self, workspace: Option<&str>) -> Result<(), Error> {
        let Some(workspace) = workspace.filter(|w| !w.is_empty()) else {
            return Ok(());
        };
        let current = self.current()?;
        let joined = match workspace.strip_prefix(':') {
            Some(abs) => abs.to_owned(),
            None => current.path.join(workspace).to_string(),
        };
        let path =
            resolve_dots(&joined).map_err(|_| Error::msg("cannot go above the root workspace"))?;
        if !path.is_valid() {
            return Err(Error::msg(format!("invalid workspace path: {workspace}")));
        }
        self.selected.cluster.server = current.with_path(&path);
        Ok(())
    }
}

/// Runs `kubectl ws`.
pub async fn run_ws(cli: WsCli) -> Result<(), Error> {
    let mut session = Session::load(&cli.connection)?;
    match cli.command {
        None => {
            use_ws::run(
                &mut session,
                cli.workspace.as_deref().unwrap_or_default(),
                cli.short,
            )
            .await
        }
        Some(WsCommand::Use { workspace, short }) => {
            use_ws::run(&mut session, &workspace, short).await
        }
        Some(WsCommand::Current { short }) => {
            use_ws::print_current(session.server(), short, None);
            Ok(())
        }
        Some(WsCommand::Create(args)) => create::run(&mut session, &args).await,
        Some(WsCommand::CreateContext { name, overwrite }) => {
            context::run(&mut session, name.as_deref(), overwrite)
        }
        Some(WsCommand::Tree(args)) => tree::run(&mut session, &args).await,
    }
}

/// Runs `kubectl create workspace`.
pub async fn run_create_workspace(cli: CreateWorkspaceCli) -> Result<(), Error> {
    let mut session = Session::load(&cli.connection)?;
    create::run(&mut session, &cli.create).await
}

/// Runs `kubectl kcp`.
pub async fn run_kcp(cli: KcpCli) -> Result<(), Error> {
    let command = match cli.command {
        // a snapshot needs neither kubeconfig nor server
        KcpCommand::Crd(CrdCommand::Snapshot(args)) => return snapshot::run(&args),
        other => other,
    };
    let mut session = Session::load(&cli.connection)?;
    match command {
        KcpCommand::Bind(BindCommand::Apiexport(args)) => bind::run(&mut session, &args).await,
        KcpCommand::Claims(ClaimsCommand::Get(ClaimsGetCommand::Apibinding {
            name,
            workspace,
        })) => claims::get(&mut session, name.as_deref(), workspace.as_deref()).await,
        KcpCommand::Claims(ClaimsCommand::Accept(args)) => {
            claims::answer(&mut session, &args, ClaimState::Accepted).await
        }
        KcpCommand::Claims(ClaimsCommand::Reject(args)) => {
            claims::answer(&mut session, &args, ClaimState::Rejected).await
        }
        KcpCommand::Crd(CrdCommand::Snapshot(args)) => snapshot::run(&args),
    }
}

/// `wait.PollUntilContextTimeout(..., immediate=true, ...)`: the first `Some` wins.
pub(crate) async fn poll<T>(
    interval: Duration,
    timeout: Duration,
    mut attempt: impl AsyncFnMut() -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(done) = attempt().await? {
            return Ok(done);
        }
        if tokio::time::Instant::now() + interval > deadline {
            return Err(Error::msg("context deadline exceeded"));
        }
        tokio::time::sleep(interval).await;
    }
}
