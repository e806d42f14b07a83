//! An OpenID Connect issuer as a test peer: discovery document and JWKS over TLS, and ES256 ID
//! tokens signed with its current key.
//!
//! OIDC authentication is only proven against a real HTTPS issuer: discovery, the exact-issuer
//! rule, key caching, rotation and an issuer that is down are all behaviour of the fetch, not of
//! the signature check. This one runs on a loopback port with its own generated CA, on a thread of
//! its own (so it serves whether the test is async or not), and stops on drop. It signs with
//! ring's ECDSA P-256 (ring cannot generate RSA keys) and does not depend on the server's own JWT
//! code, so it checks that code rather than mirroring it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// How long a stopped issuer may wait for its port to become free again.
const REBIND_WITHIN: Duration = Duration::from_secs(10);

/// Signing keys, newest last; the JWKS serves them all.
#[derive(Default)]
struct Keys {
    keys: Vec<(String, EcdsaKeyPair)>,
}

impl Keys {
    fn add(&mut self) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generating a P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("loading a generated P-256 key");
        self.keys
            .push((format!("test-key-{}", self.keys.len() + 1), key));
    }

    fn jwks(&self) -> Value {
        let keys: Vec<Value> = self
            .keys
            .iter()
            .map(|(kid, key)| {
                // An uncompressed point: 0x04, then x and y, 32 bytes each.
                let point = key.public_key().as_ref();
                json!({
                    "kty": "EC",
                    "crv": "P-256",
                    "use": "sig",
                    "alg": "ES256",
                    "kid": kid,
                    "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                    "y": URL_SAFE_NO_PAD.encode(&point[33..]),
                })
            })
            .collect();
        json!({ "keys": keys })
    }
}

/// The serving thread of a running issuer.
struct Serving {
    shutdown: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

/// A running OIDC issuer at `url` (`https://127.0.0.1:<port>`), whose certificate `ca_pem` signs.
pub struct OidcIssuer {
    pub url: String,
    pub ca_pem: String,
    port: u16,
    tls: Arc<rustls::ServerConfig>,
    keys: Arc<Mutex<Keys>>,
    serving: Option<Serving>,
}

impl OidcIssuer {
    /// Generates a CA, a serving certificate for 127.0.0.1 and a first signing key, and serves.
    pub fn start() -> OidcIssuer {
        let (ca_pem, tls) = tls_config();
        let mut keys = Keys::default();
        keys.add();
        let mut issuer = OidcIssuer {
            url: String::new(),
            ca_pem,
            port: 0,
            tls,
            keys: Arc::new(Mutex::new(keys)),
            serving: None,
        };
        issuer.resume();
        issuer
    }

    /// A compact JWS of `claims`, signed with the current key (header `alg` ES256 and its `kid`).
    pub fn token(&self, claims: Value) -> String {
        let keys = self.keys.lock().expect("issuer keys lock");
        let (kid, key) = keys.keys.last().expect("the issuer always has a key");
        let header = json!({"alg": "ES256", "kid": kid, "typ": "JWT"});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = key
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("signing a token");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }

    /// Signs with a new key from now on; the JWKS keeps serving the old ones too.
    pub fn rotate_key(&self) {
        self.keys.lock().expect("issuer keys lock").add();
    }

    /// The key id new tokens carry.
    pub fn current_key_id(&self) -> String {
        let keys = self.keys.lock().expect("issuer keys lock");
        keys.keys
            .last()
            .map(|(kid, _)| kid.clone())
            .unwrap_or_default()
    }

    /// Stops serving (connections are dropped, the port is closed); keys and CA stay.
    pub fn stop(&mut self) {
        if let Some(serving) = self.serving.take() {
            let _ = serving.shutdown.send(());
            let _ = serving.thread.join();
        }
    }

    /// Serves again, on the same port (the first call picks a free one).
    pub fn resume(&mut self) {
        if self.serving.is_some() {
            return;
        }
        let (bound_tx, bound_rx) = mpsc::channel();
        let (shutdown, shutdown_rx) = oneshot::channel();
        let port = self.port;
        let state = Served {
            tls: Arc::clone(&self.tls),
            keys: Arc::clone(&self.keys),
        };
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("building the issuer's runtime");
            runtime.block_on(state.serve(port, bound_tx, shutdown_rx));
        });
        let port = bound_rx
            .recv()
            .expect("issuer thread reports its port")
            .unwrap_or_else(|error| panic!("binding the OIDC issuer's port: {error}"));
        self.port = port;
        self.url = format!("https://127.0.0.1:{port}");
        self.serving = Some(Serving { shutdown, thread });
    }
}

impl Drop for OidcIssuer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the serving thread shares with the issuer.
struct Served {
    tls: Arc<rustls::ServerConfig>,
    keys: Arc<Mutex<Keys>>,
}

impl Served {
    async fn serve(
        self,
        port: u16,
        bound: mpsc::Sender<std::io::Result<u16>>,
        mut shutdown: oneshot::Receiver<()>,
    ) {
        let listener = match bind(port).await {
            Ok(listener) => listener,
            Err(error) => {
                let _ = bound.send(Err(error));
                return;
            }
        };
        let port = match listener.local_addr() {
            Ok(addr) => addr.port(),
            Err(error) => {
                let _ = bound.send(Err(error));
                return;
            }
        };
        let url = format!("https://127.0.0.1:{port}");
        let _ = bound.send(Ok(port));
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls);
        // Dropping the set at shutdown aborts every open connection.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let acceptor = acceptor.clone();
                    let keys = Arc::clone(&self.keys);
                    let url = url.clone();
                    connections.spawn(async move {
                        let Ok(tls) = acceptor.accept(stream).await else { return };
                        let service = hyper::service::service_fn(move |request| {
                            let answer = answer(&request, &url, &keys);
                            async move { Ok::<_, std::convert::Infallible>(answer) }
                        });
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    });
                }
            }
        }
    }
}

/// A loopback listener on `port` (0: any), retrying while a just-closed port is still taken.
async fn bind(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = tokio::time::Instant::now() + REBIND_WITHIN;
    loop {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(64)) {
            Ok(listener) => return Ok(listener),
            Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn answer<B>(request: &Request<B>, url: &str, keys: &Mutex<Keys>) -> Response<Full<Bytes>> {
    let body = match request.uri().path() {
        "/.well-known/openid-configuration" => json!({
            "issuer": url,
            "jwks_uri": format!("{url}/jwks"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        }),
        "/jwks" => keys.lock().expect("issuer keys lock").jwks(),
        _ => {
            let mut response = Response::new(Full::new(Bytes::from_static(b"not found")));
            *response.status_mut() = hyper::StatusCode::NOT_FOUND;
            return response;
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A CA (PEM) and a server config presenting a certificate it signed for 127.0.0.1.
fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kcp-testing OIDC CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
        .expect("self-signing the CA");

    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("serving certificate parameters");
    params
        .distinguished_name
        .push(DnType::CommonName, "oidc-issuer");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().expect("serving key");
    let cert = params
        .signed_by(&key, &ca)
        .expect("signing the serving certificate");

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::try_from(key.serialize_der()).expect("serving key DER"),
        )
        .expect("TLS server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (ca.pem(), Arc::new(config))
}
