//! Waiting for a server to get somewhere, with a deadline: a server that never gets there fails the
//! test with the last answer it gave, rather than hanging it.

use std::time::{Duration, Instant};

use crate::caller::Caller;
use crate::http::Response;
use serde_json::Value;

/// How long a suite lets the server settle (controllers, RBAC changes, ...) and how often it looks
/// meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    pub within: Duration,
    pub every: Duration,
}

impl Patience {
    pub const fn new(within: Duration, every: Duration) -> Patience {
        Patience { within, every }
    }

    /// Polls `check` until it returns `Ok`, and returns that value; a server that does not get
    /// there within [`Self::within`] fails the test with `what` and the last answer (the `Err`).
    pub async fn eventually<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + self.within;
        loop {
            match check().await {
                Ok(value) => return value,
                Err(last) => assert!(
                    Instant::now() < deadline,
                    "{what}: not within {:?}; last: {last}",
                    self.within
                ),
            }
            tokio::time::sleep(self.every).await;
        }
    }

    /// Waits until `caller` gets `want` for GET `path`; returns that answer.
    pub async fn wait_status(
        &self,
        what: &str,
        caller: &Caller,
        path: &str,
        want: u16,
    ) -> Response {
        self.eventually(what, || async {
            let response = caller.get(path).await;
            if response.status == want {
                Ok(response)
            } else {
                Err(format!(
                    "GET {path}: {} {}",
                    response.status,
                    response.text()
                ))
            }
        })
        .await
    }

    /// POSTs `body` to `path` through `caller` until it is created (201), e.g. until a server has
    /// learnt of something the creation depends on; returns the created object.
    pub async fn wait_created(
        &self,
        what: &str,
        caller: &Caller,
        path: &str,
        body: &Value,
    ) -> Value {
        self.eventually(what, || async {
            let response = caller.post(path, body).await;
            match response.status {
                201 => Ok(response.json()),
                status => Err(format!("POST {path}: {status} {}", response.text())),
            }
        })
        .await
    }
}
