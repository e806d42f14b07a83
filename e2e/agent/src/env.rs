//! A container's environment, resolved as kubelet does it.
//!
//! Order matters and follows `kubelet_pods.go`: `envFrom` sources first (later ones win), then
//! `env` entries in order (each may use `$(VAR)` of the variables before it and of the Service
//! variables), then the Service variables (`<SVC>_SERVICE_HOST`, docker-link style `<SVC>_PORT_*`,
//! and always the API server's `KUBERNETES_SERVICE_HOST/PORT`) for names not already set. On top
//! come what a container runtime adds: `PATH`, `HOSTNAME`, `HOME` unless the pod sets them.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Container;

use crate::expand::expand;
use crate::fieldref::{self, PodFacts};

/// The `PATH` container images usually set.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where Secrets and ConfigMaps are read from (the agent's watch caches; maps in tests).
pub trait Objects: Sync {
    /// The data of Secret `namespace/name`, or None when it does not exist.
    fn secret(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
    /// `data` of ConfigMap `namespace/name`.
    fn config_map(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>>;
    /// `binaryData` of ConfigMap `namespace/name` (volumes only).
    fn config_map_binary(&self, namespace: &str, name: &str) -> BTreeMap<String, Vec<u8>>;
}

/// A Service as its environment variables describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceLink {
    pub name: String,
    pub ip: Ipv4Addr,
    /// (port name, port, protocol)
    pub ports: Vec<(Option<String>, u16, String)>,
}

fn env_name(text: &str) -> String {
    text.replace('-', "_").to_uppercase()
}

/// The variables kubelet derives from `services` (those with a virtual IP and ports).
pub fn service_variables(services: &[ServiceLink]) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    for service in services {
        let Some((_, first_port, _)) = service.ports.first() else {
            continue;
        };
        let prefix = env_name(&service.name);
        let ip = service.ip.to_string();
        vars.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
        vars.push((format!("{prefix}_SERVICE_PORT"), first_port.to_string()));
        for (name, port, _) in &service.ports {
            if let Some(name) = name.as_deref().filter(|n| !n.is_empty()) {
                vars.push((
                    format!("{prefix}_SERVICE_PORT_{}", env_name(name)),
                    port.to_string(),
                ));
            }
        }
        for (index, (_, port, protocol)) in service.ports.iter().enumerate() {
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{ip}:{port}");
            if index == 0 {
                vars.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{port}_{}", protocol.to_uppercase());
            vars.push((port_prefix.clone(), url));
            vars.push((format!("{port_prefix}_PROTO"), lower));
            vars.push((format!("{port_prefix}_PORT"), port.to_string()));
            vars.push((format!("{port_prefix}_ADDR"), ip.clone()));
        }
    }
    vars
}

/// An ordered map: a name keeps its first position, later writes replace the value.
#[derive(Default)]
struct Ordered {
    order: Vec<String>,
    values: BTreeMap<String, String>,
}

impl Ordered {
    fn set(&mut self, name: String, value: String) {
        if !self.values.contains_key(&name) {
            self.order.push(name.clone());
        }
        self.values.insert(name, value);
    }

    fn get(&self, name: &str) -> Option<&String> {
        self.values.get(name)
    }

    fn into_vec(self) -> Vec<(String, String)> {
        let Ordered { order, mut values } = self;
        order
            .into_iter()
            .filter_map(|name| values.remove(&name).map(|value| (name, value)))
            .collect()
    }
}

/// Everything the environment of one container depends on.
pub struct EnvInputs<'a> {
    pub facts: PodFacts<'a>,
    pub container: &'a Container,
    pub objects: &'a dyn Objects,
    /// Services of the pod's namespace (empty when `enableServiceLinks: false`), plus the API
    /// server as `kubernetes`.
    pub services: &'a [ServiceLink],
}

/// The container's environment, or why it cannot be built (kubelet's
/// `CreateContainerConfigError` messages).
pub fn resolve(inputs: &EnvInputs<'_>) -> Result<Vec<(String, String)>, String> {
    let namespace = inputs.facts.namespace();
    let service_env: BTreeMap<String, String> =
        service_variables(inputs.services).into_iter().collect();
    let mut env = Ordered::default();
    for source in inputs.container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        if let Some(cm) = &source.config_map_ref {
            let optional = cm.optional.unwrap_or(false);
            match inputs.objects.config_map(&namespace, &cm.name) {
                Some(data) => {
                    for (key, value) in data {
                        env.set(format!("{prefix}{key}"), value);
                    }
                }
                None if optional => {}
                None => return Err(format!("configmap {:?} not found", cm.name)),
            }
        }
        if let Some(secret) = &source.secret_ref {
            let optional = secret.optional.unwrap_or(false);
            match inputs.objects.secret(&namespace, &secret.name) {
                Some(data) => {
                    for (key, value) in data {
                        env.set(
                            format!("{prefix}{key}"),
                            String::from_utf8_lossy(&value).into_owned(),
                        );
                    }
                }
                None if optional => {}
                None => return Err(format!("secret {:?} not found", secret.name)),
            }
        }
    }
    for var in inputs.container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) if !value.is_empty() => expand(value, |name| {
                env.get(name).or_else(|| service_env.get(name)).cloned()
            }),
            (_, Some(from)) => {
                if let Some(field) = &from.field_ref {
                    fieldref::field(&field.field_path, &inputs.facts)?
                } else if let Some(resource) = &from.resource_field_ref {
                    let container = match resource.container_name.as_deref() {
                        Some(name) if !name.is_empty() && name != inputs.container.name => {
                            return Err(format!(
                                "resourceFieldRef of another container ({name}) is not supported"
                            ));
                        }
                        _ => inputs.container,
                    };
                    fieldref::resource(
                        container,
                        &resource.resource,
                        resource.divisor.as_ref().map(|d| d.0.as_str()),
                    )?
                } else if let Some(key) = &from.config_map_key_ref {
                    let optional = key.optional.unwrap_or(false);
                    match inputs.objects.config_map(&namespace, &key.name) {
                        Some(data) => match data.get(&key.key) {
                            Some(value) => value.clone(),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in ConfigMap {namespace}/{}",
                                    key.key, key.name
                                ));
                            }
                        },
                        None if optional => continue,
                        None => return Err(format!("configmap {:?} not found", key.name)),
                    }
                } else if let Some(key) = &from.secret_key_ref {
                    let optional = key.optional.unwrap_or(false);
                    match inputs.objects.secret(&namespace, &key.name) {
                        Some(data) => match data.get(&key.key) {
                            Some(value) => String::from_utf8_lossy(value).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in Secret {namespace}/{}",
                                    key.key, key.name
                                ));
                            }
                        },
                        None if optional => continue,
                        None => return Err(format!("secret {:?} not found", key.name)),
                    }
                } else {
                    String::new()
                }
            }
            _ => String::new(),
        };
        env.set(var.name.clone(), value);
    }
    for (name, value) in service_env {
        if env.get(&name).is_none() {
            env.set(name, value);
        }
    }
    let hostname = inputs
        .facts
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .or_else(|| inputs.facts.pod.metadata.name.clone())
        .unwrap_or_default();
    for (name, value) in [
        ("PATH", DEFAULT_PATH.to_owned()),
        ("HOSTNAME", hostname),
        ("HOME", "/root".to_owned()),
    ] {
        if env.get(name).is_none() {
            env.set(name.to_owned(), value);
        }
    }
    Ok(env.into_vec())
}

/// `command` and `args` with `$(VAR)` references expanded from the final environment.
pub fn expand_command(
    container: &Container,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let map: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| map.get(name).map(|v| (*v).to_owned());
    let each = |items: &Option<Vec<String>>| {
        items
            .iter()
            .flatten()
            .map(|item| expand(item, lookup))
            .collect()
    };
    (each(&container.command), each(&container.args))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource,
        ObjectFieldSelector, Pod, SecretEnvSource, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    struct Fixed;

    impl Objects for Fixed {
        fn secret(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (namespace == "ns" && name == "creds").then(|| {
                BTreeMap::from([
                    ("password".to_owned(), b"s3cret".to_vec()),
                    ("user".to_owned(), b"admin".to_vec()),
                ])
            })
        }
        fn config_map(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
            (namespace == "ns" && name == "settings").then(|| {
                BTreeMap::from([
                    ("MODE".to_owned(), "fast".to_owned()),
                    ("LEVEL".to_owned(), "3".to_owned()),
                ])
            })
        }
        fn config_map_binary(&self, _: &str, _: &str) -> BTreeMap<String, Vec<u8>> {
            BTreeMap::new()
        }
    }

    fn var(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn from(name: &str, source: EnvVarSource) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(source),
        }
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn resolve_for(
        container: &Container,
        services: &[ServiceLink],
    ) -> Result<Vec<(String, String)>, String> {
        let pod = pod();
        resolve(&EnvInputs {
            facts: PodFacts {
                pod: &pod,
                pod_ip: Some(Ipv4Addr::new(10, 0, 0, 7)),
                host_ip: Ipv4Addr::new(10, 0, 0, 1),
                node_name: "agent",
            },
            container,
            objects: &Fixed,
            services,
        })
    }

    fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn sources_order_and_expansion() {
        let container = Container {
            name: "app".into(),
            env_from: Some(vec![
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: "settings".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
                EnvFromSource {
                    prefix: Some("DB_".into()),
                    secret_ref: Some(SecretEnvSource {
                        name: "creds".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
            ]),
            env: Some(vec![
                from(
                    "POD_NAME",
                    EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.name".into(),
                            api_version: None,
                        }),
                        ..Default::default()
                    },
                ),
                from(
                    "POD_IP",
                    EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "status.podIP".into(),
                            api_version: None,
                        }),
                        ..Default::default()
                    },
                ),
                var(
                    "URL",
                    "http://$(POD_NAME).svc:$(WEB_SERVICE_PORT)/$(LATER)/$$(POD_NAME)",
                ),
                var("LATER", "x"),
                var("MODE", "slow-$(MODE)"),
                from(
                    "PASSWORD",
                    EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: "creds".into(),
                            key: "password".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ),
                from(
                    "OPTIONAL",
                    EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: "absent".into(),
                            key: "k".into(),
                            optional: Some(true),
                        }),
                        ..Default::default()
                    },
                ),
            ]),
            ..Default::default()
        };
        let services = vec![ServiceLink {
            name: "web".into(),
            ip: Ipv4Addr::new(10, 0, 0, 254),
            ports: vec![(Some("http".into()), 8080, "TCP".into())],
        }];
        let env = resolve_for(&container, &services).expect("env");
        assert_eq!(lookup(&env, "POD_NAME"), Some("web-1"));
        assert_eq!(lookup(&env, "POD_IP"), Some("10.0.0.7"));
        assert_eq!(
            lookup(&env, "URL"),
            Some("http://web-1.svc:8080/$(LATER)/$(POD_NAME)")
        );
        assert_eq!(lookup(&env, "MODE"), Some("slow-fast"));
        assert_eq!(lookup(&env, "LEVEL"), Some("3"));
        assert_eq!(lookup(&env, "DB_user"), Some("admin"));
        assert_eq!(lookup(&env, "PASSWORD"), Some("s3cret"));
        assert_eq!(lookup(&env, "OPTIONAL"), None);
        assert_eq!(lookup(&env, "WEB_SERVICE_HOST"), Some("10.0.0.254"));
        assert_eq!(lookup(&env, "WEB_SERVICE_PORT_HTTP"), Some("8080"));
        assert_eq!(lookup(&env, "WEB_PORT"), Some("tcp://10.0.0.254:8080"));
        assert_eq!(lookup(&env, "WEB_PORT_8080_TCP_ADDR"), Some("10.0.0.254"));
        assert_eq!(lookup(&env, "HOSTNAME"), Some("web-1"));
        assert_eq!(lookup(&env, "PATH"), Some(DEFAULT_PATH));
        // A name keeps the position of its first definition.
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert!(
            names.iter().position(|n| *n == "LEVEL") < names.iter().position(|n| *n == "POD_NAME")
        );

        let (command, args) = expand_command(
            &Container {
                command: Some(vec!["run".into(), "--name=$(POD_NAME)".into()]),
                args: Some(vec!["$(UNKNOWN)".into(), "$$(POD_NAME)".into()]),
                ..Default::default()
            },
            &env,
        );
        assert_eq!(command, vec!["run", "--name=web-1"]);
        assert_eq!(args, vec!["$(UNKNOWN)", "$(POD_NAME)"]);
    }

    /// Container `app` whose only variable is `X` from `source`.
    fn with_x(source: EnvVarSource) -> Container {
        Container {
            name: "app".into(),
            env: Some(vec![from("X", source)]),
            ..Default::default()
        }
    }

    #[test]
    fn missing_sources_are_errors_unless_optional() {
        let missing_secret = with_x(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: "nope".into(),
                key: "k".into(),
                optional: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            resolve_for(&missing_secret, &[]),
            Err("secret \"nope\" not found".to_owned())
        );
        let missing_key = with_x(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "settings".into(),
                key: "nope".into(),
                optional: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            resolve_for(&missing_key, &[]),
            Err("couldn't find key nope in ConfigMap ns/settings".to_owned())
        );
    }

    #[test]
    fn kubernetes_service_variables() {
        let vars = service_variables(&[ServiceLink {
            name: "kubernetes".into(),
            ip: Ipv4Addr::new(10, 0, 0, 1),
            ports: vec![(Some("https".into()), 6443, "TCP".into())],
        }]);
        let map: BTreeMap<_, _> = vars.into_iter().collect();
        assert_eq!(map["KUBERNETES_SERVICE_HOST"], "10.0.0.1");
        assert_eq!(map["KUBERNETES_SERVICE_PORT"], "6443");
        assert_eq!(map["KUBERNETES_SERVICE_PORT_HTTPS"], "6443");
        assert_eq!(map["KUBERNETES_PORT"], "tcp://10.0.0.1:6443");
        assert_eq!(map["KUBERNETES_PORT_6443_TCP"], "tcp://10.0.0.1:6443");
        assert_eq!(map["KUBERNETES_PORT_6443_TCP_PROTO"], "tcp");
        assert_eq!(map["KUBERNETES_PORT_6443_TCP_PORT"], "6443");
        assert_eq!(map["KUBERNETES_PORT_6443_TCP_ADDR"], "10.0.0.1");
    }
}
