//! The userspace Service proxy: one listener per Service port on the virtual IP, forwarding each
//! connection to a ready endpoint, round robin.
//!
//! This is what makes rolling updates invisible to clients: the backend list is replaced the
//! moment a pod stops being ready or starts terminating (the pod worker marks itself terminating
//! before any signal is sent), so new connections only go to pods that serve, while a connection
//! already open on a pod lives as long as that pod does. A backend that refuses is skipped and the
//! next one tried before the client sees a failure. At debug level it logs every backend list
//! it is given and each connection's backend, time to connect, lifetime and bytes: what shows
//! where a client's request went when one fails while pods roll.
//!
//! Both sockets of a forwarded connection carry `TCP_USER_TIMEOUT` ([`UNACKNOWLEDGED_LIMIT`]):
//! when a pod is deleted its network namespace goes with it, and data the proxy still had to send
//! there would otherwise be retransmitted until TCP gives up (about 15 minutes with Linux's
//! default `tcp_retries2`), holding the connection, its task and the client's half open. kube-proxy
//! has no such socket (it NATs in the kernel, whose conntrack entry goes with the endpoint).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::network::Network;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long sent data may stay unacknowledged before the kernel closes a forwarded connection.
const UNACKNOWLEDGED_LIMIT: Duration = Duration::from_secs(30);

struct PortProxy {
    backends: watch::Sender<Vec<SocketAddr>>,
    task: JoinHandle<()>,
}

struct RunningService {
    vip: Ipv4Addr,
    ports: HashMap<u16, PortProxy>,
}

/// What one Service should look like: its virtual IP and, per port, the ready backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub vip: Ipv4Addr,
    pub ports: BTreeMap<u16, Vec<SocketAddr>>,
}

#[derive(Default)]
pub struct Proxies {
    running: HashMap<String, RunningService>,
}

impl Proxies {
    /// Makes the listeners match `desired` (keyed by `namespace/name`): virtual IPs added to the
    /// bridge, listeners started and stopped, backend lists replaced.
    pub async fn sync(&mut self, network: &Network, desired: &BTreeMap<String, Desired>) {
        let gone: Vec<String> = self
            .running
            .iter()
            .filter(|(key, running)| desired.get(*key).is_none_or(|d| d.vip != running.vip))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some(service) = self.running.remove(&key) {
                stop_service(network, service).await;
                tracing::info!(service = %key, "service proxy removed");
            }
        }
        for (key, want) in desired {
            if !self.running.contains_key(key) {
                let network = network.clone();
                let vip = want.vip;
                match tokio::task::spawn_blocking(move || network.add_vip(vip)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(service = %key, %error, "adding the virtual IP");
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "virtual IP task");
                        continue;
                    }
                }
                tracing::info!(service = %key, %vip, "service virtual IP");
                self.running.insert(
                    key.clone(),
                    RunningService {
                        vip,
                        ports: HashMap::new(),
                    },
                );
            }
            let Some(running) = self.running.get_mut(key) else {
                continue;
            };
            running.ports.retain(|port, proxy| {
                let keep = want.ports.contains_key(port);
                if !keep {
                    proxy.task.abort();
                }
                keep
            });
            for (port, backends) in &want.ports {
                if let Some(proxy) = running.ports.get(port) {
                    proxy.backends.send_if_modified(|current| {
                        if current == backends {
                            false
                        } else {
                            tracing::debug!(service = %key, port, ?backends, "service backends");
                            backends.clone_into(current);
                            true
                        }
                    });
                    continue;
                }
                let address = SocketAddr::from((running.vip, *port));
                match TcpListener::bind(address).await {
                    Ok(listener) => {
                        let (tx, rx) = watch::channel(backends.clone());
                        let task = tokio::spawn(serve(listener, rx));
                        running
                            .ports
                            .insert(*port, PortProxy { backends: tx, task });
                    }
                    Err(error) => {
                        tracing::warn!(service = %key, %address, %error, "listening for a service port");
                    }
                }
            }
        }
    }

    /// Stops every listener and removes every virtual IP.
    pub async fn shutdown(&mut self, network: &Network) {
        for (_, service) in self.running.drain() {
            stop_service(network, service).await;
        }
    }
}

async fn stop_service(network: &Network, service: RunningService) {
    for (_, proxy) in service.ports {
        proxy.task.abort();
    }
    let network = network.clone();
    let vip = service.vip;
    let _ = tokio::task::spawn_blocking(move || network.remove_vip(vip)).await;
}

async fn serve(listener: TcpListener, backends: watch::Receiver<Vec<SocketAddr>>) {
    let next = Arc::new(AtomicUsize::new(0));
    loop {
        let (inbound, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::debug!(%error, "accepting a service connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let list = backends.borrow().clone();
        let start = next.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(forward(inbound, list, start));
    }
}

async fn forward(mut inbound: TcpStream, backends: Vec<SocketAddr>, start: usize) {
    tune(&inbound);
    let client = inbound.peer_addr().ok();
    let began = std::time::Instant::now();
    for i in 0..backends.len() {
        let backend = backends[(start + i) % backends.len()];
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
            Ok(Ok(mut outbound)) => {
                tune(&outbound);
                let connected = began.elapsed();
                let copied = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                tracing::debug!(
                    ?client,
                    %backend,
                    connect_ms = connected.as_millis() as u64,
                    open_ms = began.elapsed().as_millis() as u64,
                    ?copied,
                    "service connection closed"
                );
                return;
            }
            Ok(Err(error)) => tracing::debug!(%backend, %error, "backend refused; trying the next"),
            Err(_) => tracing::debug!(%backend, "backend connect timed out; trying the next"),
        }
    }
    tracing::debug!(?client, ?backends, "no backend took the connection");
}

/// No Nagle delay, and [`UNACKNOWLEDGED_LIMIT`] as `TCP_USER_TIMEOUT`; a socket that refuses
/// either still forwards (logged at debug level).
fn tune(stream: &TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set");
    }
    if let Err(error) = set_user_timeout(stream, UNACKNOWLEDGED_LIMIT) {
        tracing::debug!(%error, "TCP_USER_TIMEOUT not set");
    }
}

fn set_user_timeout(stream: &TcpStream, limit: Duration) -> std::io::Result<()> {
    let millis = libc::c_uint::try_from(limit.as_millis()).unwrap_or(libc::c_uint::MAX);
    let length = libc::socklen_t::try_from(std::mem::size_of::<libc::c_uint>())
        .unwrap_or(libc::socklen_t::MAX);
    // SAFETY: the descriptor is the open socket `stream` owns for the whole call; the option
    // value points at a live `c_uint` whose size is passed alongside it.
    let done = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            (&raw const millis).cast(),
            length,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Round robin over live backends, skipping one that refuses.
    #[tokio::test]
    async fn forwards_round_robin_and_skips_dead_backends() {
        let mut addresses = Vec::new();
        for reply in [b'a', b'b'] {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            addresses.push(listener.local_addr().expect("addr"));
            tokio::spawn(async move {
                loop {
                    let Ok((mut socket, _)) = listener.accept().await else {
                        return;
                    };
                    let _ = socket.write_all(&[reply]).await;
                }
            });
        }
        // A port nobody listens on.
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            l.local_addr().expect("addr")
        };
        let front = TcpListener::bind("127.0.0.1:0").await.expect("front");
        let front_addr = front.local_addr().expect("addr");
        let (_tx, rx) = watch::channel(vec![addresses[0], dead, addresses[1]]);
        tokio::spawn(serve(front, rx));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let mut client = TcpStream::connect(front_addr).await.expect("connect");
            let mut byte = [0u8; 1];
            client.read_exact(&mut byte).await.expect("read");
            seen.push(byte[0]);
        }
        // 0 -> a, 1 -> dead then b, 2 -> b.
        assert_eq!(seen, vec![b'a', b'b', b'b']);
    }

    /// The `TCP_USER_TIMEOUT` of `stream`, in milliseconds, as the kernel reports it.
    fn user_timeout_ms(stream: &TcpStream) -> libc::c_uint {
        let mut millis: libc::c_uint = 0;
        let mut length =
            libc::socklen_t::try_from(std::mem::size_of::<libc::c_uint>()).expect("socklen_t");
        // SAFETY: `stream` owns the open descriptor; both pointers are to live locals and
        // `length` holds the size of `millis`.
        let done = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                (&raw mut millis).cast(),
                &raw mut length,
            )
        };
        assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
        millis
    }

    #[tokio::test]
    async fn tuned_sockets_give_up_on_unacknowledged_data_after_the_limit() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        assert_eq!(
            user_timeout_ms(&stream),
            0,
            "the kernel's default is no limit"
        );
        tune(&stream);
        assert_eq!(
            u128::from(user_timeout_ms(&stream)),
            UNACKNOWLEDGED_LIMIT.as_millis()
        );
        assert!(stream.nodelay().expect("nodelay"));
    }
}
