//! kcp's virtual workspaces (upstream's `pkg/virtual`): APIs served under `/services/<name>/`
//! that show a controller a slice of many logical clusters at once.
//!
//! - [`apiexport`] serves `/services/apiexport/<export-cluster>/<export-name>/clusters/<cluster|*>/...`,
//!   a provider's view of the resources its APIExport binds, in every logical cluster bound to
//!   it, authorized by the provider's `content` permission on the export.
//! - [`lifecycle`] serves `/services/initializingworkspaces/<initializer>/...` and
//!   `/services/terminatingworkspaces/<terminator>/...`, the LogicalClusters waiting for a
//!   WorkspaceType's initializer (terminator), which it finishes through the workspace.
//!
//! Each virtual workspace is a [`kcp_apiserver::services::Service`] the binary mounts; it
//! authorizes its requests itself and serves them by dispatching rewritten requests into the API
//! server through [`kcp_apiserver::services::Loopback`] (so admission, validation, watch caches and
//! discovery are the server's own). The pure rules (URLs, which clusters and resources a view
//! shows, document filtering) are small modules with unit tests; the I/O is in the services.

pub mod apiexport;
mod backend;
mod documents;
mod export_cache;
mod export_view;
pub mod lifecycle;
mod mounted;
pub mod remote;
mod request;
mod url;

pub use apiexport::ApiExportService;
pub use backend::Backend;
pub use lifecycle::LifecycleService;

use std::sync::Arc;

use kcp_apiserver::services::Services;
use mounted::Mounted;

/// Mounts every virtual workspace on `services`, each served through `backend` (a shard mounts
/// them beside its API; `kcp virtual-workspaces` serves them alone).
pub fn mount(services: Services, backend: &Backend) -> Services {
    let lifecycle = |which| Arc::new(Mounted(LifecycleService::new(which, backend.clone())));
    services
        .with(
            apiexport::NAME,
            Arc::new(Mounted(ApiExportService::new(backend.clone()))),
        )
        .with(
            lifecycle::INITIALIZING.name,
            lifecycle(&lifecycle::INITIALIZING),
        )
        .with(
            lifecycle::TERMINATING.name,
            lifecycle(&lifecycle::TERMINATING),
        )
}
