//! A recording's JSONL lines read into chunks: which lines are the server's output, and a
//! malformed line as an error with its line number.

use super::*;

/// One line of the file, before its chunk is looked at.
pub(super) struct Line {
    pub(super) number: usize,
    pub(super) direction: String,
    pub(super) chunk: Value,
}

pub(super) fn parse_lines(file: &str, text: &str) -> Result<Vec<Line>, ReplayError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let not_a_line = |reason| ReplayError::NotALogLine {
            file: file.to_owned(),
            line: number,
            reason,
        };
        let value: Value = serde_json::from_str(raw).map_err(|source| ReplayError::Json {
            file: file.to_owned(),
            line: number,
            source,
        })?;
        let Value::Object(mut map) = value else {
            return Err(not_a_line("not a JSON object"));
        };
        let direction = match map.remove("direction") {
            Some(Value::String(direction)) => direction,
            _ => return Err(not_a_line("no string `direction`")),
        };
        let chunk = map
            .remove("chunk")
            .ok_or_else(|| not_a_line("no `chunk`"))?;
        lines.push(Line {
            number,
            direction,
            chunk,
        });
    }
    Ok(lines)
}

/// The chunk of a line that is replayed: `None` for `"[DONE]"` and for unknown types.
pub(super) fn decode(file: &str, line: usize, chunk: Value) -> Result<Option<Chunk>, ReplayError> {
    let not_a_chunk = |reason: String| ReplayError::NotAChunk {
        file: file.to_owned(),
        line,
        reason,
    };
    match chunk {
        // The end of a response (SSE) or of a turn: turns are cut at `start`, not here.
        Value::String(text) if text == "[DONE]" => Ok(None),
        Value::String(text) => Err(not_a_chunk(format!(
            "the string {:?} (only \"[DONE]\" may be a string)",
            shorten(&text)
        ))),
        Value::Object(map) if has_string_type(&map) => {
            match Chunk::from_value(Value::Object(map)) {
                Ok(Chunk::Unknown(_)) => Ok(None),
                Ok(chunk) => Ok(Some(chunk)),
                Err(source) => Err(ReplayError::InvalidChunk {
                    file: file.to_owned(),
                    line,
                    source,
                }),
            }
        }
        Value::Object(_) => Err(not_a_chunk("an object without a string `type`".into())),
        _ => Err(not_a_chunk(
            "neither an object with a `type` nor \"[DONE]\"".into(),
        )),
    }
}

fn has_string_type(map: &Map<String, Value>) -> bool {
    matches!(map.get("type"), Some(Value::String(_)))
}

/// The first 40 characters, for error messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
