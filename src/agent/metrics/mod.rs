//! What an operator scrapes (`GET /metrics`, Prometheus' text format 0.0.4): the one home of
//! every metric the server keeps, encoded by the Prometheus project's own client
//! (`prometheus-client`).
//!
//! Two kinds of value (ADR 0033):
//! - **kept here**, as atomics moved where the thing happens: commits and their latency (the
//!   store's boundary, [`Metered`]), store errors by operation, decisions and their latency (the
//!   inbox, when an approval committed here leaves it), turns started, SSE streams open. A hot path pays one or two
//!   relaxed atomic additions and never takes a lock.
//! - **read at scrape time** from where the state already lives ([`Gauges`]): approvals waiting
//!   (the inbox), turns running (the live sessions), live instances (the instances' heartbeats on
//!   Postgres), WebSockets open (the edge's tracker). No second copy of any state.

mod store;

use std::{
    borrow::Cow,
    sync::{
        Arc,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
    time::Duration,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet},
    metrics::MetricType,
    registry::Registry,
};

pub use store::Metered;

use super::{clock::Millis, gate::ApprovalResolution};

/// The content type of a scrape (Prometheus' text format, version 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Upper bounds (seconds) of the commit latency buckets: 0.25 ms (SQLite without fsync) to 2.5 s
/// (a database in trouble).
const COMMIT_BUCKETS: &[f64] = &[
    0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Upper bounds (seconds) of the decision latency buckets: a person answers in seconds to
/// hours; an approval's deadline is at most a day.
const DECISION_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1_800.0, 3_600.0, 14_400.0, 86_400.0,
];

/// How an approval ended: the outcomes of the decision histogram.
const DECISIONS: [&str; 9] = [
    "approved",
    "edited",
    "denied",
    "denied_by_rule",
    "expired",
    "dismissed",
    "superseded",
    "withdrawn",
    "automatic",
];

/// `resolution`'s outcome (one of [`DECISIONS`]) and when it came.
fn outcome_of(resolution: &ApprovalResolution) -> (&'static str, Millis) {
    match resolution {
        ApprovalResolution::Approved { at_ms, edited } => {
            (if *edited { "edited" } else { "approved" }, *at_ms)
        }
        ApprovalResolution::Denied { at_ms, .. } => ("denied", *at_ms),
        ApprovalResolution::DeniedByRule { at_ms, .. } => ("denied_by_rule", *at_ms),
        ApprovalResolution::Expired { at_ms } => ("expired", *at_ms),
        ApprovalResolution::Dismissed { at_ms } => ("dismissed", *at_ms),
        ApprovalResolution::Superseded { at_ms } => ("superseded", *at_ms),
        ApprovalResolution::Withdrawn { at_ms } => ("withdrawn", *at_ms),
        ApprovalResolution::Automatic { at_ms, .. } => ("automatic", *at_ms),
    }
}

/// What a store call was, for its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    /// Reading a session.
    Load,
    /// A commit (a record, its audit events, a paused log).
    Commit,
    /// Any other read (lists, the audit log, attachments, the chain).
    Read,
    /// Any other write (attachments, checkpoints, logs of running turns, news).
    Write,
    /// Whether the database answers.
    Ping,
}

impl StoreOp {
    const ALL: [StoreOp; 5] = [
        StoreOp::Load,
        StoreOp::Commit,
        StoreOp::Read,
        StoreOp::Write,
        StoreOp::Ping,
    ];

    fn as_str(self) -> &'static str {
        match self {
            StoreOp::Load => "load",
            StoreOp::Commit => "commit",
            StoreOp::Read => "read",
            StoreOp::Write => "write",
            StoreOp::Ping => "ping",
        }
    }
}

/// The metrics one server keeps (one per runtime: tests run several servers in one process).
#[derive(Debug)]
pub struct Metrics {
    /// The store's kind (`memory`, `sqlite`, `postgres`): the `store` label.
    store: &'static str,
    commits: AtomicU64,
    commit_seconds: Histogram,
    store_errors: [AtomicU64; StoreOp::ALL.len()],
    decisions: [Histogram; DECISIONS.len()],
    turns_started: AtomicU64,
    sse_streams: Arc<AtomicI64>,
}

/// The values read at scrape time from where they live.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Approvals waiting, by tool and by the rule that asks (`None`: the tool's own setting).
    pub waiting: Vec<((String, Option<String>), u64)>,
    /// Turns a task of this instance drives now.
    pub turns_running: u64,
    /// Instances with a fresh heartbeat on the shared database (1 on a database of its own).
    pub live_instances: Option<u64>,
    /// WebSockets open on this instance.
    pub websockets: u64,
}

impl Metrics {
    pub fn new(store: &'static str) -> Metrics {
        Metrics {
            store,
            commits: AtomicU64::new(0),
            commit_seconds: Histogram::new(COMMIT_BUCKETS),
            store_errors: Default::default(),
            decisions: DECISIONS.map(|_| Histogram::new(DECISION_BUCKETS)),
            turns_started: AtomicU64::new(0),
            sse_streams: Arc::default(),
        }
    }

    /// A commit that took `took` (succeeded or not: the latency a turn waited).
    pub fn committed(&self, took: Duration) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    /// A store call of kind `op` failed.
    pub fn store_error(&self, op: StoreOp) {
        let at = StoreOp::ALL.iter().position(|o| *o == op).unwrap_or(0);
        self.store_errors[at].fetch_add(1, Ordering::Relaxed);
    }

    /// An approval asked at `asked_ms` ended as `resolution` (the inbox saw it go).
    pub fn decided(&self, resolution: &ApprovalResolution, asked_ms: Millis) {
        let (outcome, at_ms) = outcome_of(resolution);
        if let Some(at) = DECISIONS.iter().position(|o| *o == outcome) {
            self.decisions[at].observe((at_ms - asked_ms).max(0) as f64 / 1_000.0);
        }
    }

    /// A turn started (new, or resumed after a restart).
    pub fn turn_started(&self) {
        self.turns_started.fetch_add(1, Ordering::Relaxed);
    }

    /// An SSE stream opened; it counts as open until the guard is dropped.
    pub fn sse_stream(&self) -> OpenStream {
        self.sse_streams.fetch_add(1, Ordering::Relaxed);
        OpenStream(self.sse_streams.clone())
    }

    /// The scrape: everything kept here and `gauges`, in Prometheus' text format.
    pub fn render(self: &Arc<Self>, gauges: Gauges) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape {
            metrics: self.clone(),
            gauges,
        }));
        let mut text = String::with_capacity(8 * 1024);
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
            // Writing to a String does not fail; say so if it ever does.
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        text
    }
}

/// An SSE stream counted as open while this lives.
#[derive(Debug)]
pub struct OpenStream(Arc<AtomicI64>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A histogram of fixed buckets, observed with atomic additions only (prometheus-client's own
/// takes a mutex per observation). The sum is kept in microseconds.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative), the last one past every bound (`+Inf`).
    counts: Box<[AtomicU64]>,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, seconds: f64) {
        let at = self.bounds.partition_point(|bound| *bound < seconds);
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// `(sum, count, buckets)` as the encoder takes them.
    fn read(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        (sum, count, buckets)
    }
}

/// One scrape's view: what is kept, and what was read for it.
#[derive(Debug)]
struct Scrape {
    metrics: Arc<Metrics>,
    gauges: Gauges,
}

type Label<'a> = (&'static str, Cow<'a, str>);

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.encode_approvals(&mut encoder)?;
        self.encode_turns(&mut encoder)?;
        self.encode_store(&mut encoder)?;
        self.encode_connections(&mut encoder)
    }
}

type Encoded = Result<(), std::fmt::Error>;

impl Scrape {
    /// Approvals waiting, by tool and rule, and how long decisions took, by outcome.
    fn encode_approvals(&self, encoder: &mut DescriptorEncoder) -> Encoded {
        let mut family = encoder.encode_descriptor(
            "countersign_approvals_waiting",
            "Approvals waiting for people, by tool and by the rule that asks (rule=\"\": the \
             tool's own setting)",
            None,
            MetricType::Gauge,
        )?;
        for ((tool, rule), n) in &self.gauges.waiting {
            let labels: [Label; 2] = [
                ("tool", Cow::Borrowed(tool)),
                ("rule", Cow::Borrowed(rule.as_deref().unwrap_or(""))),
            ];
            family.encode_family(&labels)?.encode_gauge(&(*n as i64))?;
        }

        let mut family = encoder.encode_descriptor(
            "countersign_decision_seconds",
            "Time from an approval's ask to its end, by outcome",
            None,
            MetricType::Histogram,
        )?;
        for (kind, histogram) in DECISIONS.iter().zip(&self.metrics.decisions) {
            let (sum, count, buckets) = histogram.read();
            let labels = [("outcome", Cow::Borrowed(*kind))];
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }

    /// Turns running now and started.
    fn encode_turns(&self, encoder: &mut DescriptorEncoder) -> Encoded {
        gauge(
            encoder,
            "countersign_turns_running",
            "Turns a task of this instance drives now",
            self.gauges.turns_running as i64,
        )?;
        counter(
            encoder,
            "countersign_turns_started",
            "Turns started (new, or resumed after a restart)",
            self.metrics.turns_started.load(Ordering::Relaxed),
        )
    }

    /// Commits, their latency, and the store's failed calls by operation.
    fn encode_store(&self, encoder: &mut DescriptorEncoder) -> Encoded {
        let m = &self.metrics;
        let store = [("store", Cow::Borrowed(m.store))];
        let mut family = encoder.encode_descriptor(
            "countersign_commits",
            "Commits of a session record (with its audit events and pending views)",
            None,
            MetricType::Counter,
        )?;
        family
            .encode_family(&store)?
            .encode_counter::<NoLabelSet, _, u64>(&m.commits.load(Ordering::Relaxed), None)?;
        let mut family = encoder.encode_descriptor(
            "countersign_commit_seconds",
            "How long a commit took",
            None,
            MetricType::Histogram,
        )?;
        let (sum, count, buckets) = m.commit_seconds.read();
        family
            .encode_family(&store)?
            .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;

        let mut family = encoder.encode_descriptor(
            "countersign_store_errors",
            "Store calls that failed, by operation",
            None,
            MetricType::Counter,
        )?;
        for (op, n) in StoreOp::ALL.iter().zip(&m.store_errors) {
            let labels: [Label; 2] = [
                ("store", Cow::Borrowed(m.store)),
                ("operation", Cow::Borrowed(op.as_str())),
            ];
            family
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&n.load(Ordering::Relaxed), None)?;
        }
        Ok(())
    }

    /// Live instances (on a shared database), WebSockets and SSE streams open here.
    fn encode_connections(&self, encoder: &mut DescriptorEncoder) -> Encoded {
        if let Some(live) = self.gauges.live_instances {
            gauge(
                encoder,
                "countersign_instances_live",
                "Instances with a fresh heartbeat on the database (1: a database of its own)",
                live as i64,
            )?;
        }
        gauge(
            encoder,
            "countersign_websockets_open",
            "WebSockets open on this instance",
            self.gauges.websockets as i64,
        )?;
        gauge(
            encoder,
            "countersign_sse_streams_open",
            "SSE streams open on this instance",
            self.metrics.sse_streams.load(Ordering::Relaxed),
        )
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let metric = prometheus_client::metrics::gauge::ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = prometheus_client::metrics::counter::ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_prometheus_text_with_every_family() {
        let metrics = Arc::new(Metrics::new("sqlite"));
        metrics.committed(Duration::from_micros(1_500));
        let approved = ApprovalResolution::Approved {
            at_ms: 12_500,
            edited: false,
        };
        metrics.decided(&approved, 10_000);
        metrics.store_error(StoreOp::Ping);
        let open = metrics.sse_stream();
        let text = metrics.render(Gauges {
            waiting: vec![(
                ("process_payment".into(), Some("big \"payments\"".into())),
                2,
            )],
            turns_running: 1,
            live_instances: Some(1),
            websockets: 3,
        });
        for line in [
            "# TYPE countersign_approvals_waiting gauge",
            "countersign_approvals_waiting{tool=\"process_payment\",rule=\"big \\\"payments\\\"\"} 2",
            "countersign_decision_seconds_bucket{outcome=\"approved\",le=\"5\"} 1",
            "countersign_decision_seconds_count{outcome=\"approved\"} 1",
            "countersign_decision_seconds_count{outcome=\"denied\"} 0",
            "countersign_commits_total{store=\"sqlite\"} 1",
            "countersign_commit_seconds_bucket{store=\"sqlite\",le=\"0.001\"} 0",
            "countersign_commit_seconds_bucket{store=\"sqlite\",le=\"0.002\"} 1",
            "countersign_commit_seconds_sum{store=\"sqlite\"} 0.0015",
            "countersign_store_errors_total{store=\"sqlite\",operation=\"ping\"} 1",
            "countersign_turns_running 1",
            "countersign_instances_live 1",
            "countersign_websockets_open 3",
            "countersign_sse_streams_open 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n---\n{text}");
        }
        drop(open);
        let text = metrics.render(Gauges::default());
        assert!(text.contains("countersign_sse_streams_open 0"), "{text}");
        assert!(!text.contains("countersign_approvals_waiting{"), "{text}");
    }

    #[test]
    fn a_value_past_every_bound_lands_in_inf() {
        let histogram = Histogram::new(&[1.0, 2.0]);
        histogram.observe(0.5);
        histogram.observe(2.0);
        histogram.observe(9.0);
        let (sum, count, buckets) = histogram.read();
        assert_eq!(count, 3);
        assert!((sum - 11.5).abs() < 1e-9);
        assert_eq!(buckets, vec![(1.0, 1), (2.0, 1), (f64::INFINITY, 1)]);
    }
}
