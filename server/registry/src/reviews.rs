//! The review APIs: `authentication.k8s.io/v1` TokenReview and SelfSubjectReview,
//! `authorization.k8s.io/v1` SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview.
//!
//! They are questions, not objects: a client creates one and gets it back with its `status`
//! filled in, and nothing is stored (`kubectl auth whoami` and `kubectl auth can-i` are built on
//! them). They are registered like any type so discovery lists them with the single verb
//! `create`; the API server's review handler answers them.

use super::{ResourceType, Strategy};

/// Which question a review type asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    Token,
    SelfSubject,
    SubjectAccess,
    LocalSubjectAccess,
    SelfSubjectAccess,
    SelfSubjectRules,
}

struct ReviewStrategy(Review);

impl Strategy for ReviewStrategy {
    fn review(&self) -> Option<Review> {
        Some(self.0)
    }
}

pub fn resources() -> Vec<ResourceType> {
    [
        (Review::Token, "authentication.k8s.io", "TokenReview", false),
        (
            Review::SelfSubject,
            "authentication.k8s.io",
            "SelfSubjectReview",
            false,
        ),
        (
            Review::SubjectAccess,
            "authorization.k8s.io",
            "SubjectAccessReview",
            false,
        ),
        (
            Review::LocalSubjectAccess,
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            true,
        ),
        (
            Review::SelfSubjectAccess,
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            false,
        ),
        (
            Review::SelfSubjectRules,
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            false,
        ),
    ]
    .into_iter()
    .map(|(review, group, kind, namespaced)| review_type(review, group, kind, namespaced))
    .chain(std::iter::once({
        // kubectl before 1.28 asks `auth whoami` at v1beta1 only.
        let mut beta = review_type(
            Review::SelfSubject,
            "authentication.k8s.io",
            "SelfSubjectReview",
            false,
        );
        beta.version = "v1beta1".to_string();
        beta
    }))
    .collect()
}

fn review_type(review: Review, group: &str, kind: &str, namespaced: bool) -> ResourceType {
    let plural = format!("{}s", kind.to_lowercase());
    super::resource(
        group,
        kind,
        &plural,
        namespaced,
        &[],
        Box::new(ReviewStrategy(review)),
    )
}
