//! How much of a step's speech the person heard, for `conversation.item.truncate` after a
//! barge-in (ADR 0041). Over a WebSocket the server keeps all of an interrupted answer — its
//! audio and its transcript — unless the client says how much was played; the server makes
//! audio faster than it is played, so what it sent is more than what was heard.
//!
//! What the person heard is estimated here, on the server: the page plays the frames in the
//! order they are forwarded, starting when the first arrives, so at the barge-in it has played
//! at most the time since the first frame went out, and at most what went out. The page's own
//! playback position is not reported (ADR 0041 says why).

use crate::agent::clock::Millis;
use crate::models::providers::openai_realtime::REALTIME_RATE;

/// The speech of one step as it went to the person.
#[derive(Debug, Default)]
pub(super) struct Heard {
    /// When the first of it went (the actor's clock).
    first_at: Option<Millis>,
    /// The assistant items whose audio went, in the order they went.
    items: Vec<Item>,
}

#[derive(Debug)]
struct Item {
    id: String,
    content_index: u32,
    /// Samples (PCM16 mono at 24 kHz) forwarded.
    samples: u64,
    /// The server said the item's audio is complete (`response.output_audio.done`).
    complete: bool,
}

/// One truncation: the item's audio past `audio_end_ms` was not heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cut {
    pub item_id: String,
    pub content_index: u32,
    pub audio_end_ms: u64,
}

fn ms(samples: u64) -> u64 {
    samples * 1_000 / u64::from(REALTIME_RATE)
}

impl Heard {
    /// `bytes` of the item's audio went to the person at `now`.
    pub fn forwarded(&mut self, item_id: &str, content_index: u32, bytes: usize, now: Millis) {
        self.first_at.get_or_insert(now);
        let samples = (bytes / 2) as u64;
        match self
            .items
            .iter_mut()
            .find(|i| i.id == item_id && i.content_index == content_index)
        {
            Some(item) => item.samples += samples,
            None => self.items.push(Item {
                id: item_id.to_owned(),
                content_index,
                samples,
                complete: false,
            }),
        }
    }

    /// The server sent all of the item's audio.
    pub fn complete(&mut self, item_id: &str, content_index: u32) {
        for item in &mut self.items {
            if item.id == item_id && item.content_index == content_index {
                item.complete = true;
            }
        }
    }

    /// The person stopped hearing at `now`: a truncation for each item of which they did not
    /// hear everything the server has (none when they heard all of every complete item, or
    /// when no speech went to them).
    pub fn cut_at(&self, now: Millis) -> Vec<Cut> {
        let Some(first) = self.first_at else {
            return Vec::new();
        };
        let sent: u64 = self.items.iter().map(|i| i.samples).sum();
        let elapsed = u64::try_from(now.saturating_sub(first)).unwrap_or(0);
        let played = sent.min(elapsed.saturating_mul(u64::from(REALTIME_RATE)) / 1_000);
        let mut start = 0;
        let mut cuts = Vec::new();
        for item in &self.items {
            let heard = played.saturating_sub(start).min(item.samples);
            start += item.samples;
            if heard == item.samples && item.complete {
                continue;
            }
            cuts.push(Cut {
                item_id: item.id.clone(),
                content_index: item.content_index,
                audio_end_ms: ms(heard),
            });
        }
        cuts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` of audio in bytes.
    fn bytes(ms: usize) -> usize {
        ms * 48
    }

    fn cut(item: &str, audio_end_ms: u64) -> Cut {
        Cut {
            item_id: item.into(),
            content_index: 0,
            audio_end_ms,
        }
    }

    #[test]
    fn what_was_heard_is_bounded_by_the_time_since_the_first_frame_and_by_what_went() {
        let mut heard = Heard::default();
        assert_eq!(heard.cut_at(5_000), vec![], "nothing went: nothing to cut");
        heard.forwarded("a", 0, bytes(600), 1_000);
        heard.forwarded("a", 0, bytes(400), 1_010);
        // 250 ms after the first frame: a second of audio went, a quarter of it was played.
        assert_eq!(heard.cut_at(1_250), vec![cut("a", 250)]);
        // Long after: all that went was played, but the server may have more of it.
        assert_eq!(heard.cut_at(9_000), vec![cut("a", 1_000)]);
        heard.complete("a", 0);
        assert_eq!(
            heard.cut_at(9_000),
            vec![],
            "all of a complete item was heard"
        );
        assert_eq!(heard.cut_at(1_999), vec![cut("a", 999)]);
        // A clock that went back hears nothing, never a negative time.
        assert_eq!(heard.cut_at(0), vec![cut("a", 0)]);
    }

    #[test]
    fn items_are_played_one_after_the_other() {
        let mut heard = Heard::default();
        heard.forwarded("a", 0, bytes(300), 0);
        heard.complete("a", 0);
        heard.forwarded("b", 0, bytes(500), 10);
        // Still in the first item: the second was not heard at all.
        assert_eq!(heard.cut_at(100), vec![cut("a", 100), cut("b", 0)]);
        // In the second: the first was heard whole.
        assert_eq!(heard.cut_at(450), vec![cut("b", 150)]);
    }
}
