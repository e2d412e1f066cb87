//! History → request: the conversation as `contents`, tools as function declarations,
//! attachments as inline or file data, and thought signatures where Gemini 3 needs them.

use super::wire::{
    Blob, Content, FileData, FunctionCall, FunctionDeclaration, FunctionResponse,
    GenerateContentRequest, GenerationConfig, Part, ThinkingConfig, Tool,
};
use super::*;

pub(super) fn build_request(
    request: &ModelRequest,
    model: &str,
    include_thoughts: bool,
) -> GenerateContentRequest {
    let system_instruction = (!request.system.is_empty()).then(|| Content {
        role: None,
        parts: vec![Part {
            text: Some(request.system.clone()),
            ..Part::default()
        }],
    });
    let tools = if request.tools.is_empty() {
        Vec::new()
    } else {
        vec![Tool {
            function_declarations: request.tools.iter().map(declaration).collect(),
        }]
    };
    GenerateContentRequest {
        contents: contents(&request.history, is_gemini_3_or_later(model)),
        system_instruction,
        tools,
        generation_config: include_thoughts.then_some(GenerationConfig {
            thinking_config: ThinkingConfig {
                include_thoughts: true,
            },
        }),
    }
}

pub(in crate::models::providers) fn declaration(tool: &ToolDeclaration) -> FunctionDeclaration {
    FunctionDeclaration {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters_json_schema: tool.parameters.clone(),
    }
}

/// `gemini-3-flash-preview`, `gemini-3.1-pro`, … (the models that validate signatures).
pub(super) fn is_gemini_3_or_later(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("gemini-") else {
        return false;
    };
    let major: String = rest.chars().take_while(char::is_ascii_digit).collect();
    major.parse::<u32>().is_ok_and(|major| major >= 3)
}

pub(in crate::models::providers) fn contents(
    history: &[HistoryItem],
    sign_missing: bool,
) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::new();
    // The calls of the latest assistant item, to find each result's Gemini id.
    let mut last_calls: Vec<&ToolCall> = Vec::new();
    let mut injected = 0usize;
    for item in history {
        let (role, parts) = match item {
            HistoryItem::User { text, attachments } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(text_part(text.clone()));
                }
                parts.extend(attachments.iter().map(attachment_part));
                ("user", parts)
            }
            HistoryItem::Assistant { parts } => {
                last_calls = parts
                    .iter()
                    .filter_map(|p| match p {
                        AssistantPart::ToolCall { call } => Some(call),
                        _ => None,
                    })
                    .collect();
                let mut parts: Vec<Part> = parts.iter().filter_map(model_part).collect();
                if sign_missing && sign_first_call(&mut parts) {
                    injected += 1;
                }
                ("model", parts)
            }
            HistoryItem::ToolResults { results } => {
                let parts = results
                    .iter()
                    .enumerate()
                    .map(|(i, result)| {
                        let call = last_calls
                            .iter()
                            .find(|c| c.id == result.call_id)
                            .or_else(|| last_calls.get(i));
                        Part {
                            function_response: Some(FunctionResponse {
                                id: call.and_then(|c| google_str(&c.provider_data, "id")),
                                name: result.name.clone(),
                                response: as_object(result.model_view(), "result"),
                            }),
                            ..Part::default()
                        }
                    })
                    .collect();
                ("user", parts)
            }
            // A client's copy of earlier messages (ADR 0020): plain text, never calls.
            HistoryItem::Context { speaker, text } => {
                let role = match speaker {
                    ContextRole::User => "user",
                    ContextRole::Assistant => "model",
                };
                (role, vec![text_part(text.clone())])
            }
        };
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if role == "user" && last.role.as_deref() == Some("user") => {
                last.parts.extend(parts)
            }
            _ => out.push(Content {
                role: Some(role.to_owned()),
                parts,
            }),
        }
    }
    if injected > 0 {
        tracing::warn!(
            steps = injected,
            "replaying Gemini function calls without a thought signature (history from another \
             model?); sent the documented skip_thought_signature_validator instead"
        );
    }
    out
}

fn text_part(text: String) -> Part {
    Part {
        text: Some(text),
        ..Part::default()
    }
}

/// One part of a model step as Gemini sent it. Empty text carries nothing and is left out.
fn model_part(part: &AssistantPart) -> Option<Part> {
    match part {
        AssistantPart::Text {
            text,
            provider_data,
        } => {
            let signature = google_str(provider_data, "thoughtSignature");
            (!text.is_empty() || signature.is_some()).then(|| Part {
                text: Some(text.clone()),
                thought_signature: signature,
                ..Part::default()
            })
        }
        AssistantPart::Reasoning {
            text,
            provider_data,
        } => (!text.is_empty()).then(|| Part {
            text: Some(text.clone()),
            thought: Some(true),
            thought_signature: google_str(provider_data, "thoughtSignature"),
            ..Part::default()
        }),
        AssistantPart::ToolCall { call } => Some(Part {
            function_call: Some(FunctionCall {
                id: google_str(&call.provider_data, "id"),
                name: call.name.clone(),
                args: Some(as_object(call.args.clone(), "raw_arguments")),
            }),
            thought_signature: google_str(&call.provider_data, "thoughtSignature"),
            ..Part::default()
        }),
    }
}

/// Puts the sentinel on the first function call of a step none of whose calls is signed.
/// Returns whether it did.
fn sign_first_call(parts: &mut [Part]) -> bool {
    let mut calls = parts.iter_mut().filter(|p| p.function_call.is_some());
    let Some(first) = calls.next() else {
        return false;
    };
    if first.thought_signature.is_some() {
        return false;
    }
    if calls.any(|p| p.thought_signature.is_some()) {
        return false;
    }
    first.thought_signature = Some(SKIP_SIGNATURE_VALIDATOR.to_owned());
    true
}

/// A JSON object as is; anything else wrapped as `{key: value}` (Gemini wants a `Struct`).
pub(in crate::models::providers) fn as_object(value: Value, key: &str) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({ key: other }),
    }
}

/// `provider_data.google.<key>` as a string.
fn google_str(provider_data: &Option<Value>, key: &str) -> Option<String> {
    provider_data
        .as_ref()?
        .get(NAMESPACE)?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

/// `{"google": {...}}` with the given fields, or `None` when there are none.
pub(super) fn google_data(fields: &[(&str, Option<&String>)]) -> Option<Value> {
    let map: Map<String, Value> = fields
        .iter()
        .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), Value::String(v.clone()))))
        .collect();
    (!map.is_empty()).then(|| json!({ NAMESPACE: map }))
}

fn attachment_part(attachment: &Attachment) -> Part {
    match DataUrl::parse(&attachment.url) {
        Some(data) => Part {
            inline_data: Some(Blob {
                mime_type: if attachment.media_type.is_empty() {
                    data.media_type.to_owned()
                } else {
                    attachment.media_type.clone()
                },
                data: data.base64(),
            }),
            ..Part::default()
        },
        None => Part {
            file_data: Some(FileData {
                mime_type: attachment.media_type.clone(),
                file_uri: attachment.url.clone(),
            }),
            ..Part::default()
        },
    }
}

/// A `data:` URL, split. Browsers produce `data:<type>;base64,<data>`; a plain (percent-encoded)
/// one is accepted too and base64-encoded here.
pub(super) struct DataUrl<'a> {
    pub(super) media_type: &'a str,
    is_base64: bool,
    pub(super) data: &'a str,
}

impl<'a> DataUrl<'a> {
    pub(super) fn parse(url: &'a str) -> Option<Self> {
        let rest = url
            .strip_prefix("data:")
            .or_else(|| url.strip_prefix("DATA:"))?;
        let (meta, data) = rest.split_once(',')?;
        let is_base64 = meta
            .rsplit(';')
            .next()
            .is_some_and(|p| p.eq_ignore_ascii_case("base64"));
        let media_type = meta.split(';').next().unwrap_or_default();
        Some(Self {
            media_type,
            is_base64,
            data,
        })
    }

    pub(super) fn base64(&self) -> String {
        if self.is_base64 {
            self.data.to_owned()
        } else {
            use base64::Engine;
            let bytes: Vec<u8> = percent_encoding::percent_decode_str(self.data).collect();
            base64::engine::general_purpose::STANDARD.encode(bytes)
        }
    }
}
