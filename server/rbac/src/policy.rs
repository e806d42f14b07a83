//! What the escalation checks need from a policy, so they work on one index or on several.
//!
//! kcp authorizes a request against more than one policy at once (the logical cluster's own RBAC
//! and the bootstrap policy of `system:admin`, which applies everywhere), and the escalation checks
//! must see the same union the authorizer sees, or a user would be refused to grant what they are
//! allowed to do. A slice of policies is itself a policy: the first opinion wins, held rules add
//! up, and a role reference resolves in the first policy that has the role. kcp's slice is therefore
//! `[&local, &bootstrap]`: the logical cluster's index, built with
//! [`PolicyIndex::build_layered`], holds the base roles it replaces or extends and must answer for
//! them before the bootstrap index does; decisions are the same in either order.

use crate::attributes::{Attributes, Decision, User};
use crate::index::{HeldRules, PolicyIndex, RoleRef};
use crate::rule::PolicyRule;

/// A source of RBAC decisions and rules.
pub trait Policy {
    fn authorize(&self, attributes: &Attributes) -> Decision;
    fn rules_for(&self, user: &User, namespace: &str) -> HeldRules;
    fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String>;
}

impl Policy for PolicyIndex {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        PolicyIndex::authorize(self, attributes)
    }

    fn rules_for(&self, user: &User, namespace: &str) -> HeldRules {
        PolicyIndex::rules_for(self, user, namespace)
    }

    fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        PolicyIndex::role_ref_rules(self, role_ref, namespace).map(<[PolicyRule]>::to_vec)
    }
}

impl<P: Policy + ?Sized> Policy for &P {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        (**self).authorize(attributes)
    }

    fn rules_for(&self, user: &User, namespace: &str) -> HeldRules {
        (**self).rules_for(user, namespace)
    }

    fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        (**self).role_ref_rules(role_ref, namespace)
    }
}

impl<P: Policy> Policy for [P] {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        Decision::first_opinion(self.iter().map(|policy| policy.authorize(attributes)))
    }

    fn rules_for(&self, user: &User, namespace: &str) -> HeldRules {
        let mut held = HeldRules::default();
        for policy in self {
            let HeldRules { rules, errors } = policy.rules_for(user, namespace);
            held.rules.extend(rules);
            held.errors.extend(errors);
        }
        held
    }

    fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.iter()
            .find_map(|policy| policy.role_ref_rules(role_ref, namespace).ok())
            .ok_or_else(|| role_ref.not_found())
    }
}
