//! The HTTP and WebSocket edge's settings (`COUNTERSIGN_*` of the edge: limits, timeouts, hosts,
//! origins, the API key, sign-in), read from the environment.

use super::*;

/// Settings of the HTTP and WebSocket edge.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeSettings {
    /// `COUNTERSIGN_MAX_BODY_BYTES`: largest accepted request body (default 20 MiB, room for
    /// images).
    pub max_body_bytes: usize,
    /// `COUNTERSIGN_BODY_BYTES_PER_ADDRESS`: request-body bytes one client address may have in
    /// flight at once (default twice `max_body_bytes`; 0 = no cap); a body beyond it waits until
    /// earlier ones are read.
    pub body_bytes_per_address: usize,
    /// `COUNTERSIGN_MAX_MESSAGES`: the most messages a chat request may carry (default 10,000);
    /// more is refused (413 `too_many_messages`).
    pub max_messages: usize,
    /// `COUNTERSIGN_API_KEY`: when set, every route but `/healthz` and the static files needs
    /// it (`Authorization: Bearer`, `X-API-Key`, or the cookie of a sign-in at `/signin`).
    pub api_key: Option<String>,
    /// Comment frames keep idle SSE responses alive through proxies (default 15 s).
    pub keep_alive: Duration,
    /// `COUNTERSIGN_WS_MAX_FRAME_BYTES`: largest WebSocket message accepted (default 1 MiB);
    /// a larger one closes the socket with 1009.
    pub ws_max_frame_bytes: usize,
    /// `COUNTERSIGN_ALLOWED_ORIGINS`: comma-separated origins (`https://app.example`) allowed to
    /// open the WebSocket besides the server's own; a browser from anywhere else gets 403.
    pub allowed_origins: Vec<String>,
    /// `COUNTERSIGN_WS_IDLE_SECS`: a socket silent this long (no frame, no pong) is closed
    /// (default 90 s; the server pings every third of it).
    pub ws_idle: Duration,
    /// `COUNTERSIGN_WS_RATE`: client frames per second allowed per connection, with bursts of
    /// twice that (default 20).
    pub ws_rate: u32,
    /// `COUNTERSIGN_VOICE_BYTES_PER_SEC`: microphone audio bytes a second per connection, in
    /// bursts of two seconds of it (default 64000: twice real time for 16 kHz PCM16); audio
    /// over it closes the socket (1008).
    pub voice_bytes_per_sec: u32,
    /// `COUNTERSIGN_VOICE_MAX_UTTERANCE_SECS`: the longest utterance (from `audio_control`
    /// `start`), default 60; audio past it closes the socket (1008).
    pub voice_max_utterance: Duration,
    /// `COUNTERSIGN_IP_RATE`: POST requests and WebSocket upgrades per client address and
    /// minute (default 600; 0 = unlimited).
    pub ip_rate: u32,
    /// `COUNTERSIGN_CHAT_RATE`: `POST /api/chat` requests per chat and minute (default 120;
    /// 0 = unlimited).
    pub chat_rate: u32,
    /// `COUNTERSIGN_ALLOWED_HOSTS`: comma-separated names (`chat.example.com`, optionally
    /// `:port`) the server answers to besides its loopback names and listening address.
    pub allowed_hosts: Vec<String>,
    /// `COUNTERSIGN_AUTH_FAILURE_RATE`: failed authentications per client address and minute
    /// before that address must wait (default 10; 0 = unlimited).
    pub auth_failure_rate: u32,
    /// `COUNTERSIGN_SESSION_HOURS`: how long a sign-in lasts (default 720, 30 days).
    pub signin_lifetime: Duration,
    /// `COUNTERSIGN_MAX_CONNECTIONS`: open connections in all (default: the open-file limit less
    /// 64; 0 = unlimited).
    pub max_connections: usize,
    /// `COUNTERSIGN_MAX_CONNECTIONS_PER_ADDRESS`: open connections per client address, IPv6 by
    /// /64 (default 256; 0 = unlimited; behind a reverse proxy every client is the proxy).
    pub max_connections_per_address: usize,
    /// `COUNTERSIGN_IDLE_TIMEOUT_SECS`: a connection without a request (or whose request
    /// headers have not all arrived) this long is closed (default 30).
    pub idle_timeout: Duration,
    /// `COUNTERSIGN_BODY_GRACE_SECS`: how long a request body may take before its pace counts
    /// (default 10).
    pub body_grace: Duration,
    /// `COUNTERSIGN_BODY_MIN_RATE`: bytes a second a request body must average after the grace
    /// (default 4096).
    pub body_min_rate: u64,
    /// `COUNTERSIGN_WRITE_TIMEOUT_SECS`: a response write or WebSocket frame the client does not
    /// take for this long closes its connection (default 30).
    pub write_timeout: Duration,
    /// `COUNTERSIGN_CORS_CREDENTIALS`: `true` lets the allowed origins send cookies (default
    /// false).
    pub cors_credentials: bool,
    /// `COUNTERSIGN_SIGN_IN`: `open` (one local person, no sign-in; the default without an API
    /// key), `key` (the API key; the default with one) or `passkeys` (people, ADR 0024).
    pub sign_in: crate::agent::people::SignInMode,
    /// `COUNTERSIGN_PUBLIC_URL`: the origin people's browsers use (`https://chat.example`);
    /// passkeys are made for its host, and links point to it. Default
    /// `http://localhost:<port>`.
    pub public_url: Option<String>,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            max_body_bytes: 20 * 1024 * 1024,
            body_bytes_per_address: 40 * 1024 * 1024,
            max_messages: 10_000,
            api_key: None,
            keep_alive: Duration::from_secs(15),
            ws_max_frame_bytes: 1024 * 1024,
            allowed_origins: Vec::new(),
            ws_idle: Duration::from_secs(90),
            ws_rate: 20,
            voice_bytes_per_sec: 64_000,
            voice_max_utterance: Duration::from_secs(60),
            ip_rate: 600,
            chat_rate: 120,
            allowed_hosts: Vec::new(),
            auth_failure_rate: 10,
            signin_lifetime: Duration::from_secs(720 * 3600),
            max_connections: default_max_connections(),
            max_connections_per_address: 256,
            idle_timeout: Duration::from_secs(30),
            body_grace: Duration::from_secs(10),
            body_min_rate: 4096,
            write_timeout: Duration::from_secs(30),
            cors_credentials: false,
            sign_in: crate::agent::people::SignInMode::Open,
            public_url: None,
        }
    }
}

/// The edge's settings from `env`, each group read by its own function below; anything unset
/// keeps its [`EdgeSettings::default`].
pub(super) fn edge_settings(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<EdgeSettings, ConfigError> {
    let mut settings = EdgeSettings::default();
    read_requests(env, &mut settings)?;
    read_access(env, &mut settings)?;
    read_sockets(env, &mut settings)?;
    read_rates(env, &mut settings)?;
    read_connections(env, &mut settings)?;
    Ok(settings)
}

/// What one request may carry, and how fast its body must come.
fn read_requests(
    env: &impl Fn(&str) -> Option<String>,
    settings: &mut EdgeSettings,
) -> Result<(), ConfigError> {
    settings.max_body_bytes = at_least(
        env,
        "COUNTERSIGN_MAX_BODY_BYTES",
        settings.max_body_bytes,
        1024,
        "must be at least 1024",
    )?;
    let max_body_bytes = settings.max_body_bytes;
    let body_bytes_per_address = number(
        env,
        "COUNTERSIGN_BODY_BYTES_PER_ADDRESS",
        2 * max_body_bytes,
    )?;
    if body_bytes_per_address != 0 && body_bytes_per_address < max_body_bytes {
        return Err(invalid(
            "COUNTERSIGN_BODY_BYTES_PER_ADDRESS",
            &body_bytes_per_address.to_string(),
            "must be 0 (no cap) or at least COUNTERSIGN_MAX_BODY_BYTES",
        ));
    }
    settings.body_bytes_per_address = body_bytes_per_address;
    settings.max_messages = at_least(
        env,
        "COUNTERSIGN_MAX_MESSAGES",
        settings.max_messages,
        1,
        "must be at least 1",
    )?;
    settings.body_grace = positive_secs(env, "COUNTERSIGN_BODY_GRACE_SECS", settings.body_grace)?;
    settings.body_min_rate = number(env, "COUNTERSIGN_BODY_MIN_RATE", settings.body_min_rate)?;
    Ok(())
}

/// Who may come in, and from where: the API key, how people sign in and for how long, the
/// public URL, the origins and hosts allowed, and whether cross-origin requests carry cookies.
fn read_access(
    env: &impl Fn(&str) -> Option<String>,
    settings: &mut EdgeSettings,
) -> Result<(), ConfigError> {
    settings.api_key = api_key(env)?;
    settings.allowed_origins = allowed_origins(env)?;
    settings.allowed_hosts = allowed_hosts(env)?;
    let session_hours = at_least(
        env,
        "COUNTERSIGN_SESSION_HOURS",
        settings.signin_lifetime.as_secs() / 3600,
        1,
        "must be at least 1",
    )?;
    settings.signin_lifetime = Duration::from_secs(session_hours * 3600);
    settings.cors_credentials = cors_credentials(env)?;
    settings.sign_in = sign_in(env, settings.api_key.is_some())?;
    settings.public_url = public_url(env)?;
    Ok(())
}

/// A WebSocket's frames and its voice: the largest frame, the idle time, the frame rate, and
/// how much microphone audio it may send.
fn read_sockets(
    env: &impl Fn(&str) -> Option<String>,
    settings: &mut EdgeSettings,
) -> Result<(), ConfigError> {
    settings.ws_max_frame_bytes = at_least(
        env,
        "COUNTERSIGN_WS_MAX_FRAME_BYTES",
        settings.ws_max_frame_bytes,
        1024,
        "must be at least 1024",
    )?;
    let idle_secs = at_least(
        env,
        "COUNTERSIGN_WS_IDLE_SECS",
        settings.ws_idle.as_secs(),
        3,
        "must be at least 3",
    )?;
    settings.ws_idle = Duration::from_secs(idle_secs);
    settings.ws_rate = at_least(
        env,
        "COUNTERSIGN_WS_RATE",
        settings.ws_rate,
        1,
        "must be at least 1",
    )?;
    settings.voice_bytes_per_sec = at_least(
        env,
        "COUNTERSIGN_VOICE_BYTES_PER_SEC",
        settings.voice_bytes_per_sec,
        32_000,
        "must be at least 32000 (real time for 16 kHz PCM16)",
    )?;
    settings.voice_max_utterance = positive_secs(
        env,
        "COUNTERSIGN_VOICE_MAX_UTTERANCE_SECS",
        settings.voice_max_utterance,
    )?;
    Ok(())
}

/// How often one address, one chat or failed sign-ins may knock.
fn read_rates(
    env: &impl Fn(&str) -> Option<String>,
    settings: &mut EdgeSettings,
) -> Result<(), ConfigError> {
    settings.ip_rate = number(env, "COUNTERSIGN_IP_RATE", settings.ip_rate)?;
    settings.chat_rate = number(env, "COUNTERSIGN_CHAT_RATE", settings.chat_rate)?;
    settings.auth_failure_rate = number(
        env,
        "COUNTERSIGN_AUTH_FAILURE_RATE",
        settings.auth_failure_rate,
    )?;
    Ok(())
}

/// How many connections stay open, and how long a silent or slow one is kept.
fn read_connections(
    env: &impl Fn(&str) -> Option<String>,
    settings: &mut EdgeSettings,
) -> Result<(), ConfigError> {
    settings.max_connections =
        number(env, "COUNTERSIGN_MAX_CONNECTIONS", settings.max_connections)?;
    settings.max_connections_per_address = number(
        env,
        "COUNTERSIGN_MAX_CONNECTIONS_PER_ADDRESS",
        settings.max_connections_per_address,
    )?;
    settings.idle_timeout =
        positive_secs(env, "COUNTERSIGN_IDLE_TIMEOUT_SECS", settings.idle_timeout)?;
    settings.write_timeout = positive_secs(
        env,
        "COUNTERSIGN_WRITE_TIMEOUT_SECS",
        settings.write_timeout,
    )?;
    Ok(())
}

/// `var` as a whole number of seconds, at least 1.
fn positive_secs(
    env: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    at_least(env, var, default.as_secs(), 1, "must be at least 1").map(Duration::from_secs)
}

/// `COUNTERSIGN_API_KEY`, trimmed (unset when empty): at least [`MIN_KEY_LENGTH`] characters,
/// and never repeated in an error.
fn api_key(env: &impl Fn(&str) -> Option<String>) -> Result<Option<String>, ConfigError> {
    let api_key = env("COUNTERSIGN_API_KEY")
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty());
    if let Some(key) = &api_key
        && key.chars().count() < MIN_KEY_LENGTH
    {
        return Err(ConfigError::Invalid {
            origin: "COUNTERSIGN_API_KEY".to_string(),
            key: "COUNTERSIGN_API_KEY",
            value: "(hidden)".to_string(),
            reason: format!(
                "the key has {} characters; use at least {} (for example the output of \
                 `openssl rand -base64 24`)",
                key.chars().count(),
                MIN_KEY_LENGTH
            ),
        });
    }
    Ok(api_key)
}

/// `COUNTERSIGN_ALLOWED_ORIGINS`: origins with their scheme, without a trailing slash.
fn allowed_origins(env: &impl Fn(&str) -> Option<String>) -> Result<Vec<String>, ConfigError> {
    let allowed_origins: Vec<String> = list(env, "COUNTERSIGN_ALLOWED_ORIGINS")
        .into_iter()
        .map(|o| o.trim_end_matches('/').to_string())
        .collect();
    if let Some(bad) = allowed_origins
        .iter()
        .find(|o| !(o.starts_with("http://") || o.starts_with("https://")))
    {
        return Err(invalid(
            "COUNTERSIGN_ALLOWED_ORIGINS",
            bad,
            "name origins with their scheme: https://app.example or http://localhost:3001",
        ));
    }
    Ok(allowed_origins)
}

/// `COUNTERSIGN_ALLOWED_HOSTS`: hosts as the Host header names them.
fn allowed_hosts(env: &impl Fn(&str) -> Option<String>) -> Result<Vec<String>, ConfigError> {
    let allowed_hosts = list(env, "COUNTERSIGN_ALLOWED_HOSTS");
    if let Some(bad) = allowed_hosts
        .iter()
        .find(|h| h.contains("://") || h.contains('/') || h.chars().any(char::is_whitespace))
    {
        return Err(invalid(
            "COUNTERSIGN_ALLOWED_HOSTS",
            bad,
            "name hosts as they appear in the Host header: chat.example.com or chat.example.com:8443",
        ));
    }
    Ok(allowed_hosts)
}

/// `COUNTERSIGN_CORS_CREDENTIALS`: true or false (unset: false).
fn cors_credentials(env: &impl Fn(&str) -> Option<String>) -> Result<bool, ConfigError> {
    match env("COUNTERSIGN_CORS_CREDENTIALS")
        .as_deref()
        .map(str::trim)
    {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(invalid(
            "COUNTERSIGN_CORS_CREDENTIALS",
            other,
            "use true or false",
        )),
    }
}

/// `COUNTERSIGN_SIGN_IN`: open, key or passkeys; unset, the key's when one is set, else open.
/// A key needs a sign-in that asks for something.
fn sign_in(
    env: &impl Fn(&str) -> Option<String>,
    has_key: bool,
) -> Result<crate::agent::people::SignInMode, ConfigError> {
    use crate::agent::people::SignInMode;
    let sign_in = match env("COUNTERSIGN_SIGN_IN")
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("") if has_key => SignInMode::Key,
        None | Some("") | Some("open") => SignInMode::Open,
        Some("key") if has_key => SignInMode::Key,
        Some("key") => {
            return Err(invalid(
                "COUNTERSIGN_SIGN_IN",
                "key",
                "needs COUNTERSIGN_API_KEY (at least 16 characters)",
            ));
        }
        Some("passkeys") | Some("passkey") => SignInMode::Passkeys,
        Some(other) => {
            return Err(invalid(
                "COUNTERSIGN_SIGN_IN",
                other,
                "use open (no sign-in), key (the API key) or passkeys (people)",
            ));
        }
    };
    if sign_in == SignInMode::Open && has_key {
        return Err(invalid(
            "COUNTERSIGN_SIGN_IN",
            "open",
            "an API key is set: use key or passkeys (or unset the key)",
        ));
    }
    Ok(sign_in)
}

/// `COUNTERSIGN_PUBLIC_URL`: an http(s) origin without a path (unset when empty).
fn public_url(env: &impl Fn(&str) -> Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(url) = env("COUNTERSIGN_PUBLIC_URL")
        .map(|u| u.trim().trim_end_matches('/').to_string())
        .filter(|u| !u.is_empty())
    else {
        return Ok(None);
    };
    let parsed = url::Url::parse(&url)
        .map_err(|e| invalid("COUNTERSIGN_PUBLIC_URL", &url, &format!("not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.host_str().is_none()
        || parsed.path() != "/"
        || parsed.query().is_some()
    {
        return Err(invalid(
            "COUNTERSIGN_PUBLIC_URL",
            &url,
            "name an origin: https://chat.example or http://localhost:3000 (no path)",
        ));
    }
    Ok(Some(url))
}

/// The shortest key accepted at start-up.
pub const MIN_KEY_LENGTH: usize = 16;

/// The default cap on connections in all: the process's open-file limit, less what the server
/// needs besides client sockets (the database and its WAL, logs, outgoing model and weather
/// requests, the listener).
pub fn default_max_connections() -> usize {
    const RESERVE: u64 = 64;
    let limit = open_file_limit().unwrap_or(1024);
    limit.saturating_sub(RESERVE).max(16) as usize
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given; no other precondition.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}
