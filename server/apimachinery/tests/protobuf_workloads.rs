//! JSON → protobuf → JSON for the workload kinds kubectl's typed commands and controllers send
//! (apps/v1, core/v1 Service, Pod, PersistentVolumeClaim, Endpoints, policy/v1,
//! discovery.k8s.io/v1, autoscaling/v1 Scale), with pod specs that use every common part:
//! embedded structs (volume sources, probe handlers, key selectors), quantities and
//! int-or-strings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod protobuf_fuzz;

use kcp_apimachinery::protobuf::{self, ProtobufError};
use serde_json::{Value, json};

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": "shop",
        "uid": "0f9d6c3e-7a51-4c1b-a1de-3f1f6f0b9a42",
        "resourceVersion": "1234",
        "generation": 2,
        "creationTimestamp": "2026-11-21T18:44:29Z",
        "labels": {"app": "web"},
        "annotations": {"deployment.kubernetes.io/revision": "2"},
    })
}

fn selector() -> Value {
    json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    })
}

fn container() -> Value {
    json!({
        "name": "web",
        "image": "nginx:1.27",
        "command": ["nginx"],
        "args": ["-g", "daemon off;"],
        "workingDir": "/srv",
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "hostPort": 9090, "hostIP": "0.0.0.0", "protocol": "UDP"},
        ],
        "envFrom": [
            {"prefix": "CFG_", "configMapRef": {"name": "web-config", "optional": true}},
            {"secretRef": {"name": "web-secret"}},
        ],
        "env": [
            {"name": "PLAIN", "value": "1"},
            {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "mode", "optional": false}}},
            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "web-secret", "key": "token"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"containerName": "web", "resource": "limits.cpu", "divisor": "1m"}}},
        ],
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": "1"},
            "requests": {"cpu": "250m", "memory": "128Mi", "ephemeral-storage": "1Gi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/web", "readOnly": true},
            {"name": "data", "mountPath": "/var/lib/web", "subPath": "www", "mountPropagation": "None"},
        ],
        "livenessProbe": {
            "httpGet": {
                "path": "/healthz",
                "port": "http",
                "scheme": "HTTP",
                "httpHeaders": [{"name": "X-Probe", "value": "liveness"}],
            },
            "initialDelaySeconds": 5,
            "timeoutSeconds": 2,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
            "terminationGracePeriodSeconds": 0,
        },
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        "startupProbe": {"grpc": {"port": 9090, "service": ""}, "failureThreshold": 30},
        "lifecycle": {
            "postStart": {"exec": {"command": ["sh", "-c", "echo started"]}},
            "preStop": {"sleep": {"seconds": 5}},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
            "privileged": false,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "runAsNonRoot": true,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "stdin": true,
        "tty": true,
        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
    })
}

fn pod_spec() -> Value {
    json!({
        "volumes": [
            {"name": "config", "configMap": {"name": "web-config", "items": [{"key": "nginx.conf", "path": "nginx.conf", "mode": 420}], "defaultMode": 420}},
            {"name": "certs", "secret": {"secretName": "web-tls", "defaultMode": 256, "optional": true}},
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "cache", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "podinfo", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "cpu", "resourceFieldRef": {"containerName": "web", "resource": "requests.cpu", "divisor": "0"}},
            ]}},
            {"name": "token", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"secret": {"name": "extra", "optional": true}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
        ],
        "initContainers": [{
            "name": "migrate",
            "image": "web-migrate:2",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "100m"}},
        }],
        "containers": [container(), {"name": "sidecar", "image": "envoy", "readinessProbe": {"exec": {"command": ["true"]}}}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "activeDeadlineSeconds": 600,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "web",
        "serviceAccount": "web",
        "automountServiceAccountToken": false,
        "nodeName": "node-1",
        "hostNetwork": true,
        "shareProcessNamespace": true,
        "securityContext": {
            "seLinuxOptions": {"level": "s0:c123,c456"},
            "runAsUser": 1000,
            "runAsNonRoot": true,
            "supplementalGroups": [2000, 3000],
            "fsGroup": 2000,
            "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/web.json"},
        },
        "imagePullSecrets": [{"name": "registry"}],
        "hostname": "web-0",
        "subdomain": "web",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-9"]}],
                }]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]},
                }],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": ["shop"],
                }],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "namespaceSelector": {},
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash"],
                    },
                }],
            },
        },
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
        ],
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}],
        "priorityClassName": "high",
        "priority": 1000,
        "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
        "readinessGates": [{"conditionType": "example.com/ready"}],
        "runtimeClassName": "gvisor",
        "enableServiceLinks": false,
        "preemptionPolicy": "PreemptLowerPriority",
        "overhead": {"cpu": "10m"},
        "topologySpreadConstraints": [{
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "minDomains": 2,
            "nodeAffinityPolicy": "Honor",
            "matchLabelKeys": ["pod-template-hash"],
        }],
        "os": {"name": "linux"},
        "hostUsers": false,
        "schedulingGates": [{"name": "example.com/quota"}],
    })
}

fn pod_template() -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "now"}},
        "spec": pod_spec(),
    })
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("web"),
        "spec": {
            "replicas": 3,
            "selector": selector(),
            "template": pod_template(),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
            "minReadySeconds": 5,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {
            "observedGeneration": 2,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "unavailableReplicas": 1,
            "conditions": [{
                "type": "Available",
                "status": "True",
                "lastUpdateTime": "2026-11-21T18:44:29Z",
                "lastTransitionTime": "2026-11-21T18:44:29Z",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            }],
            "collisionCount": 0,
            "terminatingReplicas": 0,
        },
    })
}

fn persistent_volume_claim(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "selector": {"matchLabels": {"disk": "ssd"}},
            "resources": {"requests": {"storage": "10Gi"}, "limits": {"storage": "20Gi"}},
            "volumeName": "pv-1",
            "storageClassName": "fast",
            "volumeMode": "Filesystem",
            "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"},
            "dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap", "namespace": "shop"},
            "volumeAttributesClassName": "gold",
        },
        "status": {
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "conditions": [{
                "type": "Resizing",
                "status": "True",
                "lastProbeTime": "2026-11-21T18:44:29Z",
                "lastTransitionTime": "2026-11-21T18:44:30Z",
                "reason": "Resize",
                "message": "waiting",
            }],
            "allocatedResources": {"storage": "10Gi"},
            "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            "currentVolumeAttributesClassName": "silver",
            "modifyVolumeStatus": {"targetVolumeAttributesClassName": "gold", "status": "InProgress"},
        },
    })
}

fn stateful_set() -> Value {
    let mut claim = persistent_volume_claim("data");
    let claim_map = claim.as_object_mut().unwrap();
    claim_map.remove("apiVersion");
    claim_map.remove("kind");
    claim_map.remove("status");
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata("db"),
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "db"}},
            "template": pod_template(),
            "volumeClaimTemplates": [claim],
            "serviceName": "db",
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1, "maxUnavailable": 2}},
            "revisionHistoryLimit": 5,
            "minReadySeconds": 3,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "ordinals": {"start": 1},
        },
        "status": {
            "observedGeneration": 2,
            "replicas": 1,
            "readyReplicas": 1,
            "currentRevision": "db-5d8f",
            "updateRevision": "db-6c7a",
            "collisionCount": 1,
            "conditions": [{"type": "Healthy", "status": "True", "lastTransitionTime": "2026-11-21T18:44:29Z"}],
            "availableReplicas": 1,
        },
    })
}

fn replica_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": metadata("web-5d8f9"),
        "spec": {"replicas": 3, "minReadySeconds": 1, "selector": selector(), "template": pod_template()},
        "status": {
            "replicas": 3,
            "fullyLabeledReplicas": 3,
            "readyReplicas": 3,
            "availableReplicas": 3,
            "terminatingReplicas": 1,
            "observedGeneration": 2,
            "conditions": [{"type": "ReplicaFailure", "status": "False", "lastTransitionTime": "2026-11-21T18:44:29Z"}],
        },
    })
}

fn daemon_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata("agent"),
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": pod_template(),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}},
            "minReadySeconds": 2,
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 3,
            "numberMisscheduled": 1,
            "desiredNumberScheduled": 3,
            "numberReady": 2,
            "observedGeneration": 2,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
            "numberUnavailable": 1,
            "collisionCount": 0,
        },
    })
}

fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata("web"),
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "appProtocol": "http", "port": 80, "targetPort": "http", "nodePort": 30080},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090},
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10", "fd00::10"],
            "type": "LoadBalancer",
            "externalIPs": ["192.0.2.1"],
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "loadBalancerSourceRanges": ["10.0.0.0/8"],
            "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 31000,
            "publishNotReadyAddresses": true,
            "ipFamilies": ["IPv4", "IPv6"],
            "ipFamilyPolicy": "PreferDualStack",
            "allocateLoadBalancerNodePorts": true,
            "loadBalancerClass": "example.com/lb",
            "internalTrafficPolicy": "Cluster",
            "trafficDistribution": "PreferClose",
        },
        "status": {
            "loadBalancer": {"ingress": [
                {"ip": "203.0.113.7", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]},
                {"hostname": "lb.example.com", "ports": [{"port": 443, "protocol": "TCP", "error": "Pending"}]},
            ]},
            "conditions": [{
                "type": "LoadBalancerReady",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-11-21T18:44:29Z",
                "reason": "Provisioned",
                "message": "ok",
            }],
        },
    })
}

fn pod() -> Value {
    let mut meta = metadata("web-5d8f9-abcde");
    meta["ownerReferences"] = json!([{
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-5d8f9",
        "uid": "6a2d4e1f-0000-4000-8000-000000000001",
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": pod_spec(),
        "status": {
            "phase": "Running",
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": "2026-11-21T18:44:35Z",
            }, {
                "type": "PodScheduled",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-11-21T18:44:29Z",
            }],
            "hostIP": "10.0.0.5",
            "hostIPs": [{"ip": "10.0.0.5"}],
            "podIP": "10.244.1.7",
            "podIPs": [{"ip": "10.244.1.7"}, {"ip": "fd00::7"}],
            "startTime": "2026-11-21T18:44:29Z",
            "initContainerStatuses": [{
                "name": "migrate",
                "state": {"terminated": {"reason": "Completed", "startedAt": "2026-11-21T18:44:30Z", "finishedAt": "2026-11-21T18:44:31Z", "containerID": "containerd://aa"}},
                "ready": true,
                "image": "web-migrate:2",
                "imageID": "sha256:aa",
                "containerID": "containerd://aa",
                "started": false,
            }],
            "containerStatuses": [{
                "name": "web",
                "state": {"running": {"startedAt": "2026-11-21T18:44:32Z"}},
                "lastState": {"terminated": {"exitCode": 137, "signal": 9, "reason": "OOMKilled", "message": "killed", "startedAt": "2026-11-21T18:40:00Z", "finishedAt": "2026-11-21T18:44:00Z"}},
                "ready": true,
                "restartCount": 1,
                "image": "nginx:1.27",
                "imageID": "docker.io/library/nginx@sha256:bb",
                "containerID": "containerd://bb",
                "started": true,
                "allocatedResources": {"cpu": "250m"},
                "resources": {"requests": {"cpu": "250m"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web", "readOnly": true}],
                "user": {"linux": {"uid": 1000, "gid": 1000, "supplementalGroups": [1000, 2000]}},
            }, {
                "name": "sidecar",
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                "restartCount": 4,
                "image": "envoy",
            }],
            "qosClass": "Burstable",
            "observedGeneration": 1,
        },
    })
}

fn endpoints() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": metadata("web"),
        "subsets": [{
            "addresses": [{
                "ip": "10.244.1.7",
                "hostname": "web-0",
                "nodeName": "node-1",
                "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "u-7"},
            }],
            "notReadyAddresses": [{"ip": "10.244.2.9"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}],
        }],
    })
}

fn endpoint_slice() -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata("web-abc12"),
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": ["10.244.1.7"],
            "conditions": {"ready": true, "serving": true, "terminating": false},
            "hostname": "web-0",
            "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-0"},
            "deprecatedTopology": {"kubernetes.io/hostname": "node-1"},
            "nodeName": "node-1",
            "zone": "a",
            "hints": {"forZones": [{"name": "a"}], "forNodes": [{"name": "node-1"}]},
        }, {
            "addresses": ["10.244.2.9"],
            "conditions": {"ready": false},
        }],
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "appProtocol": "kubernetes.io/h2c"}, {"name": ""}],
    })
}

fn pod_disruption_budget() -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata("web"),
        "spec": {
            "maxUnavailable": "20%",
            "selector": {"matchLabels": {"app": "web"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
        "status": {
            "observedGeneration": 2,
            "disruptedPods": {"web-1": "2026-11-21T18:44:29Z", "web-0": "2026-11-21T18:44:20Z"},
            "disruptionsAllowed": 1,
            "currentHealthy": 3,
            "desiredHealthy": 2,
            "expectedPods": 3,
            "conditions": [{
                "type": "DisruptionAllowed",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-11-21T18:44:29Z",
                "reason": "SufficientPods",
            }],
        },
    })
}

fn scale() -> Value {
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": metadata("web"),
        "spec": {"replicas": 5},
        "status": {"replicas": 3, "selector": "app=web,tier in (edge,frontend)"},
    })
}

fn eviction() -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "shop"},
        "deleteOptions": {"gracePeriodSeconds": 30, "dryRun": ["All"]},
    })
}

fn all_objects() -> Vec<Value> {
    let mut objects = vec![
        deployment(),
        stateful_set(),
        replica_set(),
        daemon_set(),
        service(),
        pod(),
        persistent_volume_claim("web-data"),
        endpoints(),
        endpoint_slice(),
        pod_disruption_budget(),
    ];
    let lists: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut item = object.clone();
            let map = item.as_object_mut().unwrap();
            map.remove("apiVersion");
            map.remove("kind");
            json!({
                "apiVersion": object["apiVersion"],
                "kind": format!("{}List", object["kind"].as_str().unwrap()),
                "metadata": {"resourceVersion": "99"},
                "items": [item.clone(), item],
            })
        })
        .collect();
    objects.extend(lists);
    objects.push(scale());
    objects.push(eviction());
    objects
}

#[test]
fn every_workload_kind_round_trips() {
    for object in all_objects() {
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        assert!(
            protobuf::supports(api_version, kind),
            "{api_version} {kind}"
        );
        let body = protobuf::encode(&object).unwrap();
        let decoded = protobuf::decode(&body).unwrap();
        assert_eq!(decoded, object, "{api_version} {kind}");
        assert_eq!(protobuf::encode(&decoded).unwrap(), body, "{kind}");
    }
}

#[test]
fn decode_never_panics_on_mutated_workloads() {
    let bodies: Vec<Vec<u8>> = all_objects()
        .iter()
        .filter(|o| !o["kind"].as_str().unwrap().ends_with("List"))
        .map(|o| protobuf::encode(o).unwrap())
        .collect();
    protobuf_fuzz::decode_never_panics(&bodies, 0x2545_f491_4f6c_dd1d);
}

#[test]
fn workload_watch_events_round_trip() {
    for object in [deployment(), stateful_set(), service()] {
        let frame = protobuf::encode_watch_event("MODIFIED", &object).unwrap();
        let (event_type, decoded) = protobuf::decode_watch_event(&frame).unwrap();
        assert_eq!(event_type, "MODIFIED");
        assert_eq!(decoded, object);
    }
}

#[test]
fn unset_value_fields_of_special_types_decode_as_go_prints_them() {
    // A resourceFieldRef without divisor: Go writes its zero Quantity "0" and prints it; an
    // HTTP probe without port writes IntOrString 0, which (like every zero value field) is
    // left out of the JSON.
    let object = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{
            "name": "c",
            "env": [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
            "livenessProbe": {"httpGet": {"path": "/"}},
        }]},
    });
    let decoded = protobuf::decode(&protobuf::encode(&object).unwrap()).unwrap();
    let container = &decoded["spec"]["containers"][0];
    assert_eq!(
        container["env"][0]["valueFrom"]["resourceFieldRef"],
        json!({"resource": "limits.cpu", "divisor": "0"})
    );
    assert_eq!(
        container["livenessProbe"],
        json!({"httpGet": {"path": "/"}})
    );
}

#[test]
fn quantities_accept_json_numbers() {
    let object = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "spec": {"resources": {"requests": {"storage": 1_073_741_824, "cpu": 0.5}}},
    });
    let decoded = protobuf::decode(&protobuf::encode(&object).unwrap()).unwrap();
    assert_eq!(
        decoded["spec"]["resources"]["requests"],
        json!({"cpu": "0.5", "storage": "1073741824"})
    );
}

#[test]
fn misshapen_special_values_are_reported() {
    let cases = [
        (
            json!({"spec": {"maxUnavailable": 1.5}}),
            "cannot encode spec.maxUnavailable: expected an int32 or a string",
        ),
        (
            json!({"spec": {"minAvailable": 3_000_000_000i64}}),
            "cannot encode spec.minAvailable: expected an int32 or a string",
        ),
        (
            json!({"spec": {"minAvailable": true}}),
            "cannot encode spec.minAvailable: expected an int32 or a string",
        ),
    ];
    for (fields, expected) in cases {
        let mut object = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"});
        object
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let err = protobuf::encode(&object).unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "spec": {"resources": {"requests": {"storage": ["10Gi"]}}},
    });
    let err = protobuf::encode(&pvc).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot encode spec.resources.requests.storage: expected a quantity string"
    );
    let volume = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"volumes": [{"name": "v", "configMap": {"name": 7}}]},
    });
    let err = protobuf::encode(&volume).unwrap_err();
    assert!(matches!(err, ProtobufError::InvalidObject { .. }));
    // The embedded struct's keys are reported where they sit in the JSON.
    assert_eq!(
        err.to_string(),
        "cannot encode spec.volumes[0].configMap.name: expected a string"
    );
}
