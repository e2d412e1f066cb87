//! Hands-free listening: where speech starts and ends in the microphone's stream (PCM16LE mono,
//! 16 kHz), so the demo hears each utterance while the microphone stays open (ADR 0036).
//!
//! Each 16 ms frame is scored by earshot's voice activity detector (pure Rust, its small network
//! compiled in: nothing is downloaded); the score is turned into utterances with hysteresis and
//! a hangover: speech starts after [`START_FRAMES`] frames in a row score at least [`ON`], goes
//! on while frames score at least [`OFF`], and ends after [`HANGOVER_FRAMES`] frames below it.
//! An utterance keeps [`PREROLL_FRAMES`] of the audio before its start (the detector needs a few
//! frames to be sure, the recogniser needs the first sound), and is at most
//! [`MAX_UTTERANCE_BYTES`] long, as push-to-talk's: longer speech is heard as it stands at the
//! limit and the rest of it, up to the next pause, is not heard.

use std::collections::VecDeque;

use super::listen::MAX_UTTERANCE_BYTES;
use crate::models::pcm;

/// Samples in a frame: 16 ms at 16 kHz (what earshot scores).
const FRAME: usize = 256;
/// A frame scoring at least this (earshot's 0..1) may start speech. White noise scores at most
/// ~0.6 in a frame now and then (measured, ADR 0036), and never three frames in a row.
pub const ON: f32 = 0.6;
/// Speech goes on while frames score at least this.
pub const OFF: f32 = 0.4;
/// Frames in a row at [`ON`] that start an utterance: 48 ms.
pub const START_FRAMES: usize = 3;
/// Frames in a row below [`OFF`] that end it: 480 ms (the pause between words of the committed
/// clips is at most ~110 ms).
pub const HANGOVER_FRAMES: usize = 30;
/// Frames of audio kept from before an utterance's start: 320 ms.
pub const PREROLL_FRAMES: usize = 20;
/// The longest utterance in samples.
const MAX_SAMPLES: usize = MAX_UTTERANCE_BYTES / 2;

/// What the detector found in a piece of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// Speech started (the agent, if speaking, is spoken over: barge-in).
    Started,
    /// An utterance ended: its audio (PCM16LE mono, 16 kHz), from a little before its start to
    /// the end of its hangover.
    Ended(Vec<u8>),
}

/// Finds the utterances of one open microphone.
pub struct Detector {
    vad: Box<earshot::Detector>,
    /// Samples not yet a whole frame.
    partial: Vec<i16>,
    state: State,
}

#[derive(Debug)]
enum State {
    /// No speech: the last frames (the preroll) and how many in a row scored [`ON`].
    Quiet { recent: VecDeque<i16>, onset: usize },
    /// An utterance, and how many frames in a row scored below [`OFF`].
    Speech { samples: Vec<i16>, quiet: usize },
    /// An utterance reached the limit: the rest of that speech is not heard, up to a pause.
    Cut { quiet: usize },
}

impl State {
    fn quiet() -> Self {
        State::Quiet {
            recent: VecDeque::with_capacity((PREROLL_FRAMES + START_FRAMES) * FRAME),
            onset: 0,
        }
    }
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Quiet { .. } => "quiet".to_owned(),
            State::Speech { samples, .. } => format!("speech ({} samples)", samples.len()),
            State::Cut { .. } => "cut".to_owned(),
        };
        f.debug_struct("Detector").field("state", &state).finish()
    }
}

impl Default for Detector {
    fn default() -> Self {
        Detector {
            vad: earshot::Detector::default_boxed(),
            partial: Vec::with_capacity(FRAME),
            state: State::quiet(),
        }
    }
}

impl Detector {
    /// Takes the next piece of the stream (PCM16LE: an odd last byte is dropped, as the
    /// transport never sends one) and says what it found, in order.
    pub fn push(&mut self, pcm: &[u8]) -> Vec<Detected> {
        let mut found = Vec::new();
        for sample in pcm::samples_of(pcm) {
            self.partial.push(sample);
            if self.partial.len() == FRAME {
                let frame = std::mem::replace(&mut self.partial, Vec::with_capacity(FRAME));
                if let Some(d) = self.frame(&frame) {
                    found.push(d);
                }
            }
        }
        found
    }

    /// The microphone closed: the utterance under way, if any, ends here.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let partial = std::mem::take(&mut self.partial);
        match std::mem::replace(&mut self.state, State::quiet()) {
            State::Speech { mut samples, .. } => {
                let room = MAX_SAMPLES.saturating_sub(samples.len());
                samples.extend_from_slice(&partial[..partial.len().min(room)]);
                Some(pcm::bytes_of(&samples))
            }
            State::Quiet { .. } | State::Cut { .. } => None,
        }
    }

    fn frame(&mut self, frame: &[i16]) -> Option<Detected> {
        let score = self.vad.predict_i16(frame);
        match &mut self.state {
            State::Quiet { recent, onset } => {
                if recent.len() + FRAME > (PREROLL_FRAMES + START_FRAMES) * FRAME {
                    recent.drain(..FRAME);
                }
                recent.extend(frame);
                *onset = if score >= ON { *onset + 1 } else { 0 };
                if *onset < START_FRAMES {
                    return None;
                }
                let samples = std::mem::take(recent).into();
                self.state = State::Speech { samples, quiet: 0 };
                Some(Detected::Started)
            }
            State::Speech { samples, quiet } => {
                let room = MAX_SAMPLES.saturating_sub(samples.len());
                samples.extend_from_slice(&frame[..frame.len().min(room)]);
                *quiet = if score >= OFF { 0 } else { *quiet + 1 };
                let (ended, cut) = (*quiet >= HANGOVER_FRAMES, samples.len() >= MAX_SAMPLES);
                if !ended && !cut {
                    return None;
                }
                let utterance = pcm::bytes_of(samples);
                self.state = if ended {
                    State::quiet()
                } else {
                    State::Cut { quiet: 0 }
                };
                Some(Detected::Ended(utterance))
            }
            State::Cut { quiet } => {
                *quiet = if score >= OFF { 0 } else { *quiet + 1 };
                if *quiet >= HANGOVER_FRAMES {
                    self.state = State::quiet();
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::pcm::LISTEN_RATE;

    fn clip(name: &str) -> Vec<i16> {
        let path = format!("{}/tests/fixtures/voice/{name}", env!("CARGO_MANIFEST_DIR"));
        let (format, samples) = pcm::read_wav(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(format.sample_rate, LISTEN_RATE);
        samples
    }

    fn silence(seconds: f64) -> Vec<i16> {
        vec![0; (seconds * f64::from(LISTEN_RATE)) as usize]
    }

    /// White noise at `level` (RMS, of full scale), from a fixed seed (xorshift, Box-Muller).
    fn noise(seconds: f64, level: f64, seed: u64) -> Vec<i16> {
        let mut state = seed.max(1);
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..(seconds * f64::from(LISTEN_RATE)) as usize)
            .map(|_| {
                let (u, v) = (uniform().max(1e-12), uniform());
                let gauss = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                (gauss * level * 32767.0).clamp(-32768.0, 32767.0) as i16
            })
            .collect()
    }

    /// Feeds `samples` in the browser's 100 ms batches; what was found, with the sample count
    /// fed when each was found.
    fn run(detector: &mut Detector, samples: &[i16]) -> Vec<(usize, Detected)> {
        let mut fed = 0;
        let mut found = Vec::new();
        for batch in samples.chunks(1600) {
            let got = detector.push(&pcm::bytes_of(batch));
            fed += batch.len();
            found.extend(got.into_iter().map(|d| (fed, d)));
        }
        found
    }

    /// The last sample of `samples` that is not silent.
    fn last_sound(samples: &[i16]) -> usize {
        samples
            .iter()
            .rposition(|s| s.unsigned_abs() > 300)
            .unwrap()
    }

    #[test]
    fn each_clip_after_silence_is_one_utterance_that_ends_within_the_hangover() {
        let mut worst_ms = 0.0f64;
        for name in ["pay.wav", "yes.wav", "no.wav"] {
            let mut detector = Detector::default();
            let speech = clip(name);
            let mut stream = silence(1.0);
            let speech_at = stream.len();
            stream.extend(&speech);
            stream.extend(silence(2.0));
            let found = run(&mut detector, &stream);
            let kinds: Vec<_> = found
                .iter()
                .map(|(_, d)| matches!(d, Detected::Started))
                .collect();
            assert_eq!(kinds, [true, false], "{name}: one start, one end");
            // It starts within 200 ms of the clip's first sound (+ the 100 ms batch).
            let first_sound = speech.iter().position(|s| s.unsigned_abs() > 300).unwrap();
            assert!(found[0].0 <= speech_at + first_sound + 4800, "{name}");
            let Detected::Ended(utterance) = &found[1].1 else {
                unreachable!()
            };
            // The utterance holds all of the clip's sound.
            let heard = pcm::samples_of(utterance);
            assert!(heard.len() > last_sound(&speech), "{name}");
            // The end of speech is found within the hangover and a little (earshot's window).
            let late = found[1].0 - (speech_at + last_sound(&speech));
            let late_ms = late as f64 * 1000.0 / f64::from(LISTEN_RATE);
            println!("{name}: end of speech found {late_ms:.0} ms after its last sound");
            assert!(late_ms <= 800.0, "{name}: {late_ms} ms");
            worst_ms = worst_ms.max(late_ms);
            assert_eq!(
                detector.finish(),
                None,
                "nothing under way after the silence"
            );
        }
        println!("the latest end of speech: {worst_ms:.0} ms");
    }

    #[test]
    fn the_clips_in_a_row_are_three_utterances_and_their_silences_start_nothing() {
        let mut detector = Detector::default();
        let mut stream = Vec::new();
        let mut words = Vec::new();
        for name in ["pay.wav", "yes.wav", "no.wav"] {
            stream.extend(silence(1.0));
            let speech = clip(name);
            words.push(speech.len());
            stream.extend(speech);
        }
        stream.extend(silence(1.0));
        let found = run(&mut detector, &stream);
        let starts = found
            .iter()
            .filter(|(_, d)| matches!(d, Detected::Started))
            .count();
        let ends: Vec<usize> = found
            .iter()
            .filter_map(|(_, d)| match d {
                Detected::Ended(u) => Some(u.len() / 2),
                Detected::Started => None,
            })
            .collect();
        assert_eq!(starts, 3, "{found:?}");
        assert_eq!(ends.len(), 3);
        for (heard, said) in ends.iter().zip(&words) {
            // Each is its clip (its pause inside, "yes … approve it", does not split it), with
            // the preroll and the hangover around it.
            assert!(
                *heard >= said * 8 / 10 && *heard <= said + 16_000,
                "{heard} {said}"
            );
        }
    }

    #[test]
    fn silence_and_noise_start_nothing() {
        let mut detector = Detector::default();
        assert!(run(&mut detector, &silence(10.0)).is_empty());
        for (level, seed) in [(0.001, 1), (0.01, 2), (0.05, 3), (0.1, 4)] {
            let found = run(&mut detector, &noise(10.0, level, seed));
            assert!(found.is_empty(), "noise at {level}: {found:?}");
        }
        assert_eq!(detector.finish(), None);
    }

    #[test]
    fn an_utterance_under_way_ends_when_the_microphone_closes() {
        let mut detector = Detector::default();
        let speech = clip("pay.wav");
        let found = run(&mut detector, &speech[..last_sound(&speech)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1, Detected::Started);
        let utterance = detector.finish().expect("the utterance under way");
        assert!(utterance.len() / 2 >= last_sound(&speech) * 9 / 10);
        assert_eq!(detector.finish(), None);
    }

    #[test]
    fn an_utterance_is_cut_at_the_limit_and_the_rest_of_that_speech_is_not_heard() {
        let mut detector = Detector::default();
        // 70 s of speech without a pause as long as the hangover: the clips back to back.
        let mut speech = Vec::new();
        while speech.len() < 70 * LISTEN_RATE as usize {
            for name in ["pay.wav", "yes.wav", "no.wav"] {
                let c = clip(name);
                speech.extend(&c[..=last_sound(&c)]);
                speech.extend(silence(0.1));
            }
        }
        let found = run(&mut detector, &speech);
        let lengths: Vec<_> = found
            .iter()
            .map(|(_, d)| match d {
                Detected::Started => 0,
                Detected::Ended(u) => u.len(),
            })
            .collect();
        assert_eq!(
            lengths,
            [0, MAX_UTTERANCE_BYTES],
            "one start, cut at the limit"
        );
        assert_eq!(
            detector.finish(),
            None,
            "the rest of that speech is not heard"
        );
        // After a pause, speech is heard again.
        let mut next = silence(1.0);
        next.extend(clip("yes.wav"));
        next.extend(silence(1.0));
        let found = run(&mut detector, &next);
        assert_eq!(found.len(), 2, "{found:?}");
    }
}
