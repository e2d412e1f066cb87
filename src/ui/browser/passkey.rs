//! Passkey assertions from the app (step-up, ADR 0024): the ceremony itself is done by
//! `public/passkey.js`, which the plain sign-in pages use too (one implementation of the
//! base64url ↔ ArrayBuffer conversions, none of it in the bundle); this only calls it.

use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};

fn message(error: JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "the passkey was not used".to_owned())
}

/// Has the browser's authenticator answer `options` (the server's request options), and returns
/// the assertion as JSON.
pub async fn assert(options: &Value) -> Result<Value, String> {
    let window = web_sys::window().ok_or("no window")?;
    let api = js_sys::Reflect::get(&window, &JsValue::from_str("countersignPasskey"))
        .ok()
        .filter(|v| !v.is_undefined())
        .ok_or("the passkey script did not load; reload the page")?;
    let assert: js_sys::Function = js_sys::Reflect::get(&api, &JsValue::from_str("assert"))
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or("the passkey script has no assert()")?;
    let options = js_sys::JSON::parse(&options.to_string()).map_err(message)?;
    let promise: js_sys::Promise = assert
        .call1(&api, &options)
        .map_err(message)?
        .dyn_into()
        .map_err(|_| "assert() did not return a promise".to_owned())?;
    let credential = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(message)?;
    let text = js_sys::JSON::stringify(&credential)
        .map_err(message)?
        .as_string()
        .unwrap_or_default();
    serde_json::from_str(&text).map_err(|e| e.to_string())
}
