//! The shard's in-process virtual workspaces (`--run-virtual-workspaces`, true by default):
//! kcp-virtual-workspaces' services mounted under `/services/`, served through the shard's own
//! API server once it is bound (its loopback), as upstream's shard serves them in-process.

use kcp_apiserver::ApiServer;
use kcp_apiserver::services::Services;
use kcp_virtual_workspaces::Backend;

/// The virtual workspaces of this process, if it runs them.
pub struct InProcess(Option<Backend>);

impl InProcess {
    pub fn new(run: bool) -> InProcess {
        InProcess(run.then(Backend::default))
    }

    /// `services` with the virtual workspaces mounted (unless this process does not run them).
    pub fn mount(&self, services: Services) -> Services {
        match &self.0 {
            Some(backend) => kcp_virtual_workspaces::mount(services, backend),
            None => services,
        }
    }

    /// Connects the mounted virtual workspaces to the bound server.
    pub fn connect(&self, server: &ApiServer) {
        if let Some(backend) = &self.0 {
            backend.connect(server.loopback());
        }
    }
}
