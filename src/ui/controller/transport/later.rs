//! A transport whose code is loaded when it is first used: the SSE transport's (loaded as the
//! page opens its first chat, after it is interactive) and the WebSocket's, which only BIDI mode
//! needs (with a split wasm each is a part of its own, ADR 0030). What the page asks of it before
//! it has loaded is asked of it, in order, once it has; what it answers at once
//! (`follows_waiting_turns`, `max_attachment_bytes`) is known without its code.

use std::{cell::RefCell, future::Future, pin::Pin, rc::Rc};

use leptos::task::spawn_local;
use serde_json::Value;

use super::ChatTransport;
use crate::{
    protocol::{ClientFrame, UiMessage},
    ui::controller::ChatCtl,
};

/// Loads the transport's code and makes the transport.
pub(super) type Load = fn() -> Pin<Box<dyn Future<Output = Rc<dyn ChatTransport>>>>;

type Call = Box<dyn FnOnce(&dyn ChatTransport)>;

enum State {
    /// Never used: nothing to load yet.
    Idle,
    /// Loading; these calls wait for it.
    Loading(Vec<Call>),
    Loaded(Rc<dyn ChatTransport>),
}

/// A handle on a transport loaded when first used (cloned into the load that completes it).
#[derive(Clone)]
pub(super) struct Later(Rc<Inner>);

struct Inner {
    state: RefCell<State>,
    load: Load,
    follows_waiting_turns: bool,
    max_attachment_bytes: u64,
}

impl Later {
    pub(super) fn new(load: Load, follows_waiting_turns: bool, max_attachment_bytes: u64) -> Self {
        Later(Rc::new(Inner {
            state: RefCell::new(State::Idle),
            load,
            follows_waiting_turns,
            max_attachment_bytes,
        }))
    }

    /// Makes `call` on the transport: now if it has loaded, else once it has (loading it).
    fn call(&self, call: impl FnOnce(&dyn ChatTransport) + 'static) {
        let mut state = self.0.state.borrow_mut();
        match &mut *state {
            State::Loaded(transport) => {
                let transport = transport.clone();
                drop(state);
                call(&*transport);
            }
            State::Loading(waiting) => waiting.push(Box::new(call)),
            State::Idle => {
                *state = State::Loading(vec![Box::new(call)]);
                drop(state);
                let this = self.clone();
                spawn_local(async move {
                    let transport = (this.0.load)().await;
                    let waiting = match std::mem::replace(
                        &mut *this.0.state.borrow_mut(),
                        State::Loaded(transport.clone()),
                    ) {
                        State::Loading(waiting) => waiting,
                        _ => Vec::new(),
                    };
                    for call in waiting {
                        call(&*transport);
                    }
                });
            }
        }
    }

    /// Makes `call` only on a transport that is in use (loaded, or loading): one never used
    /// has nothing to close or forget.
    fn call_if_used(&self, call: impl FnOnce(&dyn ChatTransport) + 'static) {
        if !matches!(&*self.0.state.borrow(), State::Idle) {
            self.call(call);
        }
    }
}

impl ChatTransport for Later {
    fn connect(&self, ctl: ChatCtl) {
        self.call(move |t| t.connect(ctl));
    }

    fn disconnect(&self, ctl: ChatCtl) {
        self.call_if_used(move |t| t.disconnect(ctl));
    }

    fn forget_chat(&self) {
        self.call_if_used(|t| t.forget_chat());
    }

    fn follows_waiting_turns(&self) -> bool {
        self.0.follows_waiting_turns
    }

    fn max_attachment_bytes(&self) -> u64 {
        self.0.max_attachment_bytes
    }

    fn send_message(&self, ctl: ChatCtl, message: &UiMessage) {
        let message = message.clone();
        self.call(move |t| t.send_message(ctl, &message));
    }

    fn send_answer(&self, ctl: ChatCtl, browser_runs_it: bool) {
        self.call(move |t| t.send_answer(ctl, browser_runs_it));
    }

    fn send_tool_result(&self, ctl: ChatCtl, call_id: &str, result: Result<Value, String>) {
        let call_id = call_id.to_owned();
        self.call(move |t| t.send_tool_result(ctl, &call_id, result));
    }

    fn resume(&self, ctl: ChatCtl) {
        self.call(move |t| t.resume(ctl));
    }

    fn stop(&self, ctl: ChatCtl) {
        self.call(move |t| t.stop(ctl));
    }

    fn retry(&self, ctl: ChatCtl) {
        self.call(move |t| t.retry(ctl));
    }

    fn send_audio(&self, ctl: ChatCtl, pcm: Vec<u8>) {
        self.call_if_used(move |t| t.send_audio(ctl, pcm));
    }

    fn send_audio_control(&self, ctl: ChatCtl, frame: ClientFrame) {
        self.call(move |t| t.send_audio_control(ctl, frame));
    }

    fn drop_connection(&self) {
        self.call_if_used(|t| t.drop_connection());
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use std::cell::{Cell, RefCell};

    use tokio::sync::oneshot;

    use super::*;

    thread_local! {
        /// What the loaded transport was asked, in order.
        static ASKED: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
        static LOADS: Cell<usize> = const { Cell::new(0) };
        /// The load finishes when this is sent to.
        static LOADED: RefCell<Option<oneshot::Receiver<()>>> = const { RefCell::new(None) };
    }

    fn asked() -> Vec<&'static str> {
        ASKED.with_borrow(Clone::clone)
    }

    struct Recorder;

    impl ChatTransport for Recorder {
        fn connect(&self, _: ChatCtl) {
            ASKED.with_borrow_mut(|a| a.push("connect"));
        }
        fn disconnect(&self, _: ChatCtl) {
            ASKED.with_borrow_mut(|a| a.push("disconnect"));
        }
        fn forget_chat(&self) {
            ASKED.with_borrow_mut(|a| a.push("forget_chat"));
        }
        fn follows_waiting_turns(&self) -> bool {
            unreachable!("known without loading")
        }
        fn max_attachment_bytes(&self) -> u64 {
            unreachable!("known without loading")
        }
        fn send_message(&self, _: ChatCtl, _: &UiMessage) {
            ASKED.with_borrow_mut(|a| a.push("send_message"));
        }
        fn send_answer(&self, _: ChatCtl, _: bool) {
            ASKED.with_borrow_mut(|a| a.push("send_answer"));
        }
        fn send_tool_result(&self, _: ChatCtl, _: &str, _: Result<Value, String>) {
            ASKED.with_borrow_mut(|a| a.push("send_tool_result"));
        }
        fn resume(&self, _: ChatCtl) {
            ASKED.with_borrow_mut(|a| a.push("resume"));
        }
        fn stop(&self, _: ChatCtl) {
            ASKED.with_borrow_mut(|a| a.push("stop"));
        }
        fn send_audio(&self, _: ChatCtl, _: Vec<u8>) {
            ASKED.with_borrow_mut(|a| a.push("send_audio"));
        }
        fn send_audio_control(&self, _: ChatCtl, _: ClientFrame) {
            ASKED.with_borrow_mut(|a| a.push("send_audio_control"));
        }
    }

    fn load() -> Pin<Box<dyn Future<Output = Rc<dyn ChatTransport>>>> {
        let loaded = LOADED.with_borrow_mut(Option::take);
        Box::pin(async move {
            LOADS.set(LOADS.get() + 1);
            if let Some(loaded) = loaded {
                let _ = loaded.await;
            }
            let transport: Rc<dyn ChatTransport> = Rc::new(Recorder);
            transport
        })
    }

    /// Lets the spawned load run as far as it can.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn what_is_asked_while_it_loads_is_asked_in_order_once_it_has_and_never_used_loads_nothing()
     {
        let _ = any_spawner::Executor::init_tokio();
        tokio::task::LocalSet::new()
            .run_until(async {
                // The page's reactive owner (its arena holds the controller's signals).
                let owner = leptos::prelude::Owner::new_root(None);
                owner.set();
                let ctl = ChatCtl::new();
                let (done, loaded) = oneshot::channel();
                LOADED.set(Some(loaded));
                let later = Later::new(load, true, 42);

                // Nothing to close or forget on a transport never used: its code is not loaded.
                later.disconnect(ctl);
                later.forget_chat();
                later.drop_connection();
                assert!(later.follows_waiting_turns());
                assert_eq!(later.max_attachment_bytes(), 42);
                settle().await;
                assert_eq!(LOADS.get(), 0);

                // Used while its code loads: loaded once, and asked once it has, in order.
                later.connect(ctl);
                later.send_answer(ctl, false);
                later.stop(ctl);
                settle().await;
                assert_eq!(LOADS.get(), 1);
                assert_eq!(asked(), Vec::<&str>::new());
                later.send_tool_result(ctl, "call-1", Ok(Value::Null));
                done.send(()).unwrap();
                settle().await;
                assert_eq!(
                    asked(),
                    ["connect", "send_answer", "stop", "send_tool_result"]
                );

                // Loaded: asked at once, the voice's frames too (not the trait's no-op defaults).
                later.resume(ctl);
                later.disconnect(ctl);
                later.send_audio_control(ctl, ClientFrame::Interrupt { reason: None });
                later.send_audio(ctl, vec![0, 0]);
                assert_eq!(
                    asked()[4..],
                    ["resume", "disconnect", "send_audio_control", "send_audio"]
                );
                assert_eq!(LOADS.get(), 1);
            })
            .await;
    }
}
