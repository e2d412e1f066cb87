//! The layers, held by a test: each top module of `src/` uses only the ones below it, so
//! dependencies point one way (docs/architecture.md, "Layers"):
//!
//! ```text
//! server, main            the router and the accept loop
//! ui                      isomorphic components, server functions, ui::browser (client only)
//! transport               the edge, SSE and WebSocket endpoints, the app's state
//! config                  start-up settings
//! models                  the demo, replays and providers behind the agent's Model trait
//! agent                   people, the gate, policy, sessions, turns, stores
//! protocol | common       the wire | text helpers: nothing of ours
//! ```
//!
//! The test reads every source file and the paths it names (`crate::x`, and the items of a
//! `use crate::{x, y::…}` group). Test code (a `tests.rs`, a `*_tests.rs`, a `tests/` folder, or
//! what follows `#[cfg(test)] mod tests {`) may use a higher layer to drive the real thing (the
//! runtime's tests talk to the demo model): the rule is for what ships.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// Bottom first; a module may use its own layer and the ones before it.
const LAYERS: &[&[&str]] = &[
    &["protocol", "common"],
    &["agent"],
    &["models"],
    &["config"],
    &["transport"],
    &["ui"],
    &["server", "main"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top modules `source` names through `crate::`.
fn named_modules(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of every item of the group, at the group's own depth.
            let mut depth = 0usize;
            let mut item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        item_start = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && item_start {
                    if c.is_alphanumeric() || c == '_' {
                        name.push(c);
                        continue;
                    }
                    if !name.is_empty() {
                        found.insert(std::mem::take(&mut name));
                        item_start = false;
                    }
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// What of `source` ships: up to an inline `#[cfg(test)] mod tests {`.
fn shipped(source: &str) -> &str {
    source
        .find("#[cfg(test)]\nmod tests {")
        .map_or(source, |at| &source[..at])
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files of `src/` (but this one) whose shipped code contains any of `needles`, by their
/// path under `src/`, sorted.
fn shipped_files_naming(needles: &[&str]) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut naming: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).unwrap_or(path);
            if is_test_file(relative) || relative == Path::new("layers.rs") {
                return None;
            }
            let source = fs::read_to_string(path).unwrap_or_default();
            let shipped = shipped(&source);
            needles
                .iter()
                .any(|needle| shipped.contains(needle))
                .then(|| relative.display().to_string())
        })
        .collect();
    naming.sort();
    naming
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 100, "read {} files of {src:?}", files.len());
    let mut upward = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&src).unwrap_or(path);
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || top == "layers" || is_test_file(relative) {
            continue;
        }
        let Some(own) = layer_of(&top) else {
            upward.push(format!("{}: `{top}` is in no layer", relative.display()));
            continue;
        };
        let source = fs::read_to_string(path).unwrap_or_default();
        for used in named_modules(shipped(&source)) {
            match layer_of(&used) {
                Some(theirs) if theirs > own => upward.push(format!(
                    "{}: `{top}` uses `{used}`, a layer above it",
                    relative.display()
                )),
                _ => {}
            }
        }
    }
    assert!(
        upward.is_empty(),
        "arrows that run back up:\n{}",
        upward.join("\n")
    );
}

/// The one home of a chat's write (issue #34): the store's commit is called from
/// `agent/commit.rs` only — turns, answers and rechecks all go through `Commits::commit`.
#[test]
fn a_chat_is_written_in_one_place() {
    let writers = shipped_files_naming(&["store.commit(", "store.commit_paused(", "store.save("])
        .into_iter()
        .filter(|file| !file.starts_with("agent/store/"))
        .collect::<Vec<_>>();
    assert_eq!(
        writers,
        ["agent/commit.rs"],
        "who writes a chat to the store"
    );
}

/// A client's dialect lives in its own files (ADR 0031, issue #34): outside the seed's two
/// (`transport/seed.rs`: its profile, requests, answers and frames; `protocol/seed.rs`: its
/// encoder) shipped code names the seed only where a module declares and re-exports them, where
/// a route line picks its profile, and in the turn's label. The agent knows the label, not the
/// client.
#[test]
fn the_seeds_dialect_lives_in_its_own_files() {
    let naming = shipped_files_naming(&["seed::", "Transport::Seed", "SeedEncoder"]);
    assert_eq!(
        naming,
        [
            "agent/mod.rs",
            "protocol/mod.rs",
            "protocol/seed.rs",
            "transport/seed.rs",
            "transport/sse.rs",
            "transport/ws/mod.rs",
        ],
        "the files that name the seed's dialect"
    );
}

#[test]
fn the_reader_sees_grouped_and_plain_paths() {
    let source = "use crate::{\n    agent::{people::Principal, Runtime},\n    protocol::Chunk,\n    transport::state::AppState,\n};\nlet x = crate::ui::url::encode(y);";
    let found: Vec<String> = named_modules(source).into_iter().collect();
    assert_eq!(found, ["agent", "protocol", "transport", "ui"]);
    assert_eq!(
        shipped("a\n#[cfg(test)]\nmod tests {\n use crate::ui;\n}"),
        "a\n"
    );
    assert!(is_test_file(Path::new("agent/runtime/people/tests.rs")));
    assert!(is_test_file(Path::new("agent/gate/proposal_tests.rs")));
    assert!(!is_test_file(Path::new("agent/gate/machine.rs")));
}
