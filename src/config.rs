//! Start-up configuration.
//!
//! Site settings come from `Leptos.toml` in three layers, the later winning (docs/adr/0001):
//! 1. the `Leptos.toml` the binary was built with (embedded, so the binary runs anywhere);
//! 2. the file named by `COUNTERSIGN_LEPTOS_TOML`, or `./Leptos.toml` when present;
//! 3. the `LEPTOS_*` environment variables Leptos itself documents (`LEPTOS_SITE_ADDR`,
//!    `LEPTOS_SITE_ROOT`, `LEPTOS_SITE_PKG_DIR`, `LEPTOS_OUTPUT_NAME`, `LEPTOS_RELOAD_PORT`,
//!    `LEPTOS_ENV`).
//!
//! Resolution is a pure function of (embedded text, optional file, environment lookup) so that
//! every rule is unit-tested without touching the process environment.

use std::{net::SocketAddr, path::PathBuf};

use leptos::config::{Env, LeptosOptions};
use serde::Deserialize;

/// The Leptos.toml this binary was built with: the defaults of every setting.
pub const EMBEDDED_LEPTOS_TOML: &str = include_str!("../Leptos.toml");

/// Why the configuration could not be loaded. Each variant names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin} is not valid Leptos.toml: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: `{key}` = {value:?} is not valid: {reason}")]
    Invalid {
        origin: String,
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// The subset of Leptos.toml the server reads. Build-only keys (style file, assets, end2end …)
/// are accepted and ignored here: cargo-leptos consumes them through `scripts/leptos`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct LeptosToml {
    output_name: Option<String>,
    site_root: Option<String>,
    site_pkg_dir: Option<String>,
    site_addr: Option<String>,
    reload_port: Option<u32>,
}

impl LeptosToml {
    fn parse(origin: &str, text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })
    }

    /// Overlays the keys that `other` sets.
    fn overlay(&mut self, other: LeptosToml) {
        let LeptosToml {
            output_name,
            site_root,
            site_pkg_dir,
            site_addr,
            reload_port,
        } = other;
        self.output_name = output_name.or(self.output_name.take());
        self.site_root = site_root.or(self.site_root.take());
        self.site_pkg_dir = site_pkg_dir.or(self.site_pkg_dir.take());
        self.site_addr = site_addr.or(self.site_addr.take());
        self.reload_port = reload_port.or(self.reload_port);
    }
}

/// Everything the server needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The options leptos_axum serves the site with.
    pub site: LeptosOptions,
    /// Where the site settings came from, for the banner and logs.
    pub source: String,
}

impl Config {
    /// Loads the configuration from the embedded defaults, the Leptos.toml file and the process
    /// environment.
    pub fn load() -> Result<Self, ConfigError> {
        let file = match std::env::var_os("COUNTERSIGN_LEPTOS_TOML") {
            Some(path) => {
                let path = PathBuf::from(path);
                let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                Some((path, text))
            }
            None => {
                let path = PathBuf::from("Leptos.toml");
                std::fs::read_to_string(&path).ok().map(|text| (path, text))
            }
        };
        let file = file
            .as_ref()
            .map(|(path, text)| (path.display().to_string(), text.as_str()));
        Self::resolve(EMBEDDED_LEPTOS_TOML, file, |key| std::env::var(key).ok())
    }

    /// Resolves the three layers. `env` looks a variable up (None when unset).
    pub fn resolve(
        embedded: &str,
        file: Option<(String, &str)>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut settings = LeptosToml::parse("the embedded Leptos.toml", embedded)?;
        let mut source = "built-in Leptos.toml".to_string();
        if let Some((origin, text)) = file {
            settings.overlay(LeptosToml::parse(&origin, text)?);
            source = origin;
        }

        let pick = |var: &str, from_file: Option<String>| -> (String, Option<String>) {
            match env(var) {
                Some(value) => (var.to_string(), Some(value)),
                None => (source.clone(), from_file),
            }
        };

        let (origin, output_name) = pick("LEPTOS_OUTPUT_NAME", settings.output_name);
        let output_name = require(&origin, "output-name", output_name)?;
        let (_, site_root) = pick("LEPTOS_SITE_ROOT", settings.site_root);
        let (_, site_pkg_dir) = pick("LEPTOS_SITE_PKG_DIR", settings.site_pkg_dir);

        let (origin, site_addr) = pick("LEPTOS_SITE_ADDR", settings.site_addr);
        let site_addr = site_addr.unwrap_or_else(|| "127.0.0.1:3000".to_string());
        let site_addr: SocketAddr = site_addr.parse().map_err(|e| ConfigError::Invalid {
            origin,
            key: "site-addr",
            value: site_addr.clone(),
            reason: format!("{e} (expected host:port, e.g. 127.0.0.1:3000)"),
        })?;

        let reload_port = match env("LEPTOS_RELOAD_PORT") {
            Some(value) => value.parse::<u32>().map_err(|e| ConfigError::Invalid {
                origin: "LEPTOS_RELOAD_PORT".to_string(),
                key: "reload-port",
                value: value.clone(),
                reason: e.to_string(),
            })?,
            None => settings.reload_port.unwrap_or(3001),
        };

        // Release builds serve without cargo-leptos's live-reload script unless asked.
        let default_env = if cfg!(debug_assertions) {
            "dev"
        } else {
            "prod"
        };
        let env_name = env("LEPTOS_ENV").unwrap_or_else(|| default_env.to_string());
        let leptos_env = match env_name.to_ascii_lowercase().as_str() {
            "dev" | "development" => Env::DEV,
            "prod" | "production" => Env::PROD,
            _ => {
                return Err(ConfigError::Invalid {
                    origin: "LEPTOS_ENV".to_string(),
                    key: "env",
                    value: env_name,
                    reason: "use dev or prod".to_string(),
                });
            }
        };

        let site = LeptosOptions::builder()
            .output_name(output_name)
            .site_root(site_root.unwrap_or_else(|| "target/site".to_string()))
            .site_pkg_dir(site_pkg_dir.unwrap_or_else(|| "pkg".to_string()))
            .site_addr(site_addr)
            .reload_port(reload_port)
            .env(leptos_env)
            .build();
        Ok(Config { site, source })
    }
}

fn require(origin: &str, key: &'static str, value: Option<String>) -> Result<String, ConfigError> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        other => Err(ConfigError::Invalid {
            origin: origin.to_string(),
            key,
            value: other.unwrap_or_default(),
            reason: "must be set".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn embedded_leptos_toml_gives_the_documented_defaults() {
        let config = Config::resolve(EMBEDDED_LEPTOS_TOML, None, env_of(&[])).unwrap();
        assert_eq!(&*config.site.output_name, "countersign");
        assert_eq!(&*config.site.site_root, "target/site");
        assert_eq!(&*config.site.site_pkg_dir, "pkg");
        assert_eq!(config.site.site_addr.to_string(), "127.0.0.1:3000");
        assert_eq!(config.site.reload_port, 3001);
        assert_eq!(config.source, "built-in Leptos.toml");
    }

    #[test]
    fn a_leptos_toml_file_overrides_only_the_keys_it_sets() {
        let file = "site-addr = \"0.0.0.0:8080\"\nsite-root = \"/srv/site\"\n";
        let config = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            Some(("deploy/Leptos.toml".into(), file)),
            env_of(&[]),
        )
        .unwrap();
        assert_eq!(config.site.site_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(&*config.site.site_root, "/srv/site");
        assert_eq!(&*config.site.output_name, "countersign");
        assert_eq!(config.source, "deploy/Leptos.toml");
    }

    #[test]
    fn leptos_environment_variables_win_over_the_file() {
        let file = "site-addr = \"0.0.0.0:8080\"\n";
        let config = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            Some(("Leptos.toml".into(), file)),
            env_of(&[
                ("LEPTOS_SITE_ADDR", "127.0.0.1:4555"),
                ("LEPTOS_SITE_ROOT", "/tmp/site"),
                ("LEPTOS_OUTPUT_NAME", "other"),
                ("LEPTOS_RELOAD_PORT", "4556"),
                ("LEPTOS_ENV", "production"),
            ]),
        )
        .unwrap();
        assert_eq!(config.site.site_addr.to_string(), "127.0.0.1:4555");
        assert_eq!(&*config.site.site_root, "/tmp/site");
        assert_eq!(&*config.site.output_name, "other");
        assert_eq!(config.site.reload_port, 4556);
        assert_eq!(config.site.env, Env::PROD);
    }

    #[test]
    fn bad_values_are_reported_with_their_origin() {
        let err = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            None,
            env_of(&[("LEPTOS_SITE_ADDR", "localhost")]),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("LEPTOS_SITE_ADDR"), "{text}");
        assert!(text.contains("site-addr"), "{text}");

        let err = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            Some(("x/Leptos.toml".into(), "site-addr = [1")),
            env_of(&[]),
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::Parse { ref origin, .. } if origin == "x/Leptos.toml"));

        let err = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            None,
            env_of(&[("LEPTOS_ENV", "staging")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("LEPTOS_ENV"));

        let err = Config::resolve(
            EMBEDDED_LEPTOS_TOML,
            None,
            env_of(&[("LEPTOS_OUTPUT_NAME", " ")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("output-name"));
    }

    #[test]
    fn build_only_keys_are_accepted() {
        let file = "style-file = \"style/x.css\"\nend2end-cmd = \"npx playwright test\"\n";
        assert!(
            Config::resolve(
                EMBEDDED_LEPTOS_TOML,
                Some(("Leptos.toml".into(), file)),
                env_of(&[])
            )
            .is_ok()
        );
    }
}
