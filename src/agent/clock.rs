//! Injected time and identifiers, so that every test is deterministic.
//!
//! Deadlines are absolute wall-clock milliseconds (they survive a restart once sessions are
//! durable); [`TokioClock`] follows tokio's clock, so `tokio::time::pause()` + `advance()` move
//! both the deadlines and the sleeps that wait for them.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// Where "now" comes from.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that starts at `base_ms` and advances with tokio's (pausable) clock.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base_ms: Millis,
    start: tokio::time::Instant,
}

impl TokioClock {
    pub fn starting_at(base_ms: Millis) -> Self {
        TokioClock {
            base_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> Millis {
        self.base_ms + self.start.elapsed().as_millis() as Millis
    }
}

/// How long from `now` until `deadline` (zero when it has passed).
pub fn until(now: Millis, deadline: Millis) -> Duration {
    Duration::from_millis(deadline.saturating_sub(now).max(0) as u64)
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T10:00:00.000Z`.
pub fn rfc3339(ms: Millis) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

/// What an identifier names; each kind has its own prefix so ids read well in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    Message,
    Text,
    Reasoning,
    ToolCall,
    Approval,
    Transaction,
    Turn,
    /// The chat of one connection to the seed's `/live` (each connection has its own).
    ConnectionChat,
    /// A question a running tool asks the person.
    Question,
    /// A grant the person made of an approval.
    Grant,
}

impl IdKind {
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Message => "msg",
            IdKind::Text => "txt",
            IdKind::Reasoning => "rsn",
            IdKind::ToolCall => "call",
            IdKind::Approval => "apv",
            IdKind::Transaction => "txn",
            IdKind::Turn => "turn",
            IdKind::ConnectionChat => "live",
            IdKind::Question => "q",
            IdKind::Grant => "grant",
        }
    }
}

/// Where identifiers come from.
pub trait IdGen: Send + Sync + 'static {
    fn next_id(&self, kind: IdKind) -> String;
}

/// Unguessable ids (UUID v4). Approval ids must not be predictable: knowing one is not proof of
/// anything (the server checks the session too), but guessable ids invite probing.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdGen for RandomIds {
    fn next_id(&self, kind: IdKind) -> String {
        format!("{}_{}", kind.prefix(), uuid::Uuid::new_v4().simple())
    }
}

/// `msg-1`, `msg-2`, `call-1` … one counter per kind: readable, deterministic test ids.
#[derive(Debug, Default)]
pub struct SequentialIds {
    counters: [AtomicU64; 10],
}

impl IdGen for SequentialIds {
    fn next_id(&self, kind: IdKind) -> String {
        let slot = match kind {
            IdKind::Message => 0,
            IdKind::Text => 1,
            IdKind::Reasoning => 2,
            IdKind::ToolCall => 3,
            IdKind::Approval => 4,
            IdKind::Transaction => 5,
            IdKind::Turn => 6,
            IdKind::ConnectionChat => 7,
            IdKind::Question => 8,
            IdKind::Grant => 9,
        };
        let n = self.counters[slot].fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{n}", kind.prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_per_kind() {
        let ids = SequentialIds::default();
        assert_eq!(ids.next_id(IdKind::Message), "msg-1");
        assert_eq!(ids.next_id(IdKind::ToolCall), "call-1");
        assert_eq!(ids.next_id(IdKind::Message), "msg-2");
    }

    #[test]
    fn random_ids_are_prefixed_and_distinct() {
        let a = RandomIds.next_id(IdKind::Approval);
        let b = RandomIds.next_id(IdKind::Approval);
        assert!(a.starts_with("apv_") && a.len() == 36, "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn rfc3339_formats_utc_millis() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let clock = TokioClock::starting_at(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(clock.now_ms(), 6_000);
        assert_eq!(until(clock.now_ms(), 7_500), Duration::from_millis(1_500));
        assert_eq!(until(clock.now_ms(), 10), Duration::ZERO);
    }
}
