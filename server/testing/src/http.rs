//! HTTPS clients for servers with generated CAs and client certificates, and readers for their
//! answers (whole responses and watch streams).

use std::time::Duration;

use serde_json::Value;

/// Bounds one request; only a guard against a hung server.
const REQUEST_WITHIN: Duration = Duration::from_secs(60);

/// How long a watch may stay silent before the test gives up on it.
const EVENT_WITHIN: Duration = Duration::from_secs(60);

/// A client builder that trusts only `ca_pem` and, given `identity_pem` (certificate chain then
/// key, PEM), presents it as its client certificate.
pub(crate) fn client_builder(ca_pem: &[u8], identity_pem: Option<&[u8]>) -> reqwest::ClientBuilder {
    let ca = reqwest::Certificate::from_pem(ca_pem).expect("parsing a CA certificate");
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .connect_timeout(REQUEST_WITHIN);
    if let Some(pem) = identity_pem {
        builder =
            builder.identity(reqwest::Identity::from_pem(pem).expect("parsing a client identity"));
    }
    builder
}

/// [`client_builder`], built.
pub(crate) fn client(ca_pem: &[u8], identity_pem: Option<&[u8]>) -> reqwest::Client {
    client_builder(ca_pem, identity_pem)
        .build()
        .expect("building an HTTPS client")
}

/// A whole response: status, content type and body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Response {
    /// Sends `request` and reads the whole answer; a transport error fails the test.
    pub async fn send(request: reqwest::RequestBuilder) -> Response {
        let response = request
            .timeout(REQUEST_WITHIN)
            .send()
            .await
            .unwrap_or_else(|error| panic!("request failed: {error:?}"));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response
            .bytes()
            .await
            .unwrap_or_else(|error| panic!("reading a response body failed: {error:?}"))
            .to_vec();
        Response {
            status,
            content_type,
            body,
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; a body that is not JSON fails the test.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "response ({} {}) is not JSON: {error}\n{}",
                self.status,
                self.content_type,
                self.text()
            )
        })
    }
}

/// The JSON watch events of one open watch response, one at a time.
pub struct WatchStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl WatchStream {
    /// Sends a watch request (its URL carries `watch=1` and whatever else); an answer other than
    /// 200 fails the test.
    pub async fn open(request: reqwest::RequestBuilder) -> WatchStream {
        let response = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("opening a watch failed: {error:?}"));
        if !response.status().is_success() {
            let (status, url) = (response.status(), response.url().clone());
            let body = response.text().await.unwrap_or_default();
            panic!("watch {url} answered {status}: {body}");
        }
        WatchStream {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next event, or `None` once the server ended the stream cleanly. A broken stream, a
    /// body that is not a JSON stream or a very long silence fails the test.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let mut values =
                serde_json::Deserializer::from_slice(&self.buffer).into_iter::<Value>();
            match values.next() {
                Some(Ok(event)) => {
                    let consumed = values.byte_offset();
                    self.buffer.drain(..consumed);
                    return Some(event);
                }
                Some(Err(error)) if !error.is_eof() => panic!(
                    "watch stream is not JSON: {error}\n{}",
                    String::from_utf8_lossy(&self.buffer)
                ),
                _ => {}
            }
            match tokio::time::timeout(EVENT_WITHIN, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
                Ok(Ok(None)) => {
                    let rest = String::from_utf8_lossy(&self.buffer);
                    assert!(
                        rest.trim().is_empty(),
                        "watch ended inside an event: {rest}"
                    );
                    return None;
                }
                Ok(Err(error)) => panic!("watch stream broke instead of ending cleanly: {error:?}"),
                Err(_) => panic!("no watch event within {EVENT_WITHIN:?}"),
            }
        }
    }

    /// The next event; the stream ending first fails the test.
    pub async fn expect_event(&mut self) -> Value {
        self.next()
            .await
            .expect("watch ended while an event was expected")
    }
}
