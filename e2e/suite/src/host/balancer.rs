//! A Service reached from outside a real cluster the way an in-cluster client reaches it: through
//! every ready pod behind it, not one. `kubectl port-forward svc/...` picks one pod when it starts
//! and ends with it, so a rolling update (scenario 3's upgrade, scenario 15's certificate
//! rotation) refused the client's next connection. Here a local listener stands for the Service:
//! a `kubectl get endpoints --watch` keeps the set of ready pods (as kube-proxy follows the
//! Endpoints), each ready pod gets its own `kubectl port-forward pod/...`, and each accepted
//! connection goes to one of them in turn. A pod that stops being ready gets no new connection
//! but keeps its forward (and so its open connections, which the pod drains while terminating)
//! until it leaves the Endpoints.
//!
//! A connection is handed to another pod only when the one it went to closed it without sending
//! a single byte back (the pod was gone, so its port-forward could not reach it): the bytes the
//! client sent are sent again. For TLS (every kcp Service) that is the ClientHello, so no request
//! was ever seen by the first pod; the number of such connections is counted and reported with
//! the suite's figures. Once a pod has answered, the connection is that pod's, as through a real
//! Service.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::KUBECTL_VERSION;

/// How long a connection waits for a ready pod (a roll can leave none ready for a moment).
const WAIT_FOR_A_POD: Duration = Duration::from_secs(30);
/// How often a connection waiting for its pod's first byte looks at the client's side.
const ANSWER_POLL: Duration = Duration::from_millis(20);

/// kubectl, as the suite runs it.
pub fn kubectl() -> String {
    std::env::var("KUBECTL")
        .unwrap_or_else(|_| format!("/usr/lib/google-cloud-sdk/bin/kubectl.{KUBECTL_VERSION}"))
}

/// Starts `kubectl port-forward <target> :<port>` in `namespace`: the child and its local port.
pub fn port_forward(
    kubeconfig: &Path,
    namespace: &str,
    target: &str,
    port: u16,
) -> Result<(Child, u16), String> {
    let kubectl = kubectl();
    let mut child = Command::new(&kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["-n", namespace, "port-forward", target, &format!(":{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {kubectl} port-forward: {e}"))?;
    let stdout = child.stdout.take().ok_or("port-forward without stdout")?;
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    if let Err(error) = stdout.read_line(&mut line) {
        stop(&mut child);
        return Err(format!("reading port-forward: {error}"));
    }
    // kubectl goes on writing (the IPv6 listener, "Handling connection for ..."): its output
    // is drained for as long as it runs, or its next line would kill it with SIGPIPE.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:41234 -> 6443"
    match line
        .split_whitespace()
        .nth(2)
        .and_then(|address| address.rsplit(':').next())
        .and_then(|port| port.parse().ok())
    {
        Some(local) => Ok((child, local)),
        None => {
            stop(&mut child);
            Err(format!("port-forward of {target} said {line:?}"))
        }
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A pod behind the Service and the port of it the Service's port targets.
type Pod = (String, u16);

/// The pods behind the Service and the forwards to them.
#[derive(Default)]
struct Backends {
    /// Ready pods (name, target port), in the Endpoints' order.
    ready: Vec<Pod>,
    /// A forward per pod (ready or draining): the child and its local port.
    forwards: BTreeMap<Pod, (Child, u16)>,
    /// The Endpoints watch, to be stopped with the Service.
    watch: Option<Child>,
    /// Where the next connection starts looking.
    next: usize,
}

impl Backends {
    /// Local ports of the ready pods with a forward, starting at the next in turn.
    fn in_turn(&mut self) -> Vec<u16> {
        let ports: Vec<u16> = self
            .ready
            .iter()
            .filter_map(|pod| self.forwards.get(pod).map(|(_, port)| *port))
            .collect();
        if ports.is_empty() {
            return ports;
        }
        self.next = (self.next + 1) % ports.len();
        let (after, before) = ports.split_at(self.next);
        before.iter().chain(after).copied().collect()
    }
}

type Shared = Arc<Mutex<Backends>>;

fn lock(backends: &Shared) -> std::sync::MutexGuard<'_, Backends> {
    backends.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One Service port reachable on `127.0.0.1:<port>` through all its ready pods.
pub struct ServiceForward {
    address: SocketAddr,
    stopped: Arc<AtomicBool>,
    backends: Shared,
}

impl ServiceForward {
    /// Starts forwarding `port` of Service `namespace/service`; `failed_over` counts the
    /// connections sent again to another pod.
    pub fn start(
        kubeconfig: &Path,
        namespace: &str,
        service: &str,
        port: u16,
        failed_over: Arc<AtomicUsize>,
    ) -> Result<ServiceForward, String> {
        let port_name = service_port_name(kubeconfig, namespace, service, port)?;
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("local address: {e}"))?;
        let stopped = Arc::new(AtomicBool::new(false));
        let backends = Shared::default();
        let watcher = Watcher {
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            port_name,
            stopped: stopped.clone(),
            backends: backends.clone(),
        };
        std::thread::spawn(move || watcher.run());
        {
            let (stopped, backends) = (stopped.clone(), backends.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let (backends, failed_over) = (backends.clone(), failed_over.clone());
                    std::thread::spawn(move || serve(client, &backends, &failed_over));
                }
            });
        }
        Ok(ServiceForward {
            address,
            stopped,
            backends,
        })
    }

    /// The local port that stands for the Service's port.
    pub fn port(&self) -> u16 {
        self.address.port()
    }
}

impl Drop for ServiceForward {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(self.address);
        let mut backends = lock(&self.backends);
        if let Some(watch) = backends.watch.as_mut() {
            stop(watch);
        }
        for (child, _) in backends.forwards.values_mut() {
            stop(child);
        }
        backends.forwards.clear();
    }
}

/// The name of the Service's port `port` (empty when it has none).
fn service_port_name(
    kubeconfig: &Path,
    namespace: &str,
    service: &str,
    port: u16,
) -> Result<String, String> {
    let output = Command::new(kubectl())
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["-n", namespace, "get", "service", service, "-o", "json"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("kubectl get service: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "kubectl get service {namespace}/{service}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let service_object: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("service {service} is not JSON: {e}"))?;
    service_object["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| entry["port"].as_u64() == Some(u64::from(port)))
        .map(|entry| entry["name"].as_str().unwrap_or_default().to_owned())
        .ok_or_else(|| format!("Service {namespace}/{service} has no port {port}"))
}

/// The pods of an Endpoints object for the Service port named `port_name`: (ready, all).
fn pods_of(endpoints: &Value, port_name: &str) -> (Vec<Pod>, BTreeSet<Pod>) {
    let (mut ready, mut all) = (Vec::new(), BTreeSet::new());
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let Some(port) = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| entry["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|entry| entry["port"].as_u64())
            .and_then(|port| u16::try_from(port).ok())
        else {
            continue;
        };
        for (key, is_ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for address in subset[key].as_array().into_iter().flatten() {
                if let Some(pod) = address["targetRef"]["name"].as_str() {
                    let pod = (pod.to_owned(), port);
                    if is_ready {
                        ready.push(pod.clone());
                    }
                    all.insert(pod);
                }
            }
        }
    }
    (ready, all)
}

/// Follows the Service's Endpoints and keeps a forward to each of its pods.
struct Watcher {
    kubeconfig: PathBuf,
    namespace: String,
    service: String,
    port_name: String,
    stopped: Arc<AtomicBool>,
    backends: Shared,
}

impl Watcher {
    fn run(self) {
        while !self.stopped.load(Ordering::SeqCst) {
            // A watch ends now and then (the server's timeout, a restart): it is started again.
            if let Err(error) = self.watch_once() {
                eprintln!(
                    "watching the Endpoints of {}/{}: {error}",
                    self.namespace, self.service
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn watch_once(&self) -> Result<(), String> {
        let mut child = Command::new(kubectl())
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(["-n", &self.namespace, "get", "endpoints", &self.service])
            .args(["-o", "json", "--watch"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting kubectl: {e}"))?;
        let stdout = child.stdout.take().ok_or("kubectl without stdout")?;
        {
            let mut backends = lock(&self.backends);
            if let Some(mut previous) = backends.watch.replace(child) {
                stop(&mut previous);
            }
            if self.stopped.load(Ordering::SeqCst) {
                return Ok(());
            }
        }
        for endpoints in serde_json::Deserializer::from_reader(BufReader::new(stdout))
            .into_iter::<Value>()
            .map_while(Result::ok)
        {
            self.follow(&endpoints);
        }
        Ok(())
    }

    /// Brings the forwards in line with `endpoints`.
    fn follow(&self, endpoints: &Value) {
        let (ready, all) = pods_of(endpoints, &self.port_name);
        let missing: Vec<Pod> = {
            let mut backends = lock(&self.backends);
            let gone: Vec<Pod> = backends
                .forwards
                .iter_mut()
                .filter_map(|(pod, (child, _))| {
                    let exited = !matches!(child.try_wait(), Ok(None));
                    (exited || !all.contains(pod)).then(|| pod.clone())
                })
                .collect();
            for pod in gone {
                if let Some((mut child, _)) = backends.forwards.remove(&pod) {
                    stop(&mut child);
                }
            }
            backends.ready.clone_from(&ready);
            ready
                .iter()
                .filter(|pod| !backends.forwards.contains_key(*pod))
                .cloned()
                .collect()
        };
        for (pod, port) in missing {
            let target = format!("pod/{pod}");
            match port_forward(&self.kubeconfig, &self.namespace, &target, port) {
                Ok(forward) => {
                    let mut backends = lock(&self.backends);
                    if self.stopped.load(Ordering::SeqCst) {
                        let (mut child, _) = forward;
                        stop(&mut child);
                        return;
                    }
                    backends.forwards.insert((pod, port), forward);
                }
                Err(error) => eprintln!("{}/{target}: {error}", self.namespace),
            }
        }
    }
}

/// What became of a connection sent to one pod.
enum FirstAnswer {
    /// The pod answered: the connection is its from now on.
    Answered(TcpStream, Vec<u8>),
    /// The pod's forward closed it without a byte back: another pod may take it.
    Unanswered,
    /// The client went away first.
    ClientGone,
}

/// Hands `client` to a ready pod, and to another while one closes it unanswered.
fn serve(client: TcpStream, backends: &Shared, failed_over: &AtomicUsize) {
    let mut sent = Vec::new();
    let waiting_since = Instant::now();
    let mut tried = BTreeSet::new();
    loop {
        let candidate = lock(backends)
            .in_turn()
            .into_iter()
            .find(|port| !tried.contains(port));
        let Some(port) = candidate else {
            if waiting_since.elapsed() > WAIT_FOR_A_POD {
                return;
            }
            tried.clear();
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        tried.insert(port);
        let Ok(backend) = TcpStream::connect(("127.0.0.1", port)) else {
            continue;
        };
        match first_answer(&client, backend, &mut sent) {
            FirstAnswer::Answered(backend, answer) => {
                pump(client, backend, &answer);
                return;
            }
            FirstAnswer::Unanswered => {
                if !sent.is_empty() {
                    failed_over.fetch_add(1, Ordering::SeqCst);
                }
            }
            FirstAnswer::ClientGone => return,
        }
    }
}

/// Sends what the client sent so far (and what it sends meanwhile) to `backend` until the
/// backend answers or closes.
fn first_answer(client: &TcpStream, mut backend: TcpStream, sent: &mut Vec<u8>) -> FirstAnswer {
    if backend.write_all(sent).is_err()
        || backend.set_read_timeout(Some(ANSWER_POLL)).is_err()
        || client.set_nonblocking(true).is_err()
    {
        return FirstAnswer::Unanswered;
    }
    let mut buffer = vec![0; 16 * 1024];
    let outcome = loop {
        match (&backend).read(&mut buffer) {
            Ok(0) => break FirstAnswer::Unanswered,
            Ok(n) => break FirstAnswer::Answered(backend, buffer[..n].to_vec()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break FirstAnswer::Unanswered,
        }
        match (&*client).read(&mut buffer) {
            Ok(0) => break FirstAnswer::ClientGone,
            Ok(n) => {
                sent.extend_from_slice(&buffer[..n]);
                if backend.write_all(&buffer[..n]).is_err() {
                    break FirstAnswer::Unanswered;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => break FirstAnswer::ClientGone,
        }
    };
    if client.set_nonblocking(false).is_err() {
        return FirstAnswer::ClientGone;
    }
    outcome
}

/// Copies both ways until each side has finished, starting with the backend's first `answer`.
fn pump(mut client: TcpStream, backend: TcpStream, answer: &[u8]) {
    if client.write_all(answer).is_err() || backend.set_read_timeout(None).is_err() {
        return;
    }
    let (Ok(mut client_read), Ok(mut backend_write)) = (client.try_clone(), backend.try_clone())
    else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut backend_write);
        let _ = backend_write.shutdown(Shutdown::Write);
    });
    let mut backend_read = backend;
    let _ = std::io::copy(&mut backend_read, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = upstream.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_and_draining_pods_are_told_apart_by_port_name() {
        let endpoints = serde_json::json!({"subsets": [{
            "addresses": [{"ip": "10.0.0.1", "targetRef": {"name": "a"}}],
            "notReadyAddresses": [{"ip": "10.0.0.2", "targetRef": {"name": "b"}}],
            "ports": [{"name": "https", "port": 6443}, {"name": "metrics", "port": 8080}],
        }]});
        let (ready, all) = pods_of(&endpoints, "https");
        assert_eq!(ready, vec![("a".to_owned(), 6443)]);
        assert_eq!(
            all,
            BTreeSet::from([("a".to_owned(), 6443), ("b".to_owned(), 6443)])
        );
        assert!(pods_of(&endpoints, "other").1.is_empty());
    }

    /// A pod that closes unanswered (its forward could not reach it) gets the connection's
    /// bytes sent again to the next; the one that answers keeps it.
    #[test]
    fn an_unanswered_connection_goes_to_the_next_pod() {
        let gone = TcpListener::bind("127.0.0.1:0").expect("bind");
        let alive = TcpListener::bind("127.0.0.1:0").expect("bind");
        let ports = [
            gone.local_addr().expect("addr").port(),
            alive.local_addr().expect("addr").port(),
        ];
        std::thread::spawn(move || {
            for stream in gone.incoming() {
                let mut stream = stream.expect("accept");
                let mut hello = [0; 5];
                let _ = stream.read_exact(&mut hello);
                drop(stream);
            }
        });
        std::thread::spawn(move || {
            let (mut stream, _) = alive.accept().expect("accept");
            let mut hello = [0; 5];
            stream.read_exact(&mut hello).expect("hello");
            stream.write_all(b"hi ").expect("answer");
            stream.write_all(&hello).expect("echo");
        });
        let backends = Shared::default();
        {
            let mut shared = lock(&backends);
            for (i, port) in ports.into_iter().enumerate() {
                let pod = (format!("p{i}"), 6443);
                let child = Command::new("sleep").arg("60").spawn().expect("sleep");
                shared.ready.push(pod.clone());
                shared.forwards.insert(pod, (child, port));
            }
            // The first in turn is the pod that is gone.
            shared.next = ports.len() - 1;
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr");
        let failed_over = Arc::new(AtomicUsize::new(0));
        {
            let (backends, failed_over) = (backends.clone(), failed_over.clone());
            std::thread::spawn(move || {
                let (client, _) = listener.accept().expect("accept");
                serve(client, &backends, &failed_over);
            });
        }
        let mut client = TcpStream::connect(address).expect("connect");
        client.write_all(b"hello").expect("hello");
        let mut answer = [0; 8];
        client.read_exact(&mut answer).expect("answer");
        assert_eq!(&answer, b"hi hello");
        assert_eq!(failed_over.load(Ordering::SeqCst), 1);
        for (child, _) in lock(&backends).forwards.values_mut() {
            stop(child);
        }
    }
}
