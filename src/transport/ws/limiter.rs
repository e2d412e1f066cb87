//! The rate every socket's client frames are held to (`COUNTERSIGN_WS_RATE`), on `/api/live`,
//! `/live` and the ai@7 socket alike.

use std::time::Instant;

use crate::transport::edge::limits::TokenBucket;

/// Frames over its rate a socket may send before it is closed (1008).
pub(super) const STRIKES_BEFORE_CLOSE: u32 = 50;

/// Every frame a client sends (text, binary, ping, pong) takes a token: `rate` a second, bursts
/// of twice that. Frames over the rate are dropped; too many of them close the socket.
pub(super) struct FrameLimiter {
    bucket: TokenBucket,
    pub(super) strikes: u32,
}

impl FrameLimiter {
    pub(super) fn new(rate: u32, now: Instant) -> Self {
        let rate = f64::from(rate);
        FrameLimiter {
            bucket: TokenBucket::new(rate * 2.0, rate, now),
            strikes: 0,
        }
    }

    /// Whether a frame arriving at `now` may be handled.
    pub(super) fn allow(&mut self, now: Instant) -> bool {
        let allowed = self.bucket.take(now).is_ok();
        if !allowed {
            self.strikes += 1;
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_limiter_allows_bursts_then_counts_strikes() {
        let now = Instant::now();
        let mut limiter = FrameLimiter::new(5, now);
        let allowed = (0..20).filter(|_| limiter.allow(now)).count();
        assert_eq!(allowed, 10);
        assert_eq!(limiter.strikes, 10);
    }
}
