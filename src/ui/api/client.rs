//! The client of the page's server functions (`client = PageClient` on each): Leptos' own
//! `fetch` client, and one thing more — an answer 401 means this page's sign-in ended (removed,
//! signed out, expired), and the page goes to the sign-in page, which says why
//! (`platform::signed_out`), instead of showing the error body it cannot decode. One place for
//! every call, as `browser::fetch` is for the JSON endpoints.

use futures::{Sink, Stream};
use leptos::server_fn::{
    Bytes,
    client::{Client, browser::BrowserClient},
    error::FromServerFnError,
    request::browser::BrowserRequest,
    response::{ClientRes, browser::BrowserResponse},
};

use crate::ui::platform;

/// Leptos' browser client, with a 401 taking the page to the sign-in page.
pub struct PageClient;

impl<E, I, O> Client<E, I, O> for PageClient
where
    E: FromServerFnError + Send,
    I: FromServerFnError,
    O: FromServerFnError,
{
    type Request = BrowserRequest;
    type Response = BrowserResponse;

    fn send(request: BrowserRequest) -> impl Future<Output = Result<BrowserResponse, E>> + Send {
        let sent = <BrowserClient as Client<E, I, O>>::send(request);
        async move {
            let response = sent.await?;
            if ClientRes::<E>::status(&response) == 401 {
                platform::signed_out();
            }
            Ok(response)
        }
    }

    fn open_websocket(
        path: &str,
    ) -> impl Future<
        Output = Result<
            (
                impl Stream<Item = Result<Bytes, Bytes>> + Send + 'static,
                impl Sink<Bytes> + Send + 'static,
            ),
            E,
        >,
    > + Send {
        <BrowserClient as Client<E, I, O>>::open_websocket(path)
    }

    fn spawn(future: impl Future<Output = ()> + Send + 'static) {
        <BrowserClient as Client<E, I, O>>::spawn(future);
    }
}
