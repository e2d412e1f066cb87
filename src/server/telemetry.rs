//! Logs, and the optional OpenTelemetry trace export (issue #35, ADR 0033).
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default: info for Countersign, warn elsewhere).
//! Traces leave the process only when an OTLP endpoint is configured with the standard
//! variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` for the
//! full URL), over HTTP as `OTEL_EXPORTER_OTLP_PROTOCOL` says (`http/protobuf`, the default, or
//! `http/json`; gRPC is refused at start-up rather than silently ignored). `OTEL_SDK_DISABLED=true`
//! turns it off again; `OTEL_SERVICE_NAME` names the service (default `countersign`);
//! `OTEL_BSP_*` tune the batch exporter. `RUST_LOG` filters only the logs: the export carries
//! Countersign's spans at info and above either way. The spans are the request (`http`), the turn, each
//! server tool, each answer and each commit; their fields name the chat, never its contents.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing_subscriber::{
    EnvFilter, Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _,
};

/// What the export carries, whatever `RUST_LOG` says of stderr: Countersign's spans (and the
/// events inside them) at info and above.
const TRACED: &str = "warn,countersign=info";

/// What starting telemetry may refuse.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0:?} is not supported: use http/protobuf (the default) or http/json"
    )]
    Protocol(String),
    #[error("the OTLP trace exporter cannot start: {0}")]
    Exporter(String),
}

/// The trace export, while it runs; [`Telemetry::shutdown`] sends what is still buffered.
#[must_use = "dropping it without shutdown loses the last spans"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the export (blocking; call it once the server has stopped).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!("the trace export did not flush: {e}");
        }
    }
}

/// Which OTLP protocol `OTEL_EXPORTER_OTLP_PROTOCOL` (or its traces-only twin) asks for.
fn protocol(env: &impl Fn(&str) -> Option<String>) -> Result<Protocol, TelemetryError> {
    let asked =
        env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match asked.as_deref().map(str::trim) {
        None | Some("") | Some("http/protobuf") => Ok(Protocol::HttpBinary),
        Some("http/json") => Ok(Protocol::HttpJson),
        Some(other) => Err(TelemetryError::Protocol(other.to_owned())),
    }
}

/// Whether the environment asks for a trace export.
fn wanted(env: &impl Fn(&str) -> Option<String>) -> bool {
    let set = |key: &str| env(key).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

fn provider(env: &impl Fn(&str) -> Option<String>) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol(env)?)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("countersign");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Starts logging, and the trace export when the environment asks for one.
pub fn init_tracing() -> Result<Telemetry, TelemetryError> {
    let env = |key: &str| std::env::var(key).ok();
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("warn,countersign=info"))
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter());
    let provider = if wanted(&env) {
        Some(provider(&env)?)
    } else {
        None
    };
    let traces = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("countersign"))
            .with_filter(EnvFilter::new(TRACED))
    });
    // A second call (tests start several servers in one process) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init();
    Ok(Telemetry { provider })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_export_is_off_unless_an_endpoint_is_set() {
        assert!(!wanted(&env(&[])));
        assert!(!wanted(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(wanted(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(wanted(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c/v1/traces"
        )])));
        assert!(!wanted(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ])));
    }

    #[test]
    fn the_protocol_is_http_and_grpc_is_refused_by_name() {
        assert!(matches!(protocol(&env(&[])), Ok(Protocol::HttpBinary)));
        assert!(matches!(
            protocol(&env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])),
            Ok(Protocol::HttpJson)
        ));
        assert!(matches!(
            protocol(&env(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ])),
            Ok(Protocol::HttpJson)
        ));
        let refused = protocol(&env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]));
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("\"grpc\" is not supported")),
            "{:?}",
            refused.err()
        );
    }
}
