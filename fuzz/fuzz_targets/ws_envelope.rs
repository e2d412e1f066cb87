//! The fuzz target `ws_envelope`: its invariants and code are in `src/targets/ws_envelope.rs`, where the
//! committed corpus is also replayed on stable (`tests/corpus.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| countersign_fuzz::targets::ws_envelope::check(input));
