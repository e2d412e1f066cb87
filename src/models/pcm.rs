//! PCM16 mono audio for the models' voices, the one home of sample-rate conversion: WAV headers
//! (hound) and rubato's FFT resampler between espeak-ng's 22.05 kHz (the demo model), the
//! microphone's 16 kHz (the browser, the demo's recogniser) and the 24 kHz OpenAI Realtime
//! takes and every voice model speaks. Streaming: a [`Resampler`] takes samples as they arrive
//! and holds at most one chunk of them, so a long answer never sits in memory whole.

use std::io::Cursor;

use rubato::{
    Fft, FixedSync, Indexing, Resampler as _, audioadapter_buffers::direct::InterleavedSlice,
};

/// The recogniser's input rate, and the browser's microphone rate on the wire.
pub const LISTEN_RATE: u32 = 16_000;
/// The agent's speech on the wire (Gemini Live's and OpenAI Realtime's output rate).
pub const SPEAK_RATE: u32 = 24_000;
/// Frames per resampler call: ~46 ms at 22.05 kHz, the unit of streamed speech.
const CHUNK_FRAMES: usize = 1024;

/// What can go wrong with audio bytes or their conversion.
#[derive(Debug, thiserror::Error)]
pub enum PcmError {
    #[error("not a PCM16 mono WAV: {0}")]
    Format(String),
    #[error("resampling failed: {0}")]
    Resample(String),
}

/// A WAV's format, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavFormat {
    pub sample_rate: u32,
}

/// Reads a RIFF WAV header (as espeak-ng writes it to a pipe, with an unknown length) and says
/// where the PCM starts. Only PCM16 mono is accepted: that is all the demo's programs write.
pub fn wav_header(bytes: &[u8]) -> Result<(WavFormat, usize), PcmError> {
    let mut cursor = Cursor::new(bytes);
    // The reader stops at the data chunk's header: the cursor is then where the samples start.
    let spec = hound::WavReader::new(&mut cursor)
        .map_err(|e| PcmError::Format(e.to_string()))?
        .spec();
    if spec.channels != 1
        || spec.bits_per_sample != 16
        || spec.sample_format != hound::SampleFormat::Int
    {
        return Err(PcmError::Format(format!(
            "{} channel(s), {} bits, {:?}",
            spec.channels, spec.bits_per_sample, spec.sample_format
        )));
    }
    let start = usize::try_from(cursor.position()).map_err(|e| PcmError::Format(e.to_string()))?;
    Ok((
        WavFormat {
            sample_rate: spec.sample_rate,
        },
        start,
    ))
}

/// A whole PCM16 mono WAV file read into its samples.
pub fn read_wav(bytes: &[u8]) -> Result<(WavFormat, Vec<i16>), PcmError> {
    let (format, start) = wav_header(bytes)?;
    // The data chunk's length may be a streaming placeholder: the samples are what is there.
    let data = bytes.get(start..).unwrap_or_default();
    Ok((format, samples_of(data)))
}

/// PCM16 samples as a WAV file.
pub fn wav_bytes(samples: &[i16], sample_rate: u32) -> Result<Vec<u8>, PcmError> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    let mut writer =
        hound::WavWriter::new(&mut out, spec).map_err(|e| PcmError::Format(e.to_string()))?;
    for &s in samples {
        writer
            .write_sample(s)
            .map_err(|e| PcmError::Format(e.to_string()))?;
    }
    writer
        .finalize()
        .map_err(|e| PcmError::Format(e.to_string()))?;
    Ok(out.into_inner())
}

/// Little-endian PCM16 bytes as samples (a trailing odd byte is not a sample).
pub fn samples_of(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// Samples as little-endian PCM16 bytes.
pub fn bytes_of(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// A whole clip at another rate.
pub fn resample_all(samples: &[i16], from: u32, to: u32) -> Result<Vec<i16>, PcmError> {
    let mut resampler = Resampler::new(from, to)?;
    let mut out = Vec::with_capacity(expected_len(samples.len() as u64, from, to) as usize);
    resampler.push(samples, &mut out)?;
    resampler.finish(&mut out)?;
    Ok(out)
}

/// How many samples `frames` at `from` make at `to` (rounded up, as rubato counts).
fn expected_len(frames: u64, from: u32, to: u32) -> u64 {
    (frames * u64::from(to)).div_ceil(u64::from(from))
}

/// A streaming PCM16 mono resampler: push samples as they come, take what is ready; `finish`
/// flushes the tail. The output has exactly the input's duration (the filter's delay trimmed).
pub struct Resampler {
    inner: Option<Fft<f32>>,
    from: u32,
    to: u32,
    /// Input waiting for a whole chunk (fewer than `CHUNK_FRAMES`).
    pending: Vec<f32>,
    scratch: Vec<f32>,
    /// Output frames still to drop: the filter's delay.
    to_trim: usize,
    frames_in: u64,
    frames_out: u64,
}

impl std::fmt::Debug for Resampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resampler")
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl Resampler {
    /// From `from` Hz to `to` Hz (the same rate passes samples through untouched).
    pub fn new(from: u32, to: u32) -> Result<Self, PcmError> {
        if from == 0 || to == 0 {
            return Err(PcmError::Resample(format!("rate {from} → {to}")));
        }
        let inner = if from == to {
            None
        } else {
            Some(
                Fft::new(
                    from as usize,
                    to as usize,
                    CHUNK_FRAMES,
                    1,
                    FixedSync::Input,
                )
                .map_err(|e| PcmError::Resample(e.to_string()))?,
            )
        };
        let to_trim = inner.as_ref().map_or(0, |r| r.output_delay());
        let scratch = vec![0.0; inner.as_ref().map_or(0, |r| r.output_frames_max())];
        Ok(Resampler {
            inner,
            from,
            to,
            pending: Vec::with_capacity(CHUNK_FRAMES),
            scratch,
            to_trim,
            frames_in: 0,
            frames_out: 0,
        })
    }

    /// Takes `samples`; appends to `out` what is ready.
    pub fn push(&mut self, samples: &[i16], out: &mut Vec<i16>) -> Result<(), PcmError> {
        self.frames_in += samples.len() as u64;
        if self.inner.is_none() {
            out.extend_from_slice(samples);
            self.frames_out += samples.len() as u64;
            return Ok(());
        }
        for &s in samples {
            self.pending.push(f32::from(s) / 32768.0);
            if self.pending.len() == CHUNK_FRAMES {
                self.run(None, out)?;
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// Flushes the tail: after this, `out` holds the whole input's duration at the new rate.
    pub fn finish(mut self, out: &mut Vec<i16>) -> Result<(), PcmError> {
        if self.inner.is_none() {
            return Ok(());
        }
        let expected = expected_len(self.frames_in, self.from, self.to);
        let partial = self.pending.len();
        self.pending.resize(CHUNK_FRAMES, 0.0);
        self.run(Some(partial), out)?;
        // The filter still holds the last frames: pump silence until they are out.
        self.pending.iter_mut().for_each(|s| *s = 0.0);
        let mut pumps = 0;
        while self.frames_out < expected && pumps < 8 {
            self.run(Some(0), out)?;
            pumps += 1;
        }
        Ok(())
    }

    fn run(&mut self, partial: Option<usize>, out: &mut Vec<i16>) -> Result<(), PcmError> {
        let Some(inner) = self.inner.as_mut() else {
            return Ok(());
        };
        let expected = expected_len(self.frames_in, self.from, self.to);
        let input = InterleavedSlice::new(&self.pending[..], 1, CHUNK_FRAMES)
            .map_err(|e| PcmError::Resample(e.to_string()))?;
        let capacity = self.scratch.len();
        let mut output = InterleavedSlice::new_mut(&mut self.scratch[..], 1, capacity)
            .map_err(|e| PcmError::Resample(e.to_string()))?;
        let indexing = Indexing {
            partial_len: partial,
            ..Indexing::default()
        };
        let (_, produced) = inner
            .process_into_buffer(&input, &mut output, Some(&indexing))
            .map_err(|e| PcmError::Resample(e.to_string()))?;
        let ready = &self.scratch[..produced];
        let skip = self.to_trim.min(ready.len());
        self.to_trim -= skip;
        let ready = &ready[skip..];
        // Never more than the input's duration: the tail's padding is not speech.
        let room = usize::try_from(expected.saturating_sub(self.frames_out)).unwrap_or(usize::MAX);
        let ready = &ready[..ready.len().min(room)];
        out.extend(ready.iter().map(|&x| to_i16(x)));
        self.frames_out += ready.len() as u64;
        Ok(())
    }
}

fn to_i16(x: f32) -> i16 {
    // Saturating: the filter's ringing may overshoot full scale a little.
    (x * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freq: f32, rate: u32, frames: usize) -> Vec<i16> {
        (0..frames)
            .map(|i| {
                let t = i as f32 / rate as f32;
                (8000.0 * (2.0 * std::f32::consts::PI * freq * t).sin()) as i16
            })
            .collect()
    }

    fn rms(samples: &[i16]) -> f64 {
        let sum: f64 = samples.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
        (sum / samples.len().max(1) as f64).sqrt()
    }

    #[test]
    fn a_clip_keeps_its_duration_and_its_loudness_at_another_rate() {
        let input = tone(440.0, 22_050, 22_050 + 123);
        for to in [LISTEN_RATE, SPEAK_RATE] {
            let out = resample_all(&input, 22_050, to).unwrap();
            assert_eq!(
                out.len() as u64,
                expected_len(input.len() as u64, 22_050, to)
            );
            let (a, b) = (rms(&input), rms(&out[200..out.len() - 200]));
            assert!((a - b).abs() / a < 0.05, "{a} vs {b}");
        }
    }

    #[test]
    fn streaming_in_odd_pieces_gives_the_whole_clip_result() {
        let input = tone(300.0, 22_050, 5000);
        let whole = resample_all(&input, 22_050, SPEAK_RATE).unwrap();
        let mut resampler = Resampler::new(22_050, SPEAK_RATE).unwrap();
        let mut streamed = Vec::new();
        for piece in input.chunks(777) {
            resampler.push(piece, &mut streamed).unwrap();
        }
        resampler.finish(&mut streamed).unwrap();
        assert_eq!(streamed, whole);
    }

    #[test]
    fn a_wav_written_reads_back_and_a_stream_header_is_accepted() {
        let samples = tone(200.0, LISTEN_RATE, 1600);
        let wav = wav_bytes(&samples, LISTEN_RATE).unwrap();
        let (format, read) = read_wav(&wav).unwrap();
        assert_eq!(format.sample_rate, LISTEN_RATE);
        assert_eq!(read, samples);
        // espeak-ng on a pipe writes a placeholder length: the samples are what follows.
        let mut piped = wav.clone();
        piped[40..44].copy_from_slice(&0x7fff_f000u32.to_le_bytes());
        assert_eq!(read_wav(&piped).unwrap().1, samples);
        assert!(read_wav(b"RIFF....WAVEjunk").is_err());
        let stereo = {
            let spec = hound::WavSpec {
                channels: 2,
                sample_rate: 16_000,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            };
            let mut c = Cursor::new(Vec::new());
            let mut w = hound::WavWriter::new(&mut c, spec).unwrap();
            w.write_sample(0i16).unwrap();
            w.write_sample(0i16).unwrap();
            w.finalize().unwrap();
            c.into_inner()
        };
        assert!(matches!(read_wav(&stereo), Err(PcmError::Format(_))));
    }
}
