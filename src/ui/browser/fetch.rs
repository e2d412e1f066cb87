//! SSE mode in the browser: `fetch` a `POST`, read the body as a stream, decode chunks.

use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::{
    protocol::{Chunk, SseDecoder, SseEvent, StreamItem},
    ui::platform::FetchError,
};

fn js_error(value: JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

/// Sends `method url` with an optional JSON body; an error status becomes
/// `FetchError::Http` with the `{error: {code, message}}` the server sent (and a 401 takes the
/// page to the sign-in page: its sign-in ended).
async fn send(
    method: &str,
    url: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
) -> Result<web_sys::Response, FetchError> {
    let window = web_sys::window().ok_or_else(|| FetchError::Network("no window".into()))?;
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    let request_headers = web_sys::Headers::new().map_err(|e| FetchError::Network(js_error(e)))?;
    for (name, value) in headers {
        let _ = request_headers.set(name, value);
    }
    if let Some(body) = &body {
        let _ = request_headers.set("content-type", "application/json");
        init.set_body(&JsValue::from_str(body));
    }
    init.set_headers(&request_headers);
    let request = web_sys::Request::new_with_str_and_init(url, &init)
        .map_err(|e| FetchError::Network(js_error(e)))?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_request(&request))
        .await
        .map_err(|e| FetchError::Network(js_error(e)))?
        .dyn_into()
        .map_err(|_| FetchError::Network("not a response".into()))?;
    if response.ok() {
        return Ok(response);
    }
    let status = response.status();
    if status == 401 {
        super::dom::signed_out();
    }
    let text = text(&response).await.unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let code = json["error"]["code"]
        .as_str()
        .unwrap_or("http_error")
        .to_string();
    let message = json["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("The server answered {status}."));
    Err(FetchError::Http {
        status,
        code,
        message,
    })
}

/// The whole body of `response` as text.
async fn text(response: &web_sys::Response) -> Result<String, FetchError> {
    let promise = response
        .text()
        .map_err(|e| FetchError::Network(js_error(e)))?;
    JsFuture::from(promise)
        .await
        .map_err(|e| FetchError::Network(js_error(e)))?
        .as_string()
        .ok_or_else(|| FetchError::Protocol("the body is not text".into()))
}

/// `GET url` and its body as text.
pub async fn get_text(url: &str) -> Result<String, FetchError> {
    let response = send("GET", url, None, &[]).await?;
    text(&response).await
}

/// `GET url` and its JSON body.
pub async fn get_json<T: serde::de::DeserializeOwned>(url: &str) -> Result<T, FetchError> {
    let response = send("GET", url, None, &[]).await?;
    let body = text(&response).await?;
    serde_json::from_str(&body).map_err(|e| FetchError::Protocol(e.to_string()))
}

/// Sends `method url` with an optional JSON body and feeds every decoded frame to `on_frame`.
/// Resolves when the body ends. A 204 answer feeds nothing and resolves `Ok(false)`.
pub async fn stream(
    method: &str,
    url: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
    mut on_frame: impl FnMut(StreamItem, serde_json::Value),
) -> Result<bool, FetchError> {
    let response = send(method, url, body, headers).await?;
    if response.status() == 204 {
        return Ok(false);
    }
    let body = response
        .body()
        .ok_or_else(|| FetchError::Protocol("the response has no body".into()))?;
    let reader: web_sys::ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|_| FetchError::Protocol("cannot read the body".into()))?;
    // Events, then chunks read from their JSON: the JSON as it came goes with each chunk (the
    // chunk log shows it; re-encoding chunks would cost the bundle an encoder).
    let mut decoder = SseDecoder::new();
    let mut deliver =
        |event: Result<SseEvent, crate::protocol::SseError>| -> Result<(), FetchError> {
            match event.map_err(|e| FetchError::Protocol(e.to_string()))? {
                SseEvent::Done => {
                    on_frame(StreamItem::Done, serde_json::Value::String("[DONE]".into()))
                }
                SseEvent::Data(data) => {
                    let raw: serde_json::Value = serde_json::from_str(&data).map_err(|e| {
                        FetchError::Protocol(crate::protocol::ChunkDecodeError::Json(e).to_string())
                    })?;
                    let chunk = Chunk::from_value(raw.clone())
                        .map_err(|e| FetchError::Protocol(e.to_string()))?;
                    on_frame(StreamItem::Chunk(chunk), raw);
                }
            }
            Ok(())
        };
    loop {
        let result = JsFuture::from(reader.read())
            .await
            .map_err(|e| FetchError::Network(js_error(e)))?;
        let done = js_sys::Reflect::get(&result, &JsValue::from_str("done"))
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(true);
        if done {
            break;
        }
        let value = js_sys::Reflect::get(&result, &JsValue::from_str("value"))
            .map_err(|e| FetchError::Protocol(js_error(e)))?;
        let bytes = js_sys::Uint8Array::new(&value).to_vec();
        for event in decoder.push(&bytes) {
            deliver(event)?;
        }
    }
    for event in decoder.finish() {
        deliver(event)?;
    }
    Ok(true)
}

/// A plain `POST` with an optional JSON body (stop, a question's reply); the answer's body is
/// not read.
pub async fn post(url: &str, body: Option<String>) -> Result<(), FetchError> {
    send("POST", url, body, &[]).await.map(|_| ())
}
