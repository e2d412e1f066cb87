//! MCP servers under the gate: anyone's tools, countersigned like the built-in ones.
//!
//! [`config`] reads `COUNTERSIGN_MCP_CONFIG` (the `mcpServers` file shape); [`tool_name`] gives
//! each server's tool the stable, provider-legal name the model sees.

pub mod config;

use sha2::{Digest, Sha256};

/// The longest function name every provider accepts (OpenAI `^[a-zA-Z0-9_-]{1,64}$`, Gemini
/// 64 characters starting with a letter or `_`).
pub const MAX_TOOL_NAME: usize = 64;

/// The name the model sees for `server`'s tool `tool`: `<server>__<tool>`, characters outside
/// `[A-Za-z0-9_-]` as `_`; past 64 characters, cut and made unique by a digest of the whole.
/// Stable across restarts (pending approvals name it), distinct per server (two servers may
/// both have `search`), never a built-in tool's name (those have no `__`).
pub fn tool_name(server: &str, tool: &str) -> String {
    let sanitise = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("{}__{}", sanitise(server), sanitise(tool));
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    if name.len() <= MAX_TOOL_NAME && sanitise(tool) == tool {
        return name;
    }
    // Cut (or made distinct from another tool that sanitises the same): a digest of the exact
    // names keeps it unique and stable.
    let digest = Sha256::digest(format!("{server}\u{0}{tool}").as_bytes());
    let suffix: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    name.truncate(MAX_TOOL_NAME - 9);
    format!("{name}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_legal_and_stable() {
        assert_eq!(tool_name("files", "read_file"), "files__read_file");
        assert_ne!(tool_name("a", "search"), tool_name("b", "search"));
        let odd = tool_name("files", "read.file");
        assert!(odd.starts_with("files__read_file_"), "{odd}");
        assert_ne!(
            odd,
            tool_name("files", "read_file"),
            "distinct from its look-alike"
        );
        let long = tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_eq!(long, tool_name("server", &"x".repeat(100)), "stable");
        assert_ne!(long, tool_name("server", &"x".repeat(101)));
        assert!(tool_name("9lives", "t").starts_with('_'));
        for name in [odd, long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
        }
    }
}
