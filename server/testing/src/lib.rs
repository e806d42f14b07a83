//! Test support shared by the server's test suites.
//!
//! Acceptance tests prove the server against the real peers users run (the `kcp` binary itself,
//! Debian's etcd, the installed kubectl releases), so the suites need the same small toolkit to start
//! them: free loopback ports, throwaway directories, and process guards that stop exactly the
//! process they started, by PID, even when a test panics. Keeping that toolkit here, and not copied
//! into each crate's `tests/`, means every suite waits, cleans up and reports a failed start the
//! same way.
//!
//! Every wait in here is bounded, and generously so: the bounds only stop a hung peer from hanging
//! the suite on a loaded CI machine; nothing asserts how fast anything is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answers;
pub mod binaries;
mod caller;
mod dir;
mod etcd;
mod http;
pub mod identities;
mod kcp;
mod kubectl;
pub mod oidc;
mod pki;
pub mod plugins;
mod ports;
mod process;
pub mod python;
mod sharded;
mod wait;
pub mod widgets;

pub use answers::{expect_status, item_names, strings};
pub use caller::{Caller, cluster_prefix};
pub use dir::temp_dir;
pub use etcd::EtcdProcess;
pub use http::{Response, WatchStream};
pub use kcp::{AdminCredentials, KcpProcess, SharedKcp, StartingKcp};
pub use kubectl::{BackgroundKubectl, Kubectl, Run};
pub use pki::{TlsFiles, write_tls_files, write_tls_files_for};
pub use ports::free_port;
pub use process::ChildGuard;
pub use sharded::{ShardedChild, ShardedKcp};
pub use wait::Patience;
