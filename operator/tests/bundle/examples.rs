//! The CSV's `alm-examples`: one working object of every kind, forming one deployment (a
//! CacheServer, a RootShard replicating into it with managed etcd, a Shard, a FrontProxy an
//! admin Kubeconfig through the FrontProxy, and a VirtualWorkspace for the Shard). OLM consoles prefill their "create" forms with these,
//! in the namespace the user picks, so they carry no namespace. `rules::alm_examples` validates each
//! against its CRD schema (structural validation and CEL, as this project's API server does) and
//! runs the operator's own validation over the typed objects.

/// The examples as YAML documents, in the order of `kcp_operator::crds::definitions`.
pub const EXAMPLES: &str = r#"apiVersion: operator.kcp.io/v1alpha1
kind: RootShard
metadata:
  name: root
spec:
  external:
    hostname: kcp.example.com
    port: 443
  certificates: {}
  cache:
    ref:
      name: cache
  replicas: 2
  etcd:
    managed:
      replicas: 3
      storage:
        size: 10Gi
---
apiVersion: operator.kcp.io/v1alpha1
kind: Shard
metadata:
  name: shard-1
spec:
  rootShard:
    ref:
      name: root
  kcpVirtualWorkspace:
    name: shard-1-vw
  replicas: 2
  etcd:
    managed:
      replicas: 3
      storage:
        size: 10Gi
---
apiVersion: operator.kcp.io/v1alpha1
kind: FrontProxy
metadata:
  name: public
spec:
  rootShard:
    ref:
      name: root
  external:
    hostname: kcp.example.com
    port: 443
  replicas: 2
  serviceTemplate:
    spec:
      type: LoadBalancer
---
apiVersion: operator.kcp.io/v1alpha1
kind: CacheServer
metadata:
  name: cache
spec:
  replicas: 1
---
apiVersion: operator.kcp.io/v1alpha1
kind: Kubeconfig
metadata:
  name: admin
spec:
  target:
    frontProxyRef:
      name: public
  username: admin
  groups:
    - system:kcp:admin
  validity: 8766h
  secretRef:
    name: admin-kubeconfig
---
apiVersion: operator.kcp.io/v1alpha1
kind: VirtualWorkspace
metadata:
  name: shard-1-vw
spec:
  target:
    shardRef:
      name: shard-1
  external:
    hostname: vw-shard-1.kcp.example.com
    port: 443
  replicas: 2
"#;
