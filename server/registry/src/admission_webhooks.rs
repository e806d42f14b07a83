//! admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and MutatingWebhookConfiguration:
//! objects of their logical cluster, read by kcp-admission to call the webhooks they name on
//! writes in that cluster only.

use super::{ResourceType, Strategy};

pub fn resources() -> Vec<ResourceType> {
    vec![
        super::resource(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &[],
            Box::new(WebhookConfigurations),
        ),
        super::resource(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            &[],
            Box::new(WebhookConfigurations),
        ),
    ]
}

struct WebhookConfigurations;

impl Strategy for WebhookConfigurations {}
