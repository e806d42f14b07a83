//! Admission policies of one logical cluster: ValidatingAdmissionPolicy (v1) and
//! MutatingAdmissionPolicy (v1beta1) with their bindings, compiled once per configuration change
//! and evaluated with CEL on every write they select, as kube-apiserver's
//! `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy` admission plugins.
//!
//! Policies run in name order, each binding of a policy in name order. Mutating policies with
//! `reinvocationPolicy: IfNeeded` run once more when a later policy changed the object (kube
//! also reinvokes them after mutating webhooks; here only policies reinvoke policies).

mod compiled;
mod matcher;
mod mutating;
mod params;
mod validating;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::{v1, v1beta1};
use kcp_apimachinery::status::StatusCause;
use kcp_apimachinery::{ApiError, StatusReason, meta};
use serde_json::{Map, Value};

use crate::cel::Environment;
use crate::sources::Objects;
use crate::{Attributes, Outcome};
use kcp_registry::admission_policies::EXPRESSION_COMPILER;
use mutating::{MutatingBinding, MutatingPolicy};
use validating::{ValidatingBinding, ValidatingPolicy};

/// One cluster's admission policies and bindings, compiled.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    validating: Vec<ValidatingPolicy>,
    mutating: Vec<MutatingPolicy>,
}

/// The write being admitted, as policies see it.
#[derive(Clone, Copy)]
pub(super) struct Request<'a> {
    attrs: &'a Attributes,
    /// The Namespace object of the request (selectors).
    namespace: Option<&'a Value>,
    /// `namespaceObject`: the namespace as kube exposes it to CEL (null for cluster-scoped writes
    /// and for Namespaces themselves).
    namespace_object: Option<&'a Value>,
    /// The AdmissionRequest CEL sees as `request`.
    request: &'a Value,
    object: Option<&'a Value>,
    old: Option<&'a Value>,
}

/// A decision to refuse the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Denial {
    message: String,
    reason: StatusReason,
    code: u16,
}

/// The Namespace fields kube exposes as `namespaceObject` (`CreateNamespaceObject`).
fn namespace_object(attrs: &Attributes, namespace: Option<&Value>) -> Option<Value> {
    if attrs.namespace.is_none() || (attrs.group.is_empty() && attrs.kind == "Namespace") {
        return None;
    }
    let namespace = namespace?;
    let mut metadata = Map::new();
    if let Some(source) = namespace.get("metadata").and_then(Value::as_object) {
        for field in [
            "name",
            "generateName",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
            "finalizers",
        ] {
            if let Some(value) = source.get(field) {
                metadata.insert(field.to_string(), value.clone());
            }
        }
    }
    let mut object = Map::new();
    object.insert("metadata".into(), Value::Object(metadata));
    for field in ["spec", "status"] {
        if let Some(value) = namespace.get(field) {
            object.insert(field.to_string(), value.clone());
        }
    }
    Some(Value::Object(object))
}

/// The Status of a validating denial: kube's `admission.NewForbidden` for the written object,
/// with the decision's reason and code and the message as its one cause.
fn validating_error(attrs: &Attributes, object: Option<&Value>, denial: &Denial) -> ApiError {
    let name = match attrs.name.as_str() {
        "" => object.and_then(meta::name).unwrap_or_default(),
        name => name,
    };
    let mut error = ApiError::forbidden(&attrs.group, &attrs.resource, name, &denial.message);
    error.reason = denial.reason;
    error.code = denial.code;
    let details = error.details.get_or_insert_with(Default::default);
    details.causes.push(StatusCause {
        message: denial.message.clone(),
        ..StatusCause::default()
    });
    error
}

/// The Status of mutating policy errors: kube's forbidden error carrying the first error's
/// message (and reason), with every error as a cause.
fn mutating_error(attrs: &Attributes, object: &Value, denials: &[Denial]) -> Option<ApiError> {
    let first = denials.first()?;
    let name = match attrs.name.as_str() {
        "" => meta::name(object).unwrap_or_default(),
        name => name,
    };
    let mut error = ApiError::forbidden(&attrs.group, &attrs.resource, name, "");
    error.message = first.message.clone();
    error.reason = first.reason;
    error.code = first.code;
    let details = error.details.get_or_insert_with(Default::default);
    details
        .causes
        .extend(denials.iter().map(|denial| StatusCause {
            message: denial.message.clone(),
            ..StatusCause::default()
        }));
    Some(error)
}

/// Compiles one policy expression in its scope (the variables declared before it, and for
/// mutations `Object{...}`/`JSONPatch{...}`): the field paths it selects from `object` and
/// `oldObject`, or the compilation error. The registry's policy strategies and the policy status
/// controller use it through [`install_expression_checks`].
pub fn compile_policy_expression(
    source: &str,
    variables: &[String],
    object_types: bool,
) -> Result<Vec<Vec<String>>, String> {
    let env = Environment {
        variables: variables.to_vec(),
        object_types,
    };
    env.compile(source)
        .map(|expression| expression.object_paths().to_vec())
}

/// Installs [`compile_policy_expression`] as the registry's CEL compiler; call once at start-up,
/// before policies are written (the registry cannot depend on this crate).
pub fn install_expression_checks() {
    let _ = EXPRESSION_COMPILER.set(compile_policy_expression);
}

/// Compiles the policies some binding names, in name order, each with its bindings.
fn compile_bound<P, B, Policy, Binding>(
    policies: &[P],
    bindings: &[B],
    name: impl Fn(&P) -> Option<&str>,
    compile: impl Fn(&P) -> Option<Policy>,
    binding: impl Fn(&B) -> Option<(String, Binding)>,
    binding_name: impl Fn(&Binding) -> &str,
    attach: impl Fn(&mut Policy, Vec<Binding>),
) -> Vec<Policy> {
    let mut by_policy: BTreeMap<String, Vec<Binding>> = BTreeMap::new();
    for (policy, binding) in bindings.iter().filter_map(binding) {
        by_policy.entry(policy).or_default().push(binding);
    }
    let mut named: Vec<(&str, &P)> = policies
        .iter()
        .filter_map(|p| Some((name(p)?, p)))
        .collect();
    named.sort_by_key(|(name, _)| *name);
    named
        .into_iter()
        .filter_map(|(name, policy)| {
            let mut bindings = by_policy.remove(name)?;
            bindings.sort_by(|a, b| binding_name(a).cmp(binding_name(b)));
            let mut compiled = compile(policy)?;
            attach(&mut compiled, bindings);
            Some(compiled)
        })
        .collect()
}

impl Policies {
    /// Compiles the bound policies and attaches their bindings (unbound policies, bindings of
    /// absent policies and objects without a spec are left out).
    pub fn new(
        validating: &[v1::ValidatingAdmissionPolicy],
        validating_bindings: &[v1::ValidatingAdmissionPolicyBinding],
        mutating: &[v1beta1::MutatingAdmissionPolicy],
        mutating_bindings: &[v1beta1::MutatingAdmissionPolicyBinding],
    ) -> Policies {
        let validating = compile_bound(
            validating,
            validating_bindings,
            |p| p.metadata.name.as_deref(),
            ValidatingPolicy::new,
            ValidatingBinding::new,
            ValidatingBinding::name,
            |policy, bindings| policy.bindings = bindings,
        );
        let mutating = compile_bound(
            mutating,
            mutating_bindings,
            |p| p.metadata.name.as_deref(),
            MutatingPolicy::new,
            MutatingBinding::new,
            MutatingBinding::name,
            |policy, bindings| policy.bindings = bindings,
        );
        Policies {
            validating,
            mutating,
        }
    }

    /// Whether no policy is bound (admission can skip policies entirely).
    pub fn is_empty(&self) -> bool {
        self.validating.is_empty() && self.mutating.is_empty()
    }

    /// Mutating policies: changes `object` in place; a policy error under `failurePolicy: Fail`
    /// fails the request (403, kube's message).
    pub async fn mutate(
        &self,
        objects: &dyn Objects,
        attrs: &Attributes,
        namespace: Option<&Value>,
        object: &mut Value,
        old: Option<&Value>,
        _outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        if self.mutating.is_empty() {
            return Ok(());
        }
        let request_json = attrs.admission_request("", None, None);
        let namespace_json = namespace_object(attrs, namespace);
        let base = Request {
            attrs,
            namespace,
            namespace_object: namespace_json.as_ref(),
            request: &request_json,
            object: None,
            old,
        };
        let mut errors = Vec::new();
        let mut invoked_if_needed = Vec::new();
        let mut reinvoke = Vec::new();
        for (index, policy) in self.mutating.iter().enumerate() {
            let run = policy.mutate(objects, &base, object, &mut errors).await;
            if run.changed {
                reinvoke.append(&mut invoked_if_needed);
            }
            if run.invoked && policy.reinvoke {
                invoked_if_needed.push(index);
            }
        }
        for index in reinvoke {
            self.mutating[index]
                .mutate(objects, &base, object, &mut errors)
                .await;
        }
        match mutating_error(attrs, object, &errors) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Validating policies: the first `Deny` fails the request with kube's message, reason and
    /// code; `Warn` and `Audit` actions and audit annotations go to `outcome`.
    pub async fn validate(
        &self,
        objects: &dyn Objects,
        attrs: &Attributes,
        namespace: Option<&Value>,
        object: Option<&Value>,
        old: Option<&Value>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        if self.validating.is_empty() {
            return Ok(());
        }
        let request_json = attrs.admission_request("", None, None);
        let namespace_json = namespace_object(attrs, namespace);
        let request = Request {
            attrs,
            namespace,
            namespace_object: namespace_json.as_ref(),
            request: &request_json,
            object,
            old,
        };
        let mut denials = Vec::new();
        for policy in &self.validating {
            policy
                .validate(objects, &request, &mut denials, outcome)
                .await;
        }
        match denials.first() {
            Some(denial) => Err(validating_error(attrs, object.or(old), denial)),
            None => Ok(()),
        }
    }
}
