//! Asides through the runtime (ADR 0035), with a voice model that has no provider notices, so
//! the waiting turn parks (ADR 0010) and the aside must give it a task again: what was said
//! while a card waits is answered inside the waiting turn, decides nothing, and leaves the card
//! decidable; a call that reaches the runner from an aside is never gated nor run; a typed
//! message ends an aside under way and supersedes the card.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::json;

use super::{Runtime, RuntimeSettings, TurnError, TurnStarted, UserTurn};
use crate::agent::{
    ApprovalDecision, InputError, PersonInput, Transport,
    clock::{SequentialIds, SystemClock},
    history::{HistoryItem, ToolCall},
    lock,
    model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
    people::LOCAL,
    session::{LogReader, TurnEntry},
    store::{AuditKind, AuditQuery, MemoryStore},
    tools::{ToolRegistry, ToolSettings, WeatherSource},
    voice::{VoiceError, VoiceInput, VoiceMode, VoiceNotice, VoiceNotices, VoiceSubscription},
};
use crate::protocol::{Chunk, FinishReason};

/// None lost, in order; readmitted at a turn's end, dismissed by a stop; the held answer.
mod words;

/// A voice model: its first step asks to pay Alice 5 dollars, the step after the results says
/// "Paid."; each utterance is heard as the next of `heard`; an aside is answered with `aside`
/// (and then, if `hang`, never ends).
struct Payer {
    notices: VoiceNotices,
    heard: Mutex<VecDeque<String>>,
    aside: Vec<ModelEvent>,
    hang: bool,
    asides: Mutex<usize>,
}

impl Payer {
    fn new(heard: &[&str], aside: Vec<ModelEvent>, hang: bool) -> Arc<Self> {
        Arc::new(Payer {
            notices: VoiceNotices::default(),
            heard: Mutex::new(heard.iter().map(|h| (*h).to_owned()).collect()),
            aside,
            hang,
            asides: Mutex::default(),
        })
    }
}

fn finish(reason: FinishReason) -> ModelEvent {
    ModelEvent::Finish {
        reason,
        usage: Usage::default(),
    }
}

fn pay(recipient: &str) -> ModelEvent {
    ModelEvent::ToolCall(ToolCall {
        id: String::new(),
        name: "process_payment".into(),
        args: json!({"amount": 5, "recipient": recipient, "currency": "USD"}),
        provider_data: None,
    })
}

impl Model for Payer {
    fn label(&self) -> String {
        "payer".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let answered = matches!(
            request.history.last(),
            Some(HistoryItem::ToolResults { .. })
        );
        let events = if answered {
            vec![
                ModelEvent::TextDelta("Paid.".into()),
                finish(FinishReason::Stop),
            ]
        } else {
            vec![pay("Alice"), finish(FinishReason::ToolCalls)]
        };
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }

    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        if input == VoiceInput::End
            && let Some(transcript) = lock(&self.heard).pop_front()
        {
            let _ = self.notices.send(VoiceNotice::Heard {
                session_id: session_id.to_owned(),
                transcript,
            });
        }
        Ok(())
    }

    fn voice_notices(&self) -> Option<VoiceSubscription> {
        Some(self.notices.subscribe())
    }

    fn aside(&self, _: &str) -> ModelStream {
        *lock(&self.asides) += 1;
        let events = futures::stream::iter(self.aside.clone().into_iter().map(Ok));
        if self.hang {
            events.chain(futures::stream::pending()).boxed()
        } else {
            events.boxed()
        }
    }
}

/// A runtime over `model` with the standard tools, an in-memory store and offline weather.
fn runtime(model: Arc<dyn Model>) -> Arc<Runtime> {
    Runtime::new(
        model,
        ToolRegistry::standard(&ToolSettings {
            approval_timeout: std::time::Duration::from_secs(600),
            browser_timeout: std::time::Duration::from_secs(10),
            weather: WeatherSource::Offline,
        }),
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings::default(),
    )
}

/// A typed BIDI message `text` in chat "c".
async fn type_bidi(rt: &Arc<Runtime>, text: &str) -> Result<TurnStarted, TurnError> {
    rt.start_turn(
        "c",
        UserTurn {
            text: text.into(),
            transport: Transport::Bidi,
            ..UserTurn::default()
        },
        None,
    )
    .await
}

/// A typed BIDI "pay Alice" whose card waits (the turn parks: the model sends no notices);
/// returns the reader past the approval request and the approval id.
async fn waiting_payment(rt: &Arc<Runtime>) -> (LogReader, String) {
    let started = type_bidi(rt, "pay Alice 5 dollars").await.unwrap();
    let mut reader = started.log.subscribe(0);
    let approval = loop {
        match reader.next().await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => break r.approval_id,
            Some(TurnEntry::End) | None => panic!("no card"),
            Some(_) => {}
        }
    };
    while !matches!(reader.next().await, Some(TurnEntry::Pause)) {}
    (reader, approval)
}

/// The person speaks one utterance in chat "c".
async fn speak(rt: &Arc<Runtime>) {
    let start = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };
    rt.voice("c", LOCAL, start).await.unwrap();
    rt.voice("c", LOCAL, VoiceInput::End).await.unwrap();
}

/// The log from `reader` to the next pause (or the end): (aside words heard, text, more cards).
async fn to_pause(reader: &mut LogReader) -> (Vec<String>, String, usize) {
    let (mut heard, mut text, mut cards) = (Vec::new(), String::new(), 0);
    loop {
        match reader.next().await {
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "voice" => {
                assert_eq!(d.data["state"], "aside", "{d:?}");
                heard.push(d.data["text"].as_str().unwrap_or_default().to_owned());
            }
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(_))) => cards += 1,
            Some(TurnEntry::Pause | TurnEntry::End) | None => return (heard, text, cards),
            Some(_) => {}
        }
    }
}

async fn approve(rt: &Arc<Runtime>, approval_id: &str) -> Result<(), InputError> {
    rt.submit(
        "c",
        &[PersonInput::Approval {
            approval_id: approval_id.to_owned(),
            decision: ApprovalDecision::Approve,
            step_up: None,
        }],
    )
    .await
    .map(|_| ())
}

async fn paid(rt: &Arc<Runtime>) -> usize {
    rt.session("c")
        .await
        .unwrap()
        .snapshot()
        .wallet
        .transactions
        .len()
}

/// A spoken "yes, approve it" while a parked turn's card waits, to a model that says it paid
/// and asks for another payment: the turn wakes for the aside and parks again; the answer is
/// in its log and its message, the extra call is never a card nor run, the words are in the
/// approval's audit; the card then runs the one payment.
#[tokio::test]
async fn a_parked_turn_answers_an_aside_and_its_card_still_decides() {
    let model = Payer::new(
        &["yes, approve it"],
        vec![
            ModelEvent::TextDelta("Done, I paid.".into()),
            pay("Mallory"),
            finish(FinishReason::Stop),
        ],
        false,
    );
    let rt = runtime(model.clone());
    let (mut reader, approval) = waiting_payment(&rt).await;
    speak(&rt).await;
    let (heard, text, cards) = to_pause(&mut reader).await;
    assert_eq!(heard, ["yes, approve it"]);
    assert_eq!(text, "Done, I paid.");
    assert_eq!(cards, 0, "the aside's call is no card");
    assert_eq!(paid(&rt).await, 0, "words run nothing");
    let record = rt.session("c").await.unwrap().snapshot();
    assert_eq!(record.history.len(), 2, "the aside is not in the history");
    let messages = record.messages.to_vec().unwrap();
    let message = messages.last().unwrap();
    assert!(
        serde_json::to_string(message)
            .unwrap()
            .contains("Done, I paid."),
        "the waiting turn's message keeps the answer (a reload shows it)"
    );
    let said: Vec<_> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            crate::protocol::UiPart::Data(d) => crate::protocol::voice::aside_words(d),
            _ => None,
        })
        .collect();
    assert_eq!(
        said,
        ["yes, approve it"],
        "and the person's words, where they said them (a reload shows them)"
    );
    let audit = rt.store.audit(&AuditQuery::default()).await.unwrap();
    let spoken: Vec<_> = audit
        .iter()
        .filter(|r| r.event.kind == AuditKind::Spoken)
        .collect();
    assert_eq!(spoken.len(), 1);
    assert_eq!(
        spoken[0].event.approval_id.as_deref(),
        Some(approval.as_str())
    );

    approve(&rt, &approval).await.expect("the card decides");
    let (_, text, _) = to_pause(&mut reader).await;
    assert_eq!(text, "Paid.");
    assert_eq!(paid(&rt).await, 1, "Alice, once; never Mallory");
    assert_eq!(*lock(&model.asides), 1);
}

/// The click and the words at once: whichever the runtime takes first (an aside of the
/// waiting turn, or words that come once it runs again and start nothing), the call runs once.
#[tokio::test]
async fn an_aside_and_the_click_at_once_run_the_call_once() {
    let model = Payer::new(
        &["is it done?"],
        vec![
            ModelEvent::TextDelta("Not yet.".into()),
            finish(FinishReason::Stop),
        ],
        false,
    );
    let rt = runtime(model);
    let (mut reader, approval) = waiting_payment(&rt).await;
    let (spoken, clicked) = tokio::join!(speak(&rt), approve(&rt, &approval));
    let () = spoken;
    clicked.expect("approved");
    let mut text = String::new();
    loop {
        match reader.next().await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::End) | None => break,
            Some(_) => {}
        }
    }
    assert!(text.ends_with("Paid."), "{text}");
    assert_eq!(paid(&rt).await, 1);
}

/// A typed message while an aside is still being answered ends it (the answer is dropped,
/// nothing waits on it) and supersedes the card: nothing runs, the card can no longer be
/// approved.
#[tokio::test]
async fn a_typed_message_during_an_aside_supersedes_the_card() {
    let model = Payer::new(
        &["hold on"],
        vec![ModelEvent::TextDelta("Sure, ".into())],
        true,
    );
    let rt = runtime(model);
    let (mut reader, approval) = waiting_payment(&rt).await;
    speak(&rt).await;
    loop {
        if let Some(TurnEntry::Chunk(Chunk::TextDelta(_))) = reader.next().await {
            break;
        }
    }
    type_bidi(&rt, "never mind")
        .await
        .expect("the typed message starts its turn");
    assert_eq!(
        approve(&rt, &approval).await,
        Err(InputError::ApprovalSuperseded {
            approval_id: approval
        })
    );
    assert_eq!(paid(&rt).await, 0);
}

/// The model talks on its own while the parked turn's card waits (told it waits, it says so):
/// the turn wakes, streams the talk into its message with no words of the person's and no
/// audit of any, parks again, and the card still decides. (Before, the talk belonged to no
/// turn and was dropped.)
#[tokio::test]
async fn the_models_own_talk_while_a_card_waits_reaches_the_waiting_turn() {
    let model = Payer::new(
        &[],
        vec![
            ModelEvent::TextDelta("It waits for your approval on screen.".into()),
            finish(FinishReason::Stop),
        ],
        false,
    );
    let rt = runtime(model.clone());
    let (mut reader, approval) = waiting_payment(&rt).await;
    // The chat speaks (the runtime listens to the model's voice notices from then on).
    speak(&rt).await;
    let listening = model.notices.send(VoiceNotice::WhileWaiting {
        session_id: "c".into(),
    });
    assert_eq!(listening, 1, "the runtime listens");
    let (heard, text, cards) = to_pause(&mut reader).await;
    assert!(heard.is_empty(), "the person said nothing: {heard:?}");
    assert_eq!(text, "It waits for your approval on screen.");
    assert_eq!(cards, 0);
    let record = rt.session("c").await.unwrap().snapshot();
    let messages = record.messages.to_vec().unwrap();
    assert!(
        serde_json::to_string(messages.last().unwrap())
            .unwrap()
            .contains("It waits for your approval"),
        "the waiting turn's message keeps it"
    );
    let audit = rt.store.audit(&AuditQuery::default()).await.unwrap();
    assert!(
        !audit.iter().any(|r| r.event.kind == AuditKind::Spoken),
        "nothing was said"
    );
    approve(&rt, &approval).await.expect("the card decides");
    let (_, text, _) = to_pause(&mut reader).await;
    assert_eq!(text, "Paid.");
    assert_eq!(paid(&rt).await, 1);
    assert_eq!(*lock(&model.asides), 1);
}

/// A voice model whose first step says "Let me see" and is then cut by the person speaking
/// over it (it ends as interrupted once `release` is notified); the utterance is heard as "and
/// in euros?", and the step that answers it says "In euros: 5.".
struct Cut {
    notices: VoiceNotices,
    release: Arc<tokio::sync::Notify>,
}

impl Model for Cut {
    fn label(&self) -> String {
        "cut".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let answering = matches!(
            request.history.last(),
            Some(HistoryItem::User { text, .. }) if text == "and in euros?"
        );
        if answering {
            let events = [
                ModelEvent::TextDelta("In euros: 5.".into()),
                finish(FinishReason::Stop),
            ];
            return futures::stream::iter(events.map(Ok)).boxed();
        }
        let release = self.release.clone();
        let cut = async move {
            release.notified().await;
            futures::stream::iter([ModelEvent::Interrupted, finish(FinishReason::Other)].map(Ok))
        };
        futures::stream::iter([Ok(ModelEvent::TextDelta("Let me see".into()))])
            .chain(futures::stream::once(cut).flatten())
            .boxed()
    }

    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        if input == VoiceInput::End {
            let _ = self.notices.send(VoiceNotice::Heard {
                session_id: session_id.to_owned(),
                transcript: "and in euros?".into(),
            });
        }
        Ok(())
    }

    fn voice_notices(&self) -> Option<VoiceSubscription> {
        Some(self.notices.subscribe())
    }
}

/// Speaking while the model answers (barge-in): the words are not refused as "a turn is
/// already running" and lost (as before); the cut answer ends its turn, and the words start
/// the next turn, whose answer the person hears.
#[tokio::test]
async fn words_said_while_the_model_answers_start_the_next_turn() {
    let model = Arc::new(Cut {
        notices: VoiceNotices::default(),
        release: Arc::default(),
    });
    let rt = Runtime::new(
        model.clone(),
        ToolRegistry::default(),
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings::default(),
    );
    let started = type_bidi(&rt, "how much is it?").await.unwrap();
    let mut reader = started.log.subscribe(0);
    while !matches!(
        within("the step", reader.next()).await,
        Some(TurnEntry::Chunk(Chunk::StartStep))
    ) {}
    // The person speaks over the answer; the runtime hears it while the step still streams.
    speak(&rt).await;
    within("the notice", async {
        while !model.notices.is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        rt.session("c").await.unwrap().snapshot().history.len(),
        1,
        "the words wait: the turn that streams is not ended by them"
    );
    model.release.notify_one();
    while within("the cut turn", reader.next()).await.is_some() {}
    // The words' own turn comes once the cut one ended.
    let next = within("the words' turn", async {
        loop {
            let session = rt.session("c").await.unwrap();
            let log = session.state().live.as_ref().map(|t| t.log.clone());
            match log {
                Some(log) if !Arc::ptr_eq(&log, &started.log) => break log,
                _ => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    let mut reader = next.subscribe(0);
    let mut text = String::new();
    while let Some(entry) = within("the words' answer", reader.next()).await {
        if let TurnEntry::Chunk(Chunk::TextDelta(d)) = entry {
            text.push_str(&d.delta);
        }
    }
    assert_eq!(text, "In euros: 5.");
    let history = rt
        .session("c")
        .await
        .unwrap()
        .snapshot()
        .history
        .to_vec()
        .unwrap();
    assert_eq!(
        history[2],
        HistoryItem::user("and in euros?"),
        "{history:?}"
    );
}

/// `future`, or a panic naming `what` after ten seconds (a test never hangs).
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), future)
        .await
        .unwrap_or_else(|_| panic!("{what} took more than ten seconds"))
}

/// Fifty "yes, approve it" said while one card waits: each is an aside answered inside the
/// waiting turn, in order; none approves, none becomes a card or enters the history, each is
/// in the approval's audit as what was said; the card then runs the one payment.
#[tokio::test]
async fn a_flood_of_spoken_yeses_approves_nothing_and_loses_nothing() {
    const SAID: usize = 50;
    let model = Payer::new(
        &["yes, approve it"; SAID],
        vec![
            ModelEvent::TextDelta("Done.".into()),
            pay("Mallory"),
            finish(FinishReason::Stop),
        ],
        false,
    );
    let rt = runtime(model.clone());
    let (mut reader, approval) = waiting_payment(&rt).await;
    for _ in 0..SAID {
        speak(&rt).await;
        // Each utterance is heard before the next is said (a burst: `words.rs`).
        within("the notice", async {
            while !model.notices.is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await;
    }
    let (mut heard, mut cards) = (0, 0);
    while heard < SAID {
        match within("the asides", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "voice" => {
                assert_eq!(d.data["text"], "yes, approve it");
                heard += 1;
            }
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(_))) => cards += 1,
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
    assert_eq!(cards, 0, "no aside's call is a card");
    assert_eq!(paid(&rt).await, 0, "words run nothing");
    let record = rt.session("c").await.unwrap().snapshot();
    assert_eq!(record.history.len(), 2, "no aside is in the history");
    let audit = rt.store.audit(&AuditQuery::default()).await.unwrap();
    let spoken = audit
        .iter()
        .filter(|r| r.event.kind == AuditKind::Spoken)
        .filter(|r| r.event.approval_id.as_deref() == Some(approval.as_str()))
        .count();
    let decided = audit
        .iter()
        .filter(|r| matches!(r.event.kind, AuditKind::Approved | AuditKind::Executed))
        .count();
    assert_eq!((spoken, decided), (SAID, 0));
    approve(&rt, &approval).await.expect("the card decides");
    let mut text = String::new();
    while let Some(entry) = within("the outcome", reader.next()).await {
        if let TurnEntry::Chunk(Chunk::TextDelta(d)) = entry {
            text.push_str(&d.delta);
        }
    }
    assert!(text.ends_with("Paid."), "{text}");
    assert_eq!(paid(&rt).await, 1, "Alice, once; never Mallory");
    assert_eq!(*lock(&model.asides), SAID);
}
