//! The order Kubernetes gives API versions of one group (k8s.io/apimachinery's
//! `CompareKubeAwareVersionStrings`): GA versions first (higher major first), then betas, then
//! alphas (higher major, then higher minor first), then versions that do not look like
//! Kubernetes versions, alphabetically. Discovery lists a group's versions in this order and
//! prefers the first, so a client (client-go, `kubectl`, `kubectl kcp bind`) picks `v1alpha2` over
//! `v1alpha1` and `v1` over `v1beta1` whatever order the types were registered in.

use std::cmp::Ordering;

/// Where a version stands: a Kubernetes-like version's stage and numbers, or any other string.
#[derive(Debug, PartialEq, Eq)]
enum Parsed<'a> {
    Kube { stage: u8, major: u64, minor: u64 },
    Other(&'a str),
}

const GA: u8 = 3;
const BETA: u8 = 2;
const ALPHA: u8 = 1;

fn parse(version: &str) -> Parsed<'_> {
    let kube = || {
        let rest = version.strip_prefix('v')?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let major: u64 = rest.get(..digits)?.parse().ok()?;
        let rest = &rest[digits..];
        if rest.is_empty() {
            return Some(Parsed::Kube {
                stage: GA,
                major,
                minor: 0,
            });
        }
        let (stage, minor) = if let Some(minor) = rest.strip_prefix("beta") {
            (BETA, minor)
        } else {
            (ALPHA, rest.strip_prefix("alpha")?)
        };
        if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Parsed::Kube {
            stage,
            major,
            minor: minor.parse().ok()?,
        })
    };
    kube().unwrap_or(Parsed::Other(version))
}

/// `Less` when `a` comes before `b` in discovery (has the higher priority).
pub fn discovery_order(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (
            Parsed::Kube {
                stage: sa,
                major: ma,
                minor: na,
            },
            Parsed::Kube {
                stage: sb,
                major: mb,
                minor: nb,
            },
        ) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Parsed::Kube { .. }, Parsed::Other(_)) => Ordering::Less,
        (Parsed::Other(_), Parsed::Kube { .. }) => Ordering::Greater,
        (Parsed::Other(a), Parsed::Other(b)) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_documented_order() {
        // The example order of k8s.io/apimachinery's version helpers.
        let want = [
            "v10",
            "v2",
            "v1",
            "v11beta2",
            "v10beta3",
            "v3beta1",
            "v12alpha1",
            "v11alpha2",
            "foo1",
            "foo10",
        ];
        let mut versions = want.to_vec();
        versions.reverse();
        versions.sort_by(|a, b| discovery_order(a, b));
        assert_eq!(versions, want);
    }

    #[test]
    fn look_alikes_are_not_kubernetes_versions() {
        for other in ["v1gamma1", "v1beta", "valpha1", "1", "v", "v1alpha1x", "V1"] {
            assert_eq!(parse(other), Parsed::Other(other), "{other}");
        }
        assert_eq!(discovery_order("v1alpha2", "v1alpha1"), Ordering::Less);
        assert_eq!(discovery_order("v1", "v1beta1"), Ordering::Less);
        assert_eq!(discovery_order("v1beta1", "zeta"), Ordering::Less);
    }
}
