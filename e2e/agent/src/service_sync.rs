//! Brings the node in line with the Services: virtual IPs allocated and recorded, proxies
//! listening with the current ready endpoints, Endpoints objects written, every pod's hosts file
//! rewritten with the current names.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::controller::MANAGER;
use crate::hosts::{self, EndpointNames, PodNames, ServiceNames};
use crate::ipam::Ipam;
use crate::kubelet::Kubelet;
use crate::proxy::{Desired, Proxies};
use crate::services::{self, PodView};

#[derive(Default)]
pub struct ServiceSync {
    pub proxies: Proxies,
    /// Endpoints subsets last written, by `namespace/name`.
    written: HashMap<String, Value>,
    /// Hosts file content last written, by pod key.
    hosts: HashMap<String, String>,
}

fn views(kubelet: &Kubelet) -> Vec<PodView> {
    kubelet
        .all()
        .map(|w| {
            let s = &w.shared;
            PodView {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                uid: s.uid.clone(),
                labels: s.labels.clone(),
                ip: s.ip,
                ready: s.serving(),
                alive: s.alive(),
                hostname: s.hostname.clone(),
                subdomain: s.subdomain.clone(),
                containers: s.containers.clone(),
            }
        })
        .collect()
}

impl ServiceSync {
    pub async fn sync(&mut self, ctx: &Arc<Ctx>, ipam: &mut Ipam, kubelet: &Kubelet) {
        let pods = views(kubelet);
        let subnet = ctx.settings.network.subnet;
        let all = ctx.cache.services.state();
        let mut desired = BTreeMap::new();
        let mut names = Vec::new();
        for service in &all {
            if service.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let key = services::key(service);
            let endpoints = services::endpoints(service, &pods);
            let mut vip = None;
            if services::wants_vip(service) {
                match ipam.service(&key, services::requested_ip(service)) {
                    Ok(ip) => {
                        vip = Some(ip);
                        if let Some(patch) = services::vip_patch(service, ip) {
                            record_vip(ctx, service, &patch).await;
                        }
                        desired.insert(
                            key.clone(),
                            Desired {
                                vip: ip,
                                ports: services::backends(service, &endpoints),
                            },
                        );
                    }
                    Err(error) => tracing::warn!(service = %key, %error, "no virtual IP"),
                }
            }
            if !services::is_external_name(service) {
                self.write_endpoints(ctx, service, &endpoints).await;
            }
            names.push(ServiceNames {
                namespace: service.metadata.namespace.clone().unwrap_or_default(),
                name: service.metadata.name.clone().unwrap_or_default(),
                vip: vip
                    .or_else(|| services::effective_vip(service, subnet))
                    .filter(|_| services::wants_vip(service)),
                endpoints: endpoints
                    .iter()
                    .filter(|e| e.ready)
                    .map(|e| EndpointNames {
                        ip: e.ip,
                        hostname: e.hostname.clone(),
                    })
                    .collect(),
            });
        }
        let live: std::collections::HashSet<String> =
            all.iter().map(|s| services::key(s)).collect();
        let released: Vec<String> = ipam
            .table()
            .services
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        for key in released {
            ipam.release_service(&key);
        }
        self.proxies.sync(&ctx.settings.network, &desired).await;
        self.forget_endpoints(ctx, &live).await;
        self.write_hosts(ctx, kubelet, &names);
    }

    async fn write_endpoints(
        &mut self,
        ctx: &Arc<Ctx>,
        service: &Service,
        endpoints: &[services::Endpoint],
    ) {
        let key = services::key(service);
        let subsets = services::endpoints_subsets(service, endpoints);
        if self.written.get(&key) == Some(&subsets) {
            return;
        }
        let namespace = service.metadata.namespace.clone().unwrap_or_default();
        let name = service.metadata.name.clone().unwrap_or_default();
        let object = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": service.metadata.labels.clone().unwrap_or_default(),
            },
            "subsets": subsets,
        });
        let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &namespace);
        match api
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
        {
            Ok(_) => {
                self.written.insert(key, subsets);
            }
            Err(error) => tracing::debug!(service = %key, %error, "writing Endpoints"),
        }
    }

    /// Deletes the Endpoints this agent wrote for Services that are gone.
    async fn forget_endpoints(&mut self, ctx: &Arc<Ctx>, live: &std::collections::HashSet<String>) {
        let gone: Vec<String> = self
            .written
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.written.remove(&key);
            let Some((namespace, name)) = key.split_once('/') else {
                continue;
            };
            let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), namespace);
            if let Err(error) = api.delete(name, &DeleteParams::default()).await {
                tracing::debug!(service = %key, %error, "deleting Endpoints");
            }
        }
    }

    fn write_hosts(&mut self, ctx: &Arc<Ctx>, kubelet: &Kubelet, names: &[ServiceNames]) {
        let settings = &ctx.settings;
        let mut seen = std::collections::HashSet::new();
        for worker in kubelet.workers.values() {
            let shared = &worker.shared;
            let key = shared.key();
            let content = hosts::render(
                &PodNames {
                    namespace: shared.namespace.clone(),
                    hostname: shared.hostname.clone(),
                    subdomain: shared.subdomain.clone(),
                    ip: Some(shared.ip),
                    aliases: shared.host_aliases.clone(),
                },
                names,
                Some(settings.api_host),
                &settings.cluster_domain,
            );
            seen.insert(key.clone());
            if self.hosts.get(&key) == Some(&content) {
                continue;
            }
            match hosts::write_in_place(&shared.hosts_file, &content) {
                Ok(()) => {
                    self.hosts.insert(key, content);
                }
                Err(error) => tracing::warn!(pod = %key, %error, "writing the hosts file"),
            }
        }
        self.hosts.retain(|key, _| seen.contains(key));
    }
}

/// Writes the virtual IP into the Service (spec or annotation).
async fn record_vip(ctx: &Arc<Ctx>, service: &Service, patch: &Value) {
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let name = service.metadata.name.clone().unwrap_or_default();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => {
            tracing::info!(service = %format!("{namespace}/{name}"), patch = %patch, "recorded virtual IP")
        }
        Err(error) => {
            tracing::warn!(service = %format!("{namespace}/{name}"), %error, "recording the virtual IP")
        }
    }
}
