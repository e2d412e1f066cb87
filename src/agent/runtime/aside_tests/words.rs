//! What becomes of words said (ADR 0035): none is lost however many come at once, and a chat's
//! come in the order said; words that wait in the turn's aside queue when it ends on its own
//! start the next turn (`TurnDriver::readmit`), a stop dismisses them; and what happens today
//! when the held answer is gone because the turn's next step began first.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::json;

use super::super::{Runtime, UserTurn, turns::Spoken};
use super::{Payer, approve, finish, paid, runtime, type_bidi, waiting_payment, within};
use crate::agent::{
    Transport,
    history::{HistoryItem, ToolCall},
    lock,
    model::{Model, ModelEvent, ModelRequest, ModelStream},
    people::LOCAL,
    session::{LogReader, TurnEntry, TurnLog},
    voice::{VoiceError, VoiceInput, VoiceMode, VoiceNotice, VoiceNotices, VoiceSubscription},
};
use crate::protocol::{Chunk, FinishReason};

/// Far more utterances than the broadcast channel the notices once went through held (64),
/// all announced before the runtime's listener reads one: each is an aside of the waiting
/// turn, in the order said; none is missed. (Before, the listener lagged and lost all but the
/// last 64; and the driver answered one aside per wake-up, which a burst folds into one.)
#[tokio::test]
async fn a_burst_of_notices_loses_none_and_keeps_their_order() {
    const SAID: usize = 200;
    let model = Payer::new(
        &[],
        vec![
            ModelEvent::TextDelta("Noted.".into()),
            finish(FinishReason::Stop),
        ],
        false,
    );
    let rt = runtime(model.clone());
    let (mut reader, approval) = waiting_payment(&rt).await;
    // The chat speaks: the runtime listens from here on, and has read nothing yet (this task
    // has not let it run).
    let start = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };
    rt.voice("c", LOCAL, start).await.unwrap();
    for n in 0..SAID {
        let listening = model.notices.send(VoiceNotice::Heard {
            session_id: "c".into(),
            transcript: format!("said {n}"),
        });
        assert_eq!(listening, 1);
    }
    assert!(!model.notices.is_empty(), "none read yet");
    let mut heard = Vec::new();
    while heard.len() < SAID {
        match within("every aside", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "voice" => {
                heard.push(d.data["text"].as_str().unwrap_or_default().to_owned());
            }
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
    let said: Vec<String> = (0..SAID).map(|n| format!("said {n}")).collect();
    assert_eq!(heard, said, "every utterance, in the order said");
    assert!(model.notices.is_empty());
    assert_eq!(*lock(&model.asides), SAID, "each answered");
    approve(&rt, &approval).await.expect("the card decides");
    while within("the outcome", reader.next()).await.is_some() {}
    assert_eq!(paid(&rt).await, 1);
}

/// What the person says in the tests below.
const WORDS: &str = "and tomorrow?";

/// A voice model with a tool nobody countersigns: its first step asks for Tokyo's weather; the
/// step after the result says "Sunny." (if `hang`, "Sunny" and it never ends; if `announce`, it
/// first announces that it heard [`WORDS`], as a provider does whose answer to speech was
/// held when this step reached it); a step answering [`WORDS`] says "Tomorrow too.".
struct Forecast {
    notices: VoiceNotices,
    hang: bool,
    announce: bool,
    /// The last history item of each step it was asked for.
    asked: Mutex<Vec<HistoryItem>>,
    /// Asides it was asked to answer (or to drop).
    asides: Mutex<usize>,
}

impl Forecast {
    fn new(hang: bool, announce: bool) -> Arc<Self> {
        Arc::new(Forecast {
            notices: VoiceNotices::default(),
            hang,
            announce,
            asked: Mutex::default(),
            asides: Mutex::default(),
        })
    }
}

impl Model for Forecast {
    fn label(&self) -> String {
        "forecast".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let last = request.history.last().cloned();
        if let Some(last) = &last {
            lock(&self.asked).push(last.clone());
        }
        let say = |text: &str| {
            vec![
                ModelEvent::TextDelta(text.into()),
                finish(FinishReason::Stop),
            ]
        };
        match last {
            Some(HistoryItem::ToolResults { .. }) => {
                if self.announce {
                    self.notices.send(VoiceNotice::Heard {
                        session_id: request.session_id.clone(),
                        transcript: WORDS.into(),
                    });
                }
                let events = futures::stream::iter(say("Sunny.").into_iter().map(Ok));
                if self.hang {
                    futures::stream::iter([Ok(ModelEvent::TextDelta("Sunny".into()))])
                        .chain(futures::stream::pending())
                        .boxed()
                } else {
                    events.boxed()
                }
            }
            Some(HistoryItem::User { text, .. }) if text == WORDS => {
                futures::stream::iter(say("Tomorrow too.").into_iter().map(Ok)).boxed()
            }
            _ => {
                let call = ModelEvent::ToolCall(ToolCall {
                    id: String::new(),
                    name: "get_weather".into(),
                    args: json!({"location": "Tokyo"}),
                    provider_data: None,
                });
                futures::stream::iter([Ok(call), Ok(finish(FinishReason::ToolCalls))]).boxed()
            }
        }
    }

    fn voice(&self, _: &str, _: VoiceInput) -> Result<(), VoiceError> {
        Ok(())
    }

    fn voice_notices(&self) -> Option<VoiceSubscription> {
        Some(self.notices.subscribe())
    }

    fn aside(&self, _: &str) -> ModelStream {
        *lock(&self.asides) += 1;
        futures::stream::empty().boxed()
    }
}

/// A typed "weather in Tokyo?" whose step asks for the weather; the person speaks [`WORDS`]
/// once the result is out, while the turn still holds its call (the driver lets the sockets
/// send the result before it goes on: the runtime's admission runs right then). The words are
/// queued as an aside of the turn, after the last look phase A takes at its asides. Returns
/// the turn's log and a reader past the result.
async fn words_after_the_last_look(rt: &Arc<Runtime>) -> (Arc<TurnLog>, LogReader) {
    let started = type_bidi(rt, "weather in Tokyo?").await.unwrap();
    let mut reader = started.log.subscribe(0);
    loop {
        match within("the result", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolOutputAvailable(_))) => break,
            Some(TurnEntry::End) | None => panic!("no result"),
            Some(_) => {}
        }
    }
    let user = UserTurn {
        text: WORDS.into(),
        transport: Transport::Bidi,
        ..UserTurn::default()
    };
    let spoken = rt.start_spoken_turn("c", user, LOCAL).await;
    assert!(
        matches!(spoken, Ok(Spoken::Aside)),
        "the turn's call is still out: the words are an aside of it"
    );
    (started.log, reader)
}

/// The log from `reader` to the turn's end: (aside words heard, text).
async fn to_end(reader: &mut LogReader) -> (Vec<String>, String) {
    let (mut heard, mut text) = (Vec::new(), String::new());
    while let Some(entry) = within("the turn's end", reader.next()).await {
        match entry {
            TurnEntry::Chunk(Chunk::Data(d)) if d.name == "voice" => {
                heard.push(d.data["text"].as_str().unwrap_or_default().to_owned());
            }
            TurnEntry::Chunk(Chunk::TextDelta(d)) => text.push_str(&d.delta),
            _ => {}
        }
    }
    (heard, text)
}

/// The chat's turn after the one whose log is `ended`, once it began.
async fn next_turn(rt: &Arc<Runtime>, ended: &Arc<TurnLog>) -> Arc<TurnLog> {
    within("the words' turn", async {
        loop {
            let session = rt.session("c").await.unwrap();
            let log = session.state().live.as_ref().map(|t| t.log.clone());
            match log {
                Some(log) if !Arc::ptr_eq(&log, ended) => break log,
                _ => tokio::task::yield_now().await,
            }
        }
    })
    .await
}

async fn history(rt: &Arc<Runtime>) -> Vec<HistoryItem> {
    let session = rt.session("c").await.unwrap();
    session.snapshot().history.to_vec().unwrap()
}

/// Words queued as an aside after phase A's last look, when the turn then ends on its own (its
/// next step calls no tool): they are not lost with the turn but admitted again once its end is
/// logged, and start the next turn, which answers them.
#[tokio::test]
async fn words_left_in_the_aside_queue_at_the_turns_end_start_the_next_turn() {
    let model = Forecast::new(false, false);
    let rt = runtime(model.clone());
    let (log, mut reader) = words_after_the_last_look(&rt).await;
    let (heard, text) = to_end(&mut reader).await;
    assert_eq!(text, "Sunny.", "the turn ended on its own");
    assert!(heard.is_empty(), "not answered as an aside: {heard:?}");
    let next = next_turn(&rt, &log).await;
    let (_, text) = to_end(&mut next.subscribe(0)).await;
    assert_eq!(text, "Tomorrow too.");
    let history = history(&rt).await;
    let said = history
        .iter()
        .filter(|item| **item == HistoryItem::user(WORDS))
        .count();
    assert_eq!(
        said, 1,
        "the words, once, as the next turn's message: {history:?}"
    );
    assert_eq!(
        lock(&model.asked).last(),
        Some(&HistoryItem::user(WORDS)),
        "the model answered them"
    );
}

/// The same words, when the person stops the turn before it ends: they are dismissed with it
/// (the model told to drop its answer), and start nothing.
#[tokio::test]
async fn a_stop_dismisses_words_left_in_the_aside_queue() {
    let model = Forecast::new(true, false);
    let rt = runtime(model.clone());
    let (log, mut reader) = words_after_the_last_look(&rt).await;
    loop {
        match within("the next step", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::StartStep)) => break,
            Some(TurnEntry::End) | None => panic!("the turn ended"),
            Some(_) => {}
        }
    }
    assert!(rt.interrupt("c", "stopped by the person").await);
    let (heard, _) = to_end(&mut reader).await;
    assert!(heard.is_empty(), "{heard:?}");
    // Whatever the end set off has run (a readmitted turn would have begun by now).
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let session = rt.session("c").await.unwrap();
    let live = session.state().live.as_ref().map(|t| t.log.clone());
    assert!(
        live.is_none_or(|live| Arc::ptr_eq(&live, &log)),
        "no turn began after the stop"
    );
    assert!(
        !history(&rt).await.contains(&HistoryItem::user(WORDS)),
        "the words started nothing"
    );
    assert_eq!(*lock(&model.asides), 1, "the model dropped its answer");
}

/// The held-answer race (ADR 0035, "Left"): the provider announces the words just as the
/// turn's next step reaches it (it ran tools meanwhile), so the answer it held is not this
/// step's and it drops it; the runtime's admission comes after. Today the words still reach
/// the person: they wait for that step's end and start the next turn, which the model answers
/// afresh (it is asked for a step whose last item is the words).
#[tokio::test]
async fn words_announced_as_the_next_step_begins_start_the_turn_after_it() {
    let model = Forecast::new(false, true);
    let rt = runtime(model.clone());
    let start = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };
    rt.voice("c", LOCAL, start).await.unwrap();
    let started = type_bidi(&rt, "weather in Tokyo?").await.unwrap();
    let (heard, text) = to_end(&mut started.log.subscribe(0)).await;
    assert_eq!(text, "Sunny.");
    assert!(heard.is_empty(), "{heard:?}");
    let next = next_turn(&rt, &started.log).await;
    let (_, text) = to_end(&mut next.subscribe(0)).await;
    assert_eq!(text, "Tomorrow too.", "answered afresh");
    let history = history(&rt).await;
    assert_eq!(history.len(), 6, "{history:?}");
    assert_eq!(history[4], HistoryItem::user(WORDS));
    assert_eq!(*lock(&model.asides), 0, "never an aside");
}
