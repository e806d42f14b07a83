//! The kubelet side: runs a pod worker for every Pod object scheduled to this node, stops
//! workers whose Pod is gone, and publishes each worker's state as the Pod's status.
//!
//! A new incarnation of a pod name (a StatefulSet pod deleted and created again) starts only after
//! the previous one has fully stopped: they share the address, the claims and the pod directory.
//! Stopping happens in two steps so Services never route to a dying pod: first the worker is
//! marked terminating (the caller then refreshes the proxies), then it is signalled.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::controller::{self, controller_uid};
use crate::ipam::Ipam;
use crate::pod::{self, PodShared};
use crate::workloads::Stopping;

pub struct Worker {
    pub shared: Arc<PodShared>,
    pub owner_uid: Option<String>,
    /// Owned by a StatefulSet: its address stays reserved for the name.
    pub stateful: bool,
    /// `<ns>_<claim>` directories it mounts.
    pub claims: Vec<String>,
    stop: watch::Sender<bool>,
    signalled: bool,
    task: JoinHandle<()>,
    last_status: Option<Value>,
}

#[derive(Default)]
pub struct Kubelet {
    pub workers: HashMap<String, Worker>,
    pub stopping: Vec<Worker>,
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_stateful(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "StatefulSet")
}

impl Kubelet {
    /// Starts workers for new pods of this node and marks those whose Pod is gone terminating.
    /// Pods `deleting` says were just deleted (the cache does not know yet) count as gone.
    pub fn sync(&mut self, ctx: &Arc<Ctx>, ipam: &mut Ipam, deleting: impl Fn(&str) -> bool) {
        let node = ctx.settings.node_name.as_str();
        let pods: HashMap<String, Arc<Pod>> = ctx
            .cache
            .pods
            .state()
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter(|p| p.metadata.uid.as_deref().is_none_or(|uid| !deleting(uid)))
            .map(|p| (key(&p), p))
            .collect();
        let gone: Vec<String> = self
            .workers
            .iter()
            .filter(|(key, worker)| {
                pods.get(*key).is_none_or(|p| {
                    p.metadata.uid.as_deref() != Some(worker.shared.uid.as_str())
                        || p.metadata.deletion_timestamp.is_some()
                })
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some(worker) = self.workers.remove(&key) {
                tracing::info!(pod = %key, "pod deleted; stopping it");
                worker.shared.mark_terminating();
                self.stopping.push(worker);
            }
        }
        for (key, pod) in pods {
            if self.workers.contains_key(&key)
                || pod.metadata.deletion_timestamp.is_some()
                || self.stopping.iter().any(|w| w.shared.key() == key)
            {
                continue;
            }
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            match self.start(ctx, ipam, &pod) {
                Ok(worker) => {
                    self.workers.insert(key, worker);
                }
                Err(error) => tracing::warn!(pod = %key, %error, "cannot start pod"),
            }
        }
    }

    fn start(
        &self,
        ctx: &Arc<Ctx>,
        ipam: &mut Ipam,
        pod: &Arc<Pod>,
    ) -> crate::error::Result<Worker> {
        let key = key(pod);
        let ip = ipam.pod(&key)?;
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pod_dir = ctx.settings.pod_dir(&namespace, &name);
        std::fs::create_dir_all(&pod_dir)
            .map_err(crate::error::io(format!("creating {}", pod_dir.display())))?;
        let hosts_file = pod_dir.join("hosts");
        let shared = Arc::new(PodShared::new(
            pod,
            ip,
            hosts_file.clone(),
            ctx.wake.clone(),
        ));
        // The hosts file must exist before the first container mounts it; the Service sync fills
        // it in right after.
        crate::hosts::write_in_place(&hosts_file, "127.0.0.1\tlocalhost\n").map_err(
            crate::error::io(format!("writing {}", hosts_file.display())),
        )?;
        let resolv = pod_dir.join("resolv.conf");
        let dns = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref());
        crate::hosts::write_in_place(
            &resolv,
            &crate::hosts::resolv_conf(&namespace, &ctx.settings.cluster_domain, dns),
        )
        .map_err(crate::error::io(format!("writing {}", resolv.display())))?;
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(pod::run(
            ctx.clone(),
            (**pod).clone(),
            shared.clone(),
            stop_rx,
        ));
        let claims = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter_map(|c| {
                let claim = ctx
                    .cache
                    .claims
                    .get(&ObjectRef::new(&c.claim_name).within(&namespace))?;
                Some(crate::claims::dir_name(&claim))
            })
            .collect();
        Ok(Worker {
            shared,
            owner_uid: controller_uid(&pod.metadata).map(str::to_owned),
            stateful: is_stateful(pod),
            claims,
            stop,
            signalled: false,
            task,
            last_status: None,
        })
    }

    /// Signals the workers marked terminating (after the proxies stopped routing to them) and
    /// forgets those that finished, releasing addresses of pods not owned by a StatefulSet.
    pub fn signal_and_reap(&mut self, ipam: &mut Ipam) {
        for worker in &mut self.stopping {
            if !worker.signalled {
                let _ = worker.stop.send(true);
                worker.signalled = true;
            }
        }
        let (finished, running): (Vec<Worker>, Vec<Worker>) =
            self.stopping.drain(..).partition(|w| w.task.is_finished());
        self.stopping = running;
        for worker in finished {
            let key = worker.shared.key();
            if !worker.stateful && !self.workers.contains_key(&key) {
                ipam.release_pod(&key);
            }
        }
    }

    /// Pods still stopping, by owner and by name.
    pub fn stopping(&self) -> Stopping {
        let mut result = Stopping::default();
        for worker in &self.stopping {
            if let Some(owner) = &worker.owner_uid {
                *result.by_owner.entry(owner.clone()).or_default() += 1;
            }
            result.keys.insert(worker.shared.key());
        }
        result
    }

    /// Every worker, running or stopping.
    pub fn all(&self) -> impl Iterator<Item = &Worker> {
        self.workers.values().chain(self.stopping.iter())
    }

    /// The claim directories pods of this node use.
    pub fn claims_in_use(&self) -> HashSet<String> {
        self.all().flat_map(|w| w.claims.iter().cloned()).collect()
    }

    /// Writes the status of every running pod whose state changed since the last write.
    pub async fn write_statuses(&mut self, ctx: &Arc<Ctx>) {
        for worker in self.workers.values_mut() {
            let status = worker
                .shared
                .snapshot()
                .to_status(Some(worker.shared.ip), ctx.settings.host_ip);
            if worker.last_status.as_ref() == Some(&status) {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &worker.shared.namespace);
            match controller::patch_status(&api, &worker.shared.name, status.clone()).await {
                Ok(()) => worker.last_status = Some(status),
                Err(kube::Error::Api(e)) if e.code == 404 => worker.last_status = Some(status),
                Err(error) => {
                    tracing::warn!(pod = %worker.shared.key(), %error, "writing pod status");
                }
            }
        }
    }

    /// Marks every pod terminating (the caller then refreshes the proxies).
    pub fn begin_shutdown(&mut self) {
        for (_, worker) in self.workers.drain() {
            worker.shared.mark_terminating();
            self.stopping.push(worker);
        }
    }

    /// Signals every pod, waits (bounded) for all to stop, and deletes their Pod objects.
    pub async fn finish_shutdown(&mut self, ctx: &Arc<Ctx>, ipam: &mut Ipam, bound: Duration) {
        for worker in &mut self.stopping {
            let _ = worker.stop.send(true);
            worker.signalled = true;
        }
        let deadline = tokio::time::Instant::now() + bound;
        for worker in &mut self.stopping {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(remaining, &mut worker.task)
                .await
                .is_err()
            {
                tracing::warn!(pod = %worker.shared.key(), "pod did not stop in time; killing what is left");
                worker.task.abort();
                let network = ctx.settings.network.clone();
                let ip = worker.shared.ip;
                let _ = tokio::task::spawn_blocking(move || network.pod_down(ip)).await;
            }
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &worker.shared.namespace);
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(worker.shared.uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&worker.shared.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(error) => {
                    tracing::warn!(pod = %worker.shared.key(), %error, "deleting the pod object")
                }
            }
        }
        self.signal_and_reap(ipam);
    }
}
