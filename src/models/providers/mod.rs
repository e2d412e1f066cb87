//! The real language models: thin HTTP clients that implement [`Model`] (decision record:
//! docs/adr/0002-model-providers.md).
//!
//! Read in this order:
//!
//! - this file: which provider the environment asks for ([`select`]) and how it is built
//!   ([`ProviderConfig::build`], [`model_from_env`]);
//! - [`http`]: what both share: timeouts, retry with backoff before the first event, reading an
//!   SSE body with our own [`crate::protocol::SseDecoder`], cancellation by drop;
//! - [`gemini`]: Gemini REST `streamGenerateContent?alt=sse` (protocols.md §B.1–B.5), including
//!   the thought signatures Gemini 3 requires back on every replayed function call;
//! - [`openai`]: OpenAI-compatible Chat Completions streaming (§B.6): OpenAI, Ollama, vLLM,
//!   llama.cpp, DeepSeek, Gemini's own compatibility endpoint.
//!
//! # What a provider keeps in history
//!
//! The runner replaces [`ToolCall::id`](crate::agent::history::ToolCall) with its own id, so
//! whatever a provider needs on the next request lives in `provider_data`, namespaced by
//! provider so a session that switches provider never sends one provider's data to another:
//!
//! | provider | on a tool call | on a reasoning part |
//! |---|---|---|
//! | Gemini | `{"google": {"thoughtSignature"?, "id"?}}` | `{"google": {"thoughtSignature"}}` |
//! | Gemini Live | `{"google": {"id"}}` (the Live call id) | — |
//! | OpenAI Realtime | `{"openai_realtime": {"id"}}` (the Realtime `call_id`) | — |
//! | OpenAI-compatible | `{"openai": {"id"?, "extra_content"?}}` | — |
//!
//! History is serialisable, so this survives an approval wait and a server restart.
//!
//! # Environment
//!
//! | variables | result |
//! |---|---|
//! | none of the below | `None`: use the demo model |
//! | `GEMINI_API_KEY` (or `GOOGLE_API_KEY`) | Gemini REST, `COUNTERSIGN_MODEL` or [`DEFAULT_GEMINI_MODEL`], base `GEMINI_BASE_URL` or [`DEFAULT_GEMINI_BASE_URL`] |
//! | `OPENAI_BASE_URL` and/or `OPENAI_API_KEY` | OpenAI-compatible, `COUNTERSIGN_MODEL` or [`DEFAULT_OPENAI_MODEL`], base [`DEFAULT_OPENAI_BASE_URL`] when unset; the key is optional (Ollama, llama.cpp) |
//! | both | Gemini, unless `COUNTERSIGN_MODEL` has the `openai:` prefix |
//! | `COUNTERSIGN_MODEL=gemini:NAME` / `google:NAME` / `openai:NAME` | that provider; an error when its variables are missing |
//! | `COUNTERSIGN_INCLUDE_THOUGHTS=0` | Gemini does not ask for thought summaries (default: it does) |
//!
//! BIDI mode (`/api/live`) talks to **Gemini Live** whenever a Gemini key is set, or to **OpenAI
//! Realtime** when asked for ([`select_live`]):
//!
//! | variables | result |
//! |---|---|
//! | `COUNTERSIGN_LIVE_MODEL` | the Live model (default [`DEFAULT_LIVE_MODEL`]); `openai:NAME` (e.g. `openai:gpt-realtime`) is OpenAI Realtime and needs `OPENAI_API_KEY`; `off` makes BIDI turns use the SSE model too; setting a Gemini one with only an OpenAI-compatible provider is an error |
//! | `GEMINI_LIVE_URL` | the `BidiGenerateContent` WebSocket (default [`DEFAULT_LIVE_URL`]; `ws://` for a local fake) |
//! | `OPENAI_REALTIME_URL` | the Realtime WebSocket (default [`DEFAULT_REALTIME_URL`]; `?model=NAME` is added; `ws://` for a local fake) |
//! | `COUNTERSIGN_LIVE_TOOL_BEHAVIOR` | `auto` (the model table in [`gemini_live`]), `blocking` or `non_blocking` (Gemini Live only) |
//! | `COUNTERSIGN_REALTIME_VAD` | hands-free detection of OpenAI Realtime: `server_vad` (default) or `semantic_vad` |
//!
//! Empty values count as unset. Only the prefixes above are provider prefixes, so an Ollama
//! model name such as `llama3.2:3b` is a model name, and `openai:llama3.2:3b` works too.

pub mod gemini;
pub mod gemini_live;
pub mod http;
mod live_sync;
pub mod openai;
pub mod openai_realtime;

#[cfg(test)]
pub(crate) mod testing;

use std::sync::Arc;

pub use gemini::{GeminiConfig, GeminiModel};
pub use gemini_live::{
    DEFAULT_LIVE_MODEL, DEFAULT_LIVE_URL, GeminiLiveConfig, GeminiLiveModel, LiveTimeouts,
    ToolBehavior, ToolBehaviorPolicy,
};
pub use http::{ProviderHttp, RetryPolicy};
pub use openai::{OpenAiConfig, OpenAiModel};
pub use openai_realtime::{
    DEFAULT_REALTIME_MODEL, DEFAULT_REALTIME_URL, HandsFreeDetection, OpenAiRealtimeConfig,
    OpenAiRealtimeModel, RealtimeTimeouts,
};

use crate::agent::model::Model;

/// Gemini's REST base URL (the `v1beta` surface has thinking config and `parametersJsonSchema`).
pub const DEFAULT_GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// The Gemini model used when `COUNTERSIGN_MODEL` does not name one.
pub const DEFAULT_GEMINI_MODEL: &str = "gemini-2.5-flash";
/// OpenAI's base URL, for `OPENAI_API_KEY` without `OPENAI_BASE_URL`.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The OpenAI-compatible model used when `COUNTERSIGN_MODEL` does not name one.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4o-mini";

/// An API key. Its `Debug` never prints it, so a config can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderKey(String);

impl ProviderKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProviderKey(<redacted>)")
    }
}

/// Which provider, with what settings.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderConfig {
    Gemini(GeminiConfig),
    OpenAi(OpenAiConfig),
}

impl ProviderConfig {
    /// Builds the model (its HTTP client is created once, here).
    pub fn build(self) -> Result<Arc<dyn Model>, ProviderConfigError> {
        Ok(match self {
            ProviderConfig::Gemini(config) => Arc::new(GeminiModel::new(config)?),
            ProviderConfig::OpenAi(config) => Arc::new(OpenAiModel::new(config)?),
        })
    }
}

/// The model of BIDI turns, when it is not the SSE model.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveConfig {
    Gemini(GeminiLiveConfig),
    OpenAiRealtime(OpenAiRealtimeConfig),
}

impl LiveConfig {
    /// Builds the model (checks its URL and key).
    pub fn build(self) -> Result<Arc<dyn Model>, ProviderConfigError> {
        Ok(match self {
            LiveConfig::Gemini(config) => Arc::new(GeminiLiveModel::new(config)?),
            LiveConfig::OpenAiRealtime(config) => Arc::new(OpenAiRealtimeModel::new(config)?),
        })
    }
}

/// Why the environment does not describe a usable model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderConfigError {
    #[error("COUNTERSIGN_MODEL={model:?} asks for {provider}; set {needed}")]
    MissingCredentials {
        provider: &'static str,
        model: String,
        needed: &'static str,
    },
    #[error("COUNTERSIGN_LIVE_MODEL={model:?} asks for {provider}; set {needed}")]
    MissingLiveCredentials {
        provider: &'static str,
        model: String,
        needed: &'static str,
    },
    #[error("COUNTERSIGN_MODEL={value:?} names no model after its provider prefix")]
    EmptyModel { value: String },
    #[error("{var}={value:?} is not an http:// or https:// URL")]
    InvalidBaseUrl { var: &'static str, value: String },
    #[error("{var}={value:?} is not a yes/no value (use 1/0, true/false, yes/no or on/off)")]
    InvalidFlag { var: &'static str, value: String },
    #[error("{var}={value:?}: use {choices}")]
    InvalidChoice {
        var: &'static str,
        value: String,
        choices: &'static str,
    },
    #[error("GEMINI_LIVE_URL={value:?} is not a wss://, ws://, https:// or http:// URL")]
    InvalidLiveUrl { value: String },
    #[error("OPENAI_REALTIME_URL={value:?} is not a wss://, ws://, https:// or http:// URL")]
    InvalidRealtimeUrl { value: String },
    #[error("cannot create the HTTP client for the model provider: {0}")]
    Client(String),
}

/// A provider prefix on `COUNTERSIGN_MODEL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prefix {
    Gemini,
    OpenAi,
}

/// Splits `gemini:NAME` / `google:NAME` / `openai:NAME`; any other colon is part of the name.
fn split_prefix(value: &str) -> (Option<Prefix>, &str) {
    for (prefix, provider) in [
        ("gemini:", Prefix::Gemini),
        ("google:", Prefix::Gemini),
        ("openai:", Prefix::OpenAi),
    ] {
        if let Some(rest) = value.strip_prefix(prefix) {
            return (Some(provider), rest.trim());
        }
    }
    (None, value)
}

/// Decides the model from the environment (see the module docs for the table). `env` is a
/// lookup such as `|k| std::env::var(k).ok()`, injected so the decision is testable.
pub fn select(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<ProviderConfig>, ProviderConfigError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let model_var = var("COUNTERSIGN_MODEL");
    let (prefix, model) = match model_var.as_deref() {
        Some(value) => {
            let (prefix, name) = split_prefix(value);
            if name.is_empty() {
                return Err(ProviderConfigError::EmptyModel {
                    value: value.to_owned(),
                });
            }
            (prefix, Some(name.to_owned()))
        }
        None => (None, None),
    };
    let gemini_key = var("GEMINI_API_KEY").or_else(|| var("GOOGLE_API_KEY"));
    let openai_base = var("OPENAI_BASE_URL");
    let openai_key = var("OPENAI_API_KEY");
    let openai_configured = openai_base.is_some() || openai_key.is_some();

    let provider = match prefix {
        Some(Prefix::Gemini) if gemini_key.is_none() => {
            return Err(ProviderConfigError::MissingCredentials {
                provider: "Gemini",
                model: model_var.unwrap_or_default(),
                needed: "GEMINI_API_KEY or GOOGLE_API_KEY",
            });
        }
        Some(Prefix::OpenAi) if !openai_configured => {
            return Err(ProviderConfigError::MissingCredentials {
                provider: "an OpenAI-compatible endpoint",
                model: model_var.unwrap_or_default(),
                needed: "OPENAI_BASE_URL or OPENAI_API_KEY",
            });
        }
        Some(prefix) => prefix,
        None if gemini_key.is_some() => {
            if openai_configured {
                tracing::info!(
                    "both Gemini and OpenAI-compatible settings are present; using Gemini \
                     (set COUNTERSIGN_MODEL=openai:NAME to use the other)"
                );
            }
            Prefix::Gemini
        }
        None if openai_configured => Prefix::OpenAi,
        None => return Ok(None),
    };

    Ok(Some(match provider {
        Prefix::Gemini => {
            let base_url = match var("GEMINI_BASE_URL") {
                Some(url) => checked_url("GEMINI_BASE_URL", url)?,
                None => DEFAULT_GEMINI_BASE_URL.to_owned(),
            };
            let include_thoughts = match var("COUNTERSIGN_INCLUDE_THOUGHTS") {
                Some(value) => flag("COUNTERSIGN_INCLUDE_THOUGHTS", &value)?,
                None => true,
            };
            ProviderConfig::Gemini(GeminiConfig {
                api_key: ProviderKey::new(gemini_key.unwrap_or_default()),
                base_url,
                model: model.unwrap_or_else(|| DEFAULT_GEMINI_MODEL.to_owned()),
                include_thoughts,
                http: ProviderHttp::default(),
            })
        }
        Prefix::OpenAi => {
            let base_url = match openai_base {
                Some(url) => checked_url("OPENAI_BASE_URL", url)?,
                None => DEFAULT_OPENAI_BASE_URL.to_owned(),
            };
            ProviderConfig::OpenAi(OpenAiConfig {
                api_key: openai_key.map(ProviderKey::new),
                base_url,
                model: model.unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_owned()),
                http: ProviderHttp::default(),
            })
        }
    }))
}

/// The model for BIDI turns, if the environment asks for one (module docs).
pub fn select_live(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<LiveConfig>, ProviderConfigError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let live_model = var("COUNTERSIGN_LIVE_MODEL");
    if live_model
        .as_deref()
        .is_some_and(|m| m.eq_ignore_ascii_case("off"))
    {
        return Ok(None);
    }
    if let Some(name) = live_model
        .as_deref()
        .and_then(|m| m.strip_prefix("openai:"))
    {
        return select_realtime(&var, name.trim()).map(|c| Some(LiveConfig::OpenAiRealtime(c)));
    }
    let Some(key) = var("GEMINI_API_KEY").or_else(|| var("GOOGLE_API_KEY")) else {
        return match live_model {
            Some(model) => Err(ProviderConfigError::MissingLiveCredentials {
                provider: "Gemini Live",
                model,
                needed: "GEMINI_API_KEY or GOOGLE_API_KEY",
            }),
            None => Ok(None),
        };
    };
    // An OpenAI-compatible main model keeps BIDI on it too, unless Live is asked for.
    let main_is_openai = var("COUNTERSIGN_MODEL").is_some_and(|m| m.starts_with("openai:"));
    if main_is_openai && live_model.is_none() {
        return Ok(None);
    }
    let mut config = GeminiLiveConfig::new(ProviderKey::new(key));
    if let Some(model) = live_model {
        config.model = model
            .strip_prefix("gemini-live:")
            .unwrap_or(&model)
            .to_owned();
    }
    if let Some(url) = var("GEMINI_LIVE_URL") {
        // Checked when the model is built (GeminiLiveModel::new), at start-up.
        config.live_url = url;
    }
    config.tool_behavior = match var("COUNTERSIGN_LIVE_TOOL_BEHAVIOR").as_deref() {
        None | Some("auto") => ToolBehaviorPolicy::Auto,
        Some("blocking") => ToolBehaviorPolicy::Fixed(ToolBehavior::Blocking),
        Some("non_blocking") | Some("non-blocking") => {
            ToolBehaviorPolicy::Fixed(ToolBehavior::NonBlocking)
        }
        Some(other) => {
            return Err(ProviderConfigError::InvalidChoice {
                var: "COUNTERSIGN_LIVE_TOOL_BEHAVIOR",
                value: other.to_owned(),
                choices: "auto, blocking or non_blocking",
            });
        }
    };
    Ok(Some(LiveConfig::Gemini(config)))
}

/// `COUNTERSIGN_LIVE_MODEL=openai:NAME`: OpenAI Realtime, which needs `OPENAI_API_KEY`.
fn select_realtime(
    var: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<OpenAiRealtimeConfig, ProviderConfigError> {
    let Some(key) = var("OPENAI_API_KEY") else {
        return Err(ProviderConfigError::MissingLiveCredentials {
            provider: "OpenAI Realtime",
            model: format!("openai:{name}"),
            needed: "OPENAI_API_KEY",
        });
    };
    let mut config = OpenAiRealtimeConfig::new(ProviderKey::new(key));
    if !name.is_empty() {
        config.model = name.to_owned();
    }
    if let Some(url) = var("OPENAI_REALTIME_URL") {
        // Checked when the model is built (OpenAiRealtimeModel::new), at start-up.
        config.url = url;
    }
    config.hands_free = match var("COUNTERSIGN_REALTIME_VAD").as_deref() {
        None | Some("server_vad") => HandsFreeDetection::ServerVad,
        Some("semantic_vad") => HandsFreeDetection::SemanticVad,
        Some(other) => {
            return Err(ProviderConfigError::InvalidChoice {
                var: "COUNTERSIGN_REALTIME_VAD",
                value: other.to_owned(),
                choices: "server_vad or semantic_vad",
            });
        }
    };
    Ok(config)
}

/// [`select`] then [`ProviderConfig::build`]: `Ok(None)` means "use the demo model".
pub fn model_from_env(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn Model>>, ProviderConfigError> {
    select(env)?.map(ProviderConfig::build).transpose()
}

fn checked_url(var: &'static str, value: String) -> Result<String, ProviderConfigError> {
    let lower = value.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => {
            Ok(value.trim_end_matches('/').to_owned())
        }
        _ => Err(ProviderConfigError::InvalidBaseUrl { var, value }),
    }
}

fn flag(var: &'static str, value: &str) -> Result<bool, ProviderConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ProviderConfigError::InvalidFlag {
            var,
            value: value.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// What a selection came to, in a form one table row can state: (provider, model, base URL).
    type Selected = Option<(String, String, String)>;

    fn outcome(pairs: &[(&str, &str)]) -> Result<Selected, ProviderConfigError> {
        Ok(select(env(pairs))?.map(|config| match config {
            ProviderConfig::Gemini(c) => ("gemini".into(), c.model, c.base_url),
            ProviderConfig::OpenAi(c) => ("openai".into(), c.model, c.base_url),
        }))
    }

    fn some(provider: &str, model: &str, base: &str) -> Selected {
        Some((provider.into(), model.into(), base.into()))
    }

    #[test]
    fn bidi_turns_use_gemini_live_whenever_a_gemini_key_is_set() {
        let live = |pairs: &[(&str, &str)]| {
            select_live(env(pairs)).map(|c| {
                c.map(|c| match c {
                    LiveConfig::Gemini(c) => (c.model, c.live_url, c.tool_behavior),
                    LiveConfig::OpenAiRealtime(c) => panic!("not Gemini: {c:?}"),
                })
            })
        };
        assert_eq!(live(&[]).unwrap(), None, "the demo model: no Live");
        assert_eq!(
            live(&[("GEMINI_API_KEY", "k")]).unwrap(),
            Some((
                DEFAULT_LIVE_MODEL.to_owned(),
                DEFAULT_LIVE_URL.to_owned(),
                ToolBehaviorPolicy::Auto
            ))
        );
        assert_eq!(
            live(&[
                ("GOOGLE_API_KEY", "k"),
                (
                    "COUNTERSIGN_LIVE_MODEL",
                    "gemini-live:gemini-3.1-flash-live-preview"
                ),
                ("GEMINI_LIVE_URL", "ws://127.0.0.1:9/live"),
                ("COUNTERSIGN_LIVE_TOOL_BEHAVIOR", "blocking"),
            ])
            .unwrap(),
            Some((
                "gemini-3.1-flash-live-preview".to_owned(),
                "ws://127.0.0.1:9/live".to_owned(),
                ToolBehaviorPolicy::Fixed(ToolBehavior::Blocking)
            ))
        );
        assert_eq!(
            live(&[("GEMINI_API_KEY", "k"), ("COUNTERSIGN_LIVE_MODEL", "off")]).unwrap(),
            None
        );
        assert_eq!(
            live(&[
                ("GEMINI_API_KEY", "k"),
                ("COUNTERSIGN_MODEL", "openai:gpt-4o")
            ])
            .unwrap(),
            None,
            "an OpenAI main model keeps BIDI on it unless Live is asked for"
        );
        // The setting that asked for Live is the one the error names.
        let missing = live(&[("COUNTERSIGN_LIVE_MODEL", "gemini-3.8-live")]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "COUNTERSIGN_LIVE_MODEL=\"gemini-3.8-live\" asks for Gemini Live; set GEMINI_API_KEY or GOOGLE_API_KEY"
        );
        assert!(matches!(
            live(&[
                ("GEMINI_API_KEY", "k"),
                ("COUNTERSIGN_LIVE_TOOL_BEHAVIOR", "sometimes")
            ]),
            Err(ProviderConfigError::InvalidChoice { .. })
        ));
    }

    #[test]
    fn bidi_turns_use_openai_realtime_when_the_live_model_is_openai() {
        let realtime = |pairs: &[(&str, &str)]| match select_live(env(pairs)) {
            Ok(Some(LiveConfig::OpenAiRealtime(c))) => Ok((c.model, c.url, c.hands_free)),
            Ok(other) => panic!("not OpenAI Realtime: {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            realtime(&[
                ("OPENAI_API_KEY", "k"),
                ("COUNTERSIGN_LIVE_MODEL", "openai:gpt-realtime")
            ])
            .unwrap(),
            (
                "gpt-realtime".to_owned(),
                DEFAULT_REALTIME_URL.to_owned(),
                HandsFreeDetection::ServerVad
            )
        );
        assert_eq!(
            realtime(&[
                ("OPENAI_API_KEY", "k"),
                ("GEMINI_API_KEY", "g"),
                ("COUNTERSIGN_LIVE_MODEL", "openai:gpt-realtime-mini"),
                ("OPENAI_REALTIME_URL", "ws://127.0.0.1:9/v1/realtime"),
                ("COUNTERSIGN_REALTIME_VAD", "semantic_vad"),
            ])
            .unwrap(),
            (
                "gpt-realtime-mini".to_owned(),
                "ws://127.0.0.1:9/v1/realtime".to_owned(),
                HandsFreeDetection::SemanticVad
            ),
            "asked for by name, even with a Gemini key"
        );
        let missing = realtime(&[
            ("GEMINI_API_KEY", "g"),
            ("COUNTERSIGN_LIVE_MODEL", "openai:gpt-realtime"),
        ])
        .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "COUNTERSIGN_LIVE_MODEL=\"openai:gpt-realtime\" asks for OpenAI Realtime; set OPENAI_API_KEY"
        );
        assert!(matches!(
            realtime(&[
                ("OPENAI_API_KEY", "k"),
                ("COUNTERSIGN_LIVE_MODEL", "openai:"),
                ("COUNTERSIGN_REALTIME_VAD", "often"),
            ]),
            Err(ProviderConfigError::InvalidChoice { .. })
        ));
        let bad_url = select_live(env(&[
            ("OPENAI_API_KEY", "k"),
            ("COUNTERSIGN_LIVE_MODEL", "openai:gpt-realtime"),
            ("OPENAI_REALTIME_URL", "ftp://example.com"),
        ]))
        .unwrap()
        .unwrap()
        .build()
        .err();
        assert_eq!(
            bad_url,
            Some(ProviderConfigError::InvalidRealtimeUrl {
                value: "ftp://example.com".into()
            })
        );
    }

    #[test]
    fn each_environment_selects_a_provider_or_a_typed_error() {
        let gemini = DEFAULT_GEMINI_BASE_URL;
        let openai = DEFAULT_OPENAI_BASE_URL;
        type Row<'a> = (
            &'a [(&'a str, &'a str)],
            Result<Selected, ProviderConfigError>,
        );
        let table: Vec<Row> = vec![
            (&[], Ok(None)),
            (&[("GEMINI_API_KEY", "  ")], Ok(None)),
            (&[("COUNTERSIGN_MODEL", "gemini-2.5-pro")], Ok(None)),
            (
                &[("GEMINI_API_KEY", "k")],
                Ok(some("gemini", DEFAULT_GEMINI_MODEL, gemini)),
            ),
            (
                &[
                    ("GOOGLE_API_KEY", "k"),
                    ("COUNTERSIGN_MODEL", "gemini-2.5-pro"),
                ],
                Ok(some("gemini", "gemini-2.5-pro", gemini)),
            ),
            (
                &[
                    ("GEMINI_API_KEY", "k"),
                    ("GEMINI_BASE_URL", "http://127.0.0.1:9/v1beta/"),
                    ("COUNTERSIGN_MODEL", "gemini:gemini-3-flash-preview"),
                ],
                Ok(some(
                    "gemini",
                    "gemini-3-flash-preview",
                    "http://127.0.0.1:9/v1beta",
                )),
            ),
            (
                &[("OPENAI_API_KEY", "k")],
                Ok(some("openai", DEFAULT_OPENAI_MODEL, openai)),
            ),
            (
                &[
                    ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
                    ("COUNTERSIGN_MODEL", "llama3.2:3b"),
                ],
                Ok(some("openai", "llama3.2:3b", "http://localhost:11434/v1")),
            ),
            (
                &[
                    ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
                    ("COUNTERSIGN_MODEL", "openai:llama3.2:3b"),
                ],
                Ok(some("openai", "llama3.2:3b", "http://localhost:11434/v1")),
            ),
            // Both configured: Gemini by default, the prefix picks the other.
            (
                &[("GEMINI_API_KEY", "k"), ("OPENAI_API_KEY", "k")],
                Ok(some("gemini", DEFAULT_GEMINI_MODEL, gemini)),
            ),
            (
                &[
                    ("GEMINI_API_KEY", "k"),
                    ("OPENAI_API_KEY", "k"),
                    ("COUNTERSIGN_MODEL", "openai:gpt-4o-mini"),
                ],
                Ok(some("openai", "gpt-4o-mini", openai)),
            ),
            (
                &[
                    ("GEMINI_API_KEY", "k"),
                    ("OPENAI_API_KEY", "k"),
                    ("COUNTERSIGN_MODEL", "google:gemini-3-pro-preview"),
                ],
                Ok(some("gemini", "gemini-3-pro-preview", gemini)),
            ),
            // Contradictions and bad values.
            (
                &[("GEMINI_API_KEY", "k"), ("COUNTERSIGN_MODEL", "openai:x")],
                Err(ProviderConfigError::MissingCredentials {
                    provider: "an OpenAI-compatible endpoint",
                    model: "openai:x".into(),
                    needed: "OPENAI_BASE_URL or OPENAI_API_KEY",
                }),
            ),
            (
                &[
                    ("OPENAI_API_KEY", "k"),
                    ("COUNTERSIGN_MODEL", "gemini:gemini-3-flash-preview"),
                ],
                Err(ProviderConfigError::MissingCredentials {
                    provider: "Gemini",
                    model: "gemini:gemini-3-flash-preview".into(),
                    needed: "GEMINI_API_KEY or GOOGLE_API_KEY",
                }),
            ),
            (
                &[("OPENAI_API_KEY", "k"), ("COUNTERSIGN_MODEL", "openai:")],
                Err(ProviderConfigError::EmptyModel {
                    value: "openai:".into(),
                }),
            ),
            (
                &[("OPENAI_BASE_URL", "localhost:11434/v1")],
                Err(ProviderConfigError::InvalidBaseUrl {
                    var: "OPENAI_BASE_URL",
                    value: "localhost:11434/v1".into(),
                }),
            ),
            (
                &[("GEMINI_API_KEY", "k"), ("GEMINI_BASE_URL", "https://")],
                Err(ProviderConfigError::InvalidBaseUrl {
                    var: "GEMINI_BASE_URL",
                    value: "https://".into(),
                }),
            ),
            (
                &[
                    ("GEMINI_API_KEY", "k"),
                    ("COUNTERSIGN_INCLUDE_THOUGHTS", "maybe"),
                ],
                Err(ProviderConfigError::InvalidFlag {
                    var: "COUNTERSIGN_INCLUDE_THOUGHTS",
                    value: "maybe".into(),
                }),
            ),
        ];
        for (pairs, expected) in table {
            assert_eq!(outcome(pairs), expected, "{pairs:?}");
        }
    }

    #[test]
    fn options_and_keys_reach_the_config() {
        let Ok(Some(ProviderConfig::Gemini(config))) = select(env(&[
            ("GEMINI_API_KEY", "gem"),
            ("GOOGLE_API_KEY", "goo"),
            ("COUNTERSIGN_INCLUDE_THOUGHTS", "off"),
        ])) else {
            panic!("expected Gemini");
        };
        assert_eq!(config.api_key.expose(), "gem", "GEMINI_API_KEY wins");
        assert!(!config.include_thoughts);
        assert!(!format!("{config:?}").contains("gem\""), "{config:?}");

        let Ok(Some(ProviderConfig::OpenAi(config))) =
            select(env(&[("OPENAI_BASE_URL", "http://localhost:8080/v1")]))
        else {
            panic!("expected OpenAI");
        };
        assert_eq!(config.api_key, None, "a local server needs no key");
    }

    #[test]
    fn errors_say_what_to_set() {
        let error = select(env(&[("COUNTERSIGN_MODEL", "openai:x")])).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("OPENAI_BASE_URL or OPENAI_API_KEY"), "{text}");
    }

    #[test]
    fn labels_name_provider_and_model() {
        let gemini = select(env(&[("GEMINI_API_KEY", "k")]))
            .unwrap()
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(gemini.label(), "Gemini gemini-2.5-flash (REST)");
        assert_eq!(gemini.model_version(), "gemini-2.5-flash");
        let openai = model_from_env(env(&[
            ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
            ("COUNTERSIGN_MODEL", "qwen3:8b"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            openai.label(),
            "OpenAI-compatible qwen3:8b (localhost:11434)"
        );
        assert_eq!(openai.model_version(), "qwen3:8b");
        assert!(model_from_env(env(&[])).unwrap().is_none());
    }
}
