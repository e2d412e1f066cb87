//! The WebSocket transport's decisions, apart from the socket: what a close means, how long to
//! wait before reconnecting, whether to resume the turn once the socket is open again.

use crate::ui::controller::Link;

/// The close code the server sends when another tab or window took the chat over.
pub(super) const TAKEN_OVER: u16 = 4001;

/// The close code the server sends when whoever opened the socket may no longer be signed in
/// (removed, or signed out of that sign-in): reconnecting would only be refused.
pub(super) const SIGNED_OUT: u16 = 4401;

/// The longest wait between reconnect attempts.
const MAX_DELAY_MS: i32 = 5000;

/// What the transport does when its socket closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterClose {
    /// Closed on purpose, or the page no longer uses the socket: go offline quietly.
    Offline,
    /// Another tab follows the chat now: go offline and say so.
    TakenOver,
    /// The person may no longer be signed in: go offline, say why, and do not reconnect.
    SignedOut,
    /// Anything else is a network failure: reconnect after a backoff.
    Reconnect,
}

/// `by_us`: the page closed the socket; `in_use`: the page is still in BIDI mode.
pub(super) fn after_close(code: u16, by_us: bool, in_use: bool) -> AfterClose {
    if by_us || !in_use {
        AfterClose::Offline
    } else if code == TAKEN_OVER {
        AfterClose::TakenOver
    } else if code == SIGNED_OUT {
        AfterClose::SignedOut
    } else {
        AfterClose::Reconnect
    }
}

/// The wait before reconnect attempt `attempt` (1, 2, ...): 500 ms, doubling, at most 5 s.
pub(super) fn reconnect_delay_ms(attempt: u32) -> i32 {
    (250 * 2i32.pow(attempt.min(5))).min(MAX_DELAY_MS)
}

/// Whether reconnect attempt `attempt` (1, 2, ...) first asks the server whether the page is
/// still signed in: from the second on (one failure is a network's; two in a row may be a
/// refusal, which a WebSocket cannot tell apart).
pub(super) fn check_session_first(attempt: u32) -> bool {
    attempt >= 2
}

/// What the indicator says while a socket is being opened.
pub(super) fn opening_link(failed_attempts: u32) -> Link {
    if failed_attempts > 0 {
        Link::Reconnecting
    } else {
        Link::Connecting
    }
}

/// Whether to ask for the rest of the turn once the socket is open: only while a turn is being
/// followed, and then after a reconnect, or when nothing is queued (a queued message starts its
/// own turn, and its answer carries the frames).
pub(super) fn resume_on_open(turn_open: bool, reconnected: bool, outbox_empty: bool) -> bool {
    turn_open && (reconnected || outbox_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_is_a_network_failure_unless_it_was_meant() {
        #[rustfmt::skip]
        let cases = [
            // code, by_us, in_use → what happens
            (1000, true, true, AfterClose::Offline),
            (1006, false, false, AfterClose::Offline),
            (TAKEN_OVER, true, true, AfterClose::Offline),
            (TAKEN_OVER, false, false, AfterClose::Offline),
            (TAKEN_OVER, false, true, AfterClose::TakenOver),
            (SIGNED_OUT, false, true, AfterClose::SignedOut),
            (SIGNED_OUT, true, true, AfterClose::Offline),
            (1006, false, true, AfterClose::Reconnect),
            (1000, false, true, AfterClose::Reconnect),
            (1009, false, true, AfterClose::Reconnect),
            (4999, false, true, AfterClose::Reconnect),
        ];
        for (code, by_us, in_use, expected) in cases {
            assert_eq!(
                after_close(code, by_us, in_use),
                expected,
                "{code} {by_us} {in_use}"
            );
        }
    }

    #[test]
    fn reconnects_back_off_to_five_seconds() {
        let delays: Vec<i32> = (1..=7).map(reconnect_delay_ms).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(reconnect_delay_ms(u32::MAX), 5000);
    }

    #[test]
    fn a_second_failed_reconnect_asks_whether_the_page_is_still_signed_in() {
        let asks: Vec<bool> = (1..=4).map(check_session_first).collect();
        assert_eq!(asks, [false, true, true, true]);
    }

    #[test]
    fn the_indicator_says_reconnecting_after_a_failure() {
        assert_eq!(opening_link(0), Link::Connecting);
        assert_eq!(opening_link(1), Link::Reconnecting);
    }

    #[test]
    fn a_turn_is_resumed_when_the_socket_opens_again() {
        #[rustfmt::skip]
        let cases = [
            // turn_open, reconnected, outbox_empty → resume
            (false, true, true, false),
            (false, false, true, false),
            (true, true, true, true),
            (true, true, false, true),
            (true, false, true, true),
            (true, false, false, false),
        ];
        for (turn_open, reconnected, outbox_empty, expected) in cases {
            assert_eq!(
                resume_on_open(turn_open, reconnected, outbox_empty),
                expected,
                "{turn_open} {reconnected} {outbox_empty}"
            );
        }
    }
}
