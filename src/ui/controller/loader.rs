//! Code loaded when it is first used (with a split wasm, a part of its own: ADR 0030): what is
//! asked of it before it has loaded waits, in order, and is asked of it once it has. The
//! WebSocket transport (`transport/later.rs`) and the voice engine (`voice.rs`) load this way.

use std::{cell::RefCell, future::Future, pin::Pin, rc::Rc};

use leptos::task::spawn_local;

/// Loads the code and makes the thing it holds.
pub(super) type Load<T> = fn() -> Pin<Box<dyn Future<Output = Rc<T>>>>;

type Call<T> = Box<dyn FnOnce(&T)>;

enum State<T: ?Sized> {
    /// Never used: nothing to load yet.
    Idle,
    /// Loading; these calls wait for it.
    Loading(Vec<Call<T>>),
    Loaded(Rc<T>),
}

/// A handle on something loaded when first used (cloned into the load that completes it).
pub(super) struct Loader<T: ?Sized + 'static>(Rc<Inner<T>>);

impl<T: ?Sized + 'static> Clone for Loader<T> {
    fn clone(&self) -> Self {
        Loader(self.0.clone())
    }
}

struct Inner<T: ?Sized> {
    state: RefCell<State<T>>,
    load: Load<T>,
}

impl<T: ?Sized + 'static> Loader<T> {
    pub(super) fn new(load: Load<T>) -> Self {
        Loader(Rc::new(Inner {
            state: RefCell::new(State::Idle),
            load,
        }))
    }

    /// Makes `call`: now if the code has loaded, else once it has (loading it).
    pub(super) fn call(&self, call: impl FnOnce(&T) + 'static) {
        let mut state = self.0.state.borrow_mut();
        match &mut *state {
            State::Loaded(loaded) => {
                let loaded = loaded.clone();
                drop(state);
                call(&*loaded);
            }
            State::Loading(waiting) => waiting.push(Box::new(call)),
            State::Idle => {
                *state = State::Loading(vec![Box::new(call)]);
                drop(state);
                let this = self.clone();
                spawn_local(async move {
                    let loaded = (this.0.load)().await;
                    let waiting = match std::mem::replace(
                        &mut *this.0.state.borrow_mut(),
                        State::Loaded(loaded.clone()),
                    ) {
                        State::Loading(waiting) => waiting,
                        _ => Vec::new(),
                    };
                    for call in waiting {
                        call(&*loaded);
                    }
                });
            }
        }
    }

    /// Makes `call` only if the code is in use (loaded, or loading): what was never used has
    /// nothing to close or forget.
    pub(super) fn call_if_used(&self, call: impl FnOnce(&T) + 'static) {
        if !matches!(&*self.0.state.borrow(), State::Idle) {
            self.call(call);
        }
    }

    /// What was loaded, if it has.
    pub(super) fn loaded(&self) -> Option<Rc<T>> {
        match &*self.0.state.borrow() {
            State::Loaded(loaded) => Some(loaded.clone()),
            _ => None,
        }
    }
}
