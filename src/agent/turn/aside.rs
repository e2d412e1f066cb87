//! Asides (ADR 0035): the person spoke while the turn waits for them (a card), and the
//! conversation goes on around the waiting call instead of ending it. The runtime queues what
//! they said on the live turn (`runtime/turns.rs` is where an utterance becomes an aside); the
//! driver, waiting in phase A, answers it: the words go into the audit of every approval that
//! waits (advisory: they decide nothing), and the model's answer — its words and its speech —
//! streams into this turn's log and message. Nothing of the aside enters the history (the
//! provider keeps the exchange on its side, so the waiting call's outcome still goes on the
//! call's own id), and nothing it asks for runs: the model answers its own calls in an aside
//! as not run, and a call that reaches the runner anyway is dropped here, never gated.

use futures::StreamExt;

use super::{Flow, TurnDriver, audit::audit_event};
use crate::agent::{
    gate::CallPhase,
    model::ModelEvent,
    people::LOCAL,
    store::{AuditEvent, AuditKind},
};
use crate::protocol::{Chunk, audit::Actor};

/// Something to answer inside the turn while its calls are out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Aside {
    /// What a person said while the turn waited for them.
    Spoken {
        /// Who spoke (the chat's person).
        speaker: String,
        /// The model's transcript of what they said.
        text: String,
    },
    /// The model speaks on its own about the call that waits (told it waits:
    /// [`crate::agent::voice::VoiceNotice::WhileWaiting`]): no words of the person's, only its
    /// answer, which the person must hear ("it is on your screen, waiting for your approval").
    Model,
}

impl TurnDriver {
    /// The next aside queued for this turn.
    pub(super) fn next_aside(&self) -> Option<Aside> {
        let mut state = self.session.state();
        state
            .live
            .as_mut()
            .filter(|t| self.output.writes(&t.log))
            .and_then(|t| t.asides.pop_front())
    }

    /// Answers `aside` inside the turn: whether anything was emitted. `Err`: the turn was
    /// interrupted meanwhile.
    pub(super) async fn run_aside(&mut self, aside: Aside) -> Result<bool, Flow> {
        let spoken = matches!(aside, Aside::Spoken { .. });
        if let Aside::Spoken { speaker, text } = &aside {
            let events = self.spoken_events(speaker, text);
            self.commits.record_all(events);
            // What the person said, kept in the waiting message where they said it (no
            // message of its own can sit inside it): every client's reducer shows it, a
            // reload too; the approval's audit has it as what was said.
            self.emit(crate::protocol::voice::aside_chunk(text));
        }
        let model = self.rt.models().answering(self.transport).clone();
        let mut stream = model.aside(&self.session.id);
        // A spoken aside is always answered in a step of its own; the model's own words open
        // one when they come (it may have nothing to say: the answer went to a step already).
        let mut step_open = spoken;
        if step_open {
            self.emit(Chunk::start_step());
        }
        let mut text: Option<String> = None;
        let mut interrupted = false;
        loop {
            let event = tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    interrupted = true;
                    break;
                }
                event = stream.next() => event,
            };
            if matches!(
                event,
                Some(Ok(ModelEvent::TextDelta(_)
                    | ModelEvent::Audio(_)
                    | ModelEvent::Interrupted))
            ) && !step_open
            {
                self.emit(Chunk::start_step());
                step_open = true;
            }
            match event {
                None => break,
                Some(Ok(ModelEvent::TextDelta(delta))) => {
                    let id = match &text {
                        Some(id) => id.clone(),
                        None => {
                            let id = self.text_id();
                            self.emit(Chunk::text_start(id.clone()));
                            text = Some(id.clone());
                            id
                        }
                    };
                    self.emit(Chunk::text_delta(id, delta));
                }
                Some(Ok(ModelEvent::Audio(pcm))) => self.speak(pcm),
                Some(Ok(ModelEvent::Interrupted)) => self.interrupted(),
                Some(Ok(ModelEvent::ToolCall(call))) => {
                    // The model answers its own calls in an aside as not run; one that gets
                    // here anyway is never gated nor run.
                    tracing::warn!(
                        session = %self.session.id, tool = %call.name,
                        "a call asked for in an aside was dropped (not run)"
                    );
                }
                Some(Ok(ModelEvent::Finish { usage, .. })) => {
                    self.with_turn(|t| t.usage.add(usage));
                    break;
                }
                Some(Ok(ModelEvent::ReasoningDelta { .. } | ModelEvent::TextData(_))) => {}
                Some(Err(error)) => {
                    // The card still waits: the aside only went unanswered.
                    tracing::warn!(session = %self.session.id, %error, "an aside got no answer");
                    break;
                }
            }
        }
        // Dropping the stream dismisses what is left of the answer (an interrupt).
        drop(stream);
        if let Some(id) = text {
            self.emit(Chunk::text_end(id));
        }
        if step_open {
            self.emit(Chunk::finish_step());
            self.sync_messages();
        }
        if interrupted {
            return Err(Flow::Interrupted);
        }
        Ok(step_open)
    }

    /// The `spoken` audit events of an aside: one per approval that waits, with the words.
    fn spoken_events(&self, speaker: &str, text: &str) -> Vec<AuditEvent> {
        let now = self.rt.clock.now_ms();
        let reason =
            format!("spoken while it waited: {text:?} (what was said; words decide nothing)");
        let actor = Actor {
            transport: self.transport.as_str().to_owned(),
            person: (speaker != LOCAL).then(|| speaker.to_owned()),
            ..Actor::default()
        };
        self.with_turn(|turn| {
            turn.calls
                .iter()
                .filter_map(|call| match &call.phase {
                    CallPhase::AwaitingApproval { approval_id, .. } => {
                        let mut event = audit_event(
                            AuditKind::Spoken,
                            &self.session.id,
                            &turn.id,
                            &call.call,
                            approval_id,
                            now,
                        );
                        event.reason = Some(reason.clone());
                        event.actor = Some(actor.clone());
                        Some(event)
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// The turn ends with asides nobody answered: the model's answers to them are discarded.
    /// Words said as it ended (not interrupted) are not lost: they are returned, to be
    /// admitted again once the end is logged ([`TurnDriver::readmit`]), as a turn of their own.
    pub(super) fn dismiss_asides(&mut self) -> Vec<(String, String)> {
        let ended_by_person = self.cancel.is_cancelled();
        let mut unanswered = Vec::new();
        while let Some(aside) = self.next_aside() {
            match aside {
                Aside::Spoken { speaker, text } if !ended_by_person => {
                    unanswered.push((speaker, text));
                }
                _ => drop(
                    self.rt
                        .models()
                        .answering(self.transport)
                        .aside(&self.session.id),
                ),
            }
        }
        unanswered
    }

    /// Words said as the turn ended start turns of their own, in order (the end is logged: the
    /// chat has no turn in the way).
    pub(super) fn readmit(&self, unanswered: Vec<(String, String)>) {
        if unanswered.is_empty() {
            return;
        }
        let (rt, chat, transport) = (self.rt.clone(), self.session.id.clone(), self.transport);
        tokio::spawn(async move {
            for (speaker, text) in unanswered {
                let user = crate::agent::runtime::UserTurn {
                    text,
                    transport,
                    ..Default::default()
                };
                if let Err(error) = rt.start_spoken_turn(&chat, user, &speaker).await {
                    tracing::warn!(session = %chat, %error, "words said as a turn ended started nothing");
                }
            }
        });
    }
}
