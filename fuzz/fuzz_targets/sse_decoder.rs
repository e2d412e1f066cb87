//! The fuzz target `sse_decoder`: its invariants and code are in `src/targets/sse_decoder.rs`, where the
//! committed corpus is also replayed on stable (`tests/corpus.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| countersign_fuzz::targets::sse_decoder::check(input));
