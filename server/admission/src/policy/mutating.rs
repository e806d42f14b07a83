//! MutatingAdmissionPolicy evaluation, as kube's `mutatingadmissionpolicy` plugin
//! (`admission/plugin/policy/mutating`): for each binding of a matching policy, for each param,
//! the match conditions, then every mutation in order on the object as the previous one left it.
//!
//! - `ApplyConfiguration`: the expression returns `Object{...}`, merged into the object by the
//!   kind's merge rules: maps merge field by field, lists merge by key where Kubernetes' patch
//!   metadata says so (the kind's strategic-merge schema), other lists are replaced, and a `null`
//!   removes the field. Kube merges with server-side apply's typed schema and refuses changes
//!   inside atomic lists and maps; here the whole atomic list is replaced instead.
//! - `JSONPatch`: the expression returns a list of `JSONPatch{op, path, from, value}`, applied
//!   as RFC 6902 (a failed `test` leaves the object unchanged, as kube).
//!
//! A mutation may not change the object's `apiVersion` or `kind`. Errors are kube's policy
//! errors (`policy '<p>' with binding '<b>' denied request: ...`), dropped under
//! `failurePolicy: Ignore`.

use k8s_openapi::api::admissionregistration::v1beta1;
use kcp_apimachinery::StatusReason;
use kcp_apimachinery::meta;
use kcp_apimachinery::patch::{PatchSchema, apply_strategic_merge_patch};
use kube_cel::cel as cel_value;
use serde_json::{Map, Value};

use super::compiled::{Common, Compiled, FailurePolicy, ParamKind, activation};
use super::matcher::Constraints;
use super::params::{self, ParamRef};
use super::{Denial, Request};
use crate::cel::{Activation, Converted, Environment, to_json};
use crate::sources::Objects;

/// One `mutations` entry.
#[derive(Debug, Clone)]
enum Mutation {
    ApplyConfiguration(Compiled),
    JsonPatch(Compiled),
    /// A mutation whose patch type or expression is missing.
    Invalid(String),
}

/// A binding of a mutating policy.
#[derive(Debug, Clone)]
pub(super) struct MutatingBinding {
    name: String,
    constraints: Option<Constraints>,
    param_ref: Option<ParamRef>,
}

impl MutatingBinding {
    /// The binding and the name of its policy; `None` without a spec or policy name.
    pub(super) fn new(binding: &v1beta1::MutatingAdmissionPolicyBinding) -> Option<(String, Self)> {
        let spec = binding.spec.as_ref()?;
        let policy = spec.policy_name.clone().filter(|p| !p.is_empty())?;
        let binding = MutatingBinding {
            name: binding.metadata.name.clone().unwrap_or_default(),
            constraints: spec.match_resources.as_ref().map(Constraints::from),
            param_ref: spec.param_ref.as_ref().map(ParamRef::from),
        };
        Some((policy, binding))
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

/// What running a policy did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    /// At least one binding applied.
    pub invoked: bool,
    /// The object changed.
    pub changed: bool,
}

/// A compiled MutatingAdmissionPolicy with its bindings.
#[derive(Debug, Clone)]
pub(super) struct MutatingPolicy {
    common: Common,
    mutations: Vec<Mutation>,
    /// `reinvocationPolicy: IfNeeded`.
    pub(super) reinvoke: bool,
    pub(super) bindings: Vec<MutatingBinding>,
}

impl MutatingPolicy {
    /// Compiles a policy; `None` without a spec or `matchConstraints` (which kube requires).
    pub(super) fn new(policy: &v1beta1::MutatingAdmissionPolicy) -> Option<MutatingPolicy> {
        let spec = policy.spec.as_ref()?;
        let constraints = Constraints::from(spec.match_constraints.as_ref()?);
        let param_kind = spec.param_kind.as_ref().and_then(|kind| {
            Some(ParamKind {
                api_version: kind.api_version.clone()?,
                kind: kind.kind.clone()?,
            })
        });
        let conditions: Vec<(String, String)> = spec
            .match_conditions
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.expression.clone()))
            .collect();
        let variables: Vec<(String, String)> = spec
            .variables
            .iter()
            .flatten()
            .map(|v| (v.name.clone(), v.expression.clone()))
            .collect();
        let mut env = Environment {
            object_types: true,
            ..Environment::default()
        };
        let common = Common::compile(
            policy.metadata.name.as_deref().unwrap_or_default(),
            param_kind,
            constraints,
            &conditions,
            &variables,
            spec.failure_policy.as_deref(),
            &mut env,
        );
        let mutations = spec
            .mutations
            .iter()
            .flatten()
            .map(|m| {
                let apply = m
                    .apply_configuration
                    .as_ref()
                    .and_then(|a| a.expression.as_deref());
                let patch = m.json_patch.as_ref().and_then(|p| p.expression.as_deref());
                match (m.patch_type.as_str(), apply, patch) {
                    ("ApplyConfiguration", Some(source), _) => {
                        Mutation::ApplyConfiguration(Compiled::new(&env, source))
                    }
                    ("JSONPatch", _, Some(source)) => {
                        Mutation::JsonPatch(Compiled::new(&env, source))
                    }
                    (other, _, _) => Mutation::Invalid(format!(
                        "unsupported mutation: patchType {other:?} without its expression"
                    )),
                }
            })
            .collect();
        Some(MutatingPolicy {
            common,
            mutations,
            reinvoke: spec.reinvocation_policy.as_deref() == Some("IfNeeded"),
            bindings: Vec::new(),
        })
    }

    pub(super) fn name(&self) -> &str {
        &self.common.name
    }

    /// Runs the policy's bindings on `object`, collecting errors under `failurePolicy: Fail`.
    pub(super) async fn mutate(
        &self,
        objects: &dyn Objects,
        base: &Request<'_>,
        object: &mut Value,
        errors: &mut Vec<Denial>,
    ) -> Run {
        let mut run = Run::default();
        let fail = self.common.failure_policy == FailurePolicy::Fail;
        let selected = {
            let request = Request {
                object: Some(&*object),
                ..*base
            };
            self.common.constraints.matches(&request)
        };
        match selected {
            Ok(true) => {}
            Ok(false) => return run,
            Err(err) => {
                if fail {
                    errors.push(self.error(None, &format!("failed to configure policy: {err}")));
                }
                return run;
            }
        }
        for binding in &self.bindings {
            let current = object.clone();
            let request = Request {
                object: Some(&current),
                ..*base
            };
            let selected = match binding.constraints.as_ref().map(|c| c.matches(&request)) {
                Some(Ok(false)) => continue,
                Some(Err(err)) => Err(err),
                _ => {
                    params::collect(
                        objects,
                        self.common.param_kind.as_ref(),
                        binding.param_ref.as_ref(),
                        base.attrs.namespace.as_deref(),
                    )
                    .await
                }
            };
            let params = match selected {
                Ok(params) => params,
                Err(err) => {
                    if fail {
                        errors.push(self.error(
                            Some(binding),
                            &format!("failed to configure binding: {err}"),
                        ));
                    }
                    continue;
                }
            };
            for param in &params {
                let outcome = self.invoke(base, param.as_ref(), object);
                run.invoked |= outcome.invoked;
                run.changed |= outcome.changed;
                if fail {
                    errors.extend(outcome.errors.iter().map(|e| {
                        let mut error = self.error(Some(binding), e);
                        error.reason = StatusReason::Invalid;
                        error
                    }));
                }
            }
        }
        run
    }

    /// One invocation (binding and param): match conditions, then every mutation.
    fn invoke(&self, base: &Request<'_>, param: Option<&Value>, object: &mut Value) -> Invocation {
        let mut invocation = Invocation::default();
        for (index, mutation) in self.mutations.iter().enumerate() {
            let current = object.clone();
            let request = Request {
                object: Some(&current),
                ..*base
            };
            let converted = Converted::default();
            let base_activation = activation(&request, Some(&current), param, &converted);
            if index == 0 {
                match self.common.conditions_match(&base_activation) {
                    Ok(true) => invocation.invoked = true,
                    Ok(false) => return invocation,
                    Err(err) => {
                        invocation.errors.push(err);
                        return invocation;
                    }
                }
            }
            let variables = self.common.variables(&base_activation);
            let activation = Activation {
                variables: Some(&variables),
                ..base_activation
            };
            match mutation.apply(&activation, base, &current) {
                Ok(Some(mutated)) if mutated != current => {
                    *object = mutated;
                    invocation.changed = true;
                }
                Ok(_) => {}
                Err(err) => invocation.errors.push(err),
            }
        }
        invocation
    }

    fn error(&self, binding: Option<&MutatingBinding>, message: &str) -> Denial {
        let message = match binding {
            Some(binding) => format!(
                "policy '{}' with binding '{}' denied request: {message}",
                self.name(),
                binding.name
            ),
            None => format!("policy {:?} denied request: {message}", self.name()),
        };
        Denial {
            message,
            reason: StatusReason::Forbidden,
            code: 403,
        }
    }
}

/// What one invocation did.
#[derive(Default)]
struct Invocation {
    invoked: bool,
    changed: bool,
    errors: Vec<String>,
}

impl Mutation {
    /// The object after this mutation (`None`: unchanged), or an error.
    fn apply(
        &self,
        activation: &Activation<'_>,
        request: &Request<'_>,
        object: &Value,
    ) -> Result<Option<Value>, String> {
        let mutated = match self {
            Mutation::Invalid(err) => return Err(err.clone()),
            Mutation::ApplyConfiguration(expression) => {
                let result = expression.evaluate(activation)?;
                let cel_value::Value::Map(_) = &result else {
                    return Err(format!(
                        "unsupported return type from ApplyConfiguration expression: {}",
                        result.type_of()
                    ));
                };
                apply_configuration(request, object, to_json(&result)?)?
            }
            Mutation::JsonPatch(expression) => {
                let result = expression.evaluate(activation)?;
                match json_patch(object, &result)? {
                    Some(patched) => patched,
                    None => return Ok(None),
                }
            }
        };
        if meta::api_version(&mutated) != meta::api_version(object)
            || meta::kind(&mutated) != meta::kind(object)
        {
            return Err(format!(
                "the mutation may not change apiVersion or kind (from {}/{} to {}/{})",
                meta::api_version(object).unwrap_or_default(),
                meta::kind(object).unwrap_or_default(),
                meta::api_version(&mutated).unwrap_or_default(),
                meta::kind(&mutated).unwrap_or_default()
            ));
        }
        Ok(Some(mutated))
    }
}

/// Merges an `Object{...}` apply configuration into `object`.
fn apply_configuration(
    request: &Request<'_>,
    object: &Value,
    mut patch: Value,
) -> Result<Value, String> {
    for field in ["apiVersion", "kind"] {
        if let (Some(value), Some(patch)) = (object.get(field), patch.as_object_mut()) {
            patch.insert(field.to_string(), value.clone());
        }
    }
    let schema = PatchSchema::for_builtin(&request.attrs.group, &request.attrs.kind);
    let bytes = serde_json::to_vec(&patch).map_err(|err| err.to_string())?;
    apply_strategic_merge_patch(object, &bytes, &schema)
        .map_err(|err| format!("error applying patch: failed to merge patch: {err}"))
}

/// Applies a list of `JSONPatch{...}`; `None` when a `test` operation failed.
fn json_patch(object: &Value, result: &cel_value::Value) -> Result<Option<Value>, String> {
    let cel_value::Value::List(items) = result else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".into());
    };
    let mut operations = Vec::new();
    for item in items.iter() {
        let Value::Object(fields) = to_json(item)? else {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                item.type_of()
            ));
        };
        let mut operation = Map::new();
        for key in ["op", "path", "from", "value"] {
            if let Some(value) = fields.get(key).filter(|v| key == "value" || !v.is_null()) {
                operation.insert(key.to_string(), value.clone());
            }
        }
        operations.push(Value::Object(operation));
    }
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations)).map_err(|err| {
        format!("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: {err}")
    })?;
    let mut patched = object.clone();
    match json_patch::patch(&mut patched, &patch) {
        Ok(()) => Ok(Some(patched)),
        Err(err) if matches!(err.kind, json_patch::PatchErrorKind::TestFailed) => Ok(None),
        Err(err) => Err(format!("JSONPath: {err}")),
    }
}
