//! FrontProxy: certificates from the root shard's CAs, kubeconfig, path mapping and the
//! front-proxy Deployment behind a Service on the external port.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::api::common::{Endpoints, ShardReference};
use crate::api::{FrontProxy, RootShard};
use crate::naming::Certificate;
use crate::pki::catalog;
use crate::render::{children, deployment};
use crate::upgrade::Stage;
use crate::validate::{self, FrontProxyConfig, Image};

use super::component::{self, Bundle, Workload};
use super::status::Problem;
use super::upgrade::{self, Earlier};
use super::{Context, Error, shard_list};

pub async fn reconcile(proxy: Arc<FrontProxy>, ctx: Arc<Context>) -> Result<Action, Error> {
    if proxy.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let stored = proxy.status.clone().unwrap_or_default();
    let previous = stored.component.clone();
    let version = Image::resolve(proxy.spec.image.as_ref()).version;
    let roots: Api<RootShard> =
        Api::namespaced(ctx.client.clone(), &proxy.namespace().unwrap_or_default());
    let root = roots
        .get_opt(&proxy.spec.root_shard.reference.name)
        .await
        .map_err(Error::Kube)?;
    let prepared = validate::front_proxy(&proxy, root.as_ref())
        .map_err(Problem::from)
        .and_then(|config| {
            let certificates = catalog::front_proxy(&config).map_err(Problem::invalid)?;
            Ok((config, certificates))
        });
    let (mut config, certificates) = match prepared {
        Ok(prepared) => prepared,
        Err(problem) => {
            return component::invalid(&ctx, &*proxy, &previous, problem, version).await;
        }
    };
    let earlier = Earlier {
        virtual_workspaces: true,
        ..Earlier::root_and_its_shards(&config.root, root.as_ref())
    };
    let decision = upgrade::gate(
        &ctx,
        &config.owner.names,
        Stage::FrontProxy,
        previous.current_version.as_deref(),
        &mut config.image,
        earlier,
    )
    .await?;
    let render = |revision: &str| children::front_proxy(&config, revision);
    let endpoints = Endpoints {
        internal: format!(
            "https://{}:{}",
            config.owner.names.service_host(),
            config.external_port
        ),
        external: Some(format!(
            "https://{}:{}",
            config.external_hostname, config.external_port
        )),
    };
    let action = component::reconcile(
        &ctx,
        &*proxy,
        &previous,
        Workload {
            owner: &config.owner,
            certificates,
            bundles: bundles(&config),
            mounts: deployment::front_proxy_fragment(&config).mounts,
            version,
            upgrade: decision,
            warnings: config.warnings.clone(),
            etcd: None,
            external_etcd: &[],
            advisories: Vec::new(),
            endpoints,
            render: &render,
        },
    )
    .await?;
    let mut routed = shard_list::of_root(&ctx, root.as_ref()).await?;
    routed.push(ShardReference {
        name: config.root.names.instance.clone(),
        url: Some(config.root.shard_base_url.clone()),
    });
    routed.sort();
    shard_list::write(&ctx, &*proxy, &stored.shards, routed).await?;
    Ok(action)
}

/// The front-proxy always mounts a merged client CA; a server CA bundle only when one is brought.
fn bundles(config: &FrontProxyConfig) -> Vec<Bundle> {
    let names = &config.owner.names;
    let root = &config.root.names;
    let mut client_sources = vec![root.certificate_secret(Certificate::ClientCa)];
    client_sources.extend(config.client_ca_bundles.iter().cloned());
    let mut bundles = vec![Bundle {
        name: names.merged_client_ca_secret(),
        sources: client_sources,
    }];
    if let Some(reference) = &config.spec.ca_bundle_secret_ref {
        bundles.push(Bundle {
            name: names.merged_ca_bundle_secret(),
            sources: vec![
                root.certificate_secret(Certificate::ServerCa),
                reference.name.clone(),
            ],
        });
    }
    bundles
}
