//! `change_bgm`: two looping background tracks (generated tones in `public/bgm/`) played with
//! Web Audio through a gain node, switched by the tool and by the BGM control.

use std::{cell::RefCell, collections::HashMap, rc::Rc};

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

struct Player {
    context: web_sys::AudioContext,
    gain: web_sys::GainNode,
    buffers: HashMap<u8, web_sys::AudioBuffer>,
    source: Option<web_sys::AudioBufferSourceNode>,
}

thread_local! {
    static PLAYER: RefCell<Option<Rc<RefCell<Player>>>> = const { RefCell::new(None) };
}

fn player() -> Result<Rc<RefCell<Player>>, String> {
    PLAYER.with(|slot| {
        if let Some(p) = slot.borrow().as_ref() {
            return Ok(p.clone());
        }
        let context = web_sys::AudioContext::new().map_err(|_| "Web Audio is not available")?;
        let gain = context
            .create_gain()
            .map_err(|_| "cannot create a gain node")?;
        gain.gain().set_value(0.25);
        gain.connect_with_audio_node(&context.destination())
            .map_err(|_| "cannot connect the gain node")?;
        let p = Rc::new(RefCell::new(Player {
            context,
            gain,
            buffers: HashMap::new(),
            source: None,
        }));
        *slot.borrow_mut() = Some(p.clone());
        Ok(p)
    })
}

/// Creates (or resumes) the audio context; call from a user gesture so playback may start.
pub fn unlock() {
    if let Ok(p) = player() {
        let _ = p.borrow().context.resume();
    }
}

async fn buffer(p: &Rc<RefCell<Player>>, track: u8) -> Result<web_sys::AudioBuffer, String> {
    if let Some(b) = p.borrow().buffers.get(&track) {
        return Ok(b.clone());
    }
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response =
        JsFuture::from(window.fetch_with_str(&format!("/bgm/track{track}.wav")))
            .await
            .map_err(|_| "cannot load the track")?
            .dyn_into()
            .map_err(|_| "cannot load the track")?;
    if !response.ok() {
        return Err(format!("track {track} is missing ({})", response.status()));
    }
    let bytes = JsFuture::from(
        response
            .array_buffer()
            .map_err(|_| "cannot read the track")?,
    )
    .await
    .map_err(|_| "cannot read the track")?;
    let array: js_sys::ArrayBuffer = bytes.dyn_into().map_err(|_| "cannot read the track")?;
    let promise = p
        .borrow()
        .context
        .decode_audio_data(&array)
        .map_err(|_| "cannot decode the track")?;
    let decoded: web_sys::AudioBuffer = JsFuture::from(promise)
        .await
        .map_err(|_| "cannot decode the track")?
        .dyn_into()
        .map_err(|_| "cannot decode the track")?;
    p.borrow_mut().buffers.insert(track, decoded.clone());
    Ok(decoded)
}

/// Plays `track` (1 or 2) in a loop, replacing what was playing.
pub async fn play(track: u8) -> Result<(), String> {
    if track != 1 && track != 2 {
        return Err(format!("There is no track {track}; choose 1 or 2."));
    }
    let p = player()?;
    let _ = p.borrow().context.resume();
    let audio = buffer(&p, track).await?;
    stop();
    let mut player = p.borrow_mut();
    let source = player
        .context
        .create_buffer_source()
        .map_err(|_| "cannot create a source")?;
    source.set_buffer(Some(&audio));
    source.set_loop(true);
    source
        .connect_with_audio_node(&player.gain)
        .map_err(|_| "cannot connect the source")?;
    source.start().map_err(|_| "cannot start playback")?;
    player.source = Some(source);
    Ok(())
}

/// Stops the music.
pub fn stop() {
    if let Ok(p) = player()
        && let Some(source) = p.borrow_mut().source.take()
    {
        #[allow(deprecated)]
        let _ = source.stop();
        let _ = source.disconnect();
    }
}
