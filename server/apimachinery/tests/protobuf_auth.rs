//! JSON → protobuf → JSON for the RBAC, authentication and authorization kinds that
//! `kubectl create role|clusterrole|rolebinding|clusterrolebinding|token` and
//! `kubectl auth can-i|whoami` send, and bodies for some of them assembled by hand from the
//! `.proto` field numbers and Go's marshalling rules (fields by number, value fields always
//! written, map keys sorted, `ExtraValue` as a message of repeated strings).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod protobuf_fuzz;
mod protobuf_wire;

use protobuf_wire::{assert_same_as_go, len_field, str_field, varint_field};

use kcp_apimachinery::protobuf;
use serde_json::{Value, json};

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({
        "name": name,
        "uid": "3c1d2a9e-5b7f-4e60-9a1d-7f2b8c4d6e01",
        "resourceVersion": "812",
        "creationTimestamp": "2026-11-21T18:44:29Z",
        "labels": {"rbac.example.com/aggregate-to-view": "true", "team": "shop"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn rules() -> Value {
    json!([
        {
            "verbs": ["get", "list", "watch"],
            "apiGroups": ["", "apps"],
            "resources": ["pods", "deployments/scale"],
            "resourceNames": ["web"],
        },
        {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics/*"]},
    ])
}

fn subjects(namespace: &str) -> Value {
    json!([
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
        {"kind": "ServiceAccount", "name": "builder", "namespace": namespace},
    ])
}

fn role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata("pod-reader", Some("shop")),
        "rules": rules(),
    })
}

fn cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata("monitoring", None),
        "rules": rules(),
        "aggregationRule": {
            "clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
                {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            ],
        },
    })
}

fn role_binding() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata("read-pods", Some("shop")),
        "subjects": subjects("shop"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
    })
}

fn cluster_role_binding() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata("monitoring", None),
        "subjects": subjects("kube-system"),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "monitoring",
        },
    })
}

fn user_info() -> Value {
    json!({
        "username": "system:serviceaccount:shop:builder",
        "uid": "9e0c7a55-1111-4222-8333-444455556666",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {
            "authentication.kubernetes.io/pod-name": ["builder-0"],
            "scopes": ["read", "write"],
            "empty": [],
        },
    })
}

fn token_review() -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": metadata("review", None),
        "spec": {"token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "audiences": ["https://kcp.example"]},
        "status": {
            "authenticated": true,
            "user": user_info(),
            "audiences": ["https://kcp.example"],
            "error": "token expired at 2026-11-21T18:44:29Z",
        },
    })
}

fn self_subject_review() -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "metadata": metadata("whoami", None),
        "status": {"userInfo": user_info()},
    })
}

fn token_request() -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": metadata("builder", Some("shop")),
        "spec": {
            "audiences": ["https://kcp.example", "vault"],
            "expirationSeconds": 0,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": "builder-0",
                "uid": "6a2d4e1f-0000-4000-8000-000000000001",
            },
        },
        "status": {"token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "expirationTimestamp": "2026-11-21T19:44:29Z"},
    })
}

fn resource_attributes() -> Value {
    json!({
        "namespace": "shop",
        "verb": "list",
        "group": "apps",
        "version": "v1",
        "resource": "deployments",
        "subresource": "scale",
        "name": "web",
        "fieldSelector": {
            "rawSelector": "metadata.name=web",
            "requirements": [{"key": "metadata.name", "operator": "In", "values": ["web"]}],
        },
        "labelSelector": {
            "rawSelector": "app=web,!canary",
            "requirements": [
                {"key": "app", "operator": "In", "values": ["web"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        },
    })
}

fn access_review_status() -> Value {
    json!({
        "allowed": true,
        "denied": true,
        "reason": "RBAC: allowed by RoleBinding \"read-pods/shop\"",
        "evaluationError": "webhook timed out",
    })
}

fn access_review_spec() -> Value {
    json!({
        "resourceAttributes": resource_attributes(),
        "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
        "user": "alice",
        "groups": ["system:authenticated", "devs"],
        "extra": {"scopes": ["read"], "acme.io/team": ["shop", "web"]},
        "uid": "u-alice",
    })
}

fn subject_access_review() -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": metadata("check", None),
        "spec": access_review_spec(),
        "status": access_review_status(),
    })
}

fn local_subject_access_review() -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "LocalSubjectAccessReview",
        "metadata": metadata("check", Some("shop")),
        "spec": access_review_spec(),
        "status": access_review_status(),
    })
}

fn self_subject_access_review() -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": metadata("can-i", None),
        "spec": {
            "resourceAttributes": resource_attributes(),
            "nonResourceAttributes": {"path": "/logs", "verb": "get"},
        },
        "status": access_review_status(),
    })
}

fn self_subject_rules_review() -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "metadata": metadata("can-i-list", None),
        "spec": {"namespace": "shop"},
        "status": {
            "resourceRules": [
                {
                    "verbs": ["get", "list"],
                    "apiGroups": ["", "apps"],
                    "resources": ["pods", "deployments"],
                    "resourceNames": ["web"],
                },
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            ],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}],
            "incomplete": true,
            "evaluationError": "webhook authorizer does not list rules",
        },
    })
}

fn list_of(kind: &str, items: &[Value]) -> Value {
    let items: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            let map = item.as_object_mut().unwrap();
            map.remove("apiVersion");
            map.remove("kind");
            item
        })
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"resourceVersion": "900", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
        "items": items,
    })
}

fn all_objects() -> Vec<Value> {
    let mut objects = vec![
        role(),
        cluster_role(),
        role_binding(),
        cluster_role_binding(),
    ];
    let lists: Vec<Value> = objects
        .iter()
        .map(|o| {
            let kind = format!("{}List", o["kind"].as_str().unwrap());
            list_of(&kind, &[o.clone(), o.clone()])
        })
        .collect();
    objects.extend(lists);
    objects.extend([
        token_review(),
        self_subject_review(),
        token_request(),
        subject_access_review(),
        local_subject_access_review(),
        self_subject_access_review(),
        self_subject_rules_review(),
    ]);
    objects
}

#[test]
fn every_rbac_and_review_kind_round_trips() {
    let objects = all_objects();
    assert_eq!(objects.len(), 15);
    for object in objects {
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        assert!(protobuf::supports(api_version, kind), "{kind}");
        let body = protobuf::encode(&object).unwrap();
        let decoded = protobuf::decode(&body).unwrap();
        assert_eq!(decoded, object, "{api_version} {kind}");
        assert_eq!(protobuf::encode(&decoded).unwrap(), body, "{kind}");
    }
}

#[test]
fn meta_kinds_are_served_in_the_new_group_versions() {
    for api_version in [
        "rbac.authorization.k8s.io/v1",
        "authentication.k8s.io/v1",
        "authorization.k8s.io/v1",
    ] {
        assert!(protobuf::supports(api_version, "DeleteOptions"));
        assert!(protobuf::supports(api_version, "Status"));
    }
    assert!(!protobuf::supports(
        "rbac.authorization.k8s.io/v1",
        "TokenReview"
    ));
    assert!(!protobuf::supports("authorization.k8s.io/v1", "Role"));
    assert!(!protobuf::supports(
        "rbac.authorization.k8s.io/v1beta1",
        "Role"
    ));
}

#[test]
fn misshapen_extra_values_are_reported() {
    let cases = [
        (
            json!({"scopes": "read"}),
            "spec.extra.scopes: expected an array",
        ),
        (
            json!({"scopes": ["read", 7]}),
            "spec.extra.scopes[1]: expected a string",
        ),
    ];
    for (extra, expected) in cases {
        let object = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "extra": extra},
        });
        let err = protobuf::encode(&object).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot encode {expected}"));
    }
}

#[test]
fn decode_never_panics_on_mutated_reviews() {
    let bodies: Vec<Vec<u8>> = all_objects()
        .iter()
        .map(|o| protobuf::encode(o).unwrap())
        .collect();
    protobuf_fuzz::decode_never_panics(&bodies, 0x5851_f42d_4c95_7f2d);
}

/// `ObjectMeta` with only a name and namespace, as Go writes it: every value field, set or not.
fn object_meta(name: &str, namespace: &str) -> Vec<u8> {
    [
        str_field(1, name),
        str_field(2, ""),
        str_field(3, namespace),
        str_field(4, ""),
        str_field(5, ""),
        str_field(6, ""),
        varint_field(7, 0),
        len_field(8, &[]),
    ]
    .concat()
}

/// One `map<string, ExtraValue>` entry: the key, then the value message of repeated field 1,
/// written even when it holds no strings.
fn extra_entry(number: u64, key: &str, items: &[&str]) -> Vec<u8> {
    let value: Vec<u8> = items.iter().flat_map(|item| str_field(1, item)).collect();
    len_field(number, &[str_field(1, key), len_field(2, &value)].concat())
}

#[test]
fn self_subject_access_review_matches_hand_assembled_bytes() {
    // `kubectl auth can-i list pods -l app=web`: an empty ObjectMeta, every ResourceAttributes
    // string written, the unset selector attributes and non-resource attributes (pointers) not,
    // and the zero status in full.
    let object = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "list",
                "resource": "pods",
                "labelSelector": {"rawSelector": "app=web"},
            },
        },
    });
    let attributes = [
        str_field(1, "default"),
        str_field(2, "list"),
        str_field(3, ""),
        str_field(4, ""),
        str_field(5, "pods"),
        str_field(6, ""),
        str_field(7, ""),
        len_field(9, &str_field(1, "app=web")),
    ]
    .concat();
    let status = [
        varint_field(1, 0),
        str_field(2, ""),
        str_field(3, ""),
        varint_field(4, 0),
    ]
    .concat();
    let raw = [
        len_field(1, &object_meta("", "")),
        len_field(2, &len_field(1, &attributes)),
        len_field(3, &status),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn role_binding_matches_hand_assembled_bytes() {
    // `kubectl create rolebinding view-bob --clusterrole=view --user=bob
    // --serviceaccount=dev:ci -n dev`.
    let object = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "view-bob", "namespace": "dev"},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"},
            {"kind": "ServiceAccount", "name": "ci", "namespace": "dev"},
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
    });
    let user = [
        str_field(1, "User"),
        str_field(2, "rbac.authorization.k8s.io"),
        str_field(3, "bob"),
        str_field(4, ""),
    ]
    .concat();
    let service_account = [
        str_field(1, "ServiceAccount"),
        str_field(2, ""),
        str_field(3, "ci"),
        str_field(4, "dev"),
    ]
    .concat();
    let role_ref = [
        str_field(1, "rbac.authorization.k8s.io"),
        str_field(2, "ClusterRole"),
        str_field(3, "view"),
    ]
    .concat();
    let raw = [
        len_field(1, &object_meta("view-bob", "dev")),
        len_field(2, &user),
        len_field(2, &service_account),
        len_field(3, &role_ref),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn user_info_extra_matches_hand_assembled_bytes() {
    // A `kubectl auth whoami` answer: extra keys written in sorted order whatever the JSON
    // order, an empty value still written as an empty message.
    let object = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "status": {
            "userInfo": {
                "username": "alice",
                "groups": ["devs", "system:authenticated"],
                "extra": {"scopes": ["write", "read"], "acme.io/team": ["shop"], "empty": []},
            },
        },
    });
    let user_info = [
        str_field(1, "alice"),
        str_field(2, ""),
        str_field(3, "devs"),
        str_field(3, "system:authenticated"),
        extra_entry(4, "acme.io/team", &["shop"]),
        extra_entry(4, "empty", &[]),
        extra_entry(4, "scopes", &["write", "read"]),
    ]
    .concat();
    let raw = [
        len_field(1, &object_meta("", "")),
        len_field(2, &len_field(1, &user_info)),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}

#[test]
fn token_request_fields_go_by_number_not_struct_order() {
    // `kubectl create token builder --audience=vault --duration=1h --bound-object-kind=Pod
    // ...`: Go declares expirationSeconds (4) before boundObjectRef (3) but writes 3 first.
    let object = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": "builder", "namespace": "shop"},
        "spec": {
            "audiences": ["vault"],
            "expirationSeconds": 3600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "builder-0", "uid": "u-1"},
        },
    });
    let bound = [
        str_field(1, "Pod"),
        str_field(2, "v1"),
        str_field(3, "builder-0"),
        str_field(4, "u-1"),
    ]
    .concat();
    let spec = [
        str_field(1, "vault"),
        len_field(3, &bound),
        varint_field(4, 3600),
    ]
    .concat();
    // The zero status: an empty token and Go's zero time as an empty message.
    let status = [str_field(1, ""), len_field(2, &[])].concat();
    let raw = [
        len_field(1, &object_meta("builder", "shop")),
        len_field(2, &spec),
        len_field(3, &status),
    ]
    .concat();
    assert_same_as_go(&object, &raw);
}
