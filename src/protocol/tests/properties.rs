//! Property tests: chunks round-trip, the strict dialect emits only what `ai@6.0.0` accepts, and
//! no input panics the reducer, the conversation, the SSE decoders or the partial-JSON parser.

use super::strategies::*;
use super::*;

/// The keys `ai@6.0.0` accepts per chunk type (ui-message-chunks.ts at the
/// `ai@6.0.0` tag), as an independent check of the strict dialect.
fn v6_0_0_keys(chunk_type: &str) -> &'static [&'static str] {
    match chunk_type {
        "start" => &["messageId", "messageMetadata"],
        "finish" => &["finishReason", "messageMetadata"],
        "abort" | "start-step" | "finish-step" => &[],
        "error" => &["errorText"],
        "message-metadata" => &["messageMetadata"],
        "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => {
            &["id", "providerMetadata"]
        }
        "text-delta" | "reasoning-delta" => &["id", "delta", "providerMetadata"],
        "tool-input-start" => &[
            "toolCallId",
            "toolName",
            "providerExecuted",
            "dynamic",
            "title",
        ],
        "tool-input-delta" => &["toolCallId", "inputTextDelta"],
        "tool-input-available" => &[
            "toolCallId",
            "toolName",
            "input",
            "providerExecuted",
            "providerMetadata",
            "dynamic",
            "title",
        ],
        "tool-input-error" => &[
            "toolCallId",
            "toolName",
            "input",
            "providerExecuted",
            "providerMetadata",
            "dynamic",
            "errorText",
            "title",
        ],
        "tool-approval-request" => &["approvalId", "toolCallId"],
        "tool-output-available" => &[
            "toolCallId",
            "output",
            "providerExecuted",
            "dynamic",
            "preliminary",
        ],
        "tool-output-error" => &["toolCallId", "errorText", "providerExecuted", "dynamic"],
        "tool-output-denied" => &["toolCallId"],
        "source-url" => &["sourceId", "url", "title", "providerMetadata"],
        "source-document" => &[
            "sourceId",
            "mediaType",
            "title",
            "filename",
            "providerMetadata",
        ],
        "file" => &["url", "mediaType", "providerMetadata"],
        data if data.starts_with("data-") => &["id", "data", "transient"],
        _ => &[],
    }
}

proptest! {
    #[test]
    fn chunks_round_trip_through_json(chunk in arb_chunk()) {
        let text = chunk.to_json(Dialect::Full).expect("full dialect sends everything");
        prop_assert_eq!(Chunk::from_json(&text).unwrap(), chunk);
    }

    #[test]
    fn strict_dialect_only_emits_keys_that_ai_6_0_0_accepts(chunk in arb_chunk()) {
        match chunk.to_value(Dialect::V6Strict) {
            None => prop_assert!(matches!(chunk, Chunk::Unknown(_))),
            Some(Value::Object(map)) => {
                let chunk_type = map["type"].as_str().unwrap().to_owned();
                let allowed = v6_0_0_keys(&chunk_type);
                for key in map.keys().filter(|key| *key != "type") {
                    prop_assert!(allowed.contains(&key.as_str()), "{} on {}", key, chunk_type);
                }
                if let Some(reason) = map.get("finishReason") {
                    prop_assert!(["stop", "length", "content-filter", "tool-calls", "error", "other"].contains(&reason.as_str().unwrap()));
                }
                // What strict mode sends still decodes.
                prop_assert!(Chunk::from_value(Value::Object(map)).is_ok());
            }
            Some(other) => prop_assert!(false, "not an object: {}", other),
        }
    }

    #[test]
    fn the_reducer_never_panics_and_rejected_chunks_change_nothing(chunks in prop::collection::vec(arb_chunk(), 0..60)) {
        let mut reducer = MessageReducer::new("m0");
        for chunk in &chunks {
            let before = reducer.clone();
            if reducer.apply(chunk).is_err() {
                prop_assert_eq!(&reducer, &before);
            }
        }
        // Whatever happened, the message still serializes and decodes.
        let json = serde_json::to_value(reducer.message()).unwrap();
        prop_assert_eq!(&serde_json::from_value::<UiMessage>(json).unwrap(), reducer.message());
    }

    #[test]
    fn the_conversation_never_panics(chunks in prop::collection::vec(arb_chunk(), 0..40), regenerate in any::<bool>()) {
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u", "hi"), UiMessage::assistant("m1")]);
        let trigger = if regenerate { Trigger::RegenerateMessage } else { Trigger::SubmitMessage };
        conversation.begin_stream(trigger, "fresh");
        for (index, chunk) in chunks.iter().enumerate() {
            let _ = conversation.apply(chunk);
            if index % 7 == 3 {
                conversation.add_tool_approval_response("ap1", index % 2 == 0, None);
                conversation.add_tool_output("c2", json!(index));
            }
        }
        prop_assert!(conversation.end_stream().is_some());
    }

    #[test]
    fn sse_decoding_is_independent_of_how_bytes_are_split(
        chunks in prop::collection::vec(arb_chunk(), 0..12),
        ending in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut wire = String::from(": hello\n\n");
        for chunk in &chunks {
            wire.push_str(&encode_chunk(chunk, Dialect::Full).unwrap());
            wire.push_str("event: x\nid: 1\n\n");
        }
        wire.push_str(DONE_FRAME);
        let wire = wire.replace('\n', ending);
        let bytes = wire.as_bytes();

        let mut positions: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        positions.sort_unstable();
        let mut decoder = ChunkStreamDecoder::new();
        let mut frames = Vec::new();
        let mut start = 0;
        for end in positions.into_iter().chain([bytes.len()]) {
            frames.extend(decoder.push(&bytes[start..end]));
            start = end;
        }
        frames.extend(decoder.finish());
        let frames: Vec<StreamItem> = frames.into_iter().map(|frame| frame.unwrap()).collect();

        let mut expected: Vec<StreamItem> = chunks.into_iter().map(StreamItem::Chunk).collect();
        expected.push(StreamItem::Done);
        prop_assert_eq!(frames, expected);
    }

    #[test]
    fn byte_by_byte_equals_whole(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let whole = {
            let mut decoder = SseDecoder::with_max_event_size(64);
            let mut out = decoder.push(&bytes);
            out.extend(decoder.finish());
            out
        };
        let mut decoder = SseDecoder::with_max_event_size(64);
        let mut split = Vec::new();
        for byte in &bytes {
            split.extend(decoder.push(std::slice::from_ref(byte)));
        }
        split.extend(decoder.finish());
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(
        bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(b'\n'), Just(b'\r'), Just(b':')], 0..600),
        cut in any::<prop::sample::Index>(),
        cap in 1usize..128,
    ) {
        let at = cut.index(bytes.len() + 1);
        let mut sse = SseDecoder::with_max_event_size(cap);
        let _ = sse.push(&bytes[..at]);
        let _ = sse.push(&bytes[at..]);
        let _ = sse.finish();
        let mut chunks = ChunkStreamDecoder::new();
        let mut prefixed = b"data: ".to_vec();
        prefixed.extend_from_slice(&bytes);
        let _ = chunks.push(&prefixed);
        let _ = chunks.finish();
    }

    #[test]
    fn arbitrary_json_never_panics_any_decoder(value in arb_json(), kind in prop::sample::select(vec![
        "message", "tool_result", "ping", "resume", "audio_chunk", "text-delta", "tool-x", "data-y", "dynamic-tool", "start",
    ])) {
        let _ = ClientFrame::from_value(value.clone());
        let _ = Chunk::from_value(value.clone());
        let _ = serde_json::from_value::<ChatRequest>(value.clone());
        let _ = serde_json::from_value::<UiMessage>(value.clone());
        let mut tagged = match value {
            Value::Object(map) => map,
            other => Map::from_iter([("payload".to_owned(), other)]),
        };
        tagged.insert("type".into(), json!(kind));
        let tagged = Value::Object(tagged);
        let _ = ClientFrame::from_value(tagged.clone());
        let _ = Chunk::from_value(tagged.clone());
        let _ = crate::protocol::message::UiPart::from_value(tagged);
    }

    #[test]
    fn every_prefix_of_valid_json_parses_and_the_whole_is_complete(value in arb_json()) {
        let text = serde_json::to_string(&value).unwrap();
        for end in (0..text.len()).filter(|end| text.is_char_boundary(*end)) {
            let prefix = &text[..end];
            let parsed = parse_partial_json(prefix);
            let trimmed = prefix.trim();
            if !trimmed.is_empty() && trimmed != "-" {
                prop_assert!(parsed.value().is_some(), "{:?} -> {:?}", prefix, parsed);
            }
        }
        prop_assert_eq!(parse_partial_json(&text), PartialJson::Complete(value));
    }

    #[test]
    fn arbitrary_text_never_panics_the_partial_parser(text in "\\PC{0,40}|[\\[{\"\\\\u0-9a-f:,}\\]-]{0,40}") {
        let _ = parse_partial_json(&text);
    }
}
