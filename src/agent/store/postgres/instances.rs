//! The instances sharing one database: each one's heartbeat (who is alive, and so who still owns
//! the turns it runs) and the news they send each other (`LISTEN`/`NOTIFY`, ADR 0025).
//!
//! News is a wake-up only. A notification says *that* something changed, never what: whoever
//! gets it reads the database again, and a reader follows a turn's log by position. A
//! notification lost while the listening connection was down is reported as
//! [`StoreNews::Missed`], after which the runtime reads again everything it follows.
//! The one exception is [`StoreNews::Text`] (ADR 0043): the entries a running turn just logged,
//! so a reader on another instance follows it per token; what it loses, it reads.

use std::{sync::Arc, time::Duration};

use deadpool_postgres::Pool;
use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use serde::{Deserialize, Serialize};

use super::{err, execute_in};
use crate::agent::{
    session::TurnEntry,
    store::{StoreError, StoreNews},
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

/// Listens on [`CHANNEL`] with a connection of its own (not the pool's) until `stop`, passing
/// what other instances say to `news`; reconnects when the connection is lost, and says
/// [`StoreNews::Missed`] then. `ready` hears when it first listens.
pub(super) fn spawn_listener(
    config: tokio_postgres::Config,
    id: Arc<str>,
    news: broadcast::Sender<StoreNews>,
    stop: CancellationToken,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    tokio::spawn(async move {
        let mut lost = false;
        let mut ready = Some(ready);
        loop {
            let listened = tokio::select! {
                () = stop.cancelled() => return,
                listened = listen(&config, &id, &news, lost, &mut ready) => listened,
            };
            if let Err(e) = listened {
                tracing::warn!(error = %e.report(), "not listening to the other instances; trying again");
            }
            lost = true;
            let _ = news.send(StoreNews::Missed);
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
    me: &str,
    news: &broadcast::Sender<StoreNews>,
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
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(err("cannot listen"))?;
    if again {
        let _ = news.send(StoreNews::Missed);
    }
    if let Some(ready) = ready.take() {
        let _ = ready.send(());
    }
    while let Some(payload) = rx.recv().await {
        if let Some(item) = decode(&payload, me) {
            // Nobody listening (no runtime yet) is fine: news is a wake-up only.
            let _ = news.send(item);
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
