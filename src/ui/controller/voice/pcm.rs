//! The voice's arithmetic, pure and in both builds (so the server's tests run it): samples to
//! the wire's PCM16LE and back, the microphone's frames, the level meter's reading, gapless
//! playback times, and when a person's speech interrupts the agent (ADR 0037).

/// The microphone's rate on the wire (the voice contract, ADR 0035): PCM16LE mono 16 kHz.
pub const MIC_RATE: u32 = 16_000;

/// The agent's speech on the wire: PCM16LE mono 24 kHz.
pub const SPEECH_RATE: u32 = 24_000;

/// The largest audio frame the server takes (0.5 s at 16 kHz).
pub const MAX_FRAME_BYTES: usize = 16_000;

/// A frame goes out once it holds this much (100 ms): ten frames a second, half of what a
/// socket may send (`COUNTERSIGN_WS_RATE`, 20), so text and answers keep their room.
pub const FRAME_BYTES: usize = 3_200;

/// Samples the capture worklet posts at a time (100 ms at 16 kHz): one frame each.
pub const CAPTURE_BATCH: u32 = 1_600;

// A frame is whole samples within the server's limit, and the worklet's batch is one frame.
const _: () = assert!(
    FRAME_BYTES <= MAX_FRAME_BYTES
        && FRAME_BYTES.is_multiple_of(2)
        && CAPTURE_BATCH as usize * 2 == FRAME_BYTES
);

/// Samples in [-1, 1] as PCM16LE, appended to `out` (out-of-range samples are clipped).
pub fn push_pcm16le(samples: &[f32], out: &mut Vec<u8>) {
    out.reserve(samples.len() * 2);
    for &s in samples {
        let s = if s.is_nan() { 0.0 } else { s.clamp(-1.0, 1.0) };
        let v = if s < 0.0 { s * 32_768.0 } else { s * 32_767.0 };
        out.extend_from_slice(&(v.round() as i16).to_le_bytes());
    }
}

/// PCM16LE as samples in [-1, 1); a trailing odd byte is ignored.
pub fn pcm16le_to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0)
        .collect()
}

/// The meter's reading of some samples: their RMS in dBFS mapped from -60..0 dB to 0..1 (what
/// an ear hears as even steps; silence and hiss read 0).
pub fn level(samples: &[f32]) -> f32 {
    if samples.is_empty() {
        return 0.0;
    }
    let mean_square = samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32;
    let db = 10.0 * mean_square.max(1e-12).log10();
    ((db + 60.0) / 60.0).clamp(0.0, 1.0)
}

/// Cuts the microphone's PCM into frames: one of [`FRAME_BYTES`] as soon as it is full, never
/// more than [`MAX_FRAME_BYTES`], always an even length (whole samples).
#[derive(Debug, Default)]
pub struct Framer {
    pending: Vec<u8>,
}

impl Framer {
    /// Adds `samples` and returns the frames now full.
    pub fn push(&mut self, samples: &[f32]) -> Vec<Vec<u8>> {
        push_pcm16le(samples, &mut self.pending);
        let mut frames = Vec::new();
        while self.pending.len() >= FRAME_BYTES {
            let rest = self.pending.split_off(FRAME_BYTES);
            frames.push(std::mem::replace(&mut self.pending, rest));
        }
        frames
    }

    /// What is left, as a last frame (the microphone closes).
    pub fn flush(&mut self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

/// Reassembles the agent's speech from binary frames: whole samples only (a byte a frame split
/// waits for the next one, which the contract never needs but costs nothing).
#[derive(Debug, Default)]
pub struct SpeechReader {
    carry: Option<u8>,
}

impl SpeechReader {
    pub fn samples(&mut self, frame: &[u8]) -> Vec<f32> {
        let mut joined;
        let bytes = match self.carry.take() {
            Some(first) => {
                joined = Vec::with_capacity(frame.len() + 1);
                joined.push(first);
                joined.extend_from_slice(frame);
                &joined[..]
            }
            None => frame,
        };
        if bytes.len() % 2 == 1 {
            self.carry = bytes.last().copied();
        }
        pcm16le_to_f32(bytes)
    }

    /// Playback stopped: a byte kept from before is void.
    pub fn reset(&mut self) {
        self.carry = None;
    }
}

/// How far ahead of the audio clock a chunk that arrives after the queue ran dry starts: enough
/// for the audio thread to pick it up, short enough not to be heard as a delay.
pub const START_LEAD_SECS: f64 = 0.05;

/// When each chunk of speech starts on the audio clock: right after the one before it (gapless)
/// while the queue has audio, or just ahead of now once it ran dry.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Schedule {
    next: f64,
}

impl Schedule {
    /// The start of a chunk of `duration` seconds arriving at audio time `now`.
    pub fn place(&mut self, now: f64, duration: f64) -> f64 {
        let start = if self.next > now {
            self.next
        } else {
            now + START_LEAD_SECS
        };
        self.next = start + duration;
        start
    }

    /// When what is queued has played (0 when nothing ever was).
    pub fn ends_at(&self) -> f64 {
        self.next
    }

    /// Playback stopped: the next chunk starts afresh.
    pub fn reset(&mut self) {
        self.next = 0.0;
    }
}

/// A meter reading a person's voice reaches (about -24 dBFS: speech close to a microphone, well
/// above a room's hiss and what echo cancellation leaves of the agent's own voice).
pub const SPEECH_LEVEL: f32 = 0.6;

/// Batches in a row at [`SPEECH_LEVEL`] that count as the person speaking over the agent (200
/// ms: a cough or a click is shorter).
pub const BARGE_IN_BATCHES: u32 = 2;

/// Hands-free barge-in: whether the person started speaking while the agent speaks, from the
/// meter's readings of the microphone's batches.
#[derive(Debug, Default)]
pub struct BargeIn {
    loud: u32,
}

impl BargeIn {
    /// One batch's level; true once (the batch that makes it speech).
    pub fn hears(&mut self, level: f32) -> bool {
        if level >= SPEECH_LEVEL {
            self.loud += 1;
            self.loud == BARGE_IN_BATCHES
        } else {
            self.loud = 0;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_become_pcm16le_and_back_clipped_and_rounded() {
        let mut out = Vec::new();
        push_pcm16le(&[0.0, 1.0, -1.0, 0.5, 2.0, -3.0, f32::NAN], &mut out);
        let values: Vec<i16> = out
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(values, [0, 32_767, -32_768, 16_384, 32_767, -32_768, 0]);
        // Little-endian on the wire: 0x7fff is ff 7f.
        assert_eq!(&out[2..4], &[0xff, 0x7f]);
        let back = pcm16le_to_f32(&out);
        assert_eq!(back.len(), 7);
        assert!((back[3] - 0.5).abs() < 1e-4);
        assert_eq!(back[2], -1.0);
        // An odd byte at the end is not a sample.
        assert_eq!(pcm16le_to_f32(&[0, 0x40, 7]), [0.5]);
    }

    #[test]
    fn the_meter_reads_silence_as_zero_full_scale_as_one_and_speech_between() {
        assert_eq!(level(&[]), 0.0);
        assert_eq!(level(&[0.0; 160]), 0.0);
        assert_eq!(level(&[1.0, -1.0]), 1.0);
        // -20 dBFS reads two thirds of the way up.
        let speech = level(&[0.1, -0.1, 0.1, -0.1]);
        assert!((speech - 2.0 / 3.0).abs() < 1e-3, "{speech}");
        // Hiss at -70 dBFS is below the meter.
        assert_eq!(level(&[0.000_316; 8]), 0.0);
    }

    #[test]
    fn microphone_frames_are_full_100_ms_even_and_never_over_the_limit() {
        let mut framer = Framer::default();
        // 50 ms: nothing yet.
        assert!(framer.push(&[0.25; 800]).is_empty());
        // 1 s more: ten frames of 3,200 bytes, 50 ms left over.
        let frames = framer.push(&[0.25; 16_000]);
        assert_eq!(frames.len(), 10);
        assert!(frames.iter().all(|f| f.len() == FRAME_BYTES));
        assert_eq!(framer.flush().map(|f| f.len()), Some(1_600));
        assert_eq!(framer.flush(), None);
    }

    #[test]
    fn speech_split_inside_a_sample_is_read_whole() {
        let mut reader = SpeechReader::default();
        // 0x4000 (0.5) split across two frames, then a whole sample.
        assert_eq!(reader.samples(&[0x00, 0x00, 0x00]), [0.0]);
        assert_eq!(reader.samples(&[0x40, 0x00, 0xc0]), [0.5, -0.5]);
        reader.samples(&[0x01]);
        reader.reset();
        assert_eq!(reader.samples(&[0x00, 0x40]), [0.5]);
    }

    #[test]
    fn chunks_play_back_to_back_while_queued_and_start_just_ahead_once_dry() {
        let mut schedule = Schedule::default();
        // The first chunk starts just ahead of the clock.
        assert_eq!(schedule.place(10.0, 0.5), 10.0 + START_LEAD_SECS);
        // The next arrives while the first plays: it starts where the first ends, no gap.
        assert_eq!(schedule.place(10.2, 0.5), 10.55);
        assert_eq!(schedule.place(10.3, 0.25), 11.05);
        assert_eq!(schedule.ends_at(), 11.3);
        // The queue ran dry (a pause in the speech): the next starts just ahead of now.
        assert_eq!(schedule.place(12.0, 0.5), 12.0 + START_LEAD_SECS);
        // Stopped (barge-in): the next chunk does not wait for what was cut off.
        schedule.place(12.1, 30.0);
        schedule.reset();
        assert_eq!(schedule.place(12.2, 0.5), 12.2 + START_LEAD_SECS);
    }

    #[test]
    fn speech_over_the_agent_is_two_loud_batches_in_a_row_and_fires_once() {
        let mut barge = BargeIn::default();
        // A click: one loud batch, then quiet.
        assert!(!barge.hears(0.9));
        assert!(!barge.hears(0.1));
        // Speech: the second loud batch in a row, once.
        assert!(!barge.hears(0.7));
        assert!(barge.hears(0.8));
        assert!(!barge.hears(0.8));
        // Quiet again, then speech again: fires again.
        assert!(!barge.hears(0.0));
        assert!(!barge.hears(SPEECH_LEVEL));
        assert!(barge.hears(SPEECH_LEVEL));
        // The room's hiss and the agent's echo stay below.
        assert!(!barge.hears(level(&[0.01; 64])));
    }
}
