//! Tables for core/v1 (group "", version v1): the pod template with everything a pod spec can
//! hold (every volume source, container, probe, security context, affinity, ...), Service, Pod,
//! PersistentVolumeClaim, Endpoints, PodTemplate, and the ConfigMap, Secret, Namespace,
//! ServiceAccount and Event kinds. Tables come leaves first, each kind after the messages it uses.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map, embedded) are those of
//! the Kubernetes 1.35 API types (`k8s.io/api` v0.35) plus the fields 1.36 added (listed in
//! the `protobuf` module doc); see `messages` for how to read a table.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static HOST_PATH_VOLUME_SOURCE: Message = Message {
    name: "HostPathVolumeSource",
    fields: &[
        Field::value(1, "path", T::String),
        Field::optional(2, "type", T::String),
    ],
};

static EMPTY_DIR_VOLUME_SOURCE: Message = Message {
    name: "EmptyDirVolumeSource",
    fields: &[
        Field::value(1, "medium", T::String),
        Field::optional(2, "sizeLimit", T::Quantity),
    ],
};

static GCE_PERSISTENT_DISK_VOLUME_SOURCE: Message = Message {
    name: "GCEPersistentDiskVolumeSource",
    fields: &[
        Field::value(1, "pdName", T::String),
        Field::value(2, "fsType", T::String),
        Field::value(3, "partition", T::Int32),
        Field::value(4, "readOnly", T::Bool),
    ],
};

static AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: Message = Message {
    name: "AWSElasticBlockStoreVolumeSource",
    fields: &[
        Field::value(1, "volumeID", T::String),
        Field::value(2, "fsType", T::String),
        Field::value(3, "partition", T::Int32),
        Field::value(4, "readOnly", T::Bool),
    ],
};

static GIT_REPO_VOLUME_SOURCE: Message = Message {
    name: "GitRepoVolumeSource",
    fields: &[
        Field::value(1, "repository", T::String),
        Field::value(2, "revision", T::String),
        Field::value(3, "directory", T::String),
    ],
};

static KEY_TO_PATH: Message = Message {
    name: "KeyToPath",
    fields: &[
        Field::value(1, "key", T::String),
        Field::value(2, "path", T::String),
        Field::optional(3, "mode", T::Int32),
    ],
};

static SECRET_VOLUME_SOURCE: Message = Message {
    name: "SecretVolumeSource",
    fields: &[
        Field::value(1, "secretName", T::String),
        Field::repeated(2, "items", T::Message(&KEY_TO_PATH)),
        Field::optional(3, "defaultMode", T::Int32),
        Field::optional(4, "optional", T::Bool),
    ],
};

static NFS_VOLUME_SOURCE: Message = Message {
    name: "NFSVolumeSource",
    fields: &[
        Field::value(1, "server", T::String),
        Field::value(2, "path", T::String),
        Field::value(3, "readOnly", T::Bool),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[Field::value(1, "name", T::String)],
};

static ISCSI_VOLUME_SOURCE: Message = Message {
    name: "ISCSIVolumeSource",
    fields: &[
        Field::value(1, "targetPortal", T::String),
        Field::value(2, "iqn", T::String),
        Field::value(3, "lun", T::Int32),
        Field::value(4, "iscsiInterface", T::String),
        Field::value(5, "fsType", T::String),
        Field::value(6, "readOnly", T::Bool),
        Field::repeated(7, "portals", T::String),
        Field::value(8, "chapAuthDiscovery", T::Bool),
        Field::optional(10, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(11, "chapAuthSession", T::Bool),
        Field::optional(12, "initiatorName", T::String),
    ],
};

static GLUSTERFS_VOLUME_SOURCE: Message = Message {
    name: "GlusterfsVolumeSource",
    fields: &[
        Field::value(1, "endpoints", T::String),
        Field::value(2, "path", T::String),
        Field::value(3, "readOnly", T::Bool),
    ],
};

static PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: Message = Message {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[
        Field::value(1, "claimName", T::String),
        Field::value(2, "readOnly", T::Bool),
    ],
};

static RBD_VOLUME_SOURCE: Message = Message {
    name: "RBDVolumeSource",
    fields: &[
        Field::repeated(1, "monitors", T::String),
        Field::value(2, "image", T::String),
        Field::value(3, "fsType", T::String),
        Field::value(4, "pool", T::String),
        Field::value(5, "user", T::String),
        Field::value(6, "keyring", T::String),
        Field::optional(7, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(8, "readOnly", T::Bool),
    ],
};

static FLEX_VOLUME_SOURCE: Message = Message {
    name: "FlexVolumeSource",
    fields: &[
        Field::value(1, "driver", T::String),
        Field::value(2, "fsType", T::String),
        Field::optional(3, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(4, "readOnly", T::Bool),
        Field::map(5, "options", T::String),
    ],
};

static CINDER_VOLUME_SOURCE: Message = Message {
    name: "CinderVolumeSource",
    fields: &[
        Field::value(1, "volumeID", T::String),
        Field::value(2, "fsType", T::String),
        Field::value(3, "readOnly", T::Bool),
        Field::optional(4, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
    ],
};

static CEPH_FS_VOLUME_SOURCE: Message = Message {
    name: "CephFSVolumeSource",
    fields: &[
        Field::repeated(1, "monitors", T::String),
        Field::value(2, "path", T::String),
        Field::value(3, "user", T::String),
        Field::value(4, "secretFile", T::String),
        Field::optional(5, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(6, "readOnly", T::Bool),
    ],
};

static FLOCKER_VOLUME_SOURCE: Message = Message {
    name: "FlockerVolumeSource",
    fields: &[
        Field::value(1, "datasetName", T::String),
        Field::value(2, "datasetUUID", T::String),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "ObjectFieldSelector",
    fields: &[
        Field::value(1, "apiVersion", T::String),
        Field::value(2, "fieldPath", T::String),
    ],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "ResourceFieldSelector",
    fields: &[
        Field::value(1, "containerName", T::String),
        Field::value(2, "resource", T::String),
        Field::value(3, "divisor", T::Quantity),
    ],
};

static DOWNWARD_API_VOLUME_FILE: Message = Message {
    name: "DownwardAPIVolumeFile",
    fields: &[
        Field::value(1, "path", T::String),
        Field::optional(2, "fieldRef", T::Message(&OBJECT_FIELD_SELECTOR)),
        Field::optional(3, "resourceFieldRef", T::Message(&RESOURCE_FIELD_SELECTOR)),
        Field::optional(4, "mode", T::Int32),
    ],
};

static DOWNWARD_API_VOLUME_SOURCE: Message = Message {
    name: "DownwardAPIVolumeSource",
    fields: &[
        Field::repeated(1, "items", T::Message(&DOWNWARD_API_VOLUME_FILE)),
        Field::optional(2, "defaultMode", T::Int32),
    ],
};

static FC_VOLUME_SOURCE: Message = Message {
    name: "FCVolumeSource",
    fields: &[
        Field::repeated(1, "targetWWNs", T::String),
        Field::optional(2, "lun", T::Int32),
        Field::value(3, "fsType", T::String),
        Field::value(4, "readOnly", T::Bool),
        Field::repeated(5, "wwids", T::String),
    ],
};

static AZURE_FILE_VOLUME_SOURCE: Message = Message {
    name: "AzureFileVolumeSource",
    fields: &[
        Field::value(1, "secretName", T::String),
        Field::value(2, "shareName", T::String),
        Field::value(3, "readOnly", T::Bool),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Message = Message {
    name: "ConfigMapVolumeSource",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::repeated(2, "items", T::Message(&KEY_TO_PATH)),
        Field::optional(3, "defaultMode", T::Int32),
        Field::optional(4, "optional", T::Bool),
    ],
};

static VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: Message = Message {
    name: "VsphereVirtualDiskVolumeSource",
    fields: &[
        Field::value(1, "volumePath", T::String),
        Field::value(2, "fsType", T::String),
        Field::value(3, "storagePolicyName", T::String),
        Field::value(4, "storagePolicyID", T::String),
    ],
};

static QUOBYTE_VOLUME_SOURCE: Message = Message {
    name: "QuobyteVolumeSource",
    fields: &[
        Field::value(1, "registry", T::String),
        Field::value(2, "volume", T::String),
        Field::value(3, "readOnly", T::Bool),
        Field::value(4, "user", T::String),
        Field::value(5, "group", T::String),
        Field::value(6, "tenant", T::String),
    ],
};

static AZURE_DISK_VOLUME_SOURCE: Message = Message {
    name: "AzureDiskVolumeSource",
    fields: &[
        Field::value(1, "diskName", T::String),
        Field::value(2, "diskURI", T::String),
        Field::optional(3, "cachingMode", T::String),
        Field::optional(4, "fsType", T::String),
        Field::optional(5, "readOnly", T::Bool),
        Field::optional(6, "kind", T::String),
    ],
};

static PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: Message = Message {
    name: "PhotonPersistentDiskVolumeSource",
    fields: &[
        Field::value(1, "pdID", T::String),
        Field::value(2, "fsType", T::String),
    ],
};

static SECRET_PROJECTION: Message = Message {
    name: "SecretProjection",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::repeated(2, "items", T::Message(&KEY_TO_PATH)),
        Field::optional(4, "optional", T::Bool),
    ],
};

static DOWNWARD_API_PROJECTION: Message = Message {
    name: "DownwardAPIProjection",
    fields: &[Field::repeated(
        1,
        "items",
        T::Message(&DOWNWARD_API_VOLUME_FILE),
    )],
};

static CONFIG_MAP_PROJECTION: Message = Message {
    name: "ConfigMapProjection",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::repeated(2, "items", T::Message(&KEY_TO_PATH)),
        Field::optional(4, "optional", T::Bool),
    ],
};

static SERVICE_ACCOUNT_TOKEN_PROJECTION: Message = Message {
    name: "ServiceAccountTokenProjection",
    fields: &[
        Field::value(1, "audience", T::String),
        Field::optional(2, "expirationSeconds", T::Int64),
        Field::value(3, "path", T::String),
    ],
};

static CLUSTER_TRUST_BUNDLE_PROJECTION: Message = Message {
    name: "ClusterTrustBundleProjection",
    fields: &[
        Field::optional(1, "name", T::String),
        Field::optional(2, "signerName", T::String),
        Field::optional(3, "labelSelector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::value(4, "path", T::String),
        Field::optional(5, "optional", T::Bool),
    ],
};

static POD_CERTIFICATE_PROJECTION: Message = Message {
    name: "PodCertificateProjection",
    fields: &[
        Field::value(1, "signerName", T::String),
        Field::value(2, "keyType", T::String),
        Field::optional(3, "maxExpirationSeconds", T::Int32),
        Field::value(4, "credentialBundlePath", T::String),
        Field::value(5, "keyPath", T::String),
        Field::value(6, "certificateChainPath", T::String),
        Field::map(7, "userAnnotations", T::String),
    ],
};

static VOLUME_PROJECTION: Message = Message {
    name: "VolumeProjection",
    fields: &[
        Field::optional(1, "secret", T::Message(&SECRET_PROJECTION)),
        Field::optional(2, "downwardAPI", T::Message(&DOWNWARD_API_PROJECTION)),
        Field::optional(3, "configMap", T::Message(&CONFIG_MAP_PROJECTION)),
        Field::optional(
            4,
            "serviceAccountToken",
            T::Message(&SERVICE_ACCOUNT_TOKEN_PROJECTION),
        ),
        Field::optional(
            5,
            "clusterTrustBundle",
            T::Message(&CLUSTER_TRUST_BUNDLE_PROJECTION),
        ),
        Field::optional(6, "podCertificate", T::Message(&POD_CERTIFICATE_PROJECTION)),
    ],
};

static PROJECTED_VOLUME_SOURCE: Message = Message {
    name: "ProjectedVolumeSource",
    fields: &[
        Field::repeated(1, "sources", T::Message(&VOLUME_PROJECTION)),
        Field::optional(2, "defaultMode", T::Int32),
    ],
};

static PORTWORX_VOLUME_SOURCE: Message = Message {
    name: "PortworxVolumeSource",
    fields: &[
        Field::value(1, "volumeID", T::String),
        Field::value(2, "fsType", T::String),
        Field::value(3, "readOnly", T::Bool),
    ],
};

static SCALE_IO_VOLUME_SOURCE: Message = Message {
    name: "ScaleIOVolumeSource",
    fields: &[
        Field::value(1, "gateway", T::String),
        Field::value(2, "system", T::String),
        Field::optional(3, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(4, "sslEnabled", T::Bool),
        Field::value(5, "protectionDomain", T::String),
        Field::value(6, "storagePool", T::String),
        Field::value(7, "storageMode", T::String),
        Field::value(8, "volumeName", T::String),
        Field::value(9, "fsType", T::String),
        Field::value(10, "readOnly", T::Bool),
    ],
};

static STORAGE_OS_VOLUME_SOURCE: Message = Message {
    name: "StorageOSVolumeSource",
    fields: &[
        Field::value(1, "volumeName", T::String),
        Field::value(2, "volumeNamespace", T::String),
        Field::value(3, "fsType", T::String),
        Field::value(4, "readOnly", T::Bool),
        Field::optional(5, "secretRef", T::Message(&LOCAL_OBJECT_REFERENCE)),
    ],
};

static CSI_VOLUME_SOURCE: Message = Message {
    name: "CSIVolumeSource",
    fields: &[
        Field::value(1, "driver", T::String),
        Field::optional(2, "readOnly", T::Bool),
        Field::optional(3, "fsType", T::String),
        Field::map(4, "volumeAttributes", T::String),
        Field::optional(
            5,
            "nodePublishSecretRef",
            T::Message(&LOCAL_OBJECT_REFERENCE),
        ),
    ],
};

static VOLUME_RESOURCE_REQUIREMENTS: Message = Message {
    name: "VolumeResourceRequirements",
    fields: &[
        Field::map(1, "limits", T::Quantity),
        Field::map(2, "requests", T::Quantity),
    ],
};

static TYPED_LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "TypedLocalObjectReference",
    fields: &[
        Field::optional(1, "apiGroup", T::String),
        Field::value(2, "kind", T::String),
        Field::value(3, "name", T::String),
    ],
};

static TYPED_OBJECT_REFERENCE: Message = Message {
    name: "TypedObjectReference",
    fields: &[
        Field::optional(1, "apiGroup", T::String),
        Field::value(2, "kind", T::String),
        Field::value(3, "name", T::String),
        Field::optional(4, "namespace", T::String),
    ],
};

static PERSISTENT_VOLUME_CLAIM_SPEC: Message = Message {
    name: "PersistentVolumeClaimSpec",
    fields: &[
        Field::repeated(1, "accessModes", T::String),
        Field::value(2, "resources", T::Message(&VOLUME_RESOURCE_REQUIREMENTS)),
        Field::value(3, "volumeName", T::String),
        Field::optional(4, "selector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::optional(5, "storageClassName", T::String),
        Field::optional(6, "volumeMode", T::String),
        Field::optional(7, "dataSource", T::Message(&TYPED_LOCAL_OBJECT_REFERENCE)),
        Field::optional(8, "dataSourceRef", T::Message(&TYPED_OBJECT_REFERENCE)),
        Field::optional(9, "volumeAttributesClassName", T::String),
    ],
};

static PERSISTENT_VOLUME_CLAIM_TEMPLATE: Message = Message {
    name: "PersistentVolumeClaimTemplate",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&PERSISTENT_VOLUME_CLAIM_SPEC)),
    ],
};

static EPHEMERAL_VOLUME_SOURCE: Message = Message {
    name: "EphemeralVolumeSource",
    fields: &[Field::optional(
        1,
        "volumeClaimTemplate",
        T::Message(&PERSISTENT_VOLUME_CLAIM_TEMPLATE),
    )],
};

static IMAGE_VOLUME_SOURCE: Message = Message {
    name: "ImageVolumeSource",
    fields: &[
        Field::value(1, "reference", T::String),
        Field::value(2, "pullPolicy", T::String),
    ],
};

static VOLUME_SOURCE: Message = Message {
    name: "VolumeSource",
    fields: &[
        Field::optional(1, "hostPath", T::Message(&HOST_PATH_VOLUME_SOURCE)),
        Field::optional(2, "emptyDir", T::Message(&EMPTY_DIR_VOLUME_SOURCE)),
        Field::optional(
            3,
            "gcePersistentDisk",
            T::Message(&GCE_PERSISTENT_DISK_VOLUME_SOURCE),
        ),
        Field::optional(
            4,
            "awsElasticBlockStore",
            T::Message(&AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE),
        ),
        Field::optional(5, "gitRepo", T::Message(&GIT_REPO_VOLUME_SOURCE)),
        Field::optional(6, "secret", T::Message(&SECRET_VOLUME_SOURCE)),
        Field::optional(7, "nfs", T::Message(&NFS_VOLUME_SOURCE)),
        Field::optional(8, "iscsi", T::Message(&ISCSI_VOLUME_SOURCE)),
        Field::optional(9, "glusterfs", T::Message(&GLUSTERFS_VOLUME_SOURCE)),
        Field::optional(
            10,
            "persistentVolumeClaim",
            T::Message(&PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE),
        ),
        Field::optional(11, "rbd", T::Message(&RBD_VOLUME_SOURCE)),
        Field::optional(12, "flexVolume", T::Message(&FLEX_VOLUME_SOURCE)),
        Field::optional(13, "cinder", T::Message(&CINDER_VOLUME_SOURCE)),
        Field::optional(14, "cephfs", T::Message(&CEPH_FS_VOLUME_SOURCE)),
        Field::optional(15, "flocker", T::Message(&FLOCKER_VOLUME_SOURCE)),
        Field::optional(16, "downwardAPI", T::Message(&DOWNWARD_API_VOLUME_SOURCE)),
        Field::optional(17, "fc", T::Message(&FC_VOLUME_SOURCE)),
        Field::optional(18, "azureFile", T::Message(&AZURE_FILE_VOLUME_SOURCE)),
        Field::optional(19, "configMap", T::Message(&CONFIG_MAP_VOLUME_SOURCE)),
        Field::optional(
            20,
            "vsphereVolume",
            T::Message(&VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE),
        ),
        Field::optional(21, "quobyte", T::Message(&QUOBYTE_VOLUME_SOURCE)),
        Field::optional(22, "azureDisk", T::Message(&AZURE_DISK_VOLUME_SOURCE)),
        Field::optional(
            23,
            "photonPersistentDisk",
            T::Message(&PHOTON_PERSISTENT_DISK_VOLUME_SOURCE),
        ),
        Field::optional(24, "portworxVolume", T::Message(&PORTWORX_VOLUME_SOURCE)),
        Field::optional(25, "scaleIO", T::Message(&SCALE_IO_VOLUME_SOURCE)),
        Field::optional(26, "projected", T::Message(&PROJECTED_VOLUME_SOURCE)),
        Field::optional(27, "storageos", T::Message(&STORAGE_OS_VOLUME_SOURCE)),
        Field::optional(28, "csi", T::Message(&CSI_VOLUME_SOURCE)),
        Field::optional(29, "ephemeral", T::Message(&EPHEMERAL_VOLUME_SOURCE)),
        Field::optional(30, "image", T::Message(&IMAGE_VOLUME_SOURCE)),
    ],
};

static VOLUME: Message = Message {
    name: "Volume",
    fields: &[
        Field::value(1, "name", T::String),
        Field::inline(2, "volumeSource", &VOLUME_SOURCE),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "hostPort", T::Int32),
        Field::value(3, "containerPort", T::Int32),
        Field::value(4, "protocol", T::String),
        Field::value(5, "hostIP", T::String),
    ],
};

static CONFIG_MAP_ENV_SOURCE: Message = Message {
    name: "ConfigMapEnvSource",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::optional(2, "optional", T::Bool),
    ],
};

static SECRET_ENV_SOURCE: Message = Message {
    name: "SecretEnvSource",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::optional(2, "optional", T::Bool),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        Field::value(1, "prefix", T::String),
        Field::optional(2, "configMapRef", T::Message(&CONFIG_MAP_ENV_SOURCE)),
        Field::optional(3, "secretRef", T::Message(&SECRET_ENV_SOURCE)),
    ],
};

static CONFIG_MAP_KEY_SELECTOR: Message = Message {
    name: "ConfigMapKeySelector",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::value(2, "key", T::String),
        Field::optional(3, "optional", T::Bool),
    ],
};

static SECRET_KEY_SELECTOR: Message = Message {
    name: "SecretKeySelector",
    fields: &[
        Field::inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        Field::value(2, "key", T::String),
        Field::optional(3, "optional", T::Bool),
    ],
};

static FILE_KEY_SELECTOR: Message = Message {
    name: "FileKeySelector",
    fields: &[
        Field::value(1, "volumeName", T::String),
        Field::value(2, "path", T::String),
        Field::value(3, "key", T::String),
        Field::optional(4, "optional", T::Bool),
    ],
};

static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        Field::optional(1, "fieldRef", T::Message(&OBJECT_FIELD_SELECTOR)),
        Field::optional(2, "resourceFieldRef", T::Message(&RESOURCE_FIELD_SELECTOR)),
        Field::optional(3, "configMapKeyRef", T::Message(&CONFIG_MAP_KEY_SELECTOR)),
        Field::optional(4, "secretKeyRef", T::Message(&SECRET_KEY_SELECTOR)),
        Field::optional(5, "fileKeyRef", T::Message(&FILE_KEY_SELECTOR)),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "value", T::String),
        Field::optional(3, "valueFrom", T::Message(&ENV_VAR_SOURCE)),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "request", T::String),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        Field::map(1, "limits", T::Quantity),
        Field::map(2, "requests", T::Quantity),
        Field::repeated(3, "claims", T::Message(&RESOURCE_CLAIM)),
    ],
};

static CONTAINER_RESIZE_POLICY: Message = Message {
    name: "ContainerResizePolicy",
    fields: &[
        Field::value(1, "resourceName", T::String),
        Field::value(2, "restartPolicy", T::String),
    ],
};

static CONTAINER_RESTART_RULE_ON_EXIT_CODES: Message = Message {
    name: "ContainerRestartRuleOnExitCodes",
    fields: &[
        Field::value(1, "operator", T::String),
        Field::repeated(2, "values", T::Int32),
    ],
};

static CONTAINER_RESTART_RULE: Message = Message {
    name: "ContainerRestartRule",
    fields: &[
        Field::value(1, "action", T::String),
        Field::optional(
            2,
            "exitCodes",
            T::Message(&CONTAINER_RESTART_RULE_ON_EXIT_CODES),
        ),
    ],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "readOnly", T::Bool),
        Field::value(3, "mountPath", T::String),
        Field::value(4, "subPath", T::String),
        Field::optional(5, "mountPropagation", T::String),
        Field::value(6, "subPathExpr", T::String),
        Field::optional(7, "recursiveReadOnly", T::String),
    ],
};

static VOLUME_DEVICE: Message = Message {
    name: "VolumeDevice",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "devicePath", T::String),
    ],
};

static EXEC_ACTION: Message = Message {
    name: "ExecAction",
    fields: &[Field::repeated(1, "command", T::String)],
};

static HTTP_HEADER: Message = Message {
    name: "HTTPHeader",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "value", T::String),
    ],
};

static HTTP_GET_ACTION: Message = Message {
    name: "HTTPGetAction",
    fields: &[
        Field::value(1, "path", T::String),
        Field::value(2, "port", T::IntOrString),
        Field::value(3, "host", T::String),
        Field::value(4, "scheme", T::String),
        Field::repeated(5, "httpHeaders", T::Message(&HTTP_HEADER)),
    ],
};

static TCP_SOCKET_ACTION: Message = Message {
    name: "TCPSocketAction",
    fields: &[
        Field::value(1, "port", T::IntOrString),
        Field::value(2, "host", T::String),
    ],
};

static GRPC_ACTION: Message = Message {
    name: "GRPCAction",
    fields: &[
        Field::value(1, "port", T::Int32),
        Field::optional(2, "service", T::String),
    ],
};

static PROBE_HANDLER: Message = Message {
    name: "ProbeHandler",
    fields: &[
        Field::optional(1, "exec", T::Message(&EXEC_ACTION)),
        Field::optional(2, "httpGet", T::Message(&HTTP_GET_ACTION)),
        Field::optional(3, "tcpSocket", T::Message(&TCP_SOCKET_ACTION)),
        Field::optional(4, "grpc", T::Message(&GRPC_ACTION)),
    ],
};

static PROBE: Message = Message {
    name: "Probe",
    fields: &[
        Field::inline(1, "probeHandler", &PROBE_HANDLER),
        Field::value(2, "initialDelaySeconds", T::Int32),
        Field::value(3, "timeoutSeconds", T::Int32),
        Field::value(4, "periodSeconds", T::Int32),
        Field::value(5, "successThreshold", T::Int32),
        Field::value(6, "failureThreshold", T::Int32),
        Field::optional(7, "terminationGracePeriodSeconds", T::Int64),
    ],
};

static SLEEP_ACTION: Message = Message {
    name: "SleepAction",
    fields: &[Field::value(1, "seconds", T::Int64)],
};

static LIFECYCLE_HANDLER: Message = Message {
    name: "LifecycleHandler",
    fields: &[
        Field::optional(1, "exec", T::Message(&EXEC_ACTION)),
        Field::optional(2, "httpGet", T::Message(&HTTP_GET_ACTION)),
        Field::optional(3, "tcpSocket", T::Message(&TCP_SOCKET_ACTION)),
        Field::optional(4, "sleep", T::Message(&SLEEP_ACTION)),
    ],
};

static LIFECYCLE: Message = Message {
    name: "Lifecycle",
    fields: &[
        Field::optional(1, "postStart", T::Message(&LIFECYCLE_HANDLER)),
        Field::optional(2, "preStop", T::Message(&LIFECYCLE_HANDLER)),
        Field::optional(3, "stopSignal", T::String),
    ],
};

static CAPABILITIES: Message = Message {
    name: "Capabilities",
    fields: &[
        Field::repeated(1, "add", T::String),
        Field::repeated(2, "drop", T::String),
    ],
};

static SE_LINUX_OPTIONS: Message = Message {
    name: "SELinuxOptions",
    fields: &[
        Field::value(1, "user", T::String),
        Field::value(2, "role", T::String),
        Field::value(3, "type", T::String),
        Field::value(4, "level", T::String),
    ],
};

static WINDOWS_SECURITY_CONTEXT_OPTIONS: Message = Message {
    name: "WindowsSecurityContextOptions",
    fields: &[
        Field::optional(1, "gmsaCredentialSpecName", T::String),
        Field::optional(2, "gmsaCredentialSpec", T::String),
        Field::optional(3, "runAsUserName", T::String),
        Field::optional(4, "hostProcess", T::Bool),
    ],
};

static SECCOMP_PROFILE: Message = Message {
    name: "SeccompProfile",
    fields: &[
        Field::value(1, "type", T::String),
        Field::optional(2, "localhostProfile", T::String),
    ],
};

static APP_ARMOR_PROFILE: Message = Message {
    name: "AppArmorProfile",
    fields: &[
        Field::value(1, "type", T::String),
        Field::optional(2, "localhostProfile", T::String),
    ],
};

static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        Field::optional(1, "capabilities", T::Message(&CAPABILITIES)),
        Field::optional(2, "privileged", T::Bool),
        Field::optional(3, "seLinuxOptions", T::Message(&SE_LINUX_OPTIONS)),
        Field::optional(4, "runAsUser", T::Int64),
        Field::optional(5, "runAsNonRoot", T::Bool),
        Field::optional(6, "readOnlyRootFilesystem", T::Bool),
        Field::optional(7, "allowPrivilegeEscalation", T::Bool),
        Field::optional(8, "runAsGroup", T::Int64),
        Field::optional(9, "procMount", T::String),
        Field::optional(
            10,
            "windowsOptions",
            T::Message(&WINDOWS_SECURITY_CONTEXT_OPTIONS),
        ),
        Field::optional(11, "seccompProfile", T::Message(&SECCOMP_PROFILE)),
        Field::optional(12, "appArmorProfile", T::Message(&APP_ARMOR_PROFILE)),
    ],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "image", T::String),
        Field::repeated(3, "command", T::String),
        Field::repeated(4, "args", T::String),
        Field::value(5, "workingDir", T::String),
        Field::repeated(6, "ports", T::Message(&CONTAINER_PORT)),
        Field::repeated(7, "env", T::Message(&ENV_VAR)),
        Field::value(8, "resources", T::Message(&RESOURCE_REQUIREMENTS)),
        Field::repeated(9, "volumeMounts", T::Message(&VOLUME_MOUNT)),
        Field::optional(10, "livenessProbe", T::Message(&PROBE)),
        Field::optional(11, "readinessProbe", T::Message(&PROBE)),
        Field::optional(12, "lifecycle", T::Message(&LIFECYCLE)),
        Field::value(13, "terminationMessagePath", T::String),
        Field::value(14, "imagePullPolicy", T::String),
        Field::optional(15, "securityContext", T::Message(&SECURITY_CONTEXT)),
        Field::value(16, "stdin", T::Bool),
        Field::value(17, "stdinOnce", T::Bool),
        Field::value(18, "tty", T::Bool),
        Field::repeated(19, "envFrom", T::Message(&ENV_FROM_SOURCE)),
        Field::value(20, "terminationMessagePolicy", T::String),
        Field::repeated(21, "volumeDevices", T::Message(&VOLUME_DEVICE)),
        Field::optional(22, "startupProbe", T::Message(&PROBE)),
        Field::repeated(23, "resizePolicy", T::Message(&CONTAINER_RESIZE_POLICY)),
        Field::optional(24, "restartPolicy", T::String),
        Field::repeated(
            25,
            "restartPolicyRules",
            T::Message(&CONTAINER_RESTART_RULE),
        ),
    ],
};

static EPHEMERAL_CONTAINER_COMMON: Message = Message {
    name: "EphemeralContainerCommon",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "image", T::String),
        Field::repeated(3, "command", T::String),
        Field::repeated(4, "args", T::String),
        Field::value(5, "workingDir", T::String),
        Field::repeated(6, "ports", T::Message(&CONTAINER_PORT)),
        Field::repeated(7, "env", T::Message(&ENV_VAR)),
        Field::value(8, "resources", T::Message(&RESOURCE_REQUIREMENTS)),
        Field::repeated(9, "volumeMounts", T::Message(&VOLUME_MOUNT)),
        Field::optional(10, "livenessProbe", T::Message(&PROBE)),
        Field::optional(11, "readinessProbe", T::Message(&PROBE)),
        Field::optional(12, "lifecycle", T::Message(&LIFECYCLE)),
        Field::value(13, "terminationMessagePath", T::String),
        Field::value(14, "imagePullPolicy", T::String),
        Field::optional(15, "securityContext", T::Message(&SECURITY_CONTEXT)),
        Field::value(16, "stdin", T::Bool),
        Field::value(17, "stdinOnce", T::Bool),
        Field::value(18, "tty", T::Bool),
        Field::repeated(19, "envFrom", T::Message(&ENV_FROM_SOURCE)),
        Field::value(20, "terminationMessagePolicy", T::String),
        Field::repeated(21, "volumeDevices", T::Message(&VOLUME_DEVICE)),
        Field::optional(22, "startupProbe", T::Message(&PROBE)),
        Field::repeated(23, "resizePolicy", T::Message(&CONTAINER_RESIZE_POLICY)),
        Field::optional(24, "restartPolicy", T::String),
        Field::repeated(
            25,
            "restartPolicyRules",
            T::Message(&CONTAINER_RESTART_RULE),
        ),
    ],
};

static EPHEMERAL_CONTAINER: Message = Message {
    name: "EphemeralContainer",
    fields: &[
        Field::inline(1, "ephemeralContainerCommon", &EPHEMERAL_CONTAINER_COMMON),
        Field::value(2, "targetContainerName", T::String),
    ],
};

static SYSCTL: Message = Message {
    name: "Sysctl",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "value", T::String),
    ],
};

static POD_SECURITY_CONTEXT: Message = Message {
    name: "PodSecurityContext",
    fields: &[
        Field::optional(1, "seLinuxOptions", T::Message(&SE_LINUX_OPTIONS)),
        Field::optional(2, "runAsUser", T::Int64),
        Field::optional(3, "runAsNonRoot", T::Bool),
        Field::repeated(4, "supplementalGroups", T::Int64),
        Field::optional(5, "fsGroup", T::Int64),
        Field::optional(6, "runAsGroup", T::Int64),
        Field::repeated(7, "sysctls", T::Message(&SYSCTL)),
        Field::optional(
            8,
            "windowsOptions",
            T::Message(&WINDOWS_SECURITY_CONTEXT_OPTIONS),
        ),
        Field::optional(9, "fsGroupChangePolicy", T::String),
        Field::optional(10, "seccompProfile", T::Message(&SECCOMP_PROFILE)),
        Field::optional(11, "appArmorProfile", T::Message(&APP_ARMOR_PROFILE)),
        Field::optional(12, "supplementalGroupsPolicy", T::String),
        Field::optional(13, "seLinuxChangePolicy", T::String),
    ],
};

static NODE_SELECTOR_REQUIREMENT: Message = Message {
    name: "NodeSelectorRequirement",
    fields: &[
        Field::value(1, "key", T::String),
        Field::value(2, "operator", T::String),
        Field::repeated(3, "values", T::String),
    ],
};

static NODE_SELECTOR_TERM: Message = Message {
    name: "NodeSelectorTerm",
    fields: &[
        Field::repeated(
            1,
            "matchExpressions",
            T::Message(&NODE_SELECTOR_REQUIREMENT),
        ),
        Field::repeated(2, "matchFields", T::Message(&NODE_SELECTOR_REQUIREMENT)),
    ],
};

static NODE_SELECTOR: Message = Message {
    name: "NodeSelector",
    fields: &[Field::repeated(
        1,
        "nodeSelectorTerms",
        T::Message(&NODE_SELECTOR_TERM),
    )],
};

static PREFERRED_SCHEDULING_TERM: Message = Message {
    name: "PreferredSchedulingTerm",
    fields: &[
        Field::value(1, "weight", T::Int32),
        Field::value(2, "preference", T::Message(&NODE_SELECTOR_TERM)),
    ],
};

static NODE_AFFINITY: Message = Message {
    name: "NodeAffinity",
    fields: &[
        Field::optional(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            T::Message(&NODE_SELECTOR),
        ),
        Field::repeated(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            T::Message(&PREFERRED_SCHEDULING_TERM),
        ),
    ],
};

static POD_AFFINITY_TERM: Message = Message {
    name: "PodAffinityTerm",
    fields: &[
        Field::optional(1, "labelSelector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::repeated(2, "namespaces", T::String),
        Field::value(3, "topologyKey", T::String),
        Field::optional(
            4,
            "namespaceSelector",
            T::Message(&super::meta::LABEL_SELECTOR),
        ),
        Field::repeated(5, "matchLabelKeys", T::String),
        Field::repeated(6, "mismatchLabelKeys", T::String),
    ],
};

static WEIGHTED_POD_AFFINITY_TERM: Message = Message {
    name: "WeightedPodAffinityTerm",
    fields: &[
        Field::value(1, "weight", T::Int32),
        Field::value(2, "podAffinityTerm", T::Message(&POD_AFFINITY_TERM)),
    ],
};

static POD_AFFINITY: Message = Message {
    name: "PodAffinity",
    fields: &[
        Field::repeated(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            T::Message(&POD_AFFINITY_TERM),
        ),
        Field::repeated(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            T::Message(&WEIGHTED_POD_AFFINITY_TERM),
        ),
    ],
};

static POD_ANTI_AFFINITY: Message = Message {
    name: "PodAntiAffinity",
    fields: &[
        Field::repeated(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            T::Message(&POD_AFFINITY_TERM),
        ),
        Field::repeated(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            T::Message(&WEIGHTED_POD_AFFINITY_TERM),
        ),
    ],
};

static AFFINITY: Message = Message {
    name: "Affinity",
    fields: &[
        Field::optional(1, "nodeAffinity", T::Message(&NODE_AFFINITY)),
        Field::optional(2, "podAffinity", T::Message(&POD_AFFINITY)),
        Field::optional(3, "podAntiAffinity", T::Message(&POD_ANTI_AFFINITY)),
    ],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        Field::value(1, "key", T::String),
        Field::value(2, "operator", T::String),
        Field::value(3, "value", T::String),
        Field::value(4, "effect", T::String),
        Field::optional(5, "tolerationSeconds", T::Int64),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[
        Field::value(1, "ip", T::String),
        Field::repeated(2, "hostnames", T::String),
    ],
};

static POD_DNS_CONFIG_OPTION: Message = Message {
    name: "PodDNSConfigOption",
    fields: &[
        Field::value(1, "name", T::String),
        Field::optional(2, "value", T::String),
    ],
};

static POD_DNS_CONFIG: Message = Message {
    name: "PodDNSConfig",
    fields: &[
        Field::repeated(1, "nameservers", T::String),
        Field::repeated(2, "searches", T::String),
        Field::repeated(3, "options", T::Message(&POD_DNS_CONFIG_OPTION)),
    ],
};

static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[Field::value(1, "conditionType", T::String)],
};

static TOPOLOGY_SPREAD_CONSTRAINT: Message = Message {
    name: "TopologySpreadConstraint",
    fields: &[
        Field::value(1, "maxSkew", T::Int32),
        Field::value(2, "topologyKey", T::String),
        Field::value(3, "whenUnsatisfiable", T::String),
        Field::optional(4, "labelSelector", T::Message(&super::meta::LABEL_SELECTOR)),
        Field::optional(5, "minDomains", T::Int32),
        Field::optional(6, "nodeAffinityPolicy", T::String),
        Field::optional(7, "nodeTaintsPolicy", T::String),
        Field::repeated(8, "matchLabelKeys", T::String),
    ],
};

static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[Field::value(1, "name", T::String)],
};

static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[Field::value(1, "name", T::String)],
};

static POD_RESOURCE_CLAIM: Message = Message {
    name: "PodResourceClaim",
    fields: &[
        Field::value(1, "name", T::String),
        Field::optional(3, "resourceClaimName", T::String),
        Field::optional(4, "resourceClaimTemplateName", T::String),
    ],
};

static POD_SCHEDULING_GROUP: Message = Message {
    name: "PodSchedulingGroup",
    fields: &[Field::optional(1, "podGroupName", T::String)],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        Field::repeated(1, "volumes", T::Message(&VOLUME)),
        Field::repeated(2, "containers", T::Message(&CONTAINER)),
        Field::value(3, "restartPolicy", T::String),
        Field::optional(4, "terminationGracePeriodSeconds", T::Int64),
        Field::optional(5, "activeDeadlineSeconds", T::Int64),
        Field::value(6, "dnsPolicy", T::String),
        Field::map(7, "nodeSelector", T::String),
        Field::value(8, "serviceAccountName", T::String),
        Field::value(9, "serviceAccount", T::String),
        Field::value(10, "nodeName", T::String),
        Field::value(11, "hostNetwork", T::Bool),
        Field::value(12, "hostPID", T::Bool),
        Field::value(13, "hostIPC", T::Bool),
        Field::optional(14, "securityContext", T::Message(&POD_SECURITY_CONTEXT)),
        Field::repeated(15, "imagePullSecrets", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::value(16, "hostname", T::String),
        Field::value(17, "subdomain", T::String),
        Field::optional(18, "affinity", T::Message(&AFFINITY)),
        Field::value(19, "schedulerName", T::String),
        Field::repeated(20, "initContainers", T::Message(&CONTAINER)),
        Field::optional(21, "automountServiceAccountToken", T::Bool),
        Field::repeated(22, "tolerations", T::Message(&TOLERATION)),
        Field::repeated(23, "hostAliases", T::Message(&HOST_ALIAS)),
        Field::value(24, "priorityClassName", T::String),
        Field::optional(25, "priority", T::Int32),
        Field::optional(26, "dnsConfig", T::Message(&POD_DNS_CONFIG)),
        Field::optional(27, "shareProcessNamespace", T::Bool),
        Field::repeated(28, "readinessGates", T::Message(&POD_READINESS_GATE)),
        Field::optional(29, "runtimeClassName", T::String),
        Field::optional(30, "enableServiceLinks", T::Bool),
        Field::optional(31, "preemptionPolicy", T::String),
        Field::map(32, "overhead", T::Quantity),
        Field::repeated(
            33,
            "topologySpreadConstraints",
            T::Message(&TOPOLOGY_SPREAD_CONSTRAINT),
        ),
        Field::repeated(34, "ephemeralContainers", T::Message(&EPHEMERAL_CONTAINER)),
        Field::optional(35, "setHostnameAsFQDN", T::Bool),
        Field::optional(36, "os", T::Message(&POD_OS)),
        Field::optional(37, "hostUsers", T::Bool),
        Field::repeated(38, "schedulingGates", T::Message(&POD_SCHEDULING_GATE)),
        Field::repeated(39, "resourceClaims", T::Message(&POD_RESOURCE_CLAIM)),
        Field::optional(40, "resources", T::Message(&RESOURCE_REQUIREMENTS)),
        Field::optional(41, "hostnameOverride", T::String),
        Field::optional(43, "schedulingGroup", T::Message(&POD_SCHEDULING_GROUP)),
    ],
};

pub(super) static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&POD_SPEC)),
    ],
};

static PERSISTENT_VOLUME_CLAIM_CONDITION: Message = Message {
    name: "PersistentVolumeClaimCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastProbeTime", T::Time),
        Field::value(4, "lastTransitionTime", T::Time),
        Field::value(5, "reason", T::String),
        Field::value(6, "message", T::String),
    ],
};

static MODIFY_VOLUME_STATUS: Message = Message {
    name: "ModifyVolumeStatus",
    fields: &[
        Field::value(1, "targetVolumeAttributesClassName", T::String),
        Field::value(2, "status", T::String),
    ],
};

static PERSISTENT_VOLUME_CLAIM_STATUS: Message = Message {
    name: "PersistentVolumeClaimStatus",
    fields: &[
        Field::value(1, "phase", T::String),
        Field::repeated(2, "accessModes", T::String),
        Field::map(3, "capacity", T::Quantity),
        Field::repeated(
            4,
            "conditions",
            T::Message(&PERSISTENT_VOLUME_CLAIM_CONDITION),
        ),
        Field::map(5, "allocatedResources", T::Quantity),
        Field::map(7, "allocatedResourceStatuses", T::String),
        Field::optional(8, "currentVolumeAttributesClassName", T::String),
        Field::optional(9, "modifyVolumeStatus", T::Message(&MODIFY_VOLUME_STATUS)),
    ],
};

pub(super) static PERSISTENT_VOLUME_CLAIM: Message = Message {
    name: "PersistentVolumeClaim",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&PERSISTENT_VOLUME_CLAIM_SPEC)),
        Field::value(3, "status", T::Message(&PERSISTENT_VOLUME_CLAIM_STATUS)),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "protocol", T::String),
        Field::value(3, "port", T::Int32),
        Field::value(4, "targetPort", T::IntOrString),
        Field::value(5, "nodePort", T::Int32),
        Field::optional(6, "appProtocol", T::String),
    ],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[Field::optional(1, "timeoutSeconds", T::Int32)],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[Field::optional(
        1,
        "clientIP",
        T::Message(&CLIENT_IP_CONFIG),
    )],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        Field::repeated(1, "ports", T::Message(&SERVICE_PORT)),
        Field::map(2, "selector", T::String),
        Field::value(3, "clusterIP", T::String),
        Field::value(4, "type", T::String),
        Field::repeated(5, "externalIPs", T::String),
        Field::value(7, "sessionAffinity", T::String),
        Field::value(8, "loadBalancerIP", T::String),
        Field::repeated(9, "loadBalancerSourceRanges", T::String),
        Field::value(10, "externalName", T::String),
        Field::value(11, "externalTrafficPolicy", T::String),
        Field::value(12, "healthCheckNodePort", T::Int32),
        Field::value(13, "publishNotReadyAddresses", T::Bool),
        Field::optional(
            14,
            "sessionAffinityConfig",
            T::Message(&SESSION_AFFINITY_CONFIG),
        ),
        Field::optional(17, "ipFamilyPolicy", T::String),
        Field::repeated(18, "clusterIPs", T::String),
        Field::repeated(19, "ipFamilies", T::String),
        Field::optional(20, "allocateLoadBalancerNodePorts", T::Bool),
        Field::optional(21, "loadBalancerClass", T::String),
        Field::optional(22, "internalTrafficPolicy", T::String),
        Field::optional(23, "trafficDistribution", T::String),
    ],
};

static PORT_STATUS: Message = Message {
    name: "PortStatus",
    fields: &[
        Field::value(1, "port", T::Int32),
        Field::value(2, "protocol", T::String),
        Field::optional(3, "error", T::String),
    ],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[
        Field::value(1, "ip", T::String),
        Field::value(2, "hostname", T::String),
        Field::optional(3, "ipMode", T::String),
        Field::repeated(4, "ports", T::Message(&PORT_STATUS)),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[Field::repeated(
        1,
        "ingress",
        T::Message(&LOAD_BALANCER_INGRESS),
    )],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        Field::value(1, "loadBalancer", T::Message(&LOAD_BALANCER_STATUS)),
        Field::repeated(2, "conditions", T::Message(&super::meta::CONDITION)),
    ],
};

pub(super) static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SERVICE_SPEC)),
        Field::value(3, "status", T::Message(&SERVICE_STATUS)),
    ],
};

static POD_CONDITION: Message = Message {
    name: "PodCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastProbeTime", T::Time),
        Field::value(4, "lastTransitionTime", T::Time),
        Field::value(5, "reason", T::String),
        Field::value(6, "message", T::String),
        Field::value(7, "observedGeneration", T::Int64),
    ],
};

static HOST_IP: Message = Message {
    name: "HostIP",
    fields: &[Field::value(1, "ip", T::String)],
};

static POD_IP: Message = Message {
    name: "PodIP",
    fields: &[Field::value(1, "ip", T::String)],
};

static CONTAINER_STATE_WAITING: Message = Message {
    name: "ContainerStateWaiting",
    fields: &[
        Field::value(1, "reason", T::String),
        Field::value(2, "message", T::String),
    ],
};

static CONTAINER_STATE_RUNNING: Message = Message {
    name: "ContainerStateRunning",
    fields: &[Field::value(1, "startedAt", T::Time)],
};

static CONTAINER_STATE_TERMINATED: Message = Message {
    name: "ContainerStateTerminated",
    fields: &[
        Field::value(1, "exitCode", T::Int32),
        Field::value(2, "signal", T::Int32),
        Field::value(3, "reason", T::String),
        Field::value(4, "message", T::String),
        Field::value(5, "startedAt", T::Time),
        Field::value(6, "finishedAt", T::Time),
        Field::value(7, "containerID", T::String),
    ],
};

static CONTAINER_STATE: Message = Message {
    name: "ContainerState",
    fields: &[
        Field::optional(1, "waiting", T::Message(&CONTAINER_STATE_WAITING)),
        Field::optional(2, "running", T::Message(&CONTAINER_STATE_RUNNING)),
        Field::optional(3, "terminated", T::Message(&CONTAINER_STATE_TERMINATED)),
    ],
};

static IMAGE_VOLUME_STATUS: Message = Message {
    name: "ImageVolumeStatus",
    fields: &[Field::value(1, "imageRef", T::String)],
};

static VOLUME_STATUS: Message = Message {
    name: "VolumeStatus",
    fields: &[Field::optional(
        1,
        "image",
        T::Message(&IMAGE_VOLUME_STATUS),
    )],
};

static VOLUME_MOUNT_STATUS: Message = Message {
    name: "VolumeMountStatus",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "mountPath", T::String),
        Field::value(3, "readOnly", T::Bool),
        Field::optional(4, "recursiveReadOnly", T::String),
        Field::optional(5, "volumeStatus", T::Message(&VOLUME_STATUS)),
    ],
};

static LINUX_CONTAINER_USER: Message = Message {
    name: "LinuxContainerUser",
    fields: &[
        Field::value(1, "uid", T::Int64),
        Field::value(2, "gid", T::Int64),
        Field::repeated(3, "supplementalGroups", T::Int64),
    ],
};

static CONTAINER_USER: Message = Message {
    name: "ContainerUser",
    fields: &[Field::optional(
        1,
        "linux",
        T::Message(&LINUX_CONTAINER_USER),
    )],
};

static RESOURCE_HEALTH: Message = Message {
    name: "ResourceHealth",
    fields: &[
        Field::value(1, "resourceID", T::String),
        Field::value(2, "health", T::String),
        Field::optional(6, "message", T::String),
    ],
};

static RESOURCE_STATUS: Message = Message {
    name: "ResourceStatus",
    fields: &[
        Field::value(1, "name", T::String),
        Field::repeated(2, "resources", T::Message(&RESOURCE_HEALTH)),
    ],
};

static CONTAINER_STATUS: Message = Message {
    name: "ContainerStatus",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "state", T::Message(&CONTAINER_STATE)),
        Field::value(3, "lastState", T::Message(&CONTAINER_STATE)),
        Field::value(4, "ready", T::Bool),
        Field::value(5, "restartCount", T::Int32),
        Field::value(6, "image", T::String),
        Field::value(7, "imageID", T::String),
        Field::value(8, "containerID", T::String),
        Field::optional(9, "started", T::Bool),
        Field::map(10, "allocatedResources", T::Quantity),
        Field::optional(11, "resources", T::Message(&RESOURCE_REQUIREMENTS)),
        Field::repeated(12, "volumeMounts", T::Message(&VOLUME_MOUNT_STATUS)),
        Field::optional(13, "user", T::Message(&CONTAINER_USER)),
        Field::repeated(14, "allocatedResourcesStatus", T::Message(&RESOURCE_STATUS)),
        Field::optional(15, "stopSignal", T::String),
    ],
};

static POD_RESOURCE_CLAIM_STATUS: Message = Message {
    name: "PodResourceClaimStatus",
    fields: &[
        Field::value(1, "name", T::String),
        Field::optional(2, "resourceClaimName", T::String),
    ],
};

static CONTAINER_EXTENDED_RESOURCE_REQUEST: Message = Message {
    name: "ContainerExtendedResourceRequest",
    fields: &[
        Field::value(1, "containerName", T::String),
        Field::value(2, "resourceName", T::String),
        Field::value(3, "requestName", T::String),
    ],
};

static POD_EXTENDED_RESOURCE_CLAIM_STATUS: Message = Message {
    name: "PodExtendedResourceClaimStatus",
    fields: &[
        Field::repeated(
            1,
            "requestMappings",
            T::Message(&CONTAINER_EXTENDED_RESOURCE_REQUEST),
        ),
        Field::value(2, "resourceClaimName", T::String),
    ],
};

static NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS: Message = Message {
    name: "NodeAllocatableResourceClaimStatus",
    fields: &[
        Field::value(1, "resourceClaimName", T::String),
        Field::repeated(2, "containers", T::String),
        Field::map(3, "resources", T::Quantity),
    ],
};

static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        Field::value(1, "phase", T::String),
        Field::repeated(2, "conditions", T::Message(&POD_CONDITION)),
        Field::value(3, "message", T::String),
        Field::value(4, "reason", T::String),
        Field::value(5, "hostIP", T::String),
        Field::value(6, "podIP", T::String),
        Field::optional(7, "startTime", T::Time),
        Field::repeated(8, "containerStatuses", T::Message(&CONTAINER_STATUS)),
        Field::value(9, "qosClass", T::String),
        Field::repeated(10, "initContainerStatuses", T::Message(&CONTAINER_STATUS)),
        Field::value(11, "nominatedNodeName", T::String),
        Field::repeated(12, "podIPs", T::Message(&POD_IP)),
        Field::repeated(
            13,
            "ephemeralContainerStatuses",
            T::Message(&CONTAINER_STATUS),
        ),
        Field::value(14, "resize", T::String),
        Field::repeated(
            15,
            "resourceClaimStatuses",
            T::Message(&POD_RESOURCE_CLAIM_STATUS),
        ),
        Field::repeated(16, "hostIPs", T::Message(&HOST_IP)),
        Field::value(17, "observedGeneration", T::Int64),
        Field::optional(
            18,
            "extendedResourceClaimStatus",
            T::Message(&POD_EXTENDED_RESOURCE_CLAIM_STATUS),
        ),
        Field::map(19, "allocatedResources", T::Quantity),
        Field::optional(20, "resources", T::Message(&RESOURCE_REQUIREMENTS)),
        Field::repeated(
            21,
            "nodeAllocatableResourceClaimStatuses",
            T::Message(&NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS),
        ),
    ],
};

pub(super) static POD: Message = Message {
    name: "Pod",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&POD_SPEC)),
        Field::value(3, "status", T::Message(&POD_STATUS)),
    ],
};

pub(super) static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        Field::value(1, "kind", T::String),
        Field::value(2, "namespace", T::String),
        Field::value(3, "name", T::String),
        Field::value(4, "uid", T::String),
        Field::value(5, "apiVersion", T::String),
        Field::value(6, "resourceVersion", T::String),
        Field::value(7, "fieldPath", T::String),
    ],
};

static ENDPOINT_ADDRESS: Message = Message {
    name: "EndpointAddress",
    fields: &[
        Field::value(1, "ip", T::String),
        Field::optional(2, "targetRef", T::Message(&OBJECT_REFERENCE)),
        Field::value(3, "hostname", T::String),
        Field::optional(4, "nodeName", T::String),
    ],
};

static ENDPOINT_PORT: Message = Message {
    name: "EndpointPort",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "port", T::Int32),
        Field::value(3, "protocol", T::String),
        Field::optional(4, "appProtocol", T::String),
    ],
};

static ENDPOINT_SUBSET: Message = Message {
    name: "EndpointSubset",
    fields: &[
        Field::repeated(1, "addresses", T::Message(&ENDPOINT_ADDRESS)),
        Field::repeated(2, "notReadyAddresses", T::Message(&ENDPOINT_ADDRESS)),
        Field::repeated(3, "ports", T::Message(&ENDPOINT_PORT)),
    ],
};

pub(super) static ENDPOINTS: Message = Message {
    name: "Endpoints",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "subsets", T::Message(&ENDPOINT_SUBSET)),
    ],
};

pub(super) static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::map(2, "data", T::String),
        Field::map(3, "binaryData", T::Bytes),
        Field::optional(4, "immutable", T::Bool),
    ],
};

pub(super) static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::map(2, "data", T::Bytes),
        Field::value(3, "type", T::String),
        Field::map(4, "stringData", T::String),
        Field::optional(5, "immutable", T::Bool),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[Field::repeated(1, "finalizers", T::String)],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(4, "lastTransitionTime", T::Time),
        Field::value(5, "reason", T::String),
        Field::value(6, "message", T::String),
    ],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        Field::value(1, "phase", T::String),
        Field::repeated(2, "conditions", T::Message(&NAMESPACE_CONDITION)),
    ],
};

pub(super) static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&NAMESPACE_SPEC)),
        Field::value(3, "status", T::Message(&NAMESPACE_STATUS)),
    ],
};

pub(super) static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::repeated(2, "secrets", T::Message(&OBJECT_REFERENCE)),
        Field::repeated(3, "imagePullSecrets", T::Message(&LOCAL_OBJECT_REFERENCE)),
        Field::optional(4, "automountServiceAccountToken", T::Bool),
    ],
};

pub(super) static EVENT_SOURCE: Message = Message {
    name: "EventSource",
    fields: &[
        Field::value(1, "component", T::String),
        Field::value(2, "host", T::String),
    ],
};

pub(super) static EVENT_SERIES: Message = Message {
    name: "EventSeries",
    fields: &[
        Field::value(1, "count", T::Int32),
        Field::value(2, "lastObservedTime", T::MicroTime),
    ],
};

pub(super) static EVENT: Message = Message {
    name: "Event",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "involvedObject", T::Message(&OBJECT_REFERENCE)),
        Field::value(3, "reason", T::String),
        Field::value(4, "message", T::String),
        Field::value(5, "source", T::Message(&EVENT_SOURCE)),
        Field::value(6, "firstTimestamp", T::Time),
        Field::value(7, "lastTimestamp", T::Time),
        Field::value(8, "count", T::Int32),
        Field::value(9, "type", T::String),
        Field::value(10, "eventTime", T::MicroTime),
        Field::optional(11, "series", T::Message(&EVENT_SERIES)),
        Field::value(12, "action", T::String),
        Field::optional(13, "related", T::Message(&OBJECT_REFERENCE)),
        Field::value(14, "reportingComponent", T::String),
        Field::value(15, "reportingInstance", T::String),
    ],
};

pub(super) static POD_TEMPLATE: Message = Message {
    name: "PodTemplate",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "template", T::Message(&POD_TEMPLATE_SPEC)),
    ],
};
