//! What this browser remembers between visits (localStorage): the transport chosen, the chat
//! open, and the chats it has had.

use serde::{Deserialize, Serialize};

use super::state::Mode;
use crate::ui::platform;

/// The keys. Browsers already hold values under them: renaming one forgets what they hold.
const MODE_KEY: &str = "countersign.mode";
const CHAT_KEY: &str = "countersign.chat";
const CHATS_KEY: &str = "countersign.chats";

/// How many chats the list keeps, and how much of a chat's first message names it.
const MAX_CHATS: usize = 50;
const TITLE_CHARS: usize = 60;

/// A chat this browser has had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatEntry {
    pub id: String,
    pub title: String,
    pub updated: i64,
}

/// The transport chosen last (SSE unless it was BIDI).
pub(super) fn saved_mode() -> Mode {
    mode_of(platform::storage_get(MODE_KEY).as_deref())
}

pub(super) fn save_mode(mode: Mode) {
    platform::storage_set(MODE_KEY, mode.as_str());
}

/// The chat open last.
pub(super) fn saved_chat() -> Option<String> {
    platform::storage_get(CHAT_KEY)
}

pub(super) fn save_chat(id: &str) {
    platform::storage_set(CHAT_KEY, id);
}

/// The chat list (empty if there is none or it cannot be read).
pub(super) fn saved_chats() -> Vec<ChatEntry> {
    chats_of(platform::storage_get(CHATS_KEY).as_deref())
}

pub(super) fn save_chats(chats: &[ChatEntry]) {
    platform::storage_set(CHATS_KEY, &serde_json::to_string(chats).unwrap_or_default());
}

fn mode_of(stored: Option<&str>) -> Mode {
    if stored == Some(Mode::Bidi.as_str()) {
        Mode::Bidi
    } else {
        Mode::Sse
    }
}

fn chats_of(stored: Option<&str>) -> Vec<ChatEntry> {
    stored
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Notes that chat `id` was used at `now`: a new chat enters the list named by `text`, a known
/// one keeps its name; newest first, at most [`MAX_CHATS`].
pub(super) fn remember(chats: &mut Vec<ChatEntry>, id: &str, text: &str, now: i64) {
    match chats.iter_mut().find(|c| c.id == id) {
        Some(entry) => entry.updated = now,
        None => chats.insert(
            0,
            ChatEntry {
                id: id.to_owned(),
                title: text.chars().take(TITLE_CHARS).collect(),
                updated: now,
            },
        ),
    }
    chats.sort_by_key(|c| std::cmp::Reverse(c.updated));
    chats.truncate(MAX_CHATS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_the_ones_browsers_already_hold() {
        assert_eq!(
            [MODE_KEY, CHAT_KEY, CHATS_KEY],
            ["countersign.mode", "countersign.chat", "countersign.chats"]
        );
    }

    #[test]
    fn the_mode_is_sse_unless_bidi_was_chosen() {
        assert_eq!(mode_of(Some("bidi")), Mode::Bidi);
        assert_eq!(mode_of(Some("sse")), Mode::Sse);
        assert_eq!(mode_of(Some("BIDI")), Mode::Sse);
        assert_eq!(mode_of(None), Mode::Sse);
    }

    #[test]
    fn a_chat_list_that_cannot_be_read_is_empty() {
        assert!(chats_of(None).is_empty());
        assert!(chats_of(Some("not json")).is_empty());
        assert!(chats_of(Some(r#"{"id": "x"}"#)).is_empty());
        let list = r#"[{"id": "chat-1", "title": "Hi", "updated": 5}]"#;
        assert_eq!(
            chats_of(Some(list)),
            [ChatEntry {
                id: "chat-1".into(),
                title: "Hi".into(),
                updated: 5
            }]
        );
    }

    #[test]
    fn a_chat_is_remembered_newest_first_by_its_first_words() {
        let mut chats = Vec::new();
        remember(&mut chats, "a", "Send $50 to Hanako", 1);
        remember(&mut chats, "b", &"東".repeat(100), 2);
        assert_eq!(
            chats.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["b", "a"]
        );
        assert_eq!(
            chats[0].title.chars().count(),
            60,
            "60 characters, not bytes"
        );

        remember(&mut chats, "a", "a later message", 3);
        assert_eq!(chats[0].id, "a", "used again: first");
        assert_eq!(chats[0].title, "Send $50 to Hanako", "keeps its name");
        assert_eq!(chats[0].updated, 3);
        assert_eq!(chats.len(), 2);

        for n in 0..60 {
            remember(&mut chats, &format!("c{n}"), "more", 10 + n);
        }
        assert_eq!(chats.len(), 50);
        assert_eq!(chats[0].id, "c59");
    }
}
