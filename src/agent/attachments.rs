//! Attachments stored once (ADR 0026): an image a person attaches arrives as a `data:` URL; the
//! runtime keeps its bytes once per chat, addressed by their SHA-256, and the record (the page's
//! messages and the model's history) keeps only a reference, `/api/chats/<chat>/files/<sha>`.
//! A commit therefore rewrites a few bytes instead of the image, twice. The bytes are inlined
//! again as a `data:` URL for a model that reads them, just before each request, and the page
//! loads them by URL with the chat's own access check.

use std::sync::Arc;

use base64::{Engine, engine::general_purpose::STANDARD};

use super::{
    clock::Clock,
    history::{Attachment, HistoryItem},
    runtime::TurnError,
    store::{SessionStore, audit::sha256_hex},
};

/// The largest attachment accepted by default (`COUNTERSIGN_MAX_ATTACHMENT_BYTES`), decoded.
pub const DEFAULT_MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;

/// Where the page loads a stored attachment: `/api/chats/<chat>/files/<sha-256 hex>` (the chat
/// id percent-encoded where it is not URL-safe).
pub fn file_url(chat: &str, sha: &str) -> String {
    format!(
        "/api/chats/{}/files/{sha}",
        crate::common::url::encode(chat)
    )
}

/// The SHA-256 of a stored attachment of `chat` that `url` references, if it is one.
pub fn referenced(chat: &str, url: &str) -> Option<String> {
    let prefix = file_url(chat, "");
    let sha = url.strip_prefix(&prefix)?;
    is_sha(sha).then(|| sha.to_owned())
}

/// Whether `text` is a SHA-256 as stored: 64 lowercase hex digits.
pub fn is_sha(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why an attachment was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    #[error("the attachment {name} is {size} bytes; the most this server accepts is {limit}")]
    TooLarge {
        name: String,
        size: usize,
        limit: usize,
    },
    #[error("the attachment {name} is not a base64 data: URL ({why})")]
    NotADataUrl { name: String, why: String },
    #[error("the attachment {name} names a file this chat does not have")]
    UnknownFile { name: String },
}

impl AttachmentError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            AttachmentError::TooLarge { .. } => "attachment_too_large",
            AttachmentError::NotADataUrl { .. } => "invalid_attachment",
            AttachmentError::UnknownFile { .. } => "unknown_attachment",
        }
    }
}

/// An attachment's bytes, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// The bytes of `url` if it is a base64 `data:` URL (`data:<type>[;…];base64,<data>`); `None`
/// for any other URL. The media type is the attachment's own, not the URL's.
fn data_url_bytes(url: &str, name: &str) -> Result<Option<Vec<u8>>, AttachmentError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(None);
    };
    let bad = |why: &str| AttachmentError::NotADataUrl {
        name: name.to_owned(),
        why: why.to_owned(),
    };
    let (header, data) = rest.split_once(',').ok_or_else(|| bad("no comma"))?;
    if !header
        .split(';')
        .skip(1)
        .any(|p| p.eq_ignore_ascii_case("base64"))
    {
        return Err(bad("only base64 data is accepted"));
    }
    STANDARD
        .decode(data.trim())
        .map(Some)
        .map_err(|e| bad(&e.to_string()))
}

/// How an attachment is named in errors: its file name, else its media type.
fn name_of(attachment: &Attachment) -> String {
    attachment
        .filename
        .clone()
        .unwrap_or_else(|| attachment.media_type.clone())
}

/// A message's attachments, every one checked ([`Attachments::check`]): each with the bytes to
/// keep when it is a `data:` URL. Nothing of them is stored yet.
#[derive(Debug)]
pub struct CheckedAttachments(Vec<(Attachment, Option<Vec<u8>>)>);

/// A runtime's attachments: checked when a message arrives, kept once by digest in the store
/// when its turn starts, inlined again for a model that reads them
/// ([`crate::agent::Runtime::attachments`]).
pub struct Attachments {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    /// The largest attachment accepted, decoded (`COUNTERSIGN_MAX_ATTACHMENT_BYTES`).
    max_bytes: usize,
}

impl Attachments {
    pub fn new(store: Arc<dyn SessionStore>, clock: Arc<dyn Clock>, max_bytes: usize) -> Self {
        Attachments {
            store,
            clock,
            max_bytes,
        }
    }

    /// Checks every attachment of a message to `chat` and stores nothing: a base64 `data:` URL
    /// no larger than `max_bytes` decoded, or a reference to this chat's own stored
    /// file (a client sending back what it was shown) that exists, or any other URL (`https:`).
    /// The first that is none of these refuses the message, and with it all its attachments.
    pub async fn check(
        &self,
        chat: &str,
        attachments: Vec<Attachment>,
    ) -> Result<CheckedAttachments, TurnError> {
        let limit = self.max_bytes;
        let mut checked = Vec::with_capacity(attachments.len());
        for attachment in attachments {
            let name = name_of(&attachment);
            if let Some(sha) = referenced(chat, &attachment.url) {
                if self.store.attachment(chat, &sha).await?.is_none() {
                    return Err(AttachmentError::UnknownFile { name }.into());
                }
                checked.push((attachment, None));
                continue;
            }
            let bytes = data_url_bytes(&attachment.url, &name)?;
            if let Some(bytes) = &bytes
                && bytes.len() > limit
            {
                return Err(AttachmentError::TooLarge {
                    name,
                    size: bytes.len(),
                    limit,
                }
                .into());
            }
            checked.push((attachment, bytes));
        }
        Ok(CheckedAttachments(checked))
    }

    /// Keeps the `data:` URL attachments `checked` holds (each once, by its SHA-256) and
    /// returns the attachments with references in their place; the others stay as they were.
    pub async fn keep(
        &self,
        chat: &str,
        checked: CheckedAttachments,
    ) -> Result<Vec<Attachment>, TurnError> {
        let now = self.clock.now_ms();
        let mut kept = Vec::with_capacity(checked.0.len());
        for (mut attachment, bytes) in checked.0 {
            if let Some(bytes) = bytes {
                let sha = sha256_hex(&bytes);
                self.store
                    .save_attachment(chat, &sha, &attachment.media_type, &bytes, now)
                    .await?;
                attachment.url = file_url(chat, &sha);
            }
            kept.push(attachment);
        }
        Ok(kept)
    }

    /// Puts the bytes of every stored attachment `history` references back as `data:` URLs,
    /// for a model that reads them. One that is gone (it should not be) is left out, logged.
    /// A history that references none is left as it is (shared with the chat's record, not
    /// copied).
    pub async fn inline(&self, chat: &str, history: &mut Arc<Vec<HistoryItem>>) {
        let references = |item: &HistoryItem| {
            matches!(item, HistoryItem::User { attachments, .. }
                if attachments.iter().any(|a| referenced(chat, &a.url).is_some()))
        };
        if !history.iter().any(references) {
            return;
        }
        for item in Arc::make_mut(history).iter_mut() {
            let HistoryItem::User { attachments, .. } = item else {
                continue;
            };
            let mut inlined = Vec::with_capacity(attachments.len());
            for mut attachment in std::mem::take(attachments) {
                let Some(sha) = referenced(chat, &attachment.url) else {
                    inlined.push(attachment);
                    continue;
                };
                match self.store.attachment(chat, &sha).await {
                    Ok(Some(file)) => {
                        attachment.url = format!(
                            "data:{};base64,{}",
                            attachment.media_type,
                            STANDARD.encode(&file.bytes)
                        );
                        inlined.push(attachment);
                    }
                    Ok(None) => {
                        tracing::error!(
                            chat,
                            sha,
                            "an attachment the chat references is not stored"
                        );
                    }
                    Err(e) => {
                        tracing::error!(chat, sha, error = %e.report(), "cannot read an attachment for the model");
                    }
                }
            }
            *attachments = inlined;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{clock::SystemClock, store::MemoryStore};

    /// A store and the attachments kept in it, with a limit of `limit` bytes.
    struct Kept {
        store: Arc<MemoryStore>,
        attachments: Attachments,
    }

    fn runtime(limit: usize) -> Kept {
        let store = Arc::new(MemoryStore::default());
        Kept {
            attachments: Attachments::new(store.clone(), Arc::new(SystemClock), limit),
            store,
        }
    }

    /// Checks, then keeps, as a turn does.
    async fn keep(
        rt: &Kept,
        chat: &str,
        attachments: Vec<Attachment>,
    ) -> Result<Vec<Attachment>, TurnError> {
        let checked = rt.attachments.check(chat, attachments).await?;
        rt.attachments.keep(chat, checked).await
    }

    fn attached(url: &str) -> Attachment {
        Attachment {
            media_type: "image/png".into(),
            url: url.into(),
            filename: Some("p.png".into()),
        }
    }

    #[tokio::test]
    async fn a_data_url_is_kept_once_referenced_and_inlined_again_for_a_model() {
        let rt = runtime(16);
        let data = "data:image/png;base64,iVBORw0=";
        let kept = keep(
            &rt,
            "c",
            vec![attached(data), attached("https://example.com/x.png")],
        )
        .await
        .unwrap();
        let sha = referenced("c", &kept[0].url).expect("a reference in place of the bytes");
        assert_eq!(kept[1].url, "https://example.com/x.png", "other URLs stay");
        assert_eq!(
            rt.store.attachment("c", &sha).await.unwrap().unwrap().bytes,
            vec![0x89, b'P', b'N', b'G', 0x0d]
        );
        // The same file again is the same reference; sending the reference back is accepted.
        let again = keep(&rt, "c", vec![attached(data), kept[0].clone()])
            .await
            .unwrap();
        assert_eq!(again[0].url, kept[0].url);
        assert_eq!(again[1].url, kept[0].url);
        let kept_url = kept[0].url.clone();
        let record = Arc::new(vec![HistoryItem::User {
            text: "look".into(),
            attachments: kept,
        }]);
        let mut history = record.clone();
        rt.attachments.inline("c", &mut history).await;
        let HistoryItem::User { attachments, .. } = &history[0] else {
            unreachable!()
        };
        assert_eq!(attachments[0].url, data);
        assert_eq!(attachments[1].url, "https://example.com/x.png");
        let HistoryItem::User { attachments, .. } = &record[0] else {
            unreachable!()
        };
        assert_eq!(
            attachments[0].url, kept_url,
            "the chat's own copy keeps the reference"
        );
    }

    #[tokio::test]
    async fn a_history_without_stored_attachments_is_handed_over_without_a_copy() {
        let rt = runtime(1_000);
        let record = Arc::new(vec![
            HistoryItem::user("hello"),
            HistoryItem::User {
                text: "elsewhere".into(),
                attachments: vec![attached("https://example.com/x.png")],
            },
        ]);
        let mut history = record.clone();
        rt.attachments.inline("c", &mut history).await;
        assert!(Arc::ptr_eq(&record, &history), "nothing to inline: no copy");
    }

    #[tokio::test]
    async fn too_large_unreadable_or_unknown_attachments_are_refused_and_nothing_is_kept() {
        let rt = runtime(4);
        let too_large = keep(&rt, "c", vec![attached("data:image/png;base64,iVBORw0=")])
            .await
            .unwrap_err();
        assert!(
            matches!(
                &too_large,
                TurnError::Attachment(AttachmentError::TooLarge {
                    size: 5,
                    limit: 4,
                    ..
                })
            ),
            "{too_large:?}"
        );
        let bad = keep(&rt, "c", vec![attached("data:image/png;base64,@@@")])
            .await
            .unwrap_err();
        assert!(matches!(
            bad,
            TurnError::Attachment(AttachmentError::NotADataUrl { .. })
        ));
        let unknown = keep(&rt, "c", vec![attached(&file_url("c", &"0".repeat(64)))])
            .await
            .unwrap_err();
        assert!(matches!(
            unknown,
            TurnError::Attachment(AttachmentError::UnknownFile { .. })
        ));
        // A good attachment beside a refused one is not kept either, in either order.
        let good = "data:image/png;base64,AAAA";
        let sha = sha256_hex(&[0, 0, 0]);
        for refused in ["data:image/png;base64,iVBORw0=", "data:image/png,raw"] {
            for attachments in [
                vec![attached(good), attached(refused)],
                vec![attached(refused), attached(good)],
            ] {
                assert!(keep(&rt, "c", attachments).await.is_err());
                assert_eq!(rt.store.attachment("c", &sha).await.unwrap(), None);
            }
        }
        assert!(keep(&rt, "c", vec![attached(good)]).await.is_ok());
        assert!(rt.store.attachment("c", &sha).await.unwrap().is_some());
    }

    #[test]
    fn a_reference_names_its_chat_and_sha_and_nothing_else() {
        let sha = "a".repeat(64);
        let url = file_url("chat 1/é", &sha);
        assert_eq!(url, format!("/api/chats/chat%201%2F%C3%A9/files/{sha}"));
        assert_eq!(referenced("chat 1/é", &url), Some(sha.clone()));
        assert_eq!(referenced("chat 2", &url), None, "another chat's");
        assert_eq!(
            referenced("c", &format!("/api/chats/c/files/{}", "A".repeat(64))),
            None
        );
        assert_eq!(referenced("c", "/api/chats/c/files/abc"), None);
        assert_eq!(referenced("c", "https://example.com/x.png"), None);
    }

    #[test]
    fn only_base64_data_urls_are_decoded_and_bad_ones_are_named() {
        assert_eq!(
            data_url_bytes("data:image/png;base64,iVBORw0=", "p.png"),
            Ok(Some(vec![0x89, b'P', b'N', b'G', 0x0d]))
        );
        assert_eq!(data_url_bytes("https://example.com/p.png", "p"), Ok(None));
        for bad in [
            "data:image/png,raw",
            "data:image/png;base64",
            "data:image/png;base64,***",
        ] {
            let error = data_url_bytes(bad, "p.png").unwrap_err();
            assert_eq!(error.code(), "invalid_attachment", "{bad}");
            assert!(error.to_string().contains("p.png"), "{error}");
        }
    }
}
