//! The microphone: `getUserMedia` (echo cancellation on), an `AudioContext` at 16 kHz, and the
//! worklet in `public/voice-capture.js`, which posts the samples in batches of 100 ms. The page
//! turns them into PCM16 (`controller::voice::pcm`), on the main thread, in Rust: Rust cannot
//! run inside a worklet on stable (ADR 0037).

use std::{cell::RefCell, rc::Rc};

use wasm_bindgen::{JsCast, JsValue, closure::Closure};
use wasm_bindgen_futures::JsFuture;

use crate::ui::{
    controller::voice::pcm::{CAPTURE_BATCH, MIC_RATE},
    platform::MicError,
};

/// The worklet's script and the processor it registers.
const WORKLET_URL: &str = "/voice-capture.js";
const PROCESSOR: &str = "countersign-capture";
const NO_WORKLET: &str = "no AudioWorklet";

/// What runs once the worklet posted what it held.
type Flushed = Rc<RefCell<Option<Box<dyn FnOnce()>>>>;

/// The worklet's end of the graph: its port, the flush waiting on it, its message handler.
type Wired = (
    web_sys::MessagePort,
    Flushed,
    Closure<dyn FnMut(web_sys::MessageEvent)>,
);

/// An open microphone.
pub(super) struct Capture {
    context: web_sys::AudioContext,
    stream: web_sys::MediaStream,
    port: web_sys::MessagePort,
    /// Called once the worklet posted what it held (`close`).
    flushed: Flushed,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
}

/// What a refused `getUserMedia` means to the person.
fn mic_error(error: &JsValue) -> MicError {
    let name = error
        .dyn_ref::<web_sys::DomException>()
        .map(|e| e.name())
        .unwrap_or_default();
    match name.as_str() {
        "NotAllowedError" | "SecurityError" => MicError::Refused,
        "NotFoundError" | "OverconstrainedError" => MicError::Absent,
        "NotReadableError" | "AbortError" => MicError::Busy,
        _ => MicError::Unsupported(if name.is_empty() {
            "the microphone failed".into()
        } else {
            name
        }),
    }
}

fn unsupported(what: &str) -> impl FnOnce(JsValue) -> MicError + '_ {
    move |_| MicError::Unsupported(what.into())
}

/// Asks for the microphone.
async fn microphone() -> Result<web_sys::MediaStream, MicError> {
    let devices = web_sys::window()
        .ok_or_else(|| MicError::Unsupported("no window".into()))?
        .navigator()
        .media_devices()
        .map_err(unsupported("no media devices: the page needs HTTPS"))?;
    let audio = js_sys::Object::new();
    for (key, value) in [
        ("echoCancellation", JsValue::TRUE),
        ("noiseSuppression", JsValue::TRUE),
        ("autoGainControl", JsValue::TRUE),
        ("channelCount", JsValue::from(1)),
    ] {
        let _ = js_sys::Reflect::set(&audio, &JsValue::from_str(key), &value);
    }
    let constraints = web_sys::MediaStreamConstraints::new();
    constraints.set_audio(&audio);
    let asked = devices
        .get_user_media_with_constraints(&constraints)
        .map_err(|e| mic_error(&e))?;
    JsFuture::from(asked)
        .await
        .map_err(|e| mic_error(&e))?
        .dyn_into()
        .map_err(unsupported("not a media stream"))
}

fn stop_tracks(stream: &web_sys::MediaStream) {
    for track in stream.get_tracks().iter() {
        if let Ok(track) = track.dyn_into::<web_sys::MediaStreamTrack>() {
            track.stop();
        }
    }
}

impl Capture {
    /// Opens the microphone; every batch of samples goes to `on_batch`.
    ///
    /// The context and its worklet (on first use, a fetch) are ready before the microphone is
    /// asked for, and the microphone is wired to them in the same task that receives it: a
    /// person who presses and speaks at once is heard from the moment the microphone is theirs,
    /// not from whenever the worklet has loaded. (Chromium's fake microphone cannot show the
    /// difference: with the worklet's fetch held back 1 s, the old order lost none of its clip
    /// either.)
    pub(super) async fn open(on_batch: Rc<dyn Fn(Vec<f32>)>) -> Result<Capture, MicError> {
        let options = web_sys::AudioContextOptions::new();
        options.set_sample_rate(MIC_RATE as f32);
        let context = web_sys::AudioContext::new_with_context_options(&options)
            .map_err(unsupported("no Web Audio at 16 kHz"))?;
        let ready = match Capture::load_worklet(&context).await {
            Ok(()) => microphone().await,
            Err(e) => Err(e),
        };
        let stream = match ready {
            Ok(stream) => stream,
            Err(e) => {
                let _ = context.close();
                return Err(e);
            }
        };
        match Capture::graph(&context, &stream, on_batch) {
            Ok((port, flushed, on_message)) => Ok(Capture {
                context,
                stream,
                port,
                flushed,
                _on_message: on_message,
            }),
            Err(e) => {
                stop_tracks(&stream);
                let _ = context.close();
                Err(e)
            }
        }
    }

    /// Loads the capture worklet's module into `context`.
    async fn load_worklet(context: &web_sys::AudioContext) -> Result<(), MicError> {
        let module = context
            .audio_worklet()
            .and_then(|w| w.add_module(WORKLET_URL))
            .map_err(unsupported(NO_WORKLET))?;
        JsFuture::from(module)
            .await
            .map_err(unsupported("the capture worklet did not load"))?;
        Ok(())
    }

    /// The graph: microphone → worklet (→ the destination, silent, so the context pulls it).
    /// Synchronous, so that nothing runs between the microphone's arrival and its wiring.
    fn graph(
        context: &web_sys::AudioContext,
        stream: &web_sys::MediaStream,
        on_batch: Rc<dyn Fn(Vec<f32>)>,
    ) -> Result<Wired, MicError> {
        let source = context
            .create_media_stream_source(stream)
            .map_err(unsupported("the microphone cannot be read at 16 kHz"))?;
        let options = web_sys::AudioWorkletNodeOptions::new();
        let processor = js_sys::Object::new();
        let _ = js_sys::Reflect::set(
            &processor,
            &JsValue::from_str("batch"),
            &JsValue::from(CAPTURE_BATCH),
        );
        options.set_processor_options(Some(&processor));
        let node = web_sys::AudioWorkletNode::new_with_options(context, PROCESSOR, &options)
            .map_err(unsupported(NO_WORKLET))?;
        let port = node.port().map_err(unsupported(NO_WORKLET))?;
        let flushed: Flushed = Rc::new(RefCell::new(None));
        let on_flushed = flushed.clone();
        let on_message =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                let data = e.data();
                if let Some(samples) = data.dyn_ref::<js_sys::Float32Array>() {
                    on_batch(samples.to_vec());
                    return;
                }
                let done = on_flushed.borrow_mut().take();
                if let Some(done) = done {
                    done();
                }
            });
        port.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        source
            .connect_with_audio_node(&node)
            .and_then(|_| node.connect_with_audio_node(&context.destination()))
            .map_err(unsupported("cannot connect the microphone"))?;
        let _ = context.resume();
        Ok((port, flushed, on_message))
    }

    /// Asks the worklet for what it still holds; `done` runs once it was posted.
    pub(super) fn flush(&self, done: Box<dyn FnOnce()>) {
        *self.flushed.borrow_mut() = Some(done);
        if self.port.post_message(&JsValue::from_str("flush")).is_err()
            && let Some(done) = self.flushed.borrow_mut().take()
        {
            done();
        }
    }

    /// `flush`'s `done`, if it has not run (it will not any more).
    pub(super) fn take_flushed(&self) -> Option<Box<dyn FnOnce()>> {
        self.flushed.borrow_mut().take()
    }
}

impl Drop for Capture {
    /// The microphone is released (the browser's recording indicator goes) and the context ends.
    fn drop(&mut self) {
        self.port.set_onmessage(None);
        stop_tracks(&self.stream);
        let _ = self.context.close();
    }
}
