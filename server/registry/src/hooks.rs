//! Reactions to writes: code that must run after an object of some type was written, whoever wrote
//! it (a client through the API server, a controller, bootstrap).
//!
//! This is k8s.io/apiserver's `AfterCreate`/`AfterUpdate`/`AfterDelete` on the generic store: the
//! reaction is registered with the [`RestStore`](crate::store::RestStore) once, instead of being a
//! branch in a request dispatcher that only sees writes made over HTTP. A hook runs after the write
//! took effect in storage (never for dry runs, no-op updates or failed writes), on the writer's
//! task: it must be quick and must not block (invalidate a cache, wake a queue).

use std::sync::Arc;

use crate::{LogicalClusterName, ResourceType};

/// What happened to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Created,
    Updated,
    /// Marked for deletion (finalizers hold it) or removed.
    Deleted,
}

/// One write that took effect.
#[derive(Clone, Copy)]
pub struct Written<'a> {
    pub rt: &'a ResourceType,
    pub cluster: &'a LogicalClusterName,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub kind: WriteKind,
}

/// A reaction to writes; see the module docs for what it may do.
pub trait AfterWrite: Send + Sync {
    fn after_write(&self, written: &Written<'_>);
}

/// The hooks a store runs, in registration order.
#[derive(Clone, Default)]
pub(crate) struct Hooks(Arc<Vec<Arc<dyn AfterWrite>>>);

impl Hooks {
    pub(crate) fn with(&self, hook: Arc<dyn AfterWrite>) -> Hooks {
        let mut hooks: Vec<_> = self.0.iter().cloned().collect();
        hooks.push(hook);
        Hooks(Arc::new(hooks))
    }

    pub(crate) fn run(&self, written: &Written<'_>) {
        for hook in self.0.iter() {
            hook.after_write(written);
        }
    }
}
