//! Admission as the store runs it: the two phases every write passes through, in kube-apiserver's
//! places.
//!
//! k8s.io/apiserver hands its generic store an admission interface per request: mutating
//! admission runs on the decoded object before the strategy prepares and validates it (inside the
//! update retry loop for updates, so it sees the state it is retried on), validating admission
//! runs on the prepared and validated object just before it is written, and on the object about
//! to go for a delete. [`Admit`] is that interface; what it does (policies, webhooks, quota) is
//! kcp-admission's, which knows the requesting user; the store only knows when to call it.
//! In-process controllers and bootstrap write with [`NoAdmission`].

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use serde_json::Value;

use crate::{LogicalClusterName, ResourceType};

/// The operation being admitted (`AdmissionRequest.operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// The name admission APIs use (`CREATE`, `UPDATE`, `DELETE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What the store knows of the write being admitted.
#[derive(Clone, Copy)]
pub struct Write<'a> {
    pub rt: &'a ResourceType,
    pub cluster: &'a LogicalClusterName,
    pub namespace: Option<&'a str>,
    /// The object's name (empty on a create that asks for `generateName`).
    pub name: &'a str,
    pub subresource: Option<&'a str>,
    pub operation: Operation,
    pub dry_run: bool,
}

/// Admission of one request's writes.
pub trait Admit: Send + Sync {
    /// Mutating admission: may change `object` (the new object of a create or update).
    fn mutate<'a>(
        &'a self,
        write: Write<'a>,
        object: &'a mut Value,
        old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>>;

    /// Validating admission: `object` is absent for deletes, `old` for creates.
    fn validate<'a>(
        &'a self,
        write: Write<'a>,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// No admission: the writes of in-process controllers and bootstrap.
pub struct NoAdmission;

impl Admit for NoAdmission {
    fn mutate<'a>(
        &'a self,
        _write: Write<'a>,
        _object: &'a mut Value,
        _old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }

    fn validate<'a>(
        &'a self,
        _write: Write<'a>,
        _object: Option<&'a Value>,
        _old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
}
