//! Attachments stored once (issue #24, ADR 0026) over a real socket: an image sent as a `data:`
//! URL is kept once, the chat refers to it by URL, the page loads it from there with the chat's
//! own access check and headers that keep it inert; bad attachments are refused with their
//! reason and change nothing.
#![cfg(feature = "ssr")]

use serde_json::{Value, json};

use crate::common;

/// A 1×1 transparent PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

fn message(chat: &str, url: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "file", "mediaType": "image/png", "url": url, "filename": "dot.png"}
        ]}
    ]})
}

async fn post(base: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .json(body)
        .send()
        .await
        .expect("sent");
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

#[tokio::test]
async fn an_image_is_kept_once_shown_by_url_and_refused_when_it_is_not_one() {
    let server = common::start(common::Opts::default()).await;
    let base = format!("http://{}", server.addr);
    let data = format!("data:image/png;base64,{PNG}");
    let (status, text) = post(&base, &message("pic", &data)).await;
    assert_eq!(status, 200, "{text}");
    let said: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["delta"].as_str().map(str::to_owned))
        .collect();
    assert!(said.contains("cannot look at attachments"), "{said}");

    // The chat refers to the file by URL; its record holds no copy of the bytes.
    let snapshot: Value = reqwest::get(format!("{base}/api/chats/pic"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let file = &snapshot["messages"][0]["parts"][1];
    let url = file["url"].as_str().expect("a URL");
    assert!(url.starts_with("/api/chats/pic/files/"), "{file}");
    assert_eq!(file["filename"], "dot.png");
    let record = server.state.runtime.live_session("pic").unwrap().snapshot();
    let stored = serde_json::to_string(&(&record.history, &record.messages)).unwrap();
    assert!(
        !stored.contains(PNG),
        "the record keeps a reference, not the image"
    );

    // The page loads it from there: the same bytes, inert.
    let served = reqwest::get(format!("{base}{url}")).await.unwrap();
    assert_eq!(served.status(), 200);
    let header = |name: &str| {
        served
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header("content-type"), "image/png");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert!(header("content-security-policy").contains("sandbox"));
    assert!(header("cache-control").contains("immutable"));
    use base64::Engine;
    let expected = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    assert_eq!(served.bytes().await.unwrap().to_vec(), expected);

    // Another chat, another digest, or no digest at all: not found.
    let sha = url.rsplit('/').next().unwrap();
    for missing in [
        format!("/api/chats/other/files/{sha}"),
        format!("/api/chats/pic/files/{}", "0".repeat(64)),
        "/api/chats/pic/files/..%2F..%2Fetc".to_owned(),
    ] {
        let response = reqwest::get(format!("{base}{missing}")).await.unwrap();
        assert_eq!(response.status(), 404, "{missing}");
    }

    // A data: URL that is not base64, or a reference to a file the chat does not have.
    let (status, text) = post(&base, &message("bad", "data:image/png,notbase64")).await;
    assert_eq!(status, 422, "{text}");
    assert!(
        text.contains("invalid_attachment") && text.contains("dot.png"),
        "{text}"
    );
    let (status, text) = post(
        &base,
        &message("bad", &format!("/api/chats/bad/files/{}", "1".repeat(64))),
    )
    .await;
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("unknown_attachment"), "{text}");
    // Nothing changed: the chat was never started.
    let snapshot = reqwest::get(format!("{base}/api/chats/bad")).await.unwrap();
    assert_eq!(snapshot.status(), 404);
    let snapshot: Value = snapshot.json().await.unwrap();
    assert_eq!(snapshot["error"]["code"], "chat_not_found", "{snapshot}");
}

/// A message refused for one of its attachments (413 or 422) keeps none of them: the valid
/// image beside the bad one is not served afterwards, as if it had never been sent. Sent alone,
/// the same image is kept and served, so the 404 is not for another reason.
#[tokio::test]
async fn a_message_refused_for_one_attachment_keeps_none() {
    use base64::Engine;
    let server = common::start(common::Opts::default()).await;
    let base = format!("http://{}", server.addr);
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    let sha = countersign::agent::store::audit::sha256_hex(&png);
    let valid = format!("data:image/png;base64,{PNG}");
    // 11 MiB decoded: over the 10 MiB an attachment may be.
    let huge = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(vec![7u8; 11 * 1024 * 1024])
    );
    let cases = [
        ("too-large", huge, 413, "attachment_too_large"),
        (
            "not-base64",
            "data:image/png,notbase64".to_owned(),
            422,
            "invalid_attachment",
        ),
        (
            "unknown",
            format!("/api/chats/unknown/files/{}", "1".repeat(64)),
            422,
            "unknown_attachment",
        ),
    ];
    for (chat, bad, status, code) in cases {
        let body = json!({"id": chat, "trigger": "submit-message", "messages": [
            {"id": "u1", "role": "user", "parts": [
                {"type": "text", "text": "Two pictures"},
                {"type": "file", "mediaType": "image/png", "url": valid, "filename": "dot.png"},
                {"type": "file", "mediaType": "image/png", "url": bad, "filename": "bad.png"}
            ]}
        ]});
        let (answered, text) = post(&base, &body).await;
        assert_eq!(answered, status, "{chat}: {}", &text[..text.len().min(300)]);
        assert!(text.contains(code), "{chat}: {text}");
        let served = reqwest::get(format!("{base}/api/chats/{chat}/files/{sha}"))
            .await
            .unwrap();
        assert_eq!(served.status(), 404, "{chat}: the valid image was kept");
        let served: Value = served.json().await.unwrap();
        assert_eq!(served["error"]["code"], "file_not_found");

        // The same message without the bad attachment: kept and served.
        let (answered, text) = post(&base, &message(chat, &valid)).await;
        assert_eq!(answered, 200, "{chat}: {text}");
        let served = reqwest::get(format!("{base}/api/chats/{chat}/files/{sha}"))
            .await
            .unwrap();
        assert_eq!(served.status(), 200, "{chat}");
    }
}

/// Issue #33: a file whose media type is not exactly an image type the page shows (a list like
/// `image/x, text/html`, SVG, HTML) is never served as itself: it is a download of
/// `application/octet-stream` under a safe name. Only exact PNG, JPEG, GIF, WebP and AVIF images
/// are inline.
#[tokio::test]
async fn only_exact_image_types_are_served_inline_and_anything_else_is_a_download() {
    use base64::Engine;
    let server = common::start(common::Opts::default()).await;
    let base = format!("http://{}", server.addr);
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let page = b"<html><body><script>alert(document.cookie)</script></body></html>";
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>";
    // Each file is different: the chat keeps a file once by its content (ADR 0026).
    let files = [
        ("dot.png", "image/png", PNG.to_owned()),
        ("shout.png", "IMAGE/PNG", encode(b"another image")),
        ("page.png", "image/x, text/html", encode(page)),
        ("drawing.svg", "image/svg+xml", encode(svg)),
        ("page.html", "text/html", encode(b"<p>hello</p>")),
        (
            "\"quoted\"\r\n.png",
            "image/png; charset=utf-8",
            encode(b"<p>a parameter</p>"),
        ),
    ];
    let mut parts = vec![json!({"type": "text", "text": "Here are some files"})];
    for (name, media_type, data) in &files {
        parts.push(json!({"type": "file", "mediaType": media_type,
            "url": format!("data:application/octet-stream;base64,{data}"), "filename": name}));
    }
    let body = json!({"id": "mixed", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": parts}
    ]});
    let (status, text) = post(&base, &body).await;
    assert_eq!(status, 200, "{text}");
    let snapshot: Value = reqwest::get(format!("{base}/api/chats/mixed"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stored = snapshot["messages"][0]["parts"].as_array().unwrap().clone();
    let url_of = |name: &str| {
        stored
            .iter()
            .find(|p| p["filename"] == name)
            .and_then(|p| p["url"].as_str())
            .unwrap_or_else(|| panic!("{name} in {stored:?}"))
            .to_owned()
    };
    for (name, content_type, disposition) in [
        (
            "dot.png",
            "image/png",
            "inline; filename=\"dot.png\"; filename*=UTF-8''dot.png",
        ),
        (
            "shout.png",
            "image/png",
            "inline; filename=\"shout.png\"; filename*=UTF-8''shout.png",
        ),
        (
            "page.png",
            "application/octet-stream",
            "attachment; filename=\"page.png\"; filename*=UTF-8''page.png",
        ),
        (
            "drawing.svg",
            "application/octet-stream",
            "attachment; filename=\"drawing.svg\"; filename*=UTF-8''drawing.svg",
        ),
        (
            "page.html",
            "application/octet-stream",
            "attachment; filename=\"page.html\"; filename*=UTF-8''page.html",
        ),
        (
            "\"quoted\"\r\n.png",
            "application/octet-stream",
            "attachment; filename=\"_quoted___.png\"; filename*=UTF-8''%22quoted%22__.png",
        ),
    ] {
        let ((kind, shown_as, nosniff, policy), _) = served(&base, &url_of(name)).await;
        assert_eq!(kind, content_type, "{name}");
        assert_eq!(shown_as, disposition, "{name}");
        assert_eq!(nosniff, "nosniff", "{name}");
        assert!(policy.contains("sandbox"), "{name}");
    }
    // The download is the file as it was sent, byte for byte.
    let (_, bytes) = served(&base, &url_of("page.png")).await;
    assert_eq!(bytes, page);
}

/// `GET url`: its content type, disposition, nosniff and content security policy headers, and
/// its bytes.
async fn served(base: &str, url: &str) -> ((String, String, String, String), Vec<u8>) {
    let response = reqwest::get(format!("{base}{url}")).await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let headers = (
        header("content-type"),
        header("content-disposition"),
        header("x-content-type-options"),
        header("content-security-policy"),
    );
    (headers, response.bytes().await.unwrap().to_vec())
}
