//! Static tokens, anonymous requests, service-account tokens, front-proxy headers and OIDC.

use super::*;

/// Waits until `caller`'s SelfSubjectReview in the default logical cluster answers `want`.
async fn wait_whoami(what: &str, caller: &Caller, want: u16) {
    SETTLED
        .eventually(what, || async {
            let answer = caller.whoami_in("").await;
            if answer.status == want {
                Ok(())
            } else {
                Err(format!("{} {}", answer.status, answer.text()))
            }
        })
        .await;
}

#[tokio::test]
async fn static_tokens_and_anonymous() {
    let dir = temp_dir("auth-tokens");
    let tokens = token_file(dir.path());
    let server = KcpProcess::start(binary(), "auth-tokens", std::slice::from_ref(&tokens)).await;
    let admin = Caller::admin(&server);
    let tina = Caller::token(&server, "tina-token-123");

    let info = tina.user_info().await;
    assert_user(&info, "tina", &["devs", "ops", "system:authenticated"]);
    assert_eq!(info["uid"], "tina-uid", "{info}");
    let configmaps = "/api/v1/namespaces/default/configmaps";
    expect_forbidden(
        "tina without bindings",
        &tina.get(configmaps).await,
        "tina",
        &["cannot list resource \"configmaps\""],
    );
    // The token file's groups take part in RBAC.
    let group = json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"});
    let body = binding("RoleBinding", "devs-view", "ClusterRole", "view", group);
    admin
        .ensure(&format!("{RBAC_V1}/namespaces/default/rolebindings"), &body)
        .await;
    SETTLED
        .wait_status("group devs bound to view", &tina, configmaps, 200)
        .await;

    // A wrong token is a 401, also where anonymous requests are allowed.
    let wrong = Caller::token(&server, "not-a-token");
    for path in [configmaps, "/version", "/api"] {
        expect_unauthorized(&format!("wrong token GET {path}"), &wrong.get(path).await);
    }

    // TokenReview.
    for (token, authenticated) in [("tina-token-123", true), ("not-a-token", false)] {
        let review = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let answer = admin
            .post("/apis/authentication.k8s.io/v1/tokenreviews", &review)
            .await;
        assert_eq!(answer.status, 201, "TokenReview: {}", answer.text());
        let status = &answer.json()["status"];
        assert_eq!(status["authenticated"], authenticated, "{status}");
        if authenticated {
            assert_user(&status["user"], "tina", &["devs", "ops"]);
        }
    }

    // Anonymous (on by default): health only. /version is public info in Kubernetes, but in kcp
    // every path of a workspace needs `access`, which root grants to authenticated users only.
    let anonymous = Caller::anonymous(&server);
    let version = anonymous.get("/version").await;
    assert_eq!(
        version.status,
        403,
        "anonymous GET /version: {}",
        version.text()
    );
    for path in ["/healthz", "/readyz", "/livez"] {
        let response = anonymous.get(path).await;
        assert_eq!(
            response.status,
            200,
            "anonymous GET {path}: {}",
            response.text()
        );
    }
    for path in ["/api/v1/namespaces", configmaps, "/api"] {
        expect_forbidden(
            &format!("anonymous GET {path}"),
            &anonymous.get(path).await,
            "system:anonymous",
            &[],
        );
    }

    // --anonymous-auth=false: credential-less requests are 401 except the always-allowed paths.
    let strict = KcpProcess::start(
        binary(),
        "auth-no-anonymous",
        &[tokens, "--anonymous-auth=false".to_owned()],
    )
    .await;
    let anonymous = Caller::anonymous(&strict);
    for path in ["/version", "/api/v1/namespaces", "/api"] {
        expect_unauthorized(
            &format!("no credentials GET {path}"),
            &anonymous.get(path).await,
        );
    }
    for path in ["/healthz", "/readyz", "/livez"] {
        let response = anonymous.get(path).await;
        assert_eq!(
            response.status,
            200,
            "no credentials GET {path}: {}",
            response.text()
        );
    }
    assert_user(
        &Caller::token(&strict, "tina-token-123").user_info().await,
        "tina",
        &["system:authenticated"],
    );
    let ok = Caller::admin(&strict).get("/api/v1/namespaces").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
}

#[tokio::test]
async fn service_account_tokens() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    SETTLED
        .wait_status(
            "the default ServiceAccount of root's default namespace",
            &admin,
            "/api/v1/namespaces/default/serviceaccounts/default",
            200,
        )
        .await;

    let token = Kubectl::new("1.33", &server.kubeconfig())
        .ok(&["create", "token", "default", "-n", "default"])
        .trim()
        .to_owned();
    let sa = Caller::token(&server, &token);
    assert_user(
        &sa.user_info().await,
        "system:serviceaccount:default:default",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated",
        ],
    );
    // Elsewhere it authenticates (upstream kcp), as a foreign identity: a logical cluster that
    // does not exist is the workspace gate's 403, not a 401.
    let list = sa.get("/clusters/other/api/v1/namespaces").await;
    expect_forbidden(
        "root's token listing in /clusters/other",
        &list,
        "system:serviceaccount:default:default",
        &["workspace access not permitted"],
    );

    // Tampered claims keep the old signature.
    let (header, claims, signature) = decode_jwt(&token);
    let encode = |value: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    };
    let mut forged = claims.clone();
    forged["sub"] = json!("system:serviceaccount:kube-system:admin");
    let tampered = format!("{}.{}.{signature}", encode(&header), encode(&forged));
    expect_unauthorized(
        "tampered token",
        &Caller::token(&server, &tampered).whoami_in("").await,
    );

    // Tokens minted with the server's own key: the unchanged claims authenticate (so the key and
    // signature are right), an expired one or one of another issuer does not.
    let key = std::fs::read_to_string(server.root_directory().join("sa.key")).expect("sa.key");
    let resigned = sign_es256(&key, &header, &claims);
    let answer = Caller::token(&server, &resigned).whoami_in("").await;
    assert_eq!(
        answer.status,
        201,
        "re-signed copy of a good token: {}",
        answer.text()
    );
    assert_eq!(
        claims["iss"], "https://kcp.default.svc",
        "default --service-account-issuer: {claims}"
    );
    let mut expired = claims.clone();
    expired["iat"] = json!(now() - 7200);
    expired["nbf"] = json!(now() - 7200);
    expired["exp"] = json!(now() - 3600);
    expect_unauthorized(
        "expired token",
        &Caller::token(&server, &sign_es256(&key, &header, &expired))
            .whoami_in("")
            .await,
    );
    let mut foreign = claims.clone();
    foreign["iss"] = json!("https://issuer.example.com");
    expect_unauthorized(
        "token of another issuer",
        &Caller::token(&server, &sign_es256(&key, &header, &foreign))
            .whoami_in("")
            .await,
    );

    // The TokenRequest API in another logical cluster.
    let other = Caller::token(
        &server,
        &default_service_account_token(&admin, "sa-other").await,
    );
    let mine = other.whoami_in("sa-other").await;
    assert_eq!(
        mine.status,
        201,
        "sa-other's token in sa-other: {}",
        mine.text()
    );
    // In root (which lets everybody authenticated in) it is still the same user.
    let abroad = other.whoami_in("root").await;
    assert_eq!(
        abroad.status,
        201,
        "sa-other's token in root: {}",
        abroad.text()
    );
    assert_eq!(
        abroad.json()["status"]["userInfo"]["username"],
        "system:serviceaccount:default:default",
        "{}",
        abroad.text()
    );

    // Deleting the ServiceAccount invalidates its tokens (--service-account-lookup).
    ensure_namespace(&admin, "", "sa-tokens").await;
    let robot =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}});
    admin
        .ensure("/api/v1/namespaces/sa-tokens/serviceaccounts", &robot)
        .await;
    let robot_path = "/api/v1/namespaces/sa-tokens/serviceaccounts/robot";
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let issued = admin.post(&format!("{robot_path}/token"), &request).await;
    assert_eq!(issued.status, 201, "TokenRequest robot: {}", issued.text());
    let robot_token = issued.json()["status"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let robot = Caller::token(&server, &robot_token);
    assert_user(
        &robot.user_info().await,
        "system:serviceaccount:sa-tokens:robot",
        &["system:serviceaccounts:sa-tokens"],
    );
    let deleted = admin.delete(robot_path).await;
    assert_eq!(deleted.status, 200, "deleting robot: {}", deleted.text());
    wait_whoami(
        "robot's token rejected after the ServiceAccount is gone",
        &robot,
        401,
    )
    .await;
    expect_unauthorized("deleted robot's token", &robot.whoami_in("").await);
}

/// A token issued in `cluster` for ServiceAccount `default` of namespace `default`.
async fn default_service_account_token(admin: &Caller, cluster: &str) -> String {
    ensure_namespace(admin, cluster, "default").await;
    let account = format!(
        "{}/api/v1/namespaces/default/serviceaccounts/default",
        cluster_prefix(cluster)
    );
    SETTLED
        .wait_status(
            &format!("{cluster}'s default ServiceAccount"),
            admin,
            &account,
            200,
        )
        .await;
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let issued = admin.post(&format!("{account}/token"), &request).await;
    assert_eq!(issued.status, 201, "TokenRequest: {}", issued.text());
    issued.json()["status"]["token"]
        .as_str()
        .expect("status.token")
        .to_owned()
}

/// Upstream kcp's cross-workspace identities: in a logical cluster other than its own, a
/// service account is only `system:anonymous` in `system:authenticated` and
/// `system:cluster:<its cluster>` for the authorizers. Bindings to it, to `system:serviceaccounts`
/// or to its namespace's group do not apply there; one to the cluster group does.
#[tokio::test]
async fn service_accounts_are_foreign_in_other_logical_clusters() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let visitor = Caller::token(
        &server,
        &default_service_account_token(&admin, "sa-home").await,
    );
    // The local one of the same name, to tell when the bindings below are in force.
    let local = Caller::token(
        &server,
        &default_service_account_token(&admin, "sa-abroad").await,
    );
    let configmaps = "/clusters/sa-abroad/api/v1/namespaces/default/configmaps";
    let user = "system:serviceaccount:default:default";
    expect_forbidden(
        "visitor before bindings",
        &visitor.get(configmaps).await,
        user,
        &[],
    );

    let bindings = "/clusters/sa-abroad/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let group = |name: &str| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name});
    for (name, subject) in [
        (
            "sa-view",
            json!({"kind": "ServiceAccount", "name": "default", "namespace": "default"}),
        ),
        ("serviceaccounts-view", group("system:serviceaccounts")),
        (
            "default-namespace-view",
            group("system:serviceaccounts:default"),
        ),
    ] {
        admin
            .ensure(
                bindings,
                &binding("ClusterRoleBinding", name, "ClusterRole", "view", subject),
            )
            .await;
    }
    SETTLED
        .wait_status(
            "the local service account may view",
            &local,
            configmaps,
            200,
        )
        .await;
    expect_forbidden(
        "visitor with bindings to service accounts",
        &visitor.get(configmaps).await,
        user,
        &["cannot list resource \"configmaps\""],
    );

    let from_home = group("system:cluster:sa-home");
    admin
        .ensure(
            bindings,
            &binding(
                "ClusterRoleBinding",
                "sa-home-view",
                "ClusterRole",
                "view",
                from_home,
            ),
        )
        .await;
    SETTLED
        .wait_status(
            "the visitor by its cluster's group",
            &visitor,
            configmaps,
            200,
        )
        .await;
}

/// `--authentication-token-webhook-*` at a shard, as upstream's shards take them: tokens no
/// other authenticator knows are reviewed by the webhook (here another server's TokenReview
/// endpoint, whose service-account token this server cannot verify itself).
#[tokio::test]
async fn tokens_reviewed_by_a_webhook() {
    let issuer = SERVER.get().await;
    let token = default_service_account_token(&Caller::admin(&issuer), "sa-webhook").await;
    let dir = temp_dir("auth-token-webhook");
    let webhook = dir.path().join("token-webhook.kubeconfig");
    write_kubeconfig(
        &webhook,
        &issuer.url("/clusters/root/apis/authentication.k8s.io/v1/tokenreviews"),
        &issuer.admin().ca_pem,
        KubeconfigUser::Certificate(
            &issuer
                .client_ca()
                .client("token-reviewer", &["system:masters"]),
        ),
    );
    let server = KcpProcess::start(
        binary(),
        "auth-token-webhook",
        &[
            format!(
                "--authentication-token-webhook-config-file={}",
                webhook.display()
            ),
            "--authentication-token-webhook-version=v1".to_owned(),
            "--authentication-token-webhook-cache-ttl=30s".to_owned(),
        ],
    )
    .await;
    let reviewed = Caller::token(&server, &token);
    let answer = reviewed.whoami_in("root").await;
    assert_eq!(answer.status, 201, "reviewed token: {}", answer.text());
    let user = &answer.json()["status"]["userInfo"];
    assert_user(
        user,
        "system:serviceaccount:default:default",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated",
        ],
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/cluster-name"],
        json!(["sa-webhook"]),
        "{user}"
    );
    expect_unauthorized(
        "a token neither server knows",
        &Caller::token(&server, "nobody-knows-this-token")
            .whoami_in("root")
            .await,
    );
}

#[tokio::test]
async fn front_proxy_headers() {
    let dir = temp_dir("auth-front-proxy");
    let proxy_ca = CertificateAuthority::generate("front-proxy-ca");
    let proxy_ca_file = dir.path().join("front-proxy-ca.crt");
    std::fs::write(&proxy_ca_file, &proxy_ca.cert_pem).unwrap();
    let server = KcpProcess::start(
        binary(),
        "auth-front-proxy",
        &[
            format!("--requestheader-client-ca-file={}", proxy_ca_file.display()),
            "--requestheader-allowed-names=front-proxy".to_owned(),
            "--requestheader-username-headers=X-Remote-User".to_owned(),
            "--requestheader-group-headers=X-Remote-Group".to_owned(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        ],
    )
    .await;
    let ca = server.client_ca();
    let with_headers = |caller: Caller| {
        caller
            .header("X-Remote-User", "frank")
            .header("X-Remote-Group", "devs")
            .header("X-Remote-Group", "ops")
            .header("X-Remote-Extra-Scopes", "read")
            .header("X-Remote-Extra-Scopes", "write")
    };
    let as_proxy = |name: &str| {
        let client = proxy_ca
            .client(name, &[])
            .credentials(server.admin())
            .client();
        Caller::with_client(&server, client)
    };

    // The front proxy's headers are who the request is.
    let proxied = with_headers(as_proxy("front-proxy"));
    let info = proxied.user_info().await;
    assert_user(&info, "frank", &["devs", "ops", "system:authenticated"]);
    assert_eq!(info["extra"]["scopes"], json!(["read", "write"]), "{info}");
    expect_forbidden(
        "frank lists configmaps",
        &proxied.get("/api/v1/namespaces/default/configmaps").await,
        "frank",
        &[],
    );

    // The same headers from a client-CA certificate (even one named front-proxy) are ignored.
    for name in ["alice", "front-proxy"] {
        let info = with_headers(Caller::cert(&server, &ca, name, &[]))
            .user_info()
            .await;
        assert_eq!(
            info["username"], name,
            "client-CA cert {name} with headers: {info}"
        );
        assert!(
            !strings(&info["groups"]).contains(&"devs".to_owned()),
            "{info}"
        );
    }
    // Without a certificate they are ignored too: the request is anonymous.
    let anonymous = with_headers(Caller::anonymous(&server));
    expect_forbidden(
        "headers without a certificate",
        &anonymous.get("/api/v1/namespaces").await,
        "system:anonymous",
        &[],
    );
    // A certificate of the request-header CA whose CN is not allowed: not frank, whatever else.
    let intruder = with_headers(as_proxy("intruder"));
    let answer = intruder.whoami_in("").await;
    match answer.status {
        401 => expect_unauthorized("request-header cert with a CN not allowed", &answer),
        201 => assert_ne!(
            answer.json()["status"]["userInfo"]["username"],
            "frank",
            "{}",
            answer.text()
        ),
        _ => {
            let message = expect_status("intruder", &answer, 403, "Forbidden");
            assert!(!message.contains("frank"), "{message}");
        }
    }
}

#[tokio::test]
async fn oidc_tokens() {
    let dir = temp_dir("auth-oidc");
    let issuer = OidcIssuer::start();
    let ca_file = dir.path().join("oidc-ca.crt");
    std::fs::write(&ca_file, &issuer.ca_pem).unwrap();
    let server = KcpProcess::start(
        binary(),
        "auth-oidc",
        &[
            format!("--oidc-issuer-url={}", issuer.url),
            "--oidc-client-id=kcp-test".to_owned(),
            format!("--oidc-ca-file={}", ca_file.display()),
            "--oidc-username-claim=sub".to_owned(),
            "--oidc-username-prefix=oidc:".to_owned(),
            "--oidc-groups-claim=groups".to_owned(),
            "--oidc-groups-prefix=oidc:".to_owned(),
            "--oidc-signing-algs=ES256".to_owned(),
        ],
    )
    .await;
    let claims = |iss: &str, aud: &str, exp: u64| {
        json!({
            "iss": iss, "aud": aud, "sub": "jane", "groups": ["devs", "ops"],
            "iat": now() - 60, "nbf": now() - 60, "exp": exp,
        })
    };
    let good = Caller::token(
        &server,
        &issuer.token(claims(&issuer.url, "kcp-test", now() + 3600)),
    );
    // The authenticator may fetch the issuer's discovery document after the server is ready.
    wait_whoami("an OIDC token authenticates", &good, 201).await;
    assert_user(
        &good.user_info().await,
        "oidc:jane",
        &["oidc:devs", "oidc:ops", "system:authenticated"],
    );
    expect_forbidden(
        "oidc:jane lists configmaps",
        &good.get("/api/v1/namespaces/default/configmaps").await,
        "oidc:jane",
        &[],
    );

    let other_issuer = OidcIssuer::start();
    for (what, token) in [
        (
            "wrong audience",
            issuer.token(claims(&issuer.url, "someone-else", now() + 3600)),
        ),
        (
            "expired",
            issuer.token(claims(&issuer.url, "kcp-test", now() - 600)),
        ),
        (
            "wrong issuer claim",
            issuer.token(claims(&other_issuer.url, "kcp-test", now() + 3600)),
        ),
        (
            "signed by another issuer's key",
            other_issuer.token(claims(&issuer.url, "kcp-test", now() + 3600)),
        ),
    ] {
        expect_unauthorized(what, &Caller::token(&server, &token).whoami_in("").await);
    }
}
