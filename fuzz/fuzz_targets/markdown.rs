//! The fuzz target `markdown`: its invariants and code are in `src/targets/markdown.rs`, where the
//! committed corpus is also replayed on stable (`tests/corpus.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| countersign_fuzz::targets::markdown::check(input));
