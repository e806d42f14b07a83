//! What every namespace gets: the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap.

use super::*;

#[tokio::test]
async fn namespace_defaults() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let ca_pem = String::from_utf8(server.admin().ca_pem.clone()).unwrap();
    for (cluster, namespace) in [("", "defaults-ns"), ("defaults-lc", "fresh")] {
        ensure_namespace(&admin, cluster, namespace).await;
        let prefix = cluster_prefix(cluster);
        let account = format!("{prefix}/api/v1/namespaces/{namespace}/serviceaccounts/default");
        let root_ca = format!("{prefix}/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt");
        SETTLED
            .wait_status("the default ServiceAccount", &admin, &account, 200)
            .await;
        SETTLED
            .wait_status("the kube-root-ca.crt ConfigMap", &admin, &root_ca, 200)
            .await;
        let published = admin.get(&root_ca).await.json();
        assert_eq!(
            published["data"]["ca.crt"].as_str().map(str::trim),
            Some(ca_pem.trim()),
            "kube-root-ca.crt in {cluster:?}/{namespace} is not the server's CA: {published}"
        );

        // Deleted, they come back (as new objects).
        for path in [&account, &root_ca] {
            let old_uid = admin.get(path).await.json()["metadata"]["uid"].clone();
            let deleted = admin.delete(path).await;
            assert_eq!(deleted.status, 200, "deleting {path}: {}", deleted.text());
            SETTLED
                .eventually(&format!("{path} recreated"), || async {
                    let response = admin.get(path).await;
                    let uid = &response.json()["metadata"]["uid"];
                    if response.status == 200 && *uid != old_uid {
                        Ok(())
                    } else {
                        Err(format!("{} {}", response.status, response.text()))
                    }
                })
                .await;
        }
    }
}
