//! Replays every committed fuzz input through its target's checks, on stable (CI runs this:
//! `cargo test --no-default-features` in `fuzz/`). A regression in the protocol code, the
//! WebSocket framing or the Markdown parser that an input of the corpus once exercised fails
//! here, without nightly or libFuzzer.
//!
//! The inputs: `seeds/<target>/` (written by `seeds/make_seeds.py`) and `minimized/<target>/`,
//! the corpus libFuzzer grew (`corpus/`, not committed), minimised with `cargo fuzz cmin` and
//! committed by `scripts/fuzz.sh --keep`.

use std::path::{Path, PathBuf};

use countersign_fuzz::targets;

fn inputs(target: &str) -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = ["seeds", "minimized"]
        .iter()
        .map(|dir| here.join(dir).join(target))
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    let files = inputs(target);
    assert!(!files.is_empty(), "no committed inputs for {target}");
    for file in &files {
        let input = std::fs::read(file).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&input));
        assert!(outcome.is_ok(), "{target}: {} fails", file.display());
    }
    eprintln!("{target}: {} inputs replayed", files.len());
}

#[test]
fn sse_decoder() {
    replay("sse_decoder", targets::sse_decoder::check);
}

#[test]
fn chunk_decode() {
    replay("chunk_decode", targets::chunk_decode::check);
}

#[test]
fn ws_envelope() {
    replay("ws_envelope", targets::ws_envelope::check);
}

#[test]
fn ws_frame() {
    replay("ws_frame", targets::ws_frame::check);
}

#[test]
fn markdown() {
    replay("markdown", targets::markdown::check);
}
