//! The tools the browser runs, as a registry: one line per tool in [`BROWSER_TOOLS`], looked up
//! by the call's tool name. Each runs at most once per call, and its result goes back through the
//! page's transport.

use std::{future::Future, pin::Pin};

use leptos::{prelude::*, task::spawn_local};
use serde_json::Value;

use super::{ChatCtl, music};
use crate::ui::platform;

/// What a browser tool resolves to: its output, or an error in words.
type Outcome = Pin<Box<dyn Future<Output = Result<Value, String>>>>;

/// How a browser tool runs: with the controller and the call's arguments.
type Run = fn(ChatCtl, Value) -> Outcome;

/// Every tool this browser can run, by the name the server declares it under: one line each.
#[rustfmt::skip]
const BROWSER_TOOLS: &[(&str, Run)] = &[
    ("get_location", get_location),
    ("change_bgm", change_bgm),
];

/// `get_location {}`: the Geolocation API.
fn get_location(_: ChatCtl, _: Value) -> Outcome {
    Box::pin(platform::locate())
}

/// `change_bgm {track}`: the background music.
fn change_bgm(ctl: ChatCtl, args: Value) -> Outcome {
    Box::pin(music::change_track(ctl, args))
}

fn browser_tool(name: &str) -> Option<Run> {
    BROWSER_TOOLS
        .iter()
        .find(|(tool, _)| *tool == name)
        .map(|(_, run)| *run)
}

impl ChatCtl {
    /// Runs browser tool `tool` for call `call_id` once, records its result in the conversation
    /// and hands it to the transport.
    pub(super) fn run_browser_tool(self, call_id: String, tool: String, args: Value) {
        let fresh = self
            .executed
            .try_update_value(|e| e.insert(call_id.clone()))
            .unwrap_or(false);
        if !fresh {
            return;
        }
        spawn_local(async move {
            let result = match browser_tool(&tool) {
                Some(run) => run(self, args).await,
                None => Err(format!("This browser cannot run {tool}.")),
            };
            self.conversation.update_value(|c| match &result {
                Ok(output) => {
                    c.add_tool_output(&call_id, output.clone());
                }
                Err(message) => {
                    c.add_tool_error(&call_id, message.clone());
                }
            });
            self.publish();
            self.transport().send_tool_result(self, &call_id, result);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_is_registered_once_and_found_by_name() {
        let names: Vec<&str> = BROWSER_TOOLS.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["get_location", "change_bgm"]);
        for name in names {
            assert!(browser_tool(name).is_some(), "{name}");
        }
        assert!(browser_tool("process_payment").is_none());
        assert!(browser_tool("").is_none());
    }

    /// Every tool the server declares as the browser's has a handler here.
    #[cfg(feature = "ssr")]
    #[test]
    fn every_tool_the_server_sends_to_the_browser_runs_here() {
        use crate::agent::tools::{ToolLocation, ToolRegistry, ToolSettings};
        let registry = ToolRegistry::standard(&ToolSettings::default());
        let browser: Vec<String> = registry
            .names()
            .into_iter()
            .filter(|name| {
                registry
                    .get(name)
                    .is_some_and(|tool| tool.spec.location == ToolLocation::Browser)
            })
            .collect();
        assert!(!browser.is_empty());
        for name in browser {
            assert!(
                browser_tool(&name).is_some(),
                "{name} has no browser handler"
            );
        }
    }
}
