//! The process-wide Prometheus recorder (installed once) whose handle renders `/metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the global `metrics` recorder (once per process; later
/// calls return the same handle) and returns the handle that renders the exposition. `None`
/// when another global recorder was installed first.
///
/// Call it before breakers are built: cutout registers its counters when a breaker is created.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .clone()
}
