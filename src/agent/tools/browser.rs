//! Tools the browser runs: the server declares them, asks for approval when needed, dispatches
//! the call to the browser by its toolCallId and waits for the browser's result.

use serde_json::json;

use super::{ApprovalPolicy, ToolEffects, ToolLocation, ToolSettings, ToolSpec};

/// `get_location()`: the browser's Geolocation API, after the person approves.
pub fn get_location_spec(settings: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: "get_location",
        description: "Get the person's current location (latitude, longitude, accuracy in metres) \
                      from their browser's Geolocation API. Needs their approval.",
        parameters: json!({
            "type": "object",
            "properties": {},
            "additionalProperties": false
        }),
        location: ToolLocation::Browser,
        approval: ApprovalPolicy::Always,
        approval_timeout: settings.approval_timeout,
        result_timeout: settings.browser_timeout,
        effects: ToolEffects::External,
    }
}

/// `change_bgm(track)`: switches the background music the browser plays (Web Audio).
pub fn change_bgm_spec(settings: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: "change_bgm",
        description: "Switch the background music playing in the person's browser to track 1 or 2.",
        parameters: json!({
            "type": "object",
            "properties": {
                "track": {"type": "integer", "enum": [1, 2], "description": "Track number, 1 or 2."}
            },
            "required": ["track"],
            "additionalProperties": false
        }),
        location: ToolLocation::Browser,
        approval: ApprovalPolicy::Never,
        approval_timeout: settings.approval_timeout,
        result_timeout: settings.browser_timeout,
        effects: ToolEffects::External,
    }
}
