//! The fuzz target `chunk_decode`: its invariants and code are in `src/targets/chunk_decode.rs`, where the
//! committed corpus is also replayed on stable (`tests/corpus.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| countersign_fuzz::targets::chunk_decode::check(input));
