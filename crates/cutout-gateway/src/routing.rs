//! [`Routing`]: the table a request holds for its whole life (the configuration, the clusters built from it, the source rate limiter), built anew on a reload from the parts whose settings changed.
//!
//! Each cluster is built from a [`ClusterPlan`]: every setting its stack, its breaker and its
//! hosts' breakers are made of, compared by value. On a reload ([`crate::reload`]) a cluster
//! whose plan is equal keeps the very same [`Cluster`] (its breaker, its hosts, its
//! statistics); one whose plan differs gets a new stack, and within it keeps its breaker when
//! the breaker's settings are equal, and its hosts (their breakers) when the hosts' part is
//! equal. A setting added to the configuration later belongs in the plan of what it builds, so
//! that changing it rebuilds that part and nothing else.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use cutout::clock::SharedClock;
use cutout::{Breaker, Registry, Settings};
use http::Uri;

use crate::cluster::{Cluster, ClusterParts, RetrySettings, upstream_client};
use crate::config::{ClusterConfig, GatewayConfig, Route};
use crate::hosts::Hosts;
use crate::rate::{RateLimit, SourceRate};

/// Everything one cluster is built from (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterPlan {
    /// The cluster's own table, with what `[gateway]` gives it.
    pub cluster: ClusterConfig,
    /// Its breaker's settings.
    pub breaker: Settings,
    /// Its hosts' breakers, when it ejects hosts.
    pub hosts: Option<HostsPlan>,
    /// `pool-idle-timeout` (its client's).
    pub pool_idle_timeout: Duration,
    /// `max-detached-body`.
    pub max_detached_body: usize,
    /// Whether breakers guard it.
    pub guarded: bool,
}

/// What a cluster's hosts and their breakers are built from.
#[derive(Debug, Clone, PartialEq)]
pub struct HostsPlan {
    /// The upstreams, in order.
    pub upstreams: Vec<Uri>,
    /// The ejection cap.
    pub max_ejected: usize,
    /// `panic-threshold`.
    pub panic_threshold: u8,
    /// Each host breaker's id and settings.
    pub settings: Vec<(String, Settings)>,
}

impl ClusterPlan {
    /// The plan of cluster `name` of `config` (`None` when there is no such cluster).
    pub fn of(config: &GatewayConfig, name: &str) -> Option<ClusterPlan> {
        let cluster = config.clusters.get(name)?;
        let max_ejected = cluster.max_ejected();
        let hosts = (config.breakers_enabled && max_ejected > 0).then(|| HostsPlan {
            upstreams: cluster.upstreams.clone(),
            max_ejected,
            panic_threshold: cluster.panic_threshold,
            settings: cluster
                .upstreams
                .iter()
                .filter_map(|u| u.authority())
                .map(|a| {
                    let id = crate::hosts::host_id(name, a.as_str());
                    let settings = config.host_settings(name, &id);
                    (id, settings)
                })
                .collect(),
        });
        Some(ClusterPlan {
            cluster: cluster.clone(),
            breaker: config.cluster_settings(name),
            hosts,
            pool_idle_timeout: config.limits.pool_idle_timeout,
            max_detached_body: config.max_detached_body,
            guarded: config.breakers_enabled,
        })
    }
}

/// The routing table: the configuration, its clusters and the source rate limiter. Requests
/// hold it (an `Arc`) from routing to their end, so a reload never changes a request's
/// cluster, breaker or timeouts under it.
#[derive(Debug)]
pub struct Routing {
    config: Arc<GatewayConfig>,
    clusters: BTreeMap<String, Arc<Cluster>>,
    plans: BTreeMap<String, ClusterPlan>,
    rate: Option<(RateLimit, Arc<SourceRate>)>,
}

/// What building a routing table needs from the gateway: the cluster breakers' registry, the
/// hosts' clock, and what every new breaker is subscribed with.
pub struct Parts<'a> {
    /// The registry cluster breakers live in (id = cluster name).
    pub registry: &'a Registry,
    /// The clock of host breakers.
    pub clock: &'a SharedClock,
    /// Subscribes a new breaker to the gateway's transition log.
    pub listen: &'a dyn Fn(&Breaker),
}

impl Routing {
    /// A table for `config`, reusing what `old` built from equal settings (nothing when `old`
    /// is `None`). Every part built anew is named in `rebuilt` (`cluster a`, `breaker a`,
    /// `host a/127.0.0.1:7001`, `routes`, `rate limit`) when `old` had it; new clusters in
    /// `added`.
    pub fn build(
        config: GatewayConfig,
        old: Option<&Routing>,
        parts: &Parts<'_>,
        rebuilt: &mut Vec<String>,
        added: &mut Vec<String>,
    ) -> Routing {
        let mut clusters = BTreeMap::new();
        let mut plans = BTreeMap::new();
        for name in config.clusters.keys() {
            let Some(plan) = ClusterPlan::of(&config, name) else {
                continue;
            };
            let before = old.and_then(|o| Some((o.plans.get(name)?, o.clusters.get(name)?)));
            let cluster = match before {
                Some((was, cluster)) if *was == plan => Arc::clone(cluster),
                Some(_) => {
                    rebuilt.push(format!("cluster {name}"));
                    Arc::new(build_cluster(&config, name, &plan, before, parts, rebuilt))
                }
                None => {
                    if old.is_some() {
                        added.push(format!("cluster {name}"));
                    }
                    Arc::new(build_cluster(&config, name, &plan, None, parts, rebuilt))
                }
            };
            clusters.insert(name.clone(), cluster);
            plans.insert(name.clone(), plan);
        }
        let rate = match (config.rate_limit, old.and_then(|o| o.rate.as_ref())) {
            (Some(limit), Some((was, rate))) if *was == limit => Some((limit, Arc::clone(rate))),
            (Some(limit), was) => {
                if was.is_some() {
                    rebuilt.push("rate limit".to_owned());
                }
                Some((limit, Arc::new(SourceRate::new(limit))))
            }
            (None, _) => None,
        };
        if old.is_some_and(|o| o.config.routes != config.routes) {
            rebuilt.push("routes".to_owned());
        }
        Routing {
            config: Arc::new(config),
            clusters,
            plans,
            rate,
        }
    }

    /// The configuration this table was built from.
    pub fn config(&self) -> &Arc<GatewayConfig> {
        &self.config
    }

    /// The clusters by name.
    pub fn clusters(&self) -> &BTreeMap<String, Arc<Cluster>> {
        &self.clusters
    }

    /// The route for `path` and its cluster.
    pub fn route(&self, path: &str) -> Option<(&Route, &Arc<Cluster>)> {
        let route = self.config.route(path)?;
        Some((route, self.clusters.get(&route.cluster)?))
    }

    /// Each source's request rate (`rate-limit-per-source`), if one is set.
    pub fn rate(&self) -> Option<&SourceRate> {
        self.rate.as_ref().map(|(_, rate)| &**rate)
    }

    /// The same, as a handle of its own.
    pub fn rate_handle(&self) -> Option<Arc<SourceRate>> {
        self.rate.as_ref().map(|(_, rate)| Arc::clone(rate))
    }
}

/// A new stack for cluster `name`, keeping `before`'s breaker and hosts where their part of
/// the plan is equal (see the [module docs](self)).
fn build_cluster(
    config: &GatewayConfig,
    name: &str,
    plan: &ClusterPlan,
    before: Option<(&ClusterPlan, &Arc<Cluster>)>,
    parts: &Parts<'_>,
    rebuilt: &mut Vec<String>,
) -> Cluster {
    let cluster = &plan.cluster;
    let breaker = match before {
        Some((was, old)) if was.breaker == plan.breaker => old.breaker().clone(),
        _ => {
            if before.is_some() {
                rebuilt.push(format!("breaker {name}"));
            }
            // The old breaker (if any) stays with the requests still in flight on it.
            let _ = parts.registry.remove(name);
            let breaker = parts
                .registry
                .breaker(name, plan.breaker.clone())
                .unwrap_or_else(|_| build_apart(name, plan.breaker.clone(), parts.clock));
            (parts.listen)(&breaker);
            breaker
        }
    };
    let hosts = match (before, &plan.hosts) {
        (Some((was, old)), Some(_)) if was.hosts == plan.hosts && old.hosts().is_some() => {
            old.hosts().cloned()
        }
        (_, None) => None,
        (_, Some(hosts_plan)) => {
            if before.is_some() {
                rebuilt.extend(
                    hosts_plan
                        .settings
                        .iter()
                        .map(|(id, _)| format!("host {id}")),
                );
            }
            let per_host: HashMap<String, Settings> = hosts_plan.settings.iter().cloned().collect();
            let fallback = plan.breaker.clone();
            let hosts = Hosts::new(
                name,
                &cluster.upstreams,
                hosts_plan.max_ejected,
                hosts_plan.panic_threshold,
                move |id| {
                    per_host
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| fallback.clone())
                },
                parts.clock.clone(),
            );
            hosts.breakers().iter().for_each(parts.listen);
            Some(Arc::new(hosts))
        }
    };
    let client = upstream_client(
        &cluster.tls,
        cluster.protocol,
        cluster.attempt_timeout,
        config.limits.pool_idle_timeout,
    );
    Cluster::new(ClusterParts {
        name: name.to_owned(),
        upstreams: cluster.upstreams.clone(),
        breaker,
        hosts,
        attempt_timeout: cluster.attempt_timeout,
        max_detached_attempts: cluster.max_detached_attempts,
        max_detached_body: config.max_detached_body,
        client,
        classifier: cluster.classifier(),
        guarded: config.breakers_enabled,
        retry: RetrySettings {
            enabled: cluster.retry,
            budget_percent: cluster.retry_budget_percent,
            min_concurrent: cluster.min_concurrent_retries,
        },
        health_check: cluster.health_check.clone(),
    })
}

/// A breaker outside the registry, should the registry refuse one (it cannot: the id was
/// removed just before); on the gateway's clock.
fn build_apart(name: &str, settings: Settings, clock: &SharedClock) -> Breaker {
    Breaker::builder(name)
        .settings(settings)
        .clock(clock.clone())
        .build()
}
