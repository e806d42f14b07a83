//! Free loopback ports, for peers that cannot be told to pick their own (etcd).

use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago. Another process may take it before the
/// caller binds it, so starters retry with fresh ports when a peer fails to start.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("binding an ephemeral loopback port")
        .port()
}
