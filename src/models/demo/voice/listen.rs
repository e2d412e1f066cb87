//! Listening: an utterance (PCM16LE mono, 16 kHz) is written as a WAV into the recogniser's
//! private directory and `pocketsphinx_continuous` reads it with the demo's own grammar
//! (`nlu::spoken_grammar`, restricted to the words its dictionary has). A child process per
//! utterance, no shell, killed when dropped or late; its output is read up to a bound.

use std::{
    collections::HashSet,
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::Stdio,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::{io::AsyncReadExt as _, process::Command};

use super::programs::Listener;
use crate::models::demo::nlu;
use crate::models::pcm::{self, LISTEN_RATE};

/// The longest utterance heard: 60 s at 16 kHz (longer speech is cut there).
pub const MAX_UTTERANCE_BYTES: usize = 60 * 2 * LISTEN_RATE as usize;
/// How long the recogniser may take for one utterance.
const TIMEOUT: Duration = Duration::from_secs(20);
/// The most of its output read (a hypothesis is a line of words).
const MAX_OUTPUT: u64 = 16 * 1024;

/// Why an utterance was not heard.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("the recogniser's files could not be written: {0}")]
    Files(#[from] std::io::Error),
    #[error("pocketsphinx could not be started: {0}")]
    Start(std::io::Error),
    #[error("pocketsphinx failed: {0}")]
    Failed(String),
    #[error("pocketsphinx took longer than {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Audio(#[from] pcm::PcmError),
}

/// The recogniser, ready: its private directory holds the grammar.
#[derive(Debug)]
pub struct Recogniser {
    listener: Listener,
    dir: tempfile::TempDir,
    grammar: PathBuf,
    next: AtomicU64,
}

impl Recogniser {
    /// Writes the grammar (only words the dictionary has) into a new private directory.
    pub fn new(listener: Listener) -> Result<Self, ListenError> {
        let wanted: HashSet<String> = nlu::spoken_words().into_iter().collect();
        let mut known = HashSet::new();
        // The dictionary is ~3 MB: read once, line by line, keeping only the grammar's words.
        for line in BufReader::new(std::fs::File::open(&listener.dict)?).lines() {
            let line = line?;
            if let Some(word) = line.split_whitespace().next()
                && wanted.contains(word)
            {
                known.insert(word.to_owned());
            }
        }
        // Readable by this process's user only (tempfile's default follows the umask).
        let dir = tempfile::Builder::new()
            .prefix("countersign-voice-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()?;
        let grammar = dir.path().join("demo.gram");
        std::fs::write(&grammar, nlu::spoken_grammar(|w| known.contains(w)))?;
        Ok(Recogniser {
            listener,
            dir,
            grammar,
            next: AtomicU64::new(0),
        })
    }

    /// How many utterances it was asked to hear.
    pub fn asked(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// What was said in `utterance` (PCM16LE mono, 16 kHz), as the recogniser's words
    /// (lowercase; empty when it heard nothing it knows).
    pub async fn recognise(&self, utterance: &[u8]) -> Result<String, ListenError> {
        let utterance = &utterance[..utterance.len().min(MAX_UTTERANCE_BYTES) & !1];
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let wav = Utterance(self.dir.path().join(format!("utterance-{n}.wav")));
        std::fs::write(
            &wav.0,
            pcm::wav_bytes(&pcm::samples_of(utterance), LISTEN_RATE)?,
        )?;
        let mut child = Command::new(&self.listener.program)
            .arg("-infile")
            .arg(&wav.0)
            .arg("-jsgf")
            .arg(&self.grammar)
            .arg("-hmm")
            .arg(&self.listener.model)
            .arg("-dict")
            .arg(&self.listener.dict)
            .args(["-logfn", "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(ListenError::Start)?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ListenError::Failed("no output pipe".into()))?;
        let run = async {
            let mut out = Vec::new();
            stdout
                .take(MAX_OUTPUT)
                .read_to_end(&mut out)
                .await
                .map_err(|e| ListenError::Failed(e.to_string()))?;
            let status = child
                .wait()
                .await
                .map_err(|e| ListenError::Failed(e.to_string()))?;
            if !status.success() {
                return Err(ListenError::Failed(status.to_string()));
            }
            Ok(out)
        };
        let out = tokio::time::timeout(TIMEOUT, run)
            .await
            .map_err(|_| ListenError::TimedOut(TIMEOUT))??;
        // One line per stretch of speech it found.
        Ok(String::from_utf8_lossy(&out)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// An utterance's WAV, removed once heard.
struct Utterance(PathBuf);

impl Drop for Utterance {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::demo::voice::programs::Programs;

    fn recogniser() -> Recogniser {
        let listener = Programs::find()
            .listener
            .expect("pocketsphinx and pocketsphinx-en-us are installed (scripts/setup.sh)");
        Recogniser::new(listener).unwrap()
    }

    fn clip(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/voice/{name}", env!("CARGO_MANIFEST_DIR"));
        let (format, samples) = pcm::read_wav(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(format.sample_rate, LISTEN_RATE);
        pcm::bytes_of(&samples)
    }

    #[tokio::test]
    async fn each_committed_clip_is_heard_as_its_words() {
        let recogniser = recogniser();
        for (file, words) in [
            ("pay.wav", "pay forty euros to alice"),
            ("yes.wav", "yes approve it"),
            ("no.wav", "no deny it"),
        ] {
            assert_eq!(
                recogniser.recognise(&clip(file)).await.unwrap(),
                words,
                "{file}"
            );
        }
        // Nothing is left behind but the grammar.
        let files = std::fs::read_dir(recogniser.dir.path()).unwrap().count();
        assert_eq!(files, 1);
    }

    /// A browser's automatic gain control hands the words over quieter or louder than they
    /// were said, clipped where they peak (Chromium's capture of pay.wav, whose peak is 23,082,
    /// peaked at 32,700): from a quarter of the level to six times it, clipped, they are still
    /// heard as the same payment ("euro" or "euros", both EUR). At ten times it is noise.
    #[tokio::test]
    async fn a_clip_quieter_or_louder_and_clipped_is_heard_as_its_words() {
        let recogniser = recogniser();
        let samples = pcm::samples_of(&clip("pay.wav"));
        for gain in [0.25_f32, 0.5, 1.42, 2.0, 4.0, 6.0] {
            let scaled: Vec<i16> = samples
                .iter()
                .map(|&s| (f32::from(s) * gain).clamp(-32768.0, 32767.0) as i16)
                .collect();
            let heard = recogniser.recognise(&pcm::bytes_of(&scaled)).await.unwrap();
            assert!(
                ["pay forty euros to alice", "pay forty euro to alice"].contains(&heard.as_str()),
                "gain {gain}: {heard:?}"
            );
        }
    }

    #[tokio::test]
    async fn silence_is_heard_as_nothing() {
        let heard = recogniser().recognise(&vec![0u8; 32_000]).await.unwrap();
        assert_eq!(heard, "");
    }

    #[test]
    fn the_grammar_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let recogniser = recogniser();
        let mode = std::fs::metadata(recogniser.dir.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        let grammar = std::fs::read_to_string(&recogniser.grammar).unwrap();
        assert!(grammar.contains("alice"), "{grammar}");
    }
}
