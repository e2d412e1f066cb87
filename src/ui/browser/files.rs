//! Image attachments: the files a person picked, read as `data:` URLs.

use wasm_bindgen::{JsCast, closure::Closure};

use crate::ui::platform::PickedFile;

/// Reads every file of the `<input type=file>` that fired `event`, then clears the input so the
/// same file can be picked again.
pub async fn read_picked(event: &web_sys::Event) -> Vec<Result<PickedFile, String>> {
    let Some(input) = event
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return Vec::new();
    };
    let Some(list) = input.files() else {
        return Vec::new();
    };
    let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
    let mut out = Vec::new();
    for file in files {
        out.push(read(&file).await);
    }
    input.set_value("");
    out
}

async fn read(file: &web_sys::File) -> Result<PickedFile, String> {
    let name = file.name();
    let media_type = file.type_();
    let size = file.size() as u64;
    let reader = web_sys::FileReader::new().map_err(|_| format!("cannot read {name}"))?;
    let (tx, rx) = futures::channel::oneshot::channel::<Result<String, String>>();
    let tx = std::rc::Rc::new(std::cell::RefCell::new(Some(tx)));
    let done_tx = tx.clone();
    let done_reader = reader.clone();
    let failed_name = name.clone();
    let on_load = Closure::once(move || {
        let url = done_reader.result().ok().and_then(|v| v.as_string());
        if let Some(tx) = done_tx.borrow_mut().take() {
            let _ = tx.send(url.ok_or_else(|| format!("cannot read {failed_name}")));
        }
    });
    let error_name = name.clone();
    let on_error = Closure::once(move || {
        if let Some(tx) = tx.borrow_mut().take() {
            let _ = tx.send(Err(format!("cannot read {error_name}")));
        }
    });
    reader.set_onload(Some(on_load.as_ref().unchecked_ref()));
    reader.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    reader
        .read_as_data_url(file)
        .map_err(|_| format!("cannot read {name}"))?;
    let url = rx
        .await
        .unwrap_or_else(|_| Err(format!("cannot read {name}")))?;
    drop(on_load);
    drop(on_error);
    Ok(PickedFile {
        name,
        media_type,
        size,
        url,
    })
}
