//! `kubectl auth whoami`, `auth can-i` (also `--list`) and `--as`/`--as-group` with the oldest
//! and the newest kubectl, plus the review APIs behind them.

use super::*;

#[tokio::test]
async fn kubectl_auth_commands() {
    let dir = temp_dir("auth-kubectl");
    let server = KcpProcess::start(binary(), "auth-kubectl", &[token_file(dir.path())]).await;
    let admin = Caller::admin(&server);
    let ca = server.client_ca();
    bind_in_namespace(&admin, "root", "default", "edit", "alice").await;
    ensure_namespace(&admin, "team-b", "default").await;
    let impersonator = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "impersonator"},
        "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}],
    });
    admin
        .ensure(&format!("{RBAC_V1}/clusterroles"), &impersonator)
        .await;
    bind_cluster_wide(&admin, "root", "impersonator", "ivy").await;
    let alice = Caller::cert(&server, &ca, "alice", &[]);
    SETTLED
        .wait_status(
            "alice's edit binding",
            &alice,
            "/api/v1/namespaces/default/configmaps",
            200,
        )
        .await;
    let ivy = Caller::cert(&server, &ca, "ivy", &[]);
    SETTLED
        .wait_status(
            "ivy's impersonator binding",
            &Caller::cert(&server, &ca, "ivy", &[]).header("Impersonate-User", "alice"),
            "/api/v1/namespaces/default/configmaps",
            200,
        )
        .await;

    // Kubeconfigs for the users.
    let ca_pem = &server.admin().ca_pem;
    let root_url = server.base_url();
    let team_b_url = format!("{root_url}/clusters/team-b");
    let kubeconfig = |name: &str, url: &str, user: KubeconfigUser| {
        let path = dir.path().join(format!("{name}.kubeconfig"));
        write_kubeconfig(&path, url, ca_pem, user);
        path
    };
    let alice_cert = ca.client("alice", &[]);
    let carol_cert = ca.client("carol", &[]);
    let ivy_cert = ca.client("ivy", &[]);
    let configs = [
        (
            "alice",
            kubeconfig("alice", root_url, KubeconfigUser::Certificate(&alice_cert)),
        ),
        (
            "carol",
            kubeconfig("carol", root_url, KubeconfigUser::Certificate(&carol_cert)),
        ),
        (
            "ivy",
            kubeconfig("ivy", root_url, KubeconfigUser::Certificate(&ivy_cert)),
        ),
        (
            "ivy-team-b",
            kubeconfig(
                "ivy-team-b",
                &team_b_url,
                KubeconfigUser::Certificate(&ivy_cert),
            ),
        ),
        (
            "tina",
            kubeconfig("tina", root_url, KubeconfigUser::Token("tina-token-123")),
        ),
        ("admin", server.kubeconfig()),
    ];

    for version in KUBECTL_VERSIONS {
        let kubectl = |who: &str| {
            let (_, path) = configs.iter().find(|(name, _)| *name == who).unwrap();
            Kubectl::new(version, path)
        };
        let whoami = |who: &str, extra: &[&str]| -> Value {
            let args = [extra, &["auth", "whoami", "-o", "json"]].concat();
            let out = kubectl(who).ok(&args);
            let review: Value = serde_json::from_str(&out).unwrap_or_else(|error| {
                panic!("kubectl {version} whoami not JSON ({error}): {out}")
            });
            review["status"]["userInfo"].clone()
        };

        // whoami: a certificate user and a token user.
        assert_user(&whoami("alice", &[]), "alice", &["system:authenticated"]);
        let tina = whoami("tina", &[]);
        assert_user(&tina, "tina", &["devs", "ops", "system:authenticated"]);
        assert_eq!(tina["uid"], "tina-uid", "kubectl {version}: {tina}");

        // can-i, yes and no (kubectl exits 1 on "no").
        for (who, args, answer) in [
            ("alice", &["create", "configmaps"][..], "yes"),
            ("alice", &["delete", "secrets"][..], "yes"),
            (
                "alice",
                &["create", "roles.rbac.authorization.k8s.io"][..],
                "no",
            ),
            ("carol", &["create", "configmaps"][..], "no"),
            ("tina", &["list", "configmaps"][..], "no"),
        ] {
            let full = [&["auth", "can-i"][..], args, &["-n", "default"]].concat();
            let run = kubectl(who).run(&full);
            assert_eq!(
                run.stdout.trim(),
                answer,
                "kubectl {version} as {who} {full:?}: {run:?}"
            );
            assert_eq!(run.status.success(), answer == "yes", "{run:?}");
        }

        // can-i --list: alice's edit rules in default, carol only the self-review basics.
        let list = kubectl("alice").ok(&["auth", "can-i", "--list", "-n", "default"]);
        let row = |output: &str, resource: &str| -> Option<String> {
            output
                .lines()
                .find(|line| line.split_whitespace().next() == Some(resource))
                .map(str::to_owned)
        };
        for resource in ["configmaps", "secrets", "leases.coordination.k8s.io"] {
            let line = row(&list, resource)
                .unwrap_or_else(|| panic!("kubectl {version}: no {resource} in:\n{list}"));
            for verb in ["create", "list", "delete"] {
                assert!(line.contains(verb), "kubectl {version}: {line}");
            }
        }
        let carol_list = kubectl("carol").ok(&["auth", "can-i", "--list", "-n", "default"]);
        assert!(
            row(&carol_list, "configmaps").is_none(),
            "kubectl {version}: carol may do something with configmaps:\n{carol_list}"
        );
        assert!(
            row(&carol_list, "selfsubjectaccessreviews.authorization.k8s.io").is_some(),
            "kubectl {version}: carol's list lacks the self-review rule:\n{carol_list}"
        );

        // Impersonation: the admin and ivy (impersonate in root) may act as alice.
        let as_alice = ["--as=alice", "get", "configmaps", "-n", "default"];
        kubectl("admin").ok(&as_alice);
        assert_user(
            &whoami("admin", &["--as=alice"]),
            "alice",
            &["system:authenticated"],
        );
        let denied = kubectl("admin").fails(&["--as=alice", "get", "secrets", "-n", "kube-system"]);
        assert!(
            denied.contains("Forbidden") && denied.contains("User \"alice\""),
            "kubectl {version}: {denied}"
        );
        kubectl("ivy").ok(&as_alice);
        assert_user(&whoami("ivy", &["--as=alice"]), "alice", &[]);
        // …but ivy may not in team-b, and carol nowhere. kubectl only says "Forbidden" here (its
        // discovery is refused first and it prints "unknown", as with kube-apiserver); the
        // Status is checked with the same headers below.
        for who in ["ivy-team-b", "carol"] {
            let refused = kubectl(who).fails(&as_alice);
            assert!(
                refused.contains("Forbidden"),
                "kubectl {version} as {who}: {refused}"
            );
        }
        // Nobody impersonates system:masters, not even a system:masters user.
        for who in ["admin", "ivy"] {
            let args = [
                "--as=alice",
                "--as-group=system:masters",
                "get",
                "configmaps",
                "-n",
                "default",
            ];
            let refused = kubectl(who).fails(&args);
            assert!(
                refused.contains("Forbidden"),
                "kubectl {version} as {who}: {refused}"
            );
        }
    }

    // The impersonation refusals as Statuses.
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let carol = Caller::cert(&server, &ca, "carol", &[]);
    let refusals = [
        ("carol", "", &carol, "carol"),
        ("ivy in team-b", "team-b", &ivy, "ivy"),
    ];
    for (what, cluster, caller, user) in refusals {
        let path = format!("{}{configmaps}", cluster_prefix(cluster));
        let response = caller
            .request(Method::GET, &path)
            .header("Impersonate-User", "alice");
        expect_forbidden(
            &format!("{what} impersonates alice"),
            &Response::send(response).await,
            user,
            &["cannot impersonate resource \"users\""],
        );
    }
    for (what, caller) in [("admin", &admin), ("ivy", &ivy)] {
        let response = caller
            .request(Method::GET, configmaps)
            .header("Impersonate-User", "alice")
            .header("Impersonate-Group", "system:masters");
        let response = Response::send(response).await;
        let message = expect_status(
            &format!("{what} impersonates group system:masters"),
            &response,
            403,
            "Forbidden",
        );
        assert!(message.contains("system:masters"), "{message}");
    }

    // The review APIs behind can-i, asked by the admin about others.
    for (user, cluster, allowed) in [
        ("alice", "", true),
        ("carol", "", false),
        ("alice", "team-b", false),
    ] {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                // Without system:authenticated nobody may enter a workspace (kcp's content gate).
                "groups": ["system:authenticated"],
                "resourceAttributes": {"namespace": "default", "verb": "create", "resource": "configmaps"},
            },
        });
        let prefix = cluster_prefix(cluster);
        let path = format!("{prefix}/apis/authorization.k8s.io/v1/subjectaccessreviews");
        let answer = admin.post(&path, &review).await;
        assert_eq!(answer.status, 201, "SAR {user}: {}", answer.text());
        assert_eq!(
            answer.json()["status"]["allowed"],
            allowed,
            "SAR {user} in {cluster:?}: {}",
            answer.text()
        );
        let mut local = review.clone();
        local["kind"] = json!("LocalSubjectAccessReview");
        local["metadata"] = json!({"namespace": "default"});
        let path = format!(
            "{prefix}/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews"
        );
        let answer = admin.post(&path, &local).await;
        assert_eq!(answer.status, 201, "LSAR {user}: {}", answer.text());
        assert_eq!(
            answer.json()["status"]["allowed"],
            allowed,
            "LSAR {user} in {cluster:?}: {}",
            answer.text()
        );
    }
    // A user may not ask about others without the right to.
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "secrets"}},
    });
    let answer = carol
        .post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            &review,
        )
        .await;
    expect_forbidden(
        "carol's SubjectAccessReview",
        &answer,
        "carol",
        &["subjectaccessreviews"],
    );
}
