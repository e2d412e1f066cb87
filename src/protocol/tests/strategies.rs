//! The generators of the property tests: small JSON values, colliding ids, and every chunk
//! variant with every optional field sometimes set.

use super::*;

/// Small JSON values without floats (floats need serde_json's
/// `float_roundtrip` feature to round-trip bit-exactly).
pub(super) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z€日\"\\\\\n ]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}|type|id", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

pub(super) fn arb_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[pq]", arb_json(), 0..3).prop_map(|map| map.into_iter().collect())
}

/// Tiny id alphabets so starts, deltas and results collide often.
pub(super) fn part_id() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b"]).prop_map(str::to_owned)
}

pub(super) fn call_id() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["c1", "c2", "c3"]).prop_map(str::to_owned)
}

pub(super) fn tool_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["t", "get-weather"]).prop_map(str::to_owned)
}

pub(super) fn text() -> impl Strategy<Value = String> {
    "[a-z {\":,}0-9€]{0,6}"
}

pub(super) fn arb_finish_reason() -> impl Strategy<Value = FinishReason> {
    prop::sample::select(vec![
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::ContentFilter,
        FinishReason::ToolCalls,
        FinishReason::Error,
        FinishReason::Other,
        FinishReason::Unknown("safety".into()),
    ])
}

/// Every chunk variant, with every optional field sometimes set.
pub(super) fn arb_chunk() -> impl Strategy<Value = Chunk> {
    let opt_bool = || proptest::option::of(any::<bool>());
    let opt_text = || proptest::option::of(text());
    let opt_meta = || proptest::option::of(arb_object());
    let boundary = || {
        (part_id(), opt_meta()).prop_map(|(id, provider_metadata)| chunk::Boundary {
            id,
            provider_metadata,
        })
    };
    let delta = || {
        (part_id(), text(), opt_meta()).prop_map(|(id, delta, provider_metadata)| chunk::Delta {
            id,
            delta,
            provider_metadata,
        })
    };
    let lifecycle = prop_oneof![
        (
            proptest::option::of("m[12]"),
            proptest::option::of(arb_json())
        )
            .prop_map(|(message_id, message_metadata)| Chunk::Start(chunk::Start {
                message_id,
                message_metadata
            })),
        Just(Chunk::StartStep),
        Just(Chunk::FinishStep),
        (
            proptest::option::of(arb_finish_reason()),
            proptest::option::of(arb_json())
        )
            .prop_map(
                |(finish_reason, message_metadata)| Chunk::Finish(chunk::Finish {
                    finish_reason,
                    message_metadata
                })
            ),
        opt_text().prop_map(|reason| Chunk::Abort(chunk::Abort { reason })),
        text().prop_map(Chunk::error),
        arb_json().prop_map(Chunk::message_metadata),
    ];
    let text_chunks = prop_oneof![
        boundary().prop_map(Chunk::TextStart),
        delta().prop_map(Chunk::TextDelta),
        boundary().prop_map(Chunk::TextEnd),
        boundary().prop_map(Chunk::ReasoningStart),
        delta().prop_map(Chunk::ReasoningDelta),
        boundary().prop_map(Chunk::ReasoningEnd),
    ];
    let tool_input = prop_oneof![
        (
            call_id(),
            tool_name(),
            opt_bool(),
            opt_bool(),
            opt_text(),
            opt_meta(),
            opt_meta()
        )
            .prop_map(
                |(
                    tool_call_id,
                    tool_name,
                    provider_executed,
                    dynamic,
                    title,
                    provider_metadata,
                    tool_metadata,
                )| {
                    Chunk::ToolInputStart(Box::new(chunk::ToolInputStart {
                        tool_call_id,
                        tool_name,
                        provider_executed,
                        dynamic,
                        title,
                        provider_metadata,
                        tool_metadata,
                    }))
                }
            ),
        (call_id(), text()).prop_map(|(id, delta)| Chunk::tool_input_delta(id, delta)),
        (
            call_id(),
            tool_name(),
            arb_json(),
            opt_bool(),
            opt_meta(),
            opt_bool(),
            opt_text(),
            opt_meta()
        )
            .prop_map(
                |(
                    tool_call_id,
                    tool_name,
                    input,
                    provider_executed,
                    provider_metadata,
                    dynamic,
                    title,
                    tool_metadata,
                )| {
                    Chunk::ToolInputAvailable(Box::new(chunk::ToolInputAvailable {
                        tool_call_id,
                        tool_name,
                        input,
                        provider_executed,
                        provider_metadata,
                        dynamic,
                        title,
                        tool_metadata,
                    }))
                }
            ),
        (
            call_id(),
            tool_name(),
            arb_json(),
            text(),
            opt_bool(),
            opt_meta(),
            opt_bool(),
            opt_text(),
            opt_meta()
        )
            .prop_map(
                |(
                    tool_call_id,
                    tool_name,
                    input,
                    error_text,
                    provider_executed,
                    provider_metadata,
                    dynamic,
                    title,
                    tool_metadata,
                )| {
                    Chunk::ToolInputError(Box::new(chunk::ToolInputError {
                        tool_call_id,
                        tool_name,
                        input,
                        error_text,
                        provider_executed,
                        provider_metadata,
                        dynamic,
                        title,
                        tool_metadata,
                    }))
                }
            ),
    ];
    let tool_output = prop_oneof![
        ("ap[12]", call_id(), opt_text()).prop_map(|(approval_id, tool_call_id, signature)| {
            Chunk::ToolApprovalRequest(Box::new(chunk::ToolApprovalRequest {
                approval_id,
                tool_call_id,
                signature,
                ..Default::default()
            }))
        }),
        (
            call_id(),
            arb_json(),
            opt_bool(),
            opt_bool(),
            opt_bool(),
            opt_meta(),
            opt_meta()
        )
            .prop_map(
                |(
                    tool_call_id,
                    output,
                    provider_executed,
                    dynamic,
                    preliminary,
                    provider_metadata,
                    tool_metadata,
                )| {
                    Chunk::ToolOutputAvailable(Box::new(chunk::ToolOutputAvailable {
                        tool_call_id,
                        output,
                        provider_executed,
                        dynamic,
                        preliminary,
                        provider_metadata,
                        tool_metadata,
                    }))
                }
            ),
        (
            call_id(),
            text(),
            opt_bool(),
            opt_bool(),
            opt_meta(),
            opt_meta()
        )
            .prop_map(
                |(
                    tool_call_id,
                    error_text,
                    provider_executed,
                    dynamic,
                    provider_metadata,
                    tool_metadata,
                )| {
                    Chunk::ToolOutputError(Box::new(chunk::ToolOutputError {
                        tool_call_id,
                        error_text,
                        provider_executed,
                        dynamic,
                        provider_metadata,
                        tool_metadata,
                    }))
                }
            ),
        call_id().prop_map(Chunk::tool_output_denied),
    ];
    let content = prop_oneof![
        (text(), text(), opt_text(), opt_meta()).prop_map(
            |(source_id, url, title, provider_metadata)| {
                Chunk::SourceUrl(chunk::SourceUrl {
                    source_id,
                    url,
                    title,
                    provider_metadata,
                })
            }
        ),
        (text(), text(), text(), opt_text()).prop_map(
            |(source_id, media_type, title, filename)| {
                Chunk::SourceDocument(chunk::SourceDocument {
                    source_id,
                    media_type,
                    title,
                    filename,
                    provider_metadata: None,
                })
            }
        ),
        (text(), text(), opt_meta()).prop_map(|(url, media_type, provider_metadata)| {
            Chunk::File(chunk::File {
                url,
                media_type,
                provider_metadata,
            })
        }),
        (
            "[a-z-]{0,5}",
            proptest::option::of(part_id()),
            arb_json(),
            opt_bool()
        )
            .prop_map(|(name, id, data, transient)| {
                Chunk::Data(chunk::DataChunk {
                    name,
                    id,
                    data,
                    transient,
                })
            }),
        (
            prop::sample::select(vec!["custom", "reasoning-file", "reset-step"]),
            arb_json()
        )
            .prop_map(|(kind, extra)| { Chunk::Unknown(json!({"type": kind, "extra": extra})) }),
    ];
    prop_oneof![lifecycle, text_chunks, tool_input, tool_output, content]
}
