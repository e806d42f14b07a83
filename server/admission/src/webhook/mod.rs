//! Admission webhooks (`admissionregistration.k8s.io/v1` Mutating- and
//! ValidatingWebhookConfiguration) of one logical cluster, called as kube-apiserver's
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins call them.
//!
//! Mutating webhooks run one after the other, in order of configuration name and then of their
//! place in it; each sees the object as the previous ones left it and may answer a JSONPatch.
//! When one changes the object, the earlier `reinvocationPolicy: IfNeeded` webhooks run once
//! more. Validating webhooks run concurrently and must all allow. Every call is an
//! `admission.k8s.io/v1` AdmissionReview POSTed to the webhook's `https` URL (kcp allows no
//! `service` references); a webhook that cannot be called, times out or answers nonsense fails
//! the request with 500 `failed calling webhook "<name>": ...` unless its `failurePolicy` is
//! `Ignore`, and a denial fails it with the webhook's message. Dry-run requests only reach
//! webhooks declaring `sideEffects: None` or `NoneOnDryRun`; any other fails them with 400.

mod client;
mod hook;
mod review;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use futures::future::join_all;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kcp_apimachinery::ApiError;
use kcp_apimachinery::patch::{PatchError, apply_json_patch};
use serde_json::Value;

use crate::{Attributes, Outcome};
pub use client::WebhookClient;
use hook::{Conditions, Hook, is_exempt};
use review::{Answer, denial, parse_answer, review};

/// Why a webhook could not be called or answered nonsense: what `failurePolicy` decides on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The webhook's configuration cannot be called (no URL, a service reference, a bad URL or
    /// CA bundle).
    #[error("{0}")]
    NotCallable(String),
    /// The call failed or its answer was not an AdmissionReview.
    #[error("failed to call webhook: {0}")]
    Transport(String),
    /// The answer was an AdmissionReview that breaks its rules.
    #[error("received invalid webhook response: {0}")]
    InvalidResponse(String),
    #[error("received undecodable patch in webhook response: {0}")]
    UndecodablePatch(String),
    #[error("unsupported patch type \"{0}\"")]
    UnsupportedPatchType(String),
}

/// How one webhook call ended, short of success.
enum HookError {
    /// Left to the webhook's `failurePolicy`.
    Call(CallError),
    /// Fails the request whatever the failure policy (a denial, a dry run the webhook cannot
    /// take, a patch that does not apply).
    Reject(ApiError),
}

impl From<CallError> for HookError {
    fn from(err: CallError) -> HookError {
        HookError::Call(err)
    }
}

/// The webhooks of one logical cluster, built once per configuration change.
#[derive(Debug, Clone, Default)]
pub struct Webhooks {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
}

impl Webhooks {
    pub fn new(
        mutating: &[MutatingWebhookConfiguration],
        validating: &[ValidatingWebhookConfiguration],
    ) -> Webhooks {
        let mut mutating: Vec<_> = mutating.iter().collect();
        mutating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut validating: Vec<_> = validating.iter().collect();
        validating.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Webhooks {
            mutating: mutating
                .iter()
                .flat_map(|config| config.webhooks.iter().flatten())
                .map(Hook::mutating)
                .collect(),
            validating: validating
                .iter()
                .flat_map(|config| config.webhooks.iter().flatten())
                .map(Hook::validating)
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty()
    }

    /// Runs the mutating webhooks the write selects on `object`, then once more those with
    /// `reinvocationPolicy: IfNeeded` that ran before a later webhook changed the object.
    pub async fn mutate(
        &self,
        client: &WebhookClient,
        attrs: &Attributes,
        namespace: Option<&Value>,
        object: &mut Value,
        old: Option<&Value>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        if self.mutating.is_empty() || is_exempt(attrs) {
            return Ok(());
        }
        // kube's reinvocation bookkeeping: reinvocable webhooks called since the last change,
        // and those a later change makes due for a second round.
        let mut since_change = Vec::new();
        let mut due = BTreeSet::new();
        for (index, hook) in self.mutating.iter().enumerate() {
            let Some(request) = invocation(hook, attrs, namespace, Some(&*object), old)? else {
                continue;
            };
            if call_mutating(client, hook, attrs, request, object, outcome).await? {
                due.extend(since_change.drain(..));
            }
            if hook.reinvoke {
                since_change.push(index);
            }
        }
        for index in due {
            let hook = &self.mutating[index];
            if let Some(request) = invocation(hook, attrs, namespace, Some(&*object), old)? {
                call_mutating(client, hook, attrs, request, object, outcome).await?;
            }
        }
        Ok(())
    }

    /// Calls the validating webhooks the write selects, all at once; every one must allow.
    /// `object` is absent for deletes.
    pub async fn validate(
        &self,
        client: &WebhookClient,
        attrs: &Attributes,
        namespace: Option<&Value>,
        object: Option<&Value>,
        old: Option<&Value>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        if self.validating.is_empty() || is_exempt(attrs) {
            return Ok(());
        }
        let mut selected = Vec::new();
        let mut requests = Vec::new();
        for hook in &self.validating {
            if let Some(request) = invocation(hook, attrs, namespace, object, old)? {
                selected.push(hook);
                requests.push(request);
            }
        }
        let answers = join_all(
            selected
                .iter()
                .zip(requests)
                .map(|(hook, request)| call(client, hook, attrs, request, false)),
        )
        .await;
        let mut first_error = None;
        for (hook, answer) in selected.iter().zip(answers) {
            let verdict = answer.and_then(|answer| {
                record(hook, &answer, outcome);
                allowed(hook, &answer)
            });
            if let Err(err) = settle(hook, verdict) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Whether the write calls `hook`, and if so the AdmissionRequest it is sent (with a fresh uid,
/// also what its match conditions see). A match condition that cannot be evaluated skips the
/// webhook under `failurePolicy: Ignore` and forbids the write otherwise, as in kube.
fn invocation(
    hook: &Hook,
    attrs: &Attributes,
    namespace: Option<&Value>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Option<Value>, ApiError> {
    if !hook.selects(attrs, namespace, object, old)? {
        return Ok(None);
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let request = attrs.admission_request(&uid, object, old);
    match hook.conditions(object, old, &request) {
        Conditions::Match => Ok(Some(request)),
        Conditions::NoMatch => Ok(None),
        Conditions::Error(err) if hook.fail_open => {
            tracing::warn!(webhook = %hook.name, error = %err, "Failed evaluating match conditions, failing open");
            Ok(None)
        }
        Conditions::Error(err) => Err(ApiError::forbidden(
            &attrs.group,
            &attrs.resource,
            &attrs.name,
            &format!(
                "failed evaluating match conditions of webhook \"{}\": {err}",
                hook.name
            ),
        )),
    }
}

/// Calls one mutating webhook and applies its patch; whether the object changed.
async fn call_mutating(
    client: &WebhookClient,
    hook: &Hook,
    attrs: &Attributes,
    request: Value,
    object: &mut Value,
    outcome: &mut Outcome,
) -> Result<bool, ApiError> {
    let result = match call(client, hook, attrs, request, true).await {
        Ok(answer) => {
            record(hook, &answer, outcome);
            allowed(hook, &answer).and_then(|()| patched(hook, &answer, object))
        }
        Err(err) => Err(err),
    };
    let Some(patched) = settle(hook, result)?.flatten() else {
        return Ok(false);
    };
    let changed = patched != *object;
    *object = patched;
    Ok(changed)
}

/// One AdmissionReview round trip with `hook`, sending `request`.
async fn call(
    client: &WebhookClient,
    hook: &Hook,
    attrs: &Attributes,
    request: Value,
    mutating: bool,
) -> Result<Answer, HookError> {
    if attrs.dry_run && !hook.dry_run_safe {
        return Err(HookError::Reject(ApiError::bad_request(&format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        ))));
    }
    if !hook.accepts_v1 {
        return Err(
            CallError::NotCallable("webhook does not accept v1 AdmissionReview".into()).into(),
        );
    }
    let uid = request["uid"].as_str().unwrap_or_default().to_string();
    let body = client
        .post(&hook.endpoint, &review(request), hook.timeout)
        .await?;
    Ok(parse_answer(&body, &uid, mutating)?)
}

/// Passes on an answer's warnings and audit annotations (the latter prefixed with the webhook's
/// name), whether it allows or not.
fn record(hook: &Hook, answer: &Answer, outcome: &mut Outcome) {
    for warning in &answer.warnings {
        outcome.warn(warning.clone());
    }
    for (key, value) in &answer.audit_annotations {
        outcome
            .audit_annotations
            .insert(format!("{}/{key}", hook.name), value.clone());
    }
}

fn allowed(hook: &Hook, answer: &Answer) -> Result<(), HookError> {
    if answer.allowed {
        Ok(())
    } else {
        Err(HookError::Reject(denial(
            &hook.name,
            answer.status.as_ref(),
        )))
    }
}

/// The object after the answer's JSONPatch, `None` without a patch (or an empty one). A patch
/// that is not a JSONPatch is the webhook's fault (its failure policy decides); one that does
/// not apply fails the request, as in kube.
fn patched(hook: &Hook, answer: &Answer, object: &Value) -> Result<Option<Value>, HookError> {
    let Some(patch) = &answer.patch else {
        return Ok(None);
    };
    let operations: Vec<Value> = serde_json::from_slice(patch)
        .map_err(|err| CallError::UndecodablePatch(err.to_string()))?;
    if operations.is_empty() {
        return Ok(None);
    }
    let patched = apply_json_patch(object, patch).map_err(|err| match err {
        PatchError::Unprocessable(detail) => HookError::Reject(ApiError::internal_error(&detail)),
        other => HookError::Call(CallError::UndecodablePatch(other.to_string())),
    })?;
    if !patched.is_object() {
        return Err(HookError::Reject(ApiError::internal_error(&format!(
            "admission webhook \"{}\" patched the object into a non-object",
            hook.name
        ))));
    }
    Ok(Some(patched))
}

/// Applies the webhook's failure policy: a failed call fails the request with 500 unless the
/// policy is `Ignore`, in which case the webhook is skipped (`None`).
fn settle<T>(hook: &Hook, result: Result<T, HookError>) -> Result<Option<T>, ApiError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(HookError::Reject(err)) => Err(err),
        Err(HookError::Call(err)) if hook.fail_open => {
            tracing::warn!(webhook = %hook.name, error = %err, "Failed calling webhook, failing open");
            Ok(None)
        }
        Err(HookError::Call(err)) => {
            tracing::warn!(webhook = %hook.name, error = %err, "Failed calling webhook, failing closed");
            Err(ApiError::internal_error(&format!(
                "failed calling webhook \"{}\": {err}",
                hook.name
            )))
        }
    }
}
