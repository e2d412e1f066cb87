//! BIDI's voice in the browser (ADR 0037): the microphone ([`capture`]) and the agent's speech
//! ([`playback`]), behind `platform::VoiceEngine`. Only the voice bar makes it, so with a split
//! wasm (ADR 0030) this code is the bar's part, loaded when BIDI mode first shows it.

mod capture;
mod playback;

use std::{cell::RefCell, pin::Pin, rc::Rc};

use crate::ui::platform::{self, MicError, VoiceEngine};

/// How long a closing microphone waits for the worklet's last batch before it closes anyway (a
/// context the browser suspended posts nothing).
const FLUSH_WAIT_MS: i32 = 500;

/// The microphone open now, with its number (a close that finishes late must not take a newer
/// one).
type Slot = Rc<RefCell<Option<(u64, capture::Capture)>>>;

#[derive(Default)]
struct Engine {
    capture: Slot,
    opened: Rc<std::cell::Cell<u64>>,
    playback: RefCell<playback::Playback>,
}

/// The engine `platform::voice_engine` hands out.
pub fn engine() -> Rc<dyn VoiceEngine> {
    Rc::new(Engine::default())
}

/// Releases microphone `id` if it is still the open one: later, never inside its own worklet's
/// message handler (which it owns).
fn release(slot: Slot, id: u64) {
    leptos::task::spawn_local(async move {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_some_and(|(open, _)| *open == id) {
            *slot = None;
        }
    });
}

impl VoiceEngine for Engine {
    fn open_mic(
        &self,
        on_batch: Rc<dyn Fn(Vec<f32>)>,
    ) -> Pin<Box<dyn Future<Output = Result<(), MicError>>>> {
        // A person's gesture: the agent's speech may play from now on.
        self.playback.borrow_mut().unlock();
        let slot = self.capture.clone();
        let opened = self.opened.clone();
        Box::pin(async move {
            let capture = capture::Capture::open(on_batch).await?;
            let id = opened.get() + 1;
            opened.set(id);
            // A microphone still closing is replaced.
            *slot.borrow_mut() = Some((id, capture));
            Ok(())
        })
    }

    fn close_mic(&self, done: Box<dyn FnOnce()>) {
        let open = self.capture.borrow();
        let Some((id, capture)) = open.as_ref() else {
            drop(open);
            done();
            return;
        };
        let id = *id;
        let slot = self.capture.clone();
        capture.flush(Box::new(move || {
            done();
            release(slot, id);
        }));
        drop(open);
        // The worklet does not answer (a context the browser suspended): close without its
        // last batch.
        let slot = self.capture.clone();
        leptos::task::spawn_local(async move {
            platform::sleep(FLUSH_WAIT_MS).await;
            let done = match &*slot.borrow() {
                Some((open, capture)) if *open == id => capture.take_flushed(),
                _ => None,
            };
            if let Some(done) = done {
                done();
            }
        });
    }

    fn play(&self, pcm: &[u8]) {
        self.playback.borrow_mut().play(pcm);
    }

    fn stop_playback(&self) {
        self.playback.borrow_mut().stop();
    }

    fn playing(&self) -> bool {
        self.playback.borrow().playing()
    }
}
