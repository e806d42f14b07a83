//! PodDisruptionBudgets: voluntary evictions (node drains) take down at most one replica at a
//! time. Upstream renders none, so a drain could stop every kcp replica at once.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::validate::Owner;

use super::pod;

/// `None` for a single replica: a budget would block every drain.
pub fn disruption_budget(
    owner: &Owner,
    name: String,
    labels: std::collections::BTreeMap<String, String>,
    replicas: i32,
) -> Option<PodDisruptionBudget> {
    (replicas > 1).then(|| PodDisruptionBudget {
        metadata: pod::object_meta(owner, name, labels.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}
