//! CacheServer: its own CA, serving and client certificates, the kubeconfig shards mount, and
//! the cache-server Deployment (plus a managed etcd when asked for).

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::api::CacheServer;
use crate::api::common::Endpoints;
use crate::pki::catalog;
use crate::render::{children, deployment};
use crate::upgrade::Decision;
use crate::validate::{self, Etcd, Image};

use super::component::{self, Workload};
use super::status::Problem;
use super::{Context, Error};

pub async fn reconcile(cache: Arc<CacheServer>, ctx: Arc<Context>) -> Result<Action, Error> {
    if cache.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let previous = cache.status.clone().unwrap_or_default();
    let version = Image::resolve(cache.spec.image.as_ref()).version;
    let config = match validate::cache_server(&cache) {
        Ok(config) => config,
        Err(error) => {
            return component::invalid(&ctx, &*cache, &previous, error.into(), version).await;
        }
    };
    let mut certificates = match catalog::cache_server(&config) {
        Ok(certificates) => certificates,
        Err(error) => {
            return component::invalid(&ctx, &*cache, &previous, Problem::invalid(error), version)
                .await;
        }
    };
    let managed = match &config.etcd {
        Etcd::Managed(managed) => {
            certificates.extend(catalog::managed_etcd(&config.owner.names));
            Some(managed)
        }
        _ => None,
    };
    tracing::debug!(name = %cache.name_any(), "reconciling cache server");
    let render = |revision: &str| children::cache_server(&config, revision);
    component::reconcile(
        &ctx,
        &*cache,
        &previous,
        Workload {
            owner: &config.owner,
            certificates,
            bundles: Vec::new(),
            mounts: deployment::cache_server_fragment(&config).mounts,
            version: config.image.version.clone(),
            // The first stage of the upgrade order never waits.
            upgrade: Decision::Proceed,
            warnings: config.warnings.clone(),
            etcd: managed,
            external_etcd: config.etcd.external_endpoints(),
            advisories: Vec::new(),
            endpoints: Endpoints {
                internal: config.owner.names.service_url(),
                external: None,
            },
            render: &render,
        },
    )
    .await
}
