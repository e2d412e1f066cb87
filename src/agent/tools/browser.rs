//! Tools the browser runs: the server declares them, asks for approval when needed, dispatches
//! the call to the browser by its toolCallId and waits for the browser's result.

use serde_json::{Value, json};

use super::{ApprovalPolicy, ToolEffects, ToolLocation, ToolSettings, ToolSpec};
use crate::protocol::ToolPresentation;

/// `get_location()`: the browser's Geolocation API, after the person approves.
pub fn get_location_spec(settings: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: "get_location".into(),
        description: "Get the person's current location (latitude, longitude, accuracy in metres) \
                      from their browser's Geolocation API. Needs their approval."
            .into(),
        purpose: "find where the person is".into(),
        presentation: ToolPresentation::new("Location", "Share your location"),
        parameters: json!({
            "type": "object",
            "properties": {},
            "additionalProperties": false
        }),
        location: ToolLocation::Browser,
        approval: ApprovalPolicy::Always,
        approval_timeout: settings.approval_timeout,
        result_timeout: settings.browser_timeout,
        acknowledgment: None,
        server: None,
        pays: None,
        names: Vec::new(),
        effects: ToolEffects::External,
    }
}

/// `change_bgm(track)`: switches the background music the browser plays (Web Audio).
pub fn change_bgm_spec(settings: &ToolSettings) -> ToolSpec {
    ToolSpec {
        name: "change_bgm".into(),
        description: "Switch the background music playing in the person's browser to track 1 or 2."
            .into(),
        purpose: "switch the background music".into(),
        presentation: ToolPresentation::new("Music", "Switch the music to track {track}"),
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
        acknowledgment: Some(bgm_initiated),
        server: None,
        pays: None,
        names: Vec::new(),
        effects: ToolEffects::External,
    }
}

/// What the seed's own server answers for `change_bgm` (the browser switches the music by itself).
fn bgm_initiated(args: &Value) -> Value {
    let track = args.get("track").cloned().unwrap_or(Value::Null);
    json!({
        "success": true,
        "track": track,
        "message": format!("BGM change to track {track} initiated (frontend handles execution)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_sentences_read_naturally() {
        let settings = ToolSettings::default();
        assert_eq!(
            get_location_spec(&settings)
                .presentation
                .sentence(&json!({})),
            "Share your location"
        );
        assert_eq!(
            change_bgm_spec(&settings)
                .presentation
                .sentence(&json!({"track": 2})),
            "Switch the music to track 2"
        );
    }

    #[test]
    fn change_bgm_can_be_acknowledged_in_the_seeds_words() {
        let spec = change_bgm_spec(&ToolSettings::default());
        let acknowledge = spec.acknowledgment.unwrap();
        assert_eq!(
            acknowledge(&json!({"track": 1})),
            json!({"success": true, "track": 1,
                   "message": "BGM change to track 1 initiated (frontend handles execution)"})
        );
        assert!(
            get_location_spec(&ToolSettings::default())
                .acknowledgment
                .is_none()
        );
    }
}
