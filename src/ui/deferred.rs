//! Parts of a page only the browser renders (the server never does: the chat's messages, a
//! panel opened by a click), built by code that is loaded when they are first shown: with a
//! split wasm (`cargo leptos build --split`, ADR 0030) that code is a part of the wasm of its
//! own, fetched then; without `--split` it is in the one module and runs at once.
//!
//! The page makes an element for the part (a `NodeRef`) and calls [`deferred`] where it makes
//! it (a `Show`'s children, a branch of a `move ||`); the loaded code builds its view into that
//! element ([`build_into`]). What it built lives as long as that scope: when the page takes the
//! element out, the view is unmounted and its effects end, and a load still under way is
//! cancelled. Built, never hydrated, and never type-erased to `AnyView`: an erased view carries
//! hydration code (a synchronous and an asynchronous copy) for a view the server never renders.

use std::any::Any;

use leptos::{
    html::ElementType,
    prelude::*,
    reactive::spawn_local_scoped_with_cancellation,
    tachys::view::{Mountable, Render},
    wasm_bindgen::JsCast,
};

/// A view built into an element of the page, with its reactive owner: it stays until dropped
/// (then it leaves the element and its effects end).
pub struct Built(#[allow(dead_code)] Box<dyn Any>);

struct Kept<M: Mountable> {
    state: M,
    _owner: Owner,
}

impl<M: Mountable> Drop for Kept<M> {
    fn drop(&mut self) {
        self.state.unmount();
    }
}

/// Builds `view` into `parent`, under a new reactive owner that is a child of the current one
/// (so the view sees the page's context).
pub fn build_into<V: IntoView + 'static>(
    parent: &web_sys::Element,
    view: impl FnOnce() -> V,
) -> Built {
    let owner = Owner::new();
    let state = owner.with(|| {
        let mut state = view().into_view().build();
        state.mount(parent, None);
        state
    });
    Built(Box::new(Kept {
        state,
        _owner: owner,
    }))
}

/// Shows in the element `host` refers to what `load` builds there, once the page has put the
/// element in (loading `load`'s code first, the first time, with a split wasm). Call it in the
/// reactive scope that makes the element: what was built goes when that scope ends.
pub fn deferred<E, F, Fut>(host: NodeRef<E>, load: F)
where
    E: ElementType + 'static,
    E::Output: JsCast + Clone + 'static,
    F: Fn(web_sys::Element) -> Fut + 'static,
    Fut: Future<Output = Built> + 'static,
{
    // Disposed with the scope, which drops (unmounts) what it holds.
    let built = StoredValue::new_local(None::<Built>);
    Effect::new(move |_| {
        let Some(element) = host
            .get()
            .and_then(|e| e.dyn_into::<web_sys::Element>().ok())
        else {
            return;
        };
        let part = load(element);
        // Cancelled if the scope ends first.
        spawn_local_scoped_with_cancellation(async move {
            built.set_value(Some(part.await));
        });
    });
}
