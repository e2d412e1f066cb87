//! A turn's output: where every chunk it emits goes, in order — the server's reducer (the
//! assistant message as the client sees it), the chunk log (`COUNTERSIGN_CHUNK_LOG`), the
//! turn's log that every reader follows, and, on a shared database, the relay to other
//! instances' readers (ADR 0043). Its state is private: the driver only emits and pushes, so
//! nothing else can write the log or let the reducer and the log disagree.

use std::sync::Arc;

use super::relay::Relay;
use crate::agent::{
    Transport,
    chunk_log::ChunkLog,
    clock::Clock,
    runtime::Runtime,
    session::{TurnEntry, TurnLog},
};
use crate::protocol::{Chunk, MessageReducer, UiMessage};

pub(crate) struct TurnOutput {
    chat: String,
    log: Arc<TurnLog>,
    /// The assistant message as the client sees it, folded from what was emitted.
    reducer: MessageReducer,
    transport: Transport,
    chunk_log: Option<Arc<ChunkLog>>,
    clock: Arc<dyn Clock>,
    /// On a shared database: tells other instances what the turn logs (set when it runs).
    relay: Option<Relay>,
}

impl TurnOutput {
    /// The output of `chat`'s turn into `log`, its message folded by `reducer`.
    pub(crate) fn new(
        rt: &Runtime,
        chat: String,
        log: Arc<TurnLog>,
        reducer: MessageReducer,
        transport: Transport,
    ) -> Self {
        TurnOutput {
            chat,
            log,
            reducer,
            transport,
            chunk_log: rt.chunk_log().cloned(),
            clock: rt.clock.clone(),
            relay: None,
        }
    }

    /// From now on, other instances' readers follow what is logged (turn `turn_id`).
    pub(super) fn relay(&mut self, rt: Arc<Runtime>, turn_id: String) {
        self.relay = Some(Relay::spawn(
            rt,
            self.chat.clone(),
            turn_id,
            Arc::downgrade(&self.log),
        ));
    }

    /// Whether `log` is this output's log (the live turn is still this one).
    pub(super) fn writes(&self, log: &Arc<TurnLog>) -> bool {
        Arc::ptr_eq(log, &self.log)
    }

    /// Everything logged so far.
    pub(super) fn entries(&self) -> Vec<TurnEntry> {
        self.log.entries_from(0)
    }

    /// The assistant message as the client sees it now.
    pub(super) fn message(&self) -> &UiMessage {
        self.reducer.message()
    }

    /// The assistant message's id.
    pub(super) fn message_id(&self) -> &str {
        &self.reducer.message().id
    }

    /// Folds `chunk` into the message, records it in the chunk log and logs it. True when the
    /// chat's follower should hear of it (see [`TurnOutput::push`]).
    #[must_use]
    pub(super) fn emit(&mut self, chunk: Chunk) -> bool {
        if let Err(e) = self.reducer.apply(&chunk) {
            tracing::error!(session = %self.chat, error = %e, ?chunk, "the runner emitted a chunk its own reducer rejects");
        }
        if let Some(log) = &self.chunk_log {
            log.record(
                &self.chat,
                self.transport.as_str(),
                &chunk,
                self.clock.now_ms(),
            );
        }
        self.push(TurnEntry::Chunk(chunk))
    }

    /// Appends to the turn's log (and tells other instances). True when the entry is news for
    /// the chat's follower, which stopped reading at a pause.
    #[must_use]
    pub(super) fn push(&self, entry: TurnEntry) -> bool {
        if let Some(relay) = &self.relay {
            // The driver is its log's only writer: the entry's number is the log's length.
            relay.logged(self.log.len(), &entry);
        }
        self.log.push(entry)
    }

    /// Marks the end of the turn in the chunk log.
    pub(super) fn record_done(&self) {
        if let Some(log) = &self.chunk_log {
            log.record_done(&self.chat, self.transport.as_str(), self.clock.now_ms());
        }
    }

    /// Writes what the chunk log holds of this chat so far.
    pub(super) fn flush_chunk_log(&self) {
        if let Some(log) = &self.chunk_log {
            log.flush(&self.chat);
        }
    }

    /// Whether a step is open in what was emitted (start-step without its finish-step).
    pub(super) fn in_step(&self) -> bool {
        let mut open = false;
        for entry in self.log.entries_from(0) {
            match entry {
                TurnEntry::Chunk(Chunk::StartStep) => open = true,
                TurnEntry::Chunk(Chunk::FinishStep) => open = false,
                _ => {}
            }
        }
        open
    }
}
