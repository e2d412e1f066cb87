//! Token buckets: how often a client, a chat or a socket may do something that costs work. Time
//! is passed in (`now`), so every rule is tested without waiting.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::response::{IntoResponse, Response};

use crate::transport::ApiError;

/// A token bucket: `capacity` tokens, refilled at `per_sec`.
#[derive(Debug, Clone, Copy)]
pub struct TokenBucket {
    capacity: f64,
    per_sec: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens, refilled at `per_sec` tokens a second.
    pub fn new(capacity: f64, per_sec: f64, now: Instant) -> Self {
        TokenBucket {
            capacity,
            per_sec,
            tokens: capacity,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.capacity);
        self.last = now;
    }

    /// Takes one token; `Err(wait)` (until one is back) when there is none.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.wait())
        }
    }

    /// Takes `n` tokens at once (a byte budget); `Err(wait)` and nothing taken when there are
    /// not that many.
    pub fn take_n(&mut self, n: f64, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= n {
            self.tokens -= n;
            Ok(())
        } else {
            Err(self.wait_for(n))
        }
    }

    /// Whether a token is there, without taking it; `Err(wait)` when there is none.
    pub fn check(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            Err(self.wait())
        }
    }

    fn wait(&self) -> Duration {
        if self.per_sec <= 0.0 {
            return Duration::from_secs(3600);
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec)
    }

    /// Until `n` tokens are back (`n` more than the bucket holds never are).
    fn wait_for(&self, n: f64) -> Duration {
        if self.per_sec <= 0.0 || n > self.capacity {
            return Duration::from_secs(3600);
        }
        Duration::from_secs_f64(((n - self.tokens) / self.per_sec).max(0.0))
    }

    /// Whether the bucket is full again at `now` (then it is no different from a new one).
    fn is_full(&self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens + elapsed * self.per_sec >= self.capacity
    }
}

/// Token buckets by key (client address, chat id): `per_minute` a minute, a minute's worth at
/// once; `0` means unlimited.
#[derive(Debug)]
pub struct RateLimits {
    per_minute: u32,
    buckets: Mutex<HashMap<String, TokenBucket>>,
}

/// Keys kept before the ones whose bucket refilled are forgotten.
const KEYS_KEPT: usize = 10_000;

impl RateLimits {
    pub fn new(per_minute: u32) -> Self {
        RateLimits {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn bucket<T>(
        &self,
        key: &str,
        now: Instant,
        f: impl FnOnce(&mut TokenBucket) -> T,
    ) -> Option<T> {
        if self.per_minute == 0 {
            return None;
        }
        let capacity = f64::from(self.per_minute);
        let mut buckets = crate::agent::lock(&self.buckets);
        if buckets.len() > KEYS_KEPT {
            buckets.retain(|_, b| !b.is_full(now));
        }
        let bucket = buckets
            .entry(key.to_owned())
            .or_insert_with(|| TokenBucket::new(capacity, capacity / 60.0, now));
        Some(f(bucket))
    }

    /// Takes one token for `key`; `Err(wait)` when there is none.
    pub fn take(&self, key: &str, now: Instant) -> Result<(), Duration> {
        self.bucket(key, now, |b| b.take(now)).unwrap_or(Ok(()))
    }

    /// Whether `key` has a token left, without taking one.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        self.bucket(key, now, |b| b.check(now)).unwrap_or(Ok(()))
    }
}

/// The key a client address is counted under: an IPv4 address, or an IPv6 address's /64 (one
/// subscriber's allocation, which they can fill with as many addresses as they like).
pub fn address_key(address: Option<SocketAddr>) -> String {
    match address.map(|a| a.ip()) {
        None => "local".to_owned(),
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// A 429 with `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub struct TooMany {
    pub wait: Duration,
    pub what: &'static str,
}

impl IntoResponse for TooMany {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_budget_is_taken_whole_or_not_at_all() {
        let now = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 50.0, now);
        assert!(bucket.take_n(60.0, now).is_ok());
        // 40 left: 60 more are 0.4 s away, and nothing was taken by asking.
        assert_eq!(bucket.take_n(60.0, now), Err(Duration::from_millis(400)));
        assert!(bucket.take_n(40.0, now).is_ok());
        assert_eq!(bucket.take_n(101.0, now), Err(Duration::from_secs(3600)));
    }

    #[test]
    fn buckets_allow_a_minute_at_once_then_refill() {
        let limits = RateLimits::new(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limits.take("a", t0).is_ok());
        }
        let wait = limits.take("a", t0).unwrap_err();
        assert!(
            wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(limits.take("b", t0).is_ok(), "keys are independent");
        assert!(limits.check("a", t0).is_err(), "checking takes nothing");
        assert!(limits.take("a", t0 + Duration::from_secs(20)).is_ok());
        assert!(RateLimits::new(0).take("x", t0).is_ok());
    }

    #[test]
    fn a_socket_bucket_allows_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 5.0, t0);
        let allowed = (0..20).filter(|_| bucket.take(t0).is_ok()).count();
        assert_eq!(allowed, 10);
        assert!(bucket.take(t0 + Duration::from_millis(200)).is_ok());
        assert!(bucket.take(t0 + Duration::from_millis(200)).is_err());
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a: SocketAddr = "[2001:db8:1:2:aaaa::1]:5000".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:bbbb::9]:6000".parse().unwrap();
        let c: SocketAddr = "[2001:db8:1:3::1]:5000".parse().unwrap();
        assert_eq!(address_key(Some(a)), address_key(Some(b)));
        assert_ne!(address_key(Some(a)), address_key(Some(c)));
        let mapped: SocketAddr = "[::ffff:192.0.2.7]:1".parse().unwrap();
        assert_eq!(address_key(Some(mapped)), "192.0.2.7");
        assert_eq!(
            address_key(Some("127.0.0.2:9".parse().unwrap())),
            "127.0.0.2"
        );
        assert_eq!(address_key(None), "local");
    }
}
