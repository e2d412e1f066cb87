//! The chunk log: every chunk and frame this page received or sent, in order, shown in the
//! "Chunk log" panel and downloadable as JSONL for bug reports.

use leptos::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::ChatCtl;
use crate::ui::platform;

/// One line of the chunk log (the same shape as the server's `COUNTERSIGN_CHUNK_LOG`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoggedChunk {
    pub timestamp: i64,
    pub session: String,
    pub mode: &'static str,
    pub direction: &'static str,
    pub sequence_number: u64,
    pub chunk: Value,
}

/// The log as JSON Lines.
fn to_jsonl(log: &[LoggedChunk]) -> String {
    log.iter()
        .filter_map(|e| serde_json::to_string(e).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

fn file_name(chat_id: &str) -> String {
    format!("countersign-{chat_id}.jsonl")
}

impl ChatCtl {
    /// Logs what arrived over `mode`'s transport.
    pub(super) fn log_in(self, chunk: Value, mode: &'static str) {
        self.push_log(chunk, mode, "in");
    }

    /// Logs what is sent (under the mode the page is in).
    pub(super) fn log_out(self, chunk: Value) {
        let mode = self.mode.get_untracked().as_str();
        self.push_log(chunk, mode, "out");
    }

    fn push_log(self, chunk: Value, mode: &'static str, direction: &'static str) {
        let entry = LoggedChunk {
            timestamp: platform::now_ms(),
            session: self.chat_id.get_untracked(),
            mode,
            direction,
            sequence_number: self.next_sequence(),
            chunk,
        };
        self.log.update(|l| l.push(entry));
    }

    fn next_sequence(self) -> u64 {
        self.sequence
            .try_update_value(|n| {
                *n += 1;
                *n
            })
            .unwrap_or(0)
    }

    /// Downloads the chunk log as JSONL.
    pub fn download_log(self) {
        leptos::task::spawn_local(download(self));
    }
}

/// Downloads `ctl`'s chunk log. With a split wasm (ADR 0030) this is a part of its own, loaded
/// when the log is first downloaded.
#[cfg_attr(wasm_split, leptos::lazy(log_download))]
async fn download(ctl: ChatCtl) {
    let text = ctl.log.with_untracked(|l| to_jsonl(l));
    let name = file_name(&ctl.chat_id.get_untracked());
    if let Err(e) = platform::download(&name, &text, "application/x-ndjson") {
        ctl.show_error(format!("Cannot download the log: {e}"), false);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_log_downloads_as_one_json_object_per_line() {
        let entry = |n: u64, direction, chunk| LoggedChunk {
            timestamp: 1_700_000_000_000,
            session: "chat-1".into(),
            mode: "sse",
            direction,
            sequence_number: n,
            chunk,
        };
        let log = [
            entry(1, "out", json!({"type": "stop"})),
            entry(2, "in", json!("[DONE]")),
        ];
        let text = to_jsonl(&log);
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect();
        assert_eq!(
            lines,
            [
                json!({"timestamp": 1_700_000_000_000_i64, "session": "chat-1", "mode": "sse",
                       "direction": "out", "sequence_number": 1, "chunk": {"type": "stop"}}),
                json!({"timestamp": 1_700_000_000_000_i64, "session": "chat-1", "mode": "sse",
                       "direction": "in", "sequence_number": 2, "chunk": "[DONE]"}),
            ]
        );
        assert_eq!(to_jsonl(&[]), "");
        assert_eq!(file_name("chat-1"), "countersign-chat-1.jsonl");
    }
}
