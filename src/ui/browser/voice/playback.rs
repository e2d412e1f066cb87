//! The agent's speech: each binary frame (PCM16LE mono 24 kHz) becomes an `AudioBuffer` played by
//! its own `AudioBufferSourceNode`, started where the one before ends (gapless: `pcm::Schedule`).
//! Stopping stops every source at once (barge-in).

use crate::ui::controller::voice::pcm::{SPEECH_RATE, Schedule, SpeechReader};

/// The context, created on the first speech (the person has used the page by then, so the
/// browser lets it play; opening the microphone resumes it too).
struct Output {
    context: web_sys::AudioContext,
    gain: web_sys::GainNode,
}

#[derive(Default)]
pub(super) struct Playback {
    output: Option<Output>,
    schedule: Schedule,
    reader: SpeechReader,
    /// Sources started or waiting, with when each ends.
    sources: Vec<(web_sys::AudioBufferSourceNode, f64)>,
}

impl Playback {
    fn output(&mut self) -> Option<&Output> {
        if self.output.is_none() {
            let context = web_sys::AudioContext::new().ok()?;
            let gain = context.create_gain().ok()?;
            gain.connect_with_audio_node(&context.destination()).ok()?;
            self.output = Some(Output { context, gain });
        }
        self.output.as_ref()
    }

    /// Lets playback start (called from a person's gesture).
    pub(super) fn unlock(&mut self) {
        if let Some(output) = self.output() {
            let _ = output.context.resume();
        }
    }

    pub(super) fn play(&mut self, frame: &[u8]) {
        let samples = self.reader.samples(frame);
        if samples.is_empty() {
            return;
        }
        let Some(output) = self.output() else {
            return;
        };
        let context = output.context.clone();
        let Some(source) = source(&context, &output.gain, &samples) else {
            return;
        };
        let now = context.current_time();
        let start = self
            .schedule
            .place(now, samples.len() as f64 / f64::from(SPEECH_RATE));
        let scheduled: &web_sys::AudioScheduledSourceNode = &source;
        if scheduled.start_with_when(start).is_ok() {
            self.sources.retain(|(_, end)| *end > now);
            self.sources.push((source, self.schedule.ends_at()));
        }
    }

    pub(super) fn stop(&mut self) {
        for (source, _) in self.sources.drain(..) {
            let scheduled: &web_sys::AudioScheduledSourceNode = &source;
            let _ = scheduled.stop();
            let _ = source.disconnect();
        }
        self.schedule.reset();
        self.reader.reset();
    }

    pub(super) fn playing(&self) -> bool {
        self.output
            .as_ref()
            .is_some_and(|o| self.schedule.ends_at() > o.context.current_time())
    }
}

/// A source that plays `samples` at 24 kHz into `gain`.
fn source(
    context: &web_sys::AudioContext,
    gain: &web_sys::GainNode,
    samples: &[f32],
) -> Option<web_sys::AudioBufferSourceNode> {
    let buffer = context
        .create_buffer(1, samples.len() as u32, SPEECH_RATE as f32)
        .ok()?;
    buffer.copy_to_channel(samples, 0).ok()?;
    let source = context.create_buffer_source().ok()?;
    source.set_buffer(Some(&buffer));
    source.connect_with_audio_node(gain).ok()?;
    Some(source)
}
