//! The settings a replay runs: a block of cutout keys each, read by cutout itself, from the
//! shipped defaults, a configuration file or a sweep.

use cutout::Settings;
use cutout_keys::{SLOW_CALL_KEYS, SLOW_CALL_RULE_KEYS};
use toml::{Table, Value};

use crate::record::Shape;
use crate::sweep::Spec;

/// A setting to replay: its name, its settings, and the one TOML table that reads as them.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The name shown in the report.
    pub name: String,
    /// The settings.
    pub settings: Settings,
    /// The keys that give these settings over cutout's built-in defaults.
    pub block: Table,
}

impl Candidate {
    /// A candidate from a table of cutout keys (`[configs.<name>]`'s body), checked by
    /// cutout.
    pub fn from_block(name: &str, block: Table) -> Result<Candidate, String> {
        let settings = settings_of(name, &block)?;
        Ok(Candidate {
            name: name.to_owned(),
            settings,
            block,
        })
    }

    /// The candidate a record of `shape` is replayed with when none is given: cutout's
    /// defaults, and for the gateway's access log the settings a gateway cluster gets with
    /// no `[breakers]` section (no relative slow-call rule; cutout-gateway's README, "Shipped
    /// breaker defaults").
    pub fn shipped(shape: Shape) -> Candidate {
        let (name, block) = match shape {
            Shape::Access => {
                let mut block = Table::new();
                block.insert("slow-calls".into(), Value::String("off".into()));
                ("gateway-defaults", block)
            }
            Shape::Csv | Shape::Jsonl => ("defaults", Table::new()),
        };
        Candidate::from_block(name, block).expect("the shipped settings are valid")
    }

    /// The candidates of a configuration file: a cutout document, or a file with one under
    /// `[breakers]` (a lab scenario, or a gateway config, read over the gateway's base with
    /// one candidate a cluster). Each instance, else each config, else its defaults; each
    /// written as one block (its layers merged key by key).
    pub fn from_document(text: &str) -> Result<Vec<Candidate>, String> {
        let mut doc: Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let gateway = ["clusters", "routes", "gateway"]
            .iter()
            .any(|k| doc.contains_key(*k));
        // A gateway's clusters, each with its number of upstreams.
        let clusters: Vec<(String, usize)> = match doc.get("clusters") {
            Some(Value::Table(clusters)) => clusters
                .iter()
                .map(|(name, c)| {
                    let upstreams = c
                        .get("upstreams")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    (name.clone(), upstreams)
                })
                .collect(),
            _ => Vec::new(),
        };
        if let Some(Value::Table(breakers)) = doc.remove("breakers") {
            doc = breakers;
        } else if gateway {
            doc = Table::new();
        }
        // A gateway's [breakers] is read over its base: the relative slow-call rule off in
        // [defaults] unless that section sets one of its keys (cutout-gateway's README,
        // "Shipped breaker defaults").
        if gateway
            && let Value::Table(defaults) = doc
                .entry("defaults")
                .or_insert_with(|| Value::Table(Table::new()))
            && !SLOW_CALL_KEYS.iter().any(|key| defaults.contains_key(*key))
        {
            defaults.insert("slow-calls".into(), Value::String("off".into()));
        }
        let section = |doc: &Table, name: &str| match doc.get(name) {
            Some(Value::Table(t)) => Ok(t.clone()),
            None => Ok(Table::new()),
            Some(_) => Err(format!("[{name}] is not a table")),
        };
        let defaults = section(&doc, "defaults")?;
        let configs = section(&doc, "configs")?;
        let instances = section(&doc, "instances")?;
        let layered = |layers: &[&Table]| {
            let mut block = Table::new();
            for layer in layers {
                merge(&mut block, layer);
            }
            block
        };
        let table = |value: &Value, what: &str| match value {
            Value::Table(t) => Ok(t.clone()),
            _ => Err(format!("{what} is not a table")),
        };
        // An instance's layers: the defaults, its base config, itself.
        let layers_of = |name: &str, instance: &Value| -> Result<Vec<Table>, String> {
            let instance = table(instance, &format!("[instances.{name}]"))?;
            let base = match instance.get("base-config") {
                Some(Value::String(base)) => Some(table(
                    configs
                        .get(base)
                        .ok_or_else(|| format!("[instances.{name}]: no config {base:?}"))?,
                    &format!("[configs.{base}]"),
                )?),
                Some(_) => return Err(format!("[instances.{name}]: base-config is not a name")),
                None => None,
            };
            let mut layers = vec![defaults.clone()];
            layers.extend(base);
            layers.push(instance);
            Ok(layers)
        };
        let mut candidates = Vec::new();
        // Of a gateway config: one a cluster, as the gateway resolves its breaker (its
        // instance, else the defaults; a cluster of one upstream has its break capped as a
        // host's, `cutout_gateway::GatewayConfig::cluster_settings`).
        let mut capped = Vec::new();
        for (name, upstreams) in &clusters {
            let layers = match instances.get(name) {
                Some(instance) => layers_of(name, instance)?,
                None => vec![defaults.clone()],
            };
            let refs: Vec<&Table> = layers.iter().collect();
            let mut candidate = Candidate::from_block(name, layered(&refs))?;
            let sets_cap = layers.iter().any(|l| l.contains_key("max-break-duration"));
            let cap = HOST_MAX_BREAK.max(candidate.settings.break_duration());
            if *upstreams == 1 && !sets_cap && cap < candidate.settings.max_break_duration() {
                let mut block = candidate.block.clone();
                block.insert(
                    "max-break-duration".into(),
                    Value::String(humantime::format_duration(cap).to_string()),
                );
                candidate = Candidate::from_block(name, block)?;
                capped.push(name.clone());
            }
            candidates.push(candidate);
        }
        if clusters.is_empty() {
            for (name, instance) in &instances {
                let layers = layers_of(name, instance)?;
                let refs: Vec<&Table> = layers.iter().collect();
                candidates.push(Candidate::from_block(name, layered(&refs))?);
            }
        }
        if candidates.is_empty() {
            for (name, config) in &configs {
                let config = table(config, &format!("[configs.{name}]"))?;
                candidates.push(Candidate::from_block(name, layered(&[&defaults, &config]))?);
            }
        }
        if candidates.is_empty() {
            candidates.push(Candidate::from_block("defaults", defaults)?);
        }
        // What cutout itself reads from the document must be what each block reads as.
        let config =
            cutout::config::Config::from_toml(&toml::to_string(&doc).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        for candidate in candidates.iter().filter(|c| !capped.contains(&c.name)) {
            let theirs = config
                .instance(&candidate.name)
                .or_else(|| config.config(&candidate.name))
                .unwrap_or(config.defaults());
            if *theirs != candidate.settings {
                return Err(format!(
                    "{}: its layers do not merge into one block of the same settings; give it \
                     as one [instances.{}] without base-config",
                    candidate.name, candidate.name
                ));
            }
        }
        Ok(candidates)
    }

    /// `spec`'s variants of this candidate: one per value, named `<key>=<value>`.
    pub fn swept(&self, spec: &Spec) -> Result<Vec<Candidate>, String> {
        spec.values
            .iter()
            .map(|v| {
                let mut block = self.block.clone();
                let mut layer = Table::new();
                layer.insert(spec.key.clone(), crate::sweep::value(v));
                merge(&mut block, &layer);
                Candidate::from_block(&format!("{}={v}", spec.key), block)
            })
            .collect()
    }

    /// The block as a `[configs.<name>]` section.
    pub fn section(&self, name: &str) -> String {
        let body = toml::to_string(&self.block).unwrap_or_default();
        if body.trim().is_empty() {
            return format!("[configs.{name}]\n# cutout's defaults: no key to set\n");
        }
        format!("[configs.{name}]\n{body}")
    }
}

/// A gateway's cap on the break of a cluster of one upstream whose sections do not set
/// `max-break-duration` (`cutout_gateway::config::DEFAULT_HOST_MAX_BREAK`, checked equal by a
/// test), unless its first break is longer.
pub const HOST_MAX_BREAK: std::time::Duration = std::time::Duration::from_secs(15);

/// `layer` merged over `block` as cutout layers its sections: each of its keys replaces the
/// block's, and a key of the relative slow-call rule switches the rule back on over an
/// earlier `slow-calls = "off"`, which one block says by leaving the "off" out (cutout
/// refuses both in one section).
fn merge(block: &mut Table, layer: &Table) {
    if !layer.contains_key("slow-calls")
        && SLOW_CALL_RULE_KEYS.iter().any(|k| layer.contains_key(*k))
    {
        block.remove("slow-calls");
    }
    for (key, value) in layer {
        if key != "base-config" {
            block.insert(key.clone(), value.clone());
        }
    }
}

/// The settings a block of cutout keys reads as, as `[configs.<name>]` of a document (an
/// error names that section, as cutout does).
fn settings_of(name: &str, block: &Table) -> Result<Settings, String> {
    let mut configs = Table::new();
    configs.insert(name.to_owned(), Value::Table(block.clone()));
    let mut doc = Table::new();
    doc.insert("configs".into(), Value::Table(configs));
    let text = toml::to_string(&doc).map_err(|e| e.to_string())?;
    let config = cutout::config::Config::from_toml(&text).map_err(|e| e.to_string())?;
    Ok(config.config(name).cloned().unwrap_or_default())
}
