//! Writes the committed voice clips (tests/fixtures/voice/, see its README): each phrase spoken
//! by espeak-ng with the demo's own voice, resampled with the demo's own resampler.
//!
//! `scripts/voice-fixtures.sh` runs it: `cargo run --example voice_fixtures --no-default-features
//! --features ssr -- <dir>`.

use std::{io::Write, path::PathBuf, process::Stdio};

use countersign::models::{demo::voice::ESPEAK_VOICE, pcm};

/// File, words, sample rate.
const CLIPS: &[(&str, &str, u32)] = &[
    ("pay.wav", "pay forty euros to alice", pcm::LISTEN_RATE),
    ("yes.wav", "yes, approve it", pcm::LISTEN_RATE),
    ("no.wav", "no, deny it", pcm::LISTEN_RATE),
    (
        "agent.wav",
        "Waiting for your countersignature.",
        pcm::SPEAK_RATE,
    ),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: voice_fixtures <dir>")?,
    );
    std::fs::create_dir_all(&dir)?;
    for (file, words, rate) in CLIPS {
        let mut child = std::process::Command::new("espeak-ng")
            .args(ESPEAK_VOICE)
            .arg("--stdout")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or("espeak-ng stdin")?
            .write_all(words.as_bytes())?;
        let output = child.wait_with_output()?;
        if !output.status.success() {
            return Err(format!("espeak-ng failed on {words:?}").into());
        }
        let (format, samples) = pcm::read_wav(&output.stdout)?;
        let samples = pcm::resample_all(&samples, format.sample_rate, *rate)?;
        std::fs::write(dir.join(file), pcm::wav_bytes(&samples, *rate)?)?;
        println!("{file}: {words:?}, {} samples at {rate} Hz", samples.len());
    }
    Ok(())
}
