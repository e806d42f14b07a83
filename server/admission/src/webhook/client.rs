//! HTTPS calls to admission webhooks, as kube-apiserver's webhook client manager makes them: one
//! client per CA bundle (reused across requests and clusters), the bundle as the only trusted
//! roots (the system roots when there is none), the webhook's timeout on the whole call and in
//! the `timeout` query parameter, and any answer but a success an error of the call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Certificate, Client, Url};
use serde_json::Value;

use super::CallError;
use super::hook::Endpoint;

/// The HTTP clients of webhook calls, by CA bundle; cheap to clone and shared by all requests.
#[derive(Clone, Default)]
pub struct WebhookClient {
    clients: Arc<Mutex<HashMap<Vec<u8>, Client>>>,
}

impl WebhookClient {
    pub fn new() -> WebhookClient {
        WebhookClient::default()
    }

    /// POSTs `review` to the endpoint and returns the answer's body.
    pub(crate) async fn post(
        &self,
        endpoint: &Endpoint,
        review: &Value,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let url = endpoint
            .url
            .as_ref()
            .map_err(|e| CallError::NotCallable(e.clone()))?;
        let mut url = Url::parse(url)
            .map_err(|err| CallError::NotCallable(format!("invalid url {url:?}: {err}")))?;
        url.query_pairs_mut()
            .append_pair("timeout", &format!("{}s", timeout.as_secs()));
        let client = self.client(endpoint.ca_bundle.as_deref())?;
        let response = client
            .post(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .json(review)
            .timeout(timeout)
            .send()
            .await
            .map_err(|err| transport_error(&url, &err))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|err| transport_error(&url, &err))?;
        if !status.is_success() {
            return Err(CallError::Transport(unexpected_status(
                status.as_u16(),
                &body,
            )));
        }
        Ok(body.to_vec())
    }

    /// The client trusting exactly `ca_bundle` (PEM), made on first use.
    fn client(&self, ca_bundle: Option<&[u8]>) -> Result<Client, CallError> {
        let key = ca_bundle.unwrap_or_default().to_vec();
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = build_client(ca_bundle)?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

fn build_client(ca_bundle: Option<&[u8]>) -> Result<Client, CallError> {
    let not_callable =
        |detail: String| CallError::NotCallable(format!("could not get REST client: {detail}"));
    let mut builder = Client::builder().use_rustls_tls();
    if let Some(pem) = ca_bundle {
        let roots = Certificate::from_pem_bundle(pem)
            .map_err(|err| not_callable(format!("unable to load root certificates: {err}")))?;
        if roots.is_empty() {
            return Err(not_callable(
                "unable to load root certificates: unable to parse bytes as PEM block".into(),
            ));
        }
        builder = builder.tls_built_in_root_certs(false);
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    builder.build().map_err(|err| not_callable(err.to_string()))
}

/// A failed POST, worded as Go's HTTP client words it (`Post "<url>": <cause>`), a timeout as
/// the expired context it is there.
fn transport_error(url: &Url, err: &reqwest::Error) -> CallError {
    let cause = if err.is_timeout() {
        "context deadline exceeded".to_string()
    } else {
        innermost_cause(err)
    };
    CallError::Transport(format!("Post \"{url}\": {cause}"))
}

/// The most specific message in an error's source chain.
fn innermost_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = err;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

/// client-go's error for a response that is not a success, by status code.
fn unexpected_status(code: u16, body: &[u8]) -> String {
    let body = String::from_utf8_lossy(body);
    let body = body.trim();
    if body.is_empty() {
        return format!(
            "the server responded with the status code {code} but did not return more information"
        );
    }
    match code {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        404 => "the server could not find the requested resource".into(),
        503 => "the server is currently unable to handle the request".into(),
        _ => format!("an error on the server ({body:?}) has prevented the request from succeeding"),
    }
}
