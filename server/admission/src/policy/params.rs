//! The params a binding gives its policy, as kube's `CollectParams`: without `paramKind` or
//! `paramRef` one evaluation without params; by `name` the one object; by `selector` every
//! matching object (one evaluation each); none found is an error under
//! `parameterNotFoundAction: Deny` (the default here, as Kubernetes requires the field) and no
//! evaluation under `Allow`.
//!
//! Params are read from the written cluster through [`Objects`], in `paramRef.namespace`, else
//! the request's namespace; for cluster-scoped param kinds the source ignores the namespace.

use k8s_openapi::api::admissionregistration::{v1, v1beta1};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcp_apimachinery::meta;
use serde_json::Value;

use super::compiled::ParamKind;
use crate::matching::label_selector_matches;
use crate::sources::Objects;

/// Kube's error when no param exists and the binding says `Deny`.
pub(super) const NO_PARAMS: &str =
    "no params found for policy binding with `Deny` parameterNotFoundAction";

/// A binding's `paramRef`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ParamRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<LabelSelector>,
    pub allow_missing: bool,
}

impl From<&v1::ParamRef> for ParamRef {
    fn from(r: &v1::ParamRef) -> ParamRef {
        ParamRef {
            name: r.name.clone().filter(|n| !n.is_empty()),
            namespace: r.namespace.clone().filter(|n| !n.is_empty()),
            selector: r.selector.clone(),
            allow_missing: r.parameter_not_found_action.as_deref() == Some("Allow"),
        }
    }
}

impl From<&v1beta1::ParamRef> for ParamRef {
    fn from(r: &v1beta1::ParamRef) -> ParamRef {
        ParamRef {
            name: r.name.clone().filter(|n| !n.is_empty()),
            namespace: r.namespace.clone().filter(|n| !n.is_empty()),
            selector: r.selector.clone(),
            allow_missing: r.parameter_not_found_action.as_deref() == Some("Allow"),
        }
    }
}

/// The params to evaluate with (`None`: an evaluation without params), or a configuration error.
pub(super) async fn collect(
    objects: &dyn Objects,
    kind: Option<&ParamKind>,
    param_ref: Option<&ParamRef>,
    request_namespace: Option<&str>,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(kind), Some(param_ref)) = (kind, param_ref) else {
        return Ok(vec![None]);
    };
    let namespace = param_ref.namespace.as_deref().or(request_namespace);
    let mut params = match (&param_ref.name, &param_ref.selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        (Some(name), None) => objects
            .get(&kind.api_version, &kind.kind, namespace, name)
            .await
            .map_err(|err| err.message)?
            .into_iter()
            .collect::<Vec<_>>(),
        (None, Some(selector)) => {
            let mut selected = Vec::new();
            let listed = objects
                .list(&kind.api_version, &kind.kind, namespace)
                .await
                .map_err(|err| err.message)?;
            for object in listed {
                let labels = meta::labels(&object);
                if label_selector_matches(Some(selector), &labels)? {
                    selected.push(object);
                }
            }
            selected
        }
        (None, None) => return Err("one of name or selector must be provided".into()),
    };
    if params.is_empty() && !param_ref.allow_missing {
        return Err(NO_PARAMS.into());
    }
    for param in &mut params {
        if meta::kind(param).is_none() {
            meta::set_type_meta(param, &kind.api_version, &kind.kind);
        }
    }
    Ok(params.into_iter().map(Some).collect())
}
