//! kcp's tenancy in the server: the index of LogicalClusters and WorkspaceTypes ([`index`]), what
//! the root logical cluster holds from the start ([`bootstrap`]) and home workspaces ([`home`]).
//! The rules themselves are kcp-tenancy's; admission sits in the write path
//! (`handlers/resource/admission`), scheduling, initialization and deletion in `controllers/`.

pub mod bootstrap;
pub mod home;
pub mod index;

pub use index::TenancyIndex;
