//! Speaking: `espeak-ng` says a piece of text, its 22.05 kHz WAV comes through a pipe and
//! leaves as PCM16LE mono at 24 kHz ([`SPEAK_RATE`]) in chunks, while espeak-ng is still
//! speaking. One child process per sentence, fed on stdin (no shell, no argument the text could
//! turn into an option), killed when dropped or late; what it may say and send is bounded.

use std::{path::Path, process::Stdio, time::Duration};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    process::{Child, ChildStdout, Command},
    time::Instant,
};

use super::ESPEAK_VOICE;
use crate::models::pcm::{self, PcmError, Resampler, SPEAK_RATE};

/// How much one synthesis may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeakLimits {
    /// The most characters one synthesis says (a longer text is cut at a word).
    pub max_chars: usize,
    /// The most PCM bytes it sends (at 24 kHz, 48,000 bytes a second).
    pub max_bytes: usize,
    /// How long espeak-ng may take, start to end.
    pub timeout: Duration,
}

impl Default for SpeakLimits {
    fn default() -> Self {
        SpeakLimits {
            max_chars: 600,
            // 60 s of speech.
            max_bytes: 60 * 2 * SPEAK_RATE as usize,
            timeout: Duration::from_secs(15),
        }
    }
}

/// Why a synthesis failed.
#[derive(Debug, thiserror::Error)]
pub enum SpeakError {
    #[error("espeak-ng could not be started: {0}")]
    Start(std::io::Error),
    #[error("espeak-ng failed: {0}")]
    Failed(String),
    #[error("espeak-ng took longer than {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Audio(#[from] PcmError),
}

/// Bytes read from espeak-ng per read (~0.19 s of its speech).
const READ_BYTES: usize = 8192;
/// The most a WAV header may take before the samples.
const MAX_HEADER: usize = 4096;

/// One text being spoken: [`Synthesis::next`] gives its speech a chunk at a time.
#[derive(Debug)]
pub struct Synthesis {
    child: Child,
    stdout: ChildStdout,
    /// The WAV header, until it is whole.
    header: Vec<u8>,
    resampler: Option<Resampler>,
    /// A byte of a sample split between two reads.
    odd: Option<u8>,
    sent: usize,
    limits: SpeakLimits,
    deadline: Instant,
    done: bool,
}

impl Synthesis {
    /// Starts `espeak` saying `text` (at most `limits.max_chars` of it).
    pub async fn start(espeak: &Path, text: &str, limits: SpeakLimits) -> Result<Self, SpeakError> {
        let text = cut_at_word(text, limits.max_chars);
        let mut child = Command::new(espeak)
            .args(ESPEAK_VOICE)
            .arg("--stdout")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(SpeakError::Start)?;
        let deadline = Instant::now() + limits.timeout;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(SpeakError::Failed("no pipes".into()));
        };
        // A few hundred bytes: the pipe takes them whole, so writing first cannot deadlock.
        tokio::time::timeout_at(deadline, stdin.write_all(text.as_bytes()))
            .await
            .map_err(|_| SpeakError::TimedOut(limits.timeout))?
            .map_err(|e| SpeakError::Failed(e.to_string()))?;
        drop(stdin);
        Ok(Synthesis {
            child,
            stdout,
            header: Vec::new(),
            resampler: None,
            odd: None,
            sent: 0,
            limits,
            deadline,
            done: false,
        })
    }

    /// The next chunk of speech (PCM16LE mono, 24 kHz, an even number of bytes); `None` at the
    /// end.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, SpeakError> {
        let mut buf = vec![0u8; READ_BYTES];
        while !self.done {
            let read = tokio::time::timeout_at(self.deadline, self.stdout.read(&mut buf))
                .await
                .map_err(|_| SpeakError::TimedOut(self.limits.timeout))?
                .map_err(|e| SpeakError::Failed(e.to_string()))?;
            let mut out = Vec::new();
            if read == 0 {
                self.done = true;
                self.end(&mut out).await?;
            } else {
                self.take(&buf[..read], &mut out)?;
            }
            if let Some(chunk) = self.bounded(out) {
                return Ok(Some(chunk));
            }
        }
        Ok(None)
    }

    /// Bytes from espeak-ng: the header first, then samples through the resampler.
    fn take(&mut self, mut bytes: &[u8], out: &mut Vec<i16>) -> Result<(), SpeakError> {
        if self.resampler.is_none() {
            self.header.extend_from_slice(bytes);
            match pcm::wav_header(&self.header) {
                Ok((format, start)) => {
                    self.resampler = Some(Resampler::new(format.sample_rate, SPEAK_RATE)?);
                    let header = std::mem::take(&mut self.header);
                    return self.take(&header[start..], out);
                }
                Err(_) if self.header.len() < MAX_HEADER => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        let mut samples = Vec::with_capacity(bytes.len() / 2 + 1);
        if let (Some(low), Some((&high, rest))) = (self.odd.take(), bytes.split_first()) {
            samples.push(i16::from_le_bytes([low, high]));
            bytes = rest;
        }
        samples.extend(pcm::samples_of(bytes));
        if bytes.len() % 2 == 1 {
            self.odd = bytes.last().copied();
        }
        if let Some(resampler) = self.resampler.as_mut() {
            resampler.push(&samples, out)?;
        }
        Ok(())
    }

    /// espeak-ng closed its output: the resampler's tail, and its exit status.
    async fn end(&mut self, out: &mut Vec<i16>) -> Result<(), SpeakError> {
        let status = tokio::time::timeout_at(self.deadline, self.child.wait())
            .await
            .map_err(|_| SpeakError::TimedOut(self.limits.timeout))?
            .map_err(|e| SpeakError::Failed(e.to_string()))?;
        if !status.success() {
            return Err(SpeakError::Failed(status.to_string()));
        }
        match self.resampler.take() {
            Some(resampler) => Ok(resampler.finish(out)?),
            None => Err(SpeakError::Failed("no WAV on its output".into())),
        }
    }

    /// `samples` as bytes, within what is left of `max_bytes` (past it, espeak-ng is stopped).
    fn bounded(&mut self, samples: Vec<i16>) -> Option<Vec<u8>> {
        let room = self.limits.max_bytes.saturating_sub(self.sent) / 2;
        let samples = &samples[..samples.len().min(room)];
        if samples.len() == room && !self.done {
            self.done = true;
            // Dropping the child kills it; start_kill says so now.
            let _ = self.child.start_kill();
        }
        self.sent += samples.len() * 2;
        (!samples.is_empty()).then(|| pcm::bytes_of(samples))
    }
}

/// `text` cut to at most `max` characters, at a word when there is one.
fn cut_at_word(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        None => text,
        Some((end, _)) => {
            let head = &text[..end];
            head.rfind(char::is_whitespace)
                .map_or(head, |at| &head[..at])
        }
    }
}

/// The demo's reply as it streams, cut into sentences to speak one by one: each is spoken as
/// soon as it is complete, the rest at the end.
#[derive(Debug, Default)]
pub struct Sentences {
    pending: String,
}

impl Sentences {
    /// Takes a piece of the reply; gives the sentences it completed.
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.pending.push_str(delta);
        let mut done = Vec::new();
        while let Some(end) = sentence_end(&self.pending) {
            let sentence: String = self.pending.drain(..end).collect();
            done.extend(spoken(&sentence));
        }
        done
    }

    /// The reply ended: what is left.
    pub fn finish(&mut self) -> Option<String> {
        spoken(&std::mem::take(&mut self.pending))
    }
}

/// Where the first complete sentence ends: after `.`, `!`, `?` or `:` followed by white space,
/// or after a line break.
fn sentence_end(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '\n' {
            return Some(at + 1);
        }
        if matches!(c, '.' | '!' | '?' | ':')
            && chars.peek().is_some_and(|(_, next)| next.is_whitespace())
        {
            return Some(at + c.len_utf8());
        }
    }
    None
}

/// What of a sentence is said: Markdown's marks are not read out, and a sentence in Japanese
/// is shown but not spoken (espeak-ng's voice here is US English).
fn spoken(sentence: &str) -> Option<String> {
    let words: String = sentence
        .chars()
        .map(|c| {
            if matches!(c, '*' | '_' | '`' | '#' | '|' | '>') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    let japanese = words
        .chars()
        .any(|c| matches!(c, '\u{3040}'..='\u{30ff}' | '\u{4e00}'..='\u{9fff}'));
    (!words.is_empty() && words.chars().any(char::is_alphanumeric) && !japanese).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::demo::voice::programs::Programs;

    fn espeak() -> std::path::PathBuf {
        Programs::find()
            .espeak
            .expect("espeak-ng is installed (scripts/setup.sh)")
    }

    async fn say(text: &str, limits: SpeakLimits) -> (Vec<i16>, usize) {
        let mut synthesis = Synthesis::start(&espeak(), text, limits).await.unwrap();
        let (mut pcm, mut chunks) = (Vec::new(), 0);
        while let Some(chunk) = synthesis.next().await.unwrap() {
            assert_eq!(chunk.len() % 2, 0);
            pcm.extend(pcm::samples_of(&chunk));
            chunks += 1;
        }
        (pcm, chunks)
    }

    fn rms(samples: &[i16]) -> f64 {
        let sum: f64 = samples.iter().map(|&s| f64::from(s).powi(2)).sum();
        (sum / samples.len().max(1) as f64).sqrt()
    }

    #[tokio::test]
    async fn speech_comes_in_chunks_at_24_khz_as_long_as_the_words_take_and_is_not_silence() {
        let (short, chunks) = say("Pay forty euros to alice.", SpeakLimits::default()).await;
        let seconds = short.len() as f64 / f64::from(SPEAK_RATE);
        // Five words at espeak-ng's ~175 words a minute, with its pauses.
        assert!((1.0..3.0).contains(&seconds), "{seconds} s");
        assert!(chunks > 1, "streamed, not in one piece: {chunks}");
        assert!(rms(&short) > 500.0, "rms {}", rms(&short));
        // Three times the words, about three times the speech.
        let (long, _) = say(
            "Pay forty euros to alice. Pay forty euros to alice. Pay forty euros to alice.",
            SpeakLimits::default(),
        )
        .await;
        let ratio = long.len() as f64 / short.len() as f64;
        assert!((2.4..3.6).contains(&ratio), "{ratio}");
        // The same duration espeak-ng's own 22.05 kHz output has.
        let direct = std::process::Command::new(espeak())
            .args(ESPEAK_VOICE)
            .args(["--stdout", "Pay forty euros to alice."])
            .output()
            .unwrap();
        let (format, own) = pcm::read_wav(&direct.stdout).unwrap();
        let expected =
            (own.len() as u64 * u64::from(SPEAK_RATE)).div_ceil(u64::from(format.sample_rate));
        assert_eq!(short.len() as u64, expected);
    }

    #[tokio::test]
    async fn speech_past_its_limit_is_cut_and_espeak_stopped() {
        let limits = SpeakLimits {
            max_bytes: 4800,
            ..SpeakLimits::default()
        };
        let (pcm, _) = say(
            "A long sentence that takes several seconds to say out loud.",
            limits,
        )
        .await;
        assert_eq!(pcm.len() * 2, 4800);
        assert_eq!(cut_at_word("one two three", 9), "one two");
        assert_eq!(cut_at_word("one", 9), "one");
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_not_a_panic() {
        let error = Synthesis::start(
            Path::new("/nonexistent/espeak-ng"),
            "hello",
            SpeakLimits::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, SpeakError::Start(_)), "{error}");
    }

    #[test]
    fn a_streamed_reply_is_spoken_sentence_by_sentence() {
        let mut sentences = Sentences::default();
        let mut said = Vec::new();
        for piece in [
            "I paid **€40** ",
            "to alice. ",
            "Your balance ",
            "is €60",
            ".",
        ] {
            said.extend(sentences.push(piece));
        }
        assert_eq!(said, vec!["I paid €40 to alice."]);
        assert_eq!(sentences.finish().as_deref(), Some("Your balance is €60."));
        assert_eq!(sentences.finish(), None);
        assert_eq!(
            Sentences::default().push("花子さんに送金しました。\n"),
            Vec::<String>::new()
        );
        assert_eq!(Sentences::default().push("3.5 euros\n"), vec!["3.5 euros"]);
    }
}
