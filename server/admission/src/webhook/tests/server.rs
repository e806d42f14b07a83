//! An admission webhook as a test peer: HTTPS on a loopback port with a CA of its own, answering
//! each AdmissionReview as the test says (allow, deny, patch, stall, garbage) and recording the
//! reviews it received.
//!
//! Webhook behaviour is only proven against a real HTTPS peer (certificate checks, timeouts,
//! unreachable ports), so this one is real: rustls over blocking sockets, a thread per
//! connection, HTTP/1.1 with keep-alive. It needs nothing but rustls, rcgen and serde_json, so
//! the crate's unit tests and kcp's end-to-end tests (which include this file by path) share it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

/// How the webhook answers one review.
pub enum Reply {
    /// An AdmissionReview whose `response` is this object with the request's uid added.
    Response(Value),
    /// Exactly this status and body.
    Raw(u16, String),
    /// The reply, after a pause.
    After(Duration, Box<Reply>),
}

impl Reply {
    pub fn allow() -> Reply {
        Reply::Response(json!({"allowed": true}))
    }

    pub fn deny(message: &str) -> Reply {
        Reply::Response(json!({"allowed": false, "status": {"message": message, "code": 403}}))
    }

    /// Allows with a JSONPatch of `operations`.
    pub fn patch(operations: Value) -> Reply {
        use base64::Engine;
        let patch = base64::engine::general_purpose::STANDARD.encode(operations.to_string());
        Reply::Response(json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}))
    }
}

type Answer = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// A running webhook at `url` (`https://127.0.0.1:<port>`), whose certificate `ca_pem` signs.
pub struct WebhookServer {
    pub url: String,
    pub ca_pem: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
    stopped: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl WebhookServer {
    /// Serves, answering a review POSTed to a path with `answer(path, review)`.
    pub fn start(answer: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> WebhookServer {
        let (ca_pem, tls) = tls_config();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let received = Arc::new(Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicBool::new(false));
        let answer: Arc<Answer> = Arc::new(answer);
        let accepting = {
            let received = Arc::clone(&received);
            let stopped = Arc::clone(&stopped);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let tls = Arc::clone(&tls);
                    let answer = Arc::clone(&answer);
                    let received = Arc::clone(&received);
                    std::thread::spawn(move || serve(stream, tls, &*answer, &received));
                }
            })
        };
        WebhookServer {
            url,
            ca_pem,
            received,
            stopped,
            accepting: Some(accepting),
        }
    }

    /// The reviews received so far, with the path each was POSTed to.
    pub fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }

    /// The requests (`review.request`) received on `path`.
    pub fn requests_on(&self, path: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|(p, _)| p == path)
            .map(|(_, review)| review["request"].clone())
            .collect()
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("https://"));
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

/// Serves one connection's requests until the client closes it.
fn serve(
    stream: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    answer: &Answer,
    received: &Mutex<Vec<(String, Value)>>,
) {
    let Ok(connection) = rustls::ServerConnection::new(tls) else {
        return;
    };
    let mut reader = BufReader::new(rustls::StreamOwned::new(connection, stream));
    while let Some((path, body)) = read_request(&mut reader) {
        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        received
            .lock()
            .unwrap()
            .push((path.clone(), review.clone()));
        let (status, body) = reply_body(answer(&path, &review), &review);
        let head = format!(
            "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let stream = reader.get_mut();
        if stream.write_all(head.as_bytes()).is_err()
            || stream.write_all(body.as_bytes()).is_err()
            || stream.flush().is_err()
        {
            return;
        }
    }
}

/// The status and body of a reply to `review`, after any pauses it asks for.
fn reply_body(reply: Reply, review: &Value) -> (u16, String) {
    match reply {
        Reply::Response(mut response) => {
            if response.get("uid").is_none() {
                response["uid"] = review["request"]["uid"].clone();
            }
            let review = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": response,
            });
            (200, review.to_string())
        }
        Reply::Raw(status, body) => (status, body),
        Reply::After(pause, then) => {
            std::thread::sleep(pause);
            reply_body(*then, review)
        }
    }
}

/// The path and body of the next request, `None` at the end of the connection.
fn read_request(reader: &mut impl BufRead) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let target = line.split_whitespace().nth(1)?.to_string();
    let path = target.split('?').next().unwrap_or_default().to_string();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, body))
}

/// A CA (PEM) and a server config presenting a certificate it signed for 127.0.0.1.
fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test webhook CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "test webhook");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}
