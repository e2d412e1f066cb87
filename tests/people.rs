//! People and countersignatures end to end (issue #23), against the real binary with
//! `COUNTERSIGN_SIGN_IN=passkeys`: the first person from the link printed at start-up, people
//! invited by an admin (and by the API key), sign-in with passkeys (a software authenticator of
//! webauthn-rs' own test kit, speaking to the server exactly as a browser's does), a payment that
//! needs two approvers other than the person who asked, each confirming with a passkey assertion
//! bound to the arguments, from the inbox; and what nobody may read or answer.
#![cfg(unix)]

use crate::common;

use std::time::Duration;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    binary::Binary,
    people::*,
    socket::{Frame, next},
};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// `GET path` as `who` from `from` (a loopback address): status, `Location`, body.
async fn get_from(
    app: &Binary,
    who: Option<&Someone>,
    path: &str,
    from: [u8; 4],
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(std::net::IpAddr::from(from))
        .build()
        .unwrap()
        .get(format!("{}{path}", app.base));
    if let Some(cookie) = who.and_then(|w| w.cookie.as_deref()) {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, location, response.text().await.unwrap_or_default())
}

#[path = "people/access.rs"]
mod access;
#[path = "people/quorum.rs"]
mod quorum;
#[path = "people/sign_in.rs"]
mod sign_in;
