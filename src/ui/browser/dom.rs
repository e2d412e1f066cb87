//! Small browser services: local storage, downloads, clipboard, focus, time.

use wasm_bindgen::{JsCast, JsValue};

fn window() -> Option<web_sys::Window> {
    web_sys::window()
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    js_sys::Date::now() as i64
}

pub fn storage_get(key: &str) -> Option<String> {
    window()?.local_storage().ok()??.get_item(key).ok()?
}

pub fn storage_set(key: &str, value: &str) {
    if let Some(storage) = window().and_then(|w| w.local_storage().ok().flatten()) {
        let _ = storage.set_item(key, value);
    }
}

/// Offers `text` as a file download.
pub fn download(filename: &str, text: &str, media_type: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(media_type);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| "cannot create the file".to_string())?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| "cannot create a download link".to_string())?;
    let document = window().and_then(|w| w.document()).ok_or("no document")?;
    let anchor: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(|_| "cannot create a link")?
        .dyn_into()
        .map_err(|_| "not a link")?;
    anchor.set_href(&url);
    anchor.set_download(filename);
    anchor.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// Copies `text` to the clipboard.
pub fn copy(text: &str) {
    if let Some(w) = window() {
        let _ = w.navigator().clipboard().write_text(text);
    }
}

/// The page's path and query (without `?`).
/// Whether the server rendered this page for a signed-in session: it says so in the head
/// (`<meta name="countersign-session">`), which the server wrote from the same request the
/// hydrated header must agree with.
pub fn signed_in() -> bool {
    window()
        .and_then(|w| w.document())
        .and_then(|d| {
            d.query_selector("meta[name=\"countersign-session\"]")
                .ok()
                .flatten()
        })
        .is_some()
}

/// The name of the person signed in with a passkey, as the server wrote it in the head
/// (`<meta name="countersign-person">`).
pub fn person_name() -> Option<String> {
    window()?
        .document()?
        .query_selector("meta[name=\"countersign-person\"]")
        .ok()
        .flatten()?
        .get_attribute("content")
}

/// Writes the time left into every `.countdown[data-deadline]` (server milliseconds; `offset`:
/// the server's clock minus this one).
pub fn tick_countdowns(offset_ms: i64) {
    let Some(document) = window().and_then(|w| w.document()) else {
        return;
    };
    let Ok(list) = document.query_selector_all(".countdown[data-deadline]") else {
        return;
    };
    let now = now_ms() + offset_ms;
    for i in 0..list.length() {
        let Some(element) = list
            .item(i)
            .and_then(|n| n.dyn_into::<web_sys::Element>().ok())
        else {
            continue;
        };
        let Some(deadline) = element
            .get_attribute("data-deadline")
            .and_then(|d| d.parse::<i64>().ok())
        else {
            continue;
        };
        let left = (deadline - now) / 1000;
        let text = if left <= 0 {
            "expired".to_owned()
        } else {
            format!("{}:{:02} left", left / 60, left % 60)
        };
        element.set_text_content(Some(&text));
    }
}

pub fn location() -> (String, String) {
    let location = window().map(|w| w.location());
    let path = location
        .as_ref()
        .and_then(|l| l.pathname().ok())
        .unwrap_or_else(|| "/".into());
    let search = location.and_then(|l| l.search().ok()).unwrap_or_default();
    let query = search.strip_prefix('?').unwrap_or(&search).to_owned();
    (path, query)
}

thread_local! {
    /// Whether the server said this page's sign-in ended.
    static SIGNED_OUT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The server answered 401: this page's sign-in ended (removed, signed out, expired). The page
/// goes to the sign-in page — once, whatever else still fails — which says why and comes back
/// here after; what polls stops ([`is_signed_out`]).
pub fn signed_out() {
    if SIGNED_OUT.with(|s| s.replace(true)) {
        return;
    }
    let (path, query) = location();
    let here = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    if let Some(window) = window() {
        let _ = window
            .location()
            .assign(&crate::common::url::signin_url(&here));
    }
}

/// Whether this page's sign-in ended ([`signed_out`]): nothing more to ask the server.
pub fn is_signed_out() -> bool {
    SIGNED_OUT.with(std::cell::Cell::get)
}

/// The page's origin as a WebSocket base (`ws://host` or `wss://host`).
pub fn ws_base() -> String {
    let location = window().map(|w| w.location());
    let protocol = location
        .as_ref()
        .and_then(|l| l.protocol().ok())
        .unwrap_or_else(|| "http:".into());
    let host = location
        .as_ref()
        .and_then(|l| l.host().ok())
        .unwrap_or_else(|| "127.0.0.1:3000".into());
    let scheme = if protocol == "https:" { "wss" } else { "ws" };
    format!("{scheme}://{host}")
}

/// Calls `f` every `ms` milliseconds for the life of the page.
pub fn every(ms: i32, f: impl Fn() + 'static) {
    let closure = wasm_bindgen::closure::Closure::<dyn Fn()>::new(f);
    if let Some(w) = window() {
        let _ = w.set_interval_with_callback_and_timeout_and_arguments_0(
            closure.as_ref().unchecked_ref(),
            ms,
        );
    }
    closure.forget();
}

/// Sleeps `ms` milliseconds.
pub async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// A random id for client-side message ids.
pub fn random_id(prefix: &str) -> String {
    let a = (js_sys::Math::random() * 1e16) as u64;
    let b = (js_sys::Math::random() * 1e16) as u64;
    format!("{prefix}-{a:x}{b:x}")
}

/// Focuses the element with this id, if present.
pub fn focus(element_id: &str) {
    if let Some(element) = window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(element_id))
        .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
    {
        let _ = element.focus();
    }
}

/// Scrolls the element with this id into view (end of the conversation).
pub fn scroll_to_bottom(element_id: &str) {
    if let Some(element) = window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(element_id))
    {
        let top = element.scroll_height();
        element.set_scroll_top(top);
    }
}

/// Whether the element is scrolled to (near) its bottom.
pub fn is_near_bottom(element_id: &str) -> bool {
    window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(element_id))
        .map(|e| e.scroll_height() - e.scroll_top() - e.client_height() < 80)
        .unwrap_or(true)
}

/// The name/value entries of the form `event` (a submit) came from, in document order.
pub fn form_entries(event: &web_sys::Event) -> Vec<(String, String)> {
    let form = event
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlFormElement>().ok());
    let Some(data) = form.and_then(|f| web_sys::FormData::new_with_form(&f).ok()) else {
        return Vec::new();
    };
    let Ok(Some(entries)) = js_sys::try_iter(&data) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pair: js_sys::Array = entry.dyn_into().ok()?;
            Some((pair.get(0).as_string()?, pair.get(1).as_string()?))
        })
        .collect()
}

/// The `data-action` of the element a click landed in (or of its nearest ancestor with one).
pub fn action_of(event: &web_sys::Event) -> Option<String> {
    event
        .target()?
        .dyn_into::<web_sys::Element>()
        .ok()?
        .closest("[data-action]")
        .ok()??
        .get_attribute("data-action")
}
