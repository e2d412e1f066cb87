//! The site settings the server serves with, in three layers (docs/adr/0032), each setting in
//! one of them:
//!
//! 1. `[package.metadata.leptos]` of the Cargo.toml this binary was built with (embedded): how
//!    the site was built — output name, package directory, hashed names, reload port — and the
//!    defaults of the rest. cargo-leptos reads the same table.
//! 2. `Leptos.toml` in the working directory, or the file `COUNTERSIGN_LEPTOS_TOML` names: where
//!    this server runs the site — `site-addr`, `site-root`, `env`. The file a deployment copies
//!    beside the binary; cargo-leptos never reads it.
//! 3. `LEPTOS_*` variables (the process's, then `.env`'s): what cargo-leptos passes the server
//!    it starts (`watch`, `serve`, `end-to-end`), or a one-off override. They win.

use std::{net::SocketAddr, path::PathBuf};

use leptos::config::{Env, LeptosOptions};
use serde::Deserialize;

use super::ConfigError;

/// The Cargo.toml this binary was built with: its `[package.metadata.leptos]` table holds how
/// the site was built and the defaults of every other site setting.
pub const EMBEDDED_CARGO_TOML: &str = include_str!("../../Cargo.toml");

/// The deployment's site settings, read from the working directory when it holds one.
pub const LEPTOS_TOML: &str = "Leptos.toml";

/// Names another file than `./Leptos.toml`; a file it names must exist.
pub const LEPTOS_TOML_VAR: &str = "COUNTERSIGN_LEPTOS_TOML";

/// The keys a Leptos.toml may hold: where the server runs, not how the site was built.
const PLACEMENT_KEYS: [&str; 3] = ["site-addr", "site-root", "env"];

/// Where the origin of an embedded setting is named.
const CARGO_ORIGIN: &str = "the built-in Cargo.toml [package.metadata.leptos]";

/// The keys of `[package.metadata.leptos]` the server reads. Build-only keys (style file,
/// assets, end2end, features …) are accepted and ignored here: cargo-leptos consumes them.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SiteMetadata {
    output_name: Option<String>,
    site_root: Option<String>,
    site_pkg_dir: Option<String>,
    site_addr: Option<String>,
    reload_port: Option<u32>,
    hash_files: Option<bool>,
    hash_file_name: Option<String>,
}

/// Just enough of Cargo.toml's shape to reach `[package.metadata.leptos]`.
#[derive(Debug, Deserialize)]
struct CargoToml {
    package: CargoPackage,
}

#[derive(Debug, Deserialize)]
struct CargoPackage {
    metadata: CargoMetadata,
}

#[derive(Debug, Deserialize)]
struct CargoMetadata {
    leptos: SiteMetadata,
}

impl SiteMetadata {
    fn parse(cargo_toml: &str) -> Result<Self, ConfigError> {
        toml::from_str::<CargoToml>(cargo_toml)
            .map(|c| c.package.metadata.leptos)
            .map_err(|e| ConfigError::Parse {
                origin: CARGO_ORIGIN.to_string(),
                message: e.to_string(),
            })
    }
}

/// A Leptos.toml as read, before it is checked.
#[derive(Debug, Clone)]
pub struct LeptosToml {
    pub path: PathBuf,
    pub text: String,
}

impl LeptosToml {
    /// The file a server started here reads: the one `COUNTERSIGN_LEPTOS_TOML` names (an error
    /// when it cannot be read), else `./Leptos.toml` when there is one.
    pub fn find(env: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let named = env(LEPTOS_TOML_VAR)
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty());
        let path = PathBuf::from(named.as_deref().unwrap_or(LEPTOS_TOML));
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(LeptosToml { path, text })),
            Err(e) if named.is_none() && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ConfigError::Read {
                path,
                message: match named {
                    Some(_) => format!("{e} (named by {LEPTOS_TOML_VAR})"),
                    None => e.to_string(),
                },
            }),
        }
    }
}

/// What a Leptos.toml says: where this server runs the site.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Placement {
    site_addr: Option<String>,
    site_root: Option<String>,
    env: Option<String>,
}

impl Placement {
    /// The file's settings; a key it may not hold, a value of the wrong type or a line that is
    /// not TOML is an error naming the file (and the line).
    fn parse(file: &LeptosToml) -> Result<Self, ConfigError> {
        let error = |message: String| ConfigError::LeptosToml {
            path: file.path.clone(),
            message,
        };
        let table: toml::Table = toml::from_str(&file.text).map_err(|e| error(e.to_string()))?;
        if let Some(key) = table
            .keys()
            .find(|key| !PLACEMENT_KEYS.contains(&key.as_str()))
        {
            return Err(error(format!(
                "`{key}` cannot be set here. Leptos.toml says where this server runs its site \
                 ({}); how the site is built (output name, package directory, hashed names, \
                 reload port …) stays in Cargo.toml [package.metadata.leptos], where \
                 cargo-leptos reads it",
                PLACEMENT_KEYS.join(", ")
            )));
        }
        toml::from_str(&file.text).map_err(|e| error(e.to_string()))
    }
}

/// The options leptos_axum serves the site with, and where they came from (for the banner).
pub(super) fn site_options(
    cargo_toml: &str,
    leptos_toml: Option<&LeptosToml>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(LeptosOptions, String), ConfigError> {
    let built = SiteMetadata::parse(cargo_toml)?;
    let placed = leptos_toml.map(Placement::parse).transpose()?;
    let file_origin = leptos_toml.map(|f| f.path.display().to_string());
    let placed = placed.unwrap_or_default();
    let mut overridden = Vec::new();
    // The value of one setting and its origin: the variable, else the Leptos.toml, else the
    // built-in table.
    let mut pick = |var: &'static str,
                    from_file: Option<String>,
                    built: Option<String>|
     -> (String, Option<String>) {
        if let Some(value) = env(var) {
            overridden.push(var);
            return (var.to_string(), Some(value));
        }
        match (from_file, &file_origin) {
            (Some(value), Some(origin)) => (origin.clone(), Some(value)),
            _ => (CARGO_ORIGIN.to_string(), built),
        }
    };

    let (from, output_name) = pick("LEPTOS_OUTPUT_NAME", None, built.output_name);
    let output_name = require(&from, "output-name", output_name)?;
    let (_, site_root) = pick("LEPTOS_SITE_ROOT", placed.site_root, built.site_root);
    let (_, site_pkg_dir) = pick("LEPTOS_SITE_PKG_DIR", None, built.site_pkg_dir);

    let (from, site_addr) = pick("LEPTOS_SITE_ADDR", placed.site_addr, built.site_addr);
    let site_addr = site_addr_of(from, site_addr)?;

    let (from, reload_port) = pick(
        "LEPTOS_RELOAD_PORT",
        None,
        built.reload_port.map(|p| p.to_string()),
    );
    let reload_port = reload_port_of(from, reload_port)?;

    let (from, hash_files) = pick(
        "LEPTOS_HASH_FILES",
        None,
        built.hash_files.map(|h| h.to_string()),
    );
    let hash_files = hash_files_of(from, hash_files)?;
    let (_, hash_file) = pick("LEPTOS_HASH_FILE_NAME", None, built.hash_file_name);

    let (from, env_name) = pick("LEPTOS_ENV", placed.env, None);
    let leptos_env = env_of(from, env_name)?;

    let site = LeptosOptions::builder()
        .output_name(output_name)
        .site_root(site_root.unwrap_or_else(|| "target/site".to_string()))
        .site_pkg_dir(site_pkg_dir.unwrap_or_else(|| "pkg".to_string()))
        .site_addr(site_addr)
        .reload_port(reload_port)
        .hash_files(hash_files)
        .hash_file(hash_file.unwrap_or_else(|| "hash.txt".to_string()).into())
        .env(leptos_env)
        .build();
    let mut source = "built-in Cargo.toml [package.metadata.leptos]".to_string();
    if let Some(file) = leptos_toml {
        source.push_str(&format!(", {}", file.path.display()));
    }
    if !overridden.is_empty() {
        source.push_str(&format!(", overridden by {}", overridden.join(", ")));
    }
    Ok((site, source))
}

/// The address to listen on (default 127.0.0.1:3000); `origin` names where the value came from.
fn site_addr_of(origin: String, value: Option<String>) -> Result<SocketAddr, ConfigError> {
    let value = value.unwrap_or_else(|| "127.0.0.1:3000".to_string());
    value.parse().map_err(|e| ConfigError::Invalid {
        origin,
        key: "site-addr",
        reason: format!("{e} (expected host:port, e.g. 127.0.0.1:3000)"),
        value,
    })
}

/// cargo-leptos's live-reload port (default 3001).
fn reload_port_of(origin: String, value: Option<String>) -> Result<u32, ConfigError> {
    let Some(value) = value else {
        return Ok(3001);
    };
    value
        .trim()
        .parse::<u32>()
        .map_err(|e| ConfigError::Invalid {
            origin,
            key: "reload-port",
            reason: e.to_string(),
            value,
        })
}

/// Whether the site's files carry content hashes in their names (default false).
fn hash_files_of(origin: String, value: Option<String>) -> Result<bool, ConfigError> {
    match value.as_deref().map(str::trim) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ConfigError::Invalid {
            origin,
            key: "hash-files",
            value: other.to_string(),
            reason: "use true or false".to_string(),
        }),
    }
}

/// dev or prod; release builds serve without cargo-leptos's live-reload script unless asked.
fn env_of(origin: String, value: Option<String>) -> Result<Env, ConfigError> {
    let default_env = if cfg!(debug_assertions) {
        "dev"
    } else {
        "prod"
    };
    let value = value.unwrap_or_else(|| default_env.to_string());
    match value.trim().to_ascii_lowercase().as_str() {
        "dev" | "development" => Ok(Env::DEV),
        "prod" | "production" => Ok(Env::PROD),
        _ => Err(ConfigError::Invalid {
            origin,
            key: "env",
            value,
            reason: "use dev or prod".to_string(),
        }),
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

    fn file(text: &str) -> LeptosToml {
        LeptosToml {
            path: PathBuf::from("/srv/countersign/Leptos.toml"),
            text: text.to_string(),
        }
    }

    fn options(text: &str, env: &[(&str, &str)]) -> Result<(LeptosOptions, String), ConfigError> {
        site_options(EMBEDDED_CARGO_TOML, Some(&file(text)), &env_of(env))
    }

    #[test]
    fn a_leptos_toml_places_the_site_over_the_built_in_table() {
        let (site, source) = options(
            "site-addr = \"0.0.0.0:8080\"\nsite-root = \"site\"\nenv = \"dev\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(site.site_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(&*site.site_root, "site");
        assert_eq!(site.env, Env::DEV);
        // How the site was built still comes from Cargo.toml.
        assert_eq!(&*site.output_name, "countersign");
        assert_eq!(&*site.site_pkg_dir, "pkg");
        assert!(site.hash_files);
        assert!(source.contains("/srv/countersign/Leptos.toml"), "{source}");
    }

    #[test]
    fn leptos_variables_win_over_the_leptos_toml() {
        let (site, source) = options(
            "site-addr = \"0.0.0.0:8080\"\nsite-root = \"site\"\nenv = \"dev\"\n",
            &[
                ("LEPTOS_SITE_ADDR", "127.0.0.1:4555"),
                ("LEPTOS_SITE_ROOT", "/tmp/site"),
                ("LEPTOS_ENV", "prod"),
            ],
        )
        .unwrap();
        assert_eq!(site.site_addr.to_string(), "127.0.0.1:4555");
        assert_eq!(&*site.site_root, "/tmp/site");
        assert_eq!(site.env, Env::PROD);
        assert!(
            source.contains("overridden by") && source.contains("LEPTOS_SITE_ADDR"),
            "{source}"
        );
    }

    #[test]
    fn an_empty_leptos_toml_changes_nothing() {
        let (site, _) = options("# nothing placed\n", &[]).unwrap();
        let (built_in, _) = site_options(EMBEDDED_CARGO_TOML, None, &env_of(&[])).unwrap();
        assert_eq!(site.site_addr, built_in.site_addr);
        assert_eq!(site.site_root, built_in.site_root);
        assert_eq!(site.env, built_in.env);
    }

    #[test]
    fn a_build_setting_in_leptos_toml_is_refused_with_where_it_belongs() {
        for key in [
            "output-name = \"x\"",
            "site-pkg-dir = \"js\"",
            "hash-files = false",
        ] {
            let err = options(key, &[]).unwrap_err().to_string();
            assert!(err.contains("/srv/countersign/Leptos.toml"), "{err}");
            assert!(err.contains(key.split(' ').next().unwrap()), "{err}");
            assert!(
                err.contains("Cargo.toml [package.metadata.leptos]"),
                "{err}"
            );
        }
        // The cargo-leptos layout (a [package.metadata.leptos] header) is not this file's.
        let err = options(
            "[package.metadata.leptos]\nsite-addr = \"0.0.0.0:1\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`package` cannot be set here"), "{err}");
    }

    #[test]
    fn bad_leptos_toml_values_name_the_file_and_the_line() {
        let err = options("site-addr = \"localhost\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("/srv/countersign/Leptos.toml"), "{err}");
        assert!(
            err.contains("site-addr") && err.contains("localhost"),
            "{err}"
        );

        let err = options("site-root = \"site\"\nsite-addr = 3000\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("/srv/countersign/Leptos.toml"), "{err}");
        assert!(err.contains("line 2"), "{err}");

        let err = options("site-addr = \"0.0.0.0:80\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");

        let err = options("env = \"staging\"\n", &[]).unwrap_err().to_string();
        assert!(
            err.contains("Leptos.toml") && err.contains("staging"),
            "{err}"
        );
    }

    #[test]
    fn a_leptos_toml_named_by_the_variable_must_exist() {
        let missing = std::env::temp_dir().join(format!(
            "countersign-no-such-{}/Leptos.toml",
            std::process::id()
        ));
        let named = missing.display().to_string();
        let err = LeptosToml::find(&env_of(&[(LEPTOS_TOML_VAR, &named)]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&named) && err.contains(LEPTOS_TOML_VAR),
            "{err}"
        );
    }
}
