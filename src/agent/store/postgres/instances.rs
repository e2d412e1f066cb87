//! The instances sharing one database: each one's heartbeat (who is alive, and so who still owns
//! the turns it runs) and the news they send each other (`LISTEN`/`NOTIFY`, ADR 0025).
//!
//! News is a wake-up only. A notification says *that* something changed, never what: whoever
//! gets it reads the database again, and a reader follows a turn's log by position. A
//! notification lost while the listening connection was down is reported as
//! [`StoreNews::Missed`], after which the runtime reads again everything it follows.
//! The one exception is [`StoreNews::Text`] (ADR 0043): the entries a running turn just logged,
//! so a reader on another instance follows it per token; what it loses, it reads. Text goes on
//! one of [`TEXT_CHANNELS`] channels by its chat, and an instance listens only to those of the
//! chats its readers follow ([`TextGroups`]); the rest of the news goes on [`CHANNEL`].

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use deadpool_postgres::Pool;
use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use serde::{Deserialize, Serialize};

use super::{err, execute_in};
use crate::agent::{
    lock,
    session::TurnEntry,
    store::{StoreError, StoreNews, TextInterest},
};

/// How long an instance stays the owner of the turns it runs after its last heartbeat: then
/// another instance may take them over (as after a crash).
pub const LEASE_MS: i64 = 5_000;

/// How often an instance says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long the listener waits before it connects again after losing its connection.
const RECONNECT: Duration = Duration::from_secs(1);

/// The channel instances notify each other on.
pub(super) const CHANNEL: &str = "countersign";

/// The database's clock, in milliseconds since the epoch (every instance reads the same clock,
/// so their own clocks may differ).
pub(super) const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::BIGINT";

/// Whether the instance named by `column` is alive (its heartbeat is fresher than the lease), as
/// SQL.
pub(super) fn alive(column: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM countersign_instances i WHERE i.id = {column} \
         AND i.seen_ms > {NOW_MS} - {LEASE_MS})"
    )
}

/// Makes this instance's row (and forgets instances not seen for a day).
pub(super) async fn register(pool: &Pool, id: &str) -> Result<(), StoreError> {
    let client = pool
        .get()
        .await
        .map_err(|e| StoreError::caused_by("cannot register this instance", e))?;
    execute_in(
        &client,
        &format!(
            "INSERT INTO countersign_instances (id, started_at_ms, seen_ms)
             VALUES ($1, {NOW_MS}, {NOW_MS})
             ON CONFLICT (id) DO UPDATE SET seen_ms = EXCLUDED.seen_ms"
        ),
        &[&id],
        "cannot register this instance",
    )
    .await?;
    execute_in(
        &client,
        &format!("DELETE FROM countersign_instances WHERE seen_ms < {NOW_MS} - 86400000"),
        &[],
        "cannot forget old instances",
    )
    .await?;
    Ok(())
}

/// Keeps this instance's row fresh every [`HEARTBEAT`] until `stop`. A heartbeat that fails is
/// logged and tried again: if the database stays away longer than [`LEASE_MS`], other instances
/// take this one's running turns over, and its own commits of them are refused.
pub(super) fn spawn_heartbeat(pool: Pool, id: Arc<str>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = register(&pool, &id).await {
                tracing::warn!(instance = %id, error = %e.report(), "heartbeat failed");
            }
        }
    });
}

/// How many channels the live text of running turns is spread over (ADR 0043): an instance
/// listens only to the channels of the chats its readers follow, so it neither receives nor
/// decodes the text of every turn in the deployment.
const TEXT_CHANNELS: u32 = 256;

/// The channel `news` goes on: a turn's text on its chat's text channel, the rest on
/// [`CHANNEL`], which every instance hears.
pub(super) fn channel_of(news: &StoreNews) -> std::borrow::Cow<'static, str> {
    match news {
        StoreNews::Text { chat, .. } => text_channel(text_group(chat)).into(),
        _ => CHANNEL.into(),
    }
}

/// The text channel of group `group`.
fn text_channel(group: u32) -> String {
    format!("{CHANNEL}_text_{group}")
}

/// The text group of `chat`: the same on every instance and every version (a digest, not
/// Rust's seeded hasher).
fn text_group(chat: &str) -> u32 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(chat.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % TEXT_CHANNELS
}

/// The text groups this instance's readers follow, each with how many interests hold it
/// ([`TextGroups::hold`]); the listener hears of each group whose count left or reached zero.
#[derive(Debug)]
pub(super) struct TextGroups {
    held: std::sync::Mutex<HashMap<u32, usize>>,
    changed: mpsc::UnboundedSender<u32>,
}

impl TextGroups {
    /// The groups, and where the listener hears of their changes.
    pub(super) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<u32>) {
        let (changed, changes) = mpsc::unbounded_channel();
        let groups = TextGroups {
            held: std::sync::Mutex::default(),
            changed,
        };
        (Arc::new(groups), changes)
    }

    /// An interest in `chat`'s text: its group is listened to while any interest in it is held.
    pub(super) fn hold(self: &Arc<Self>, chat: &str) -> TextInterest {
        let group = text_group(chat);
        let first = {
            let mut held = lock(&self.held);
            let count = held.entry(group).or_default();
            *count += 1;
            *count == 1
        };
        if first {
            // The listener is gone only with the store.
            let _ = self.changed.send(group);
        }
        let groups = Arc::downgrade(self);
        TextInterest::ending_with(move || {
            let Some(groups) = groups.upgrade() else {
                return;
            };
            let last = {
                let mut held = lock(&groups.held);
                match held.get_mut(&group) {
                    Some(count) if *count > 1 => {
                        *count -= 1;
                        false
                    }
                    Some(_) => {
                        held.remove(&group);
                        true
                    }
                    None => false,
                }
            };
            if last {
                let _ = groups.changed.send(group);
            }
        })
    }

    fn is_held(&self, group: u32) -> bool {
        lock(&self.held).contains_key(&group)
    }

    fn held(&self) -> Vec<u32> {
        lock(&self.held).keys().copied().collect()
    }
}

/// What the listener needs: this instance's id, where news goes, and the text groups to hear.
pub(super) struct Listening {
    pub me: Arc<str>,
    pub news: broadcast::Sender<StoreNews>,
    pub texts: Arc<TextGroups>,
    pub text_changes: mpsc::UnboundedReceiver<u32>,
}

/// Listens on [`CHANNEL`] (and the text channels the readers here follow) with a connection of
/// its own (not the pool's) until `stop`, passing what other instances say to `news`;
/// reconnects when the connection is lost, and says [`StoreNews::Missed`] then. `ready` hears
/// when it first listens.
pub(super) fn spawn_listener(
    config: tokio_postgres::Config,
    mut listening: Listening,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    tokio::spawn(async move {
        let mut lost = false;
        let mut ready = Some(ready);
        loop {
            let listened = tokio::select! {
                () = stop.cancelled() => return,
                listened = listen(&config, &mut listening, lost, &mut ready) => listened,
            };
            if let Err(e) = listened {
                tracing::warn!(error = %e.report(), "not listening to the other instances; trying again");
            }
            lost = true;
            let _ = listening.news.send(StoreNews::Missed);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RECONNECT) => {}
            }
        }
    });
}

/// One listening connection, for as long as it lasts. `again`: an earlier one was lost, so news
/// may have been missed meanwhile (said once listening again).
async fn listen(
    config: &tokio_postgres::Config,
    listening: &mut Listening,
    again: bool,
    ready: &mut Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<(), StoreError> {
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(err("cannot connect to listen"))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_owned()).is_err() {
                        return Ok(());
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    let mut sql = format!("LISTEN {CHANNEL};");
    let mut texts = HashSet::new();
    for group in listening.texts.held() {
        sql.push_str(&format!(" LISTEN {};", text_channel(group)));
        texts.insert(group);
    }
    client
        .batch_execute(&sql)
        .await
        .map_err(err("cannot listen"))?;
    if again {
        let _ = listening.news.send(StoreNews::Missed);
    }
    if let Some(ready) = ready.take() {
        let _ = ready.send(());
    }
    loop {
        tokio::select! {
            payload = rx.recv() => {
                let Some(payload) = payload else { break };
                if let Some(item) = decode(&payload, &listening.me) {
                    // Nobody listening (no runtime yet) is fine: news is a wake-up only.
                    let _ = listening.news.send(item);
                }
            }
            Some(group) = listening.text_changes.recv() => {
                // The count may have moved again since: what it is now decides.
                let wanted = listening.texts.is_held(group);
                let command = match (wanted, texts.contains(&group)) {
                    (true, false) => "LISTEN",
                    (false, true) => "UNLISTEN",
                    _ => continue,
                };
                client
                    .batch_execute(&format!("{command} {}", text_channel(group)))
                    .await
                    .map_err(err("cannot change the text channels listened to"))?;
                if wanted {
                    texts.insert(group);
                } else {
                    texts.remove(&group);
                }
            }
        }
    }
    drop(client);
    match driver.await {
        Ok(Ok(())) => Err(StoreError::new("the listening connection closed")),
        Ok(Err(e)) => Err(StoreError::caused_by("the listening connection failed", e)),
        Err(e) => Err(StoreError::caused_by("the listening task failed", e)),
    }
}

/// The longest notification payload sent (Postgres refuses 8,000 bytes and more).
pub(super) const MAX_PAYLOAD: usize = 7_900;

/// A [`StoreNews::Text`] as sent.
#[derive(Serialize)]
struct TextOut<'a> {
    chat: &'a str,
    turn: &'a str,
    at: usize,
    entries: &'a [TurnEntry],
}

/// A [`StoreNews::Text`] as heard.
#[derive(Deserialize)]
struct TextIn {
    chat: String,
    turn: String,
    at: usize,
    entries: Vec<TurnEntry>,
}

/// `news` from instance `from`, as a notification's payload: `<from> <kind>[ <chat>]`; for
/// [`StoreNews::Waiting`] `<from> a <chat>[ <approval>…]`, for [`StoreNews::Kept`]
/// `<from> k <len> <turn> <chat>` and for [`StoreNews::Text`] `<from> t <JSON>` (which may be
/// longer than [`MAX_PAYLOAD`]: not sent then).
pub(super) fn encode(from: &str, news: &StoreNews) -> String {
    match news {
        StoreNews::Text {
            chat,
            turn,
            at,
            entries,
        } => {
            let text = TextOut {
                chat,
                turn,
                at: *at,
                entries,
            };
            // Chunks as stored always serialize; nothing would be said otherwise.
            let json = serde_json::to_string(&text).unwrap_or_default();
            format!("{from} t {json}")
        }
        StoreNews::Kept { chat, turn, len } => format!("{from} k {len} {turn} {chat}"),
        StoreNews::Chat { chat, waits: true } => format!("{from} w {chat}"),
        StoreNews::Chat { chat, waits: false } => format!("{from} c {chat}"),
        StoreNews::Waiting { chat, approvals } => {
            let mut payload = format!("{from} a {chat}");
            let full = payload.len() + approvals.iter().map(|a| a.len() + 1).sum::<usize>();
            // Postgres refuses a payload of 8,000 bytes or more: past that, no names.
            if full < MAX_PAYLOAD {
                for approval in approvals {
                    payload.push(' ');
                    payload.push_str(approval);
                }
            }
            payload
        }
        StoreNews::Stop { chat } => format!("{from} s {chat}"),
        StoreNews::People => format!("{from} p"),
        StoreNews::Grants => format!("{from} g"),
        StoreNews::SignIns => format!("{from} i"),
        StoreNews::Missed => format!("{from} m"),
    }
}

/// A notification's payload as news, unless it came from `me` (or is not ours).
fn decode(payload: &str, me: &str) -> Option<StoreNews> {
    let mut parts = payload.splitn(3, ' ');
    let from = parts.next()?;
    if from == me {
        return None;
    }
    let kind = parts.next()?;
    let rest = parts.next();
    if kind == "t" {
        let text: TextIn = serde_json::from_str(rest?)
            .map_err(
                |e| tracing::debug!(error = %e, "a live text notification that does not decode"),
            )
            .ok()?;
        return Some(StoreNews::Text {
            chat: text.chat,
            turn: text.turn,
            at: text.at,
            entries: text.entries,
        });
    }
    if kind == "k" {
        let mut kept = rest?.splitn(3, ' ');
        let len = kept.next()?.parse().ok()?;
        let turn = kept.next()?.to_owned();
        let chat = kept.next()?.to_owned();
        return Some(StoreNews::Kept { chat, turn, len });
    }
    if kind == "a" {
        let mut names = rest?.split(' ').map(str::to_owned);
        let chat = names.next()?;
        return Some(StoreNews::Waiting {
            chat,
            approvals: names.collect(),
        });
    }
    let chat = rest.map(str::to_owned);
    Some(match (kind, chat) {
        ("w", Some(chat)) => StoreNews::Chat { chat, waits: true },
        ("c", Some(chat)) => StoreNews::Chat { chat, waits: false },
        ("s", Some(chat)) => StoreNews::Stop { chat },
        ("p", None) => StoreNews::People,
        ("g", None) => StoreNews::Grants,
        ("i", None) => StoreNews::SignIns,
        ("m", None) => StoreNews::Missed,
        _ => {
            tracing::debug!(payload, "a notification this build does not know");
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_goes_out_and_comes_back_and_an_instance_ignores_its_own() {
        let all = [
            StoreNews::Chat {
                chat: "a chat with spaces".into(),
                waits: true,
            },
            StoreNews::Chat {
                chat: "c".into(),
                waits: false,
            },
            StoreNews::Stop { chat: "c".into() },
            StoreNews::Waiting {
                chat: "c".into(),
                approvals: vec!["apv-1".into(), "apv-2".into()],
            },
            StoreNews::Waiting {
                chat: "c".into(),
                approvals: Vec::new(),
            },
            StoreNews::People,
            StoreNews::Grants,
            StoreNews::SignIns,
            StoreNews::Missed,
            StoreNews::Kept {
                chat: "a chat with spaces".into(),
                turn: "turn-1".into(),
                len: 12,
            },
            StoreNews::Text {
                chat: "a \"chat\" with spaces".into(),
                turn: "turn-1".into(),
                at: 7,
                entries: vec![
                    TurnEntry::Chunk(crate::protocol::Chunk::text_delta(
                        "t",
                        "Hello, \"world\"\n",
                    )),
                    TurnEntry::Pause,
                    TurnEntry::End,
                ],
            },
        ];
        for news in all {
            let payload = encode("a", &news);
            assert_eq!(decode(&payload, "b"), Some(news.clone()), "{payload}");
            assert_eq!(decode(&payload, "a"), None);
        }
        // Too many approvals to name within Postgres' payload limit: the chat alone.
        let many = StoreNews::Waiting {
            chat: "c".into(),
            approvals: (0..1_000).map(|i| format!("approval-{i:04}")).collect(),
        };
        let payload = encode("a", &many);
        assert!(payload.len() < 8_000);
        assert_eq!(
            decode(&payload, "b"),
            Some(StoreNews::Waiting {
                chat: "c".into(),
                approvals: Vec::new()
            })
        );
        assert_eq!(decode("b x", "a"), None);
        assert_eq!(decode("b", "a"), None);
        assert_eq!(decode("b p extra", "a"), None);
        assert_eq!(decode("b t {\"chat\":", "a"), None);
        assert_eq!(decode("b k x turn chat", "a"), None);
    }
}
