//! The background music: the BGM control in the toolbar and the `change_bgm` browser tool play
//! through the same player; `ChatCtl::bgm` shows the track playing.

use leptos::{prelude::*, task::spawn_local};
use serde_json::{Value, json};

use super::ChatCtl;
use crate::ui::platform;

impl ChatCtl {
    /// The BGM control: pause, or play track 1.
    pub fn toggle_bgm(self) {
        platform::bgm_unlock();
        if self.bgm.get_untracked().is_some() {
            platform::bgm_stop();
            self.bgm.set(None);
        } else {
            spawn_local(async move {
                match platform::bgm_play(1).await {
                    Ok(()) => self.bgm.set(Some(1)),
                    Err(e) => self.show_error(e, false),
                }
            });
        }
    }
}

/// `change_bgm {track}`: plays the track and reports it playing.
pub(super) async fn change_track(ctl: ChatCtl, args: Value) -> Result<Value, String> {
    let track = args["track"].as_u64().unwrap_or(0) as u8;
    platform::bgm_play(track).await?;
    ctl.bgm.set(Some(track));
    Ok(json!({"track": track, "playing": true}))
}
