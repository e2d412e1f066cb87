//! The demo model's voice, offline (ADR 0036): it speaks with Debian's `espeak-ng` and listens
//! with Debian's `pocketsphinx_continuous`, both run as child processes (no C library is linked,
//! so a machine without them still builds, and the demo then answers in text and says why).
//! Hands-free, it finds where speech starts and ends itself ([`detect`]).

pub mod detect;
pub mod listen;
pub mod programs;
mod session;
pub mod speak;

pub use session::DemoVoice;

/// The espeak-ng voice the demo speaks with, and every committed clip was made with: US English,
/// which the recogniser's en-us acoustic model hears best (measured in ADR 0036).
pub const ESPEAK_VOICE: &[&str] = &["-v", "en-us"];

#[cfg(test)]
mod tests {
    use crate::models::demo::nlu::{Intent, understand};

    /// The committed clips (tests/fixtures/voice/README.md) say what the demo model acts on.
    #[test]
    fn the_payment_clip_s_words_are_a_payment_the_demo_asks_to_countersign() {
        let plan = understand("pay forty euros to alice");
        assert_eq!(
            plan.steps,
            vec![vec![Intent::Payment {
                amount: 40.0,
                currency: "EUR".into(),
                recipient: "alice".into(),
                description: String::new(),
            }]]
        );
        // "yes, approve it" and "no, deny it" ask for nothing: spoken, they are only words.
        for words in ["yes, approve it", "no, deny it"] {
            assert!(
                understand(words)
                    .steps
                    .iter()
                    .flatten()
                    .all(|i| i.tool_call().is_none()),
                "{words}"
            );
        }
    }
}
