//! Checks of the oracles in `src/lib.rs` (`cargo test` in `fuzz/`; the lib's own
//! unit-test build would pull in `src/protocol`'s tests, which need proptest).

use countersign_fuzz::protocol::{SseDecoder, SseError, SseEvent};
use countersign_fuzz::{json_eq_modulo_float_ulp, reference_sse, split_points};

fn whole(bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
    let mut decoder = SseDecoder::new();
    let mut out = decoder.push(bytes);
    out.extend(decoder.finish());
    out
}

#[test]
fn the_reference_agrees_with_the_decoder_on_the_unit_test_inputs() {
    for input in [
        &b"data: a\n\ndata: b\n\n"[..],
        b"data: a\r\n\r\ndata: b\r\n\r\n",
        b"data: a\r\rdata: b\r\r",
        b": ping\n\nevent: message\nid: 7\nretry: 1000\ndata: x\nfoo: bar\n\n:\n\n",
        b"data: {\"a\":\ndata:1}\ndata\n\n",
        b"data:  two\n\ndata:none\n\n",
        b"data:\n\nevent: x\n\n\n\n",
        b"data: [DONE]\n\n",
        b"data: [DONE] \n\n",
        b"\xEF\xBB\xBFdata: x\n\n",
        b"data: tail",
        b"data: ok\n\ndata: \xff\xfe\ndata: more\n\ndata: after\n\n",
        b": \xff\nid: \xfe\ndata: x\n\n",
        b"data: \xff",
        b"data: \xff\ndata: y",
        b"\r\n\xEF\xBB\xBFdata: not a bom line\n\n",
    ] {
        assert_eq!(whole(input), reference_sse(input), "{input:?}");
    }
    assert_eq!(reference_sse(b"data: x\n\n").len(), 1);
}

#[test]
fn split_points_cover_the_input() {
    let input: Vec<u8> = (0..=255).collect();
    for seed in 0..64 {
        assert_eq!(split_points(&input, seed).concat(), input);
    }
}

#[test]
fn float_tolerance_is_narrow() {
    let a = serde_json::json!({"x": [1.0, 2], "y": "s"});
    let b = serde_json::json!({"x": [f64::from_bits(1.0f64.to_bits() + 1), 2], "y": "s"});
    assert!(json_eq_modulo_float_ulp(&a, &b));
    assert!(!json_eq_modulo_float_ulp(
        &a,
        &serde_json::json!({"x": [1.1, 2], "y": "s"})
    ));
    assert!(!json_eq_modulo_float_ulp(
        &serde_json::json!(1),
        &serde_json::json!(2)
    ));
}

/// Why the targets compare floats modulo ULPs: with the main crate's features
/// (no `float_roundtrip`), serde_json does not always parse back what it printed.
#[test]
fn serde_json_float_printing_is_not_always_reparsed_exactly() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut misses = 0;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let x = f64::from_bits(state);
        if !x.is_finite() {
            continue;
        }
        let printed = serde_json::to_string(&x).unwrap();
        let back: f64 = serde_json::from_str(&printed).unwrap();
        if back != x {
            assert!(json_eq_modulo_float_ulp(
                &serde_json::json!(x),
                &serde_json::json!(back)
            ));
            misses += 1;
        }
    }
    eprintln!("{misses} of 200000 random doubles did not re-parse exactly");
}
