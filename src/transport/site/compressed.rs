//! Site files compressed by the server when the build wrote no compressed copies (a plain
//! `cargo leptos build --release`, `watch`, `serve`): each file is compressed once, with brotli
//! and gzip at their best settings, the first time a browser that takes either asks for it, and
//! the result is kept in memory for as long as the file stays the same (its length and
//! modification time). Nothing is compressed per request: a second request, or one that arrives
//! while the first is being compressed, gets the same bytes.

use std::{
    collections::HashMap,
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::SystemTime,
};

use axum::{
    body::Bytes,
    http::{HeaderMap, HeaderValue, header},
};
use tokio::sync::OnceCell;

/// Files smaller than this go out as they are (robots.txt): the headers would cost more than
/// compression saves.
pub const MIN_BYTES: u64 = 1024;

/// Brotli's best quality and its default window (what `cargo leptos build --precompress` uses).
const BROTLI_QUALITY: i32 = 11;
const BROTLI_WINDOW: i32 = 22;

/// A compression a client may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Gzip,
}

impl Encoding {
    pub fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Encoding::Brotli => "br",
            Encoding::Gzip => "gzip",
        })
    }

    /// The compression a request's `Accept-Encoding` prefers: the larger q-value (brotli on a
    /// tie), `*` standing for whatever is not named, `q=0` refusing; `None` when it takes
    /// neither.
    pub fn preferred(headers: &HeaderMap) -> Option<Encoding> {
        let (mut br, mut gzip, mut any) = (None::<f32>, None::<f32>, None::<f32>);
        for value in headers.get_all(header::ACCEPT_ENCODING) {
            let Ok(value) = value.to_str() else { continue };
            for item in value.split(',') {
                let mut parts = item.split(';');
                let name = parts.next().unwrap_or_default().trim();
                let q = parts
                    .filter_map(|p| p.trim().strip_prefix("q="))
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                let slot = if name.eq_ignore_ascii_case("br") {
                    &mut br
                } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                    &mut gzip
                } else if name == "*" {
                    &mut any
                } else {
                    continue;
                };
                *slot = Some(q);
            }
        }
        let br = br.or(any).unwrap_or(0.0);
        let gzip = gzip.or(any).unwrap_or(0.0);
        if br > 0.0 && br >= gzip {
            Some(Encoding::Brotli)
        } else if gzip > 0.0 {
            Some(Encoding::Gzip)
        } else {
            None
        }
    }
}

/// Whether a response of this `Content-Type` is worth compressing: the bundle (wasm, JS, CSS)
/// and text. Not images, audio or anything already compressed.
pub fn compressible(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/wasm"
                | "application/javascript"
                | "application/json"
                | "application/manifest+json"
                | "application/xml"
                | "image/svg+xml"
        )
}

/// One file's compressed forms.
#[derive(Debug)]
pub struct Variants {
    pub brotli: Bytes,
    pub gzip: Bytes,
}

impl Variants {
    pub fn get(&self, encoding: Encoding) -> &Bytes {
        match encoding {
            Encoding::Brotli => &self.brotli,
            Encoding::Gzip => &self.gzip,
        }
    }
}

/// The version of a file a cache entry was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    len: u64,
    modified: Option<SystemTime>,
}

struct Entry {
    version: Version,
    /// Filled once; `None` when the file could not be read (it is served as it is).
    variants: OnceCell<Option<Arc<Variants>>>,
}

/// The compressed files, by path: at most one entry per file of the site.
#[derive(Default)]
pub struct Compressed {
    entries: Mutex<HashMap<PathBuf, Arc<Entry>>>,
}

impl std::fmt::Debug for Compressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressed")
            .field("files", &self.files())
            .finish()
    }
}

impl Compressed {
    /// How many files have an entry.
    pub fn files(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or_default()
    }

    /// `file`'s compressed forms, made now if this version of it has none yet (on a blocking
    /// thread; concurrent callers wait for the same work). `None` when it cannot be read.
    pub async fn variants(&self, file: &Path) -> Option<Arc<Variants>> {
        let metadata = tokio::fs::metadata(file).await.ok()?;
        let version = Version {
            len: metadata.len(),
            modified: metadata.modified().ok(),
        };
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            match entries.get(file) {
                Some(entry) if entry.version == version => entry.clone(),
                // New, or the file changed (a rebuild under the same name): start again.
                _ => {
                    let entry = Arc::new(Entry {
                        version,
                        variants: OnceCell::new(),
                    });
                    entries.insert(file.to_path_buf(), entry.clone());
                    entry
                }
            }
        };
        entry
            .variants
            .get_or_init(|| {
                let file = file.to_path_buf();
                async move {
                    let started = std::time::Instant::now();
                    let done = tokio::task::spawn_blocking(move || compress_file(&file))
                        .await
                        .ok()
                        .and_then(|r| {
                            r.map_err(|e| tracing::warn!(error = %e, "cannot compress a site file"))
                                .ok()
                        });
                    if let Some(v) = &done {
                        tracing::debug!(
                            bytes = version.len,
                            brotli = v.brotli.len(),
                            gzip = v.gzip.len(),
                            ms = started.elapsed().as_millis() as u64,
                            "compressed a site file"
                        );
                    }
                    done.map(Arc::new)
                }
            })
            .await
            .clone()
    }
}

fn compress_file(file: &Path) -> std::io::Result<Variants> {
    let data = std::fs::read(file)?;
    Ok(compress(&data))
}

/// `data` as brotli (quality 11) and gzip (level 9).
pub fn compress(data: &[u8]) -> Variants {
    let params = brotli::enc::BrotliEncoderParams {
        quality: BROTLI_QUALITY,
        lgwin: BROTLI_WINDOW,
        size_hint: data.len(),
        ..Default::default()
    };
    let mut brotli = Vec::with_capacity(data.len() / 3);
    // Writing to a Vec cannot fail.
    let _ = brotli::BrotliCompress(&mut &data[..], &mut brotli, &params);
    let mut gzip = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 2),
        flate2::Compression::best(),
    );
    let _ = gzip.write_all(data);
    let gzip = gzip.finish().unwrap_or_default();
    Variants {
        brotli: brotli.into(),
        gzip: gzip.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Option<Encoding> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        Encoding::preferred(&headers)
    }

    #[test]
    fn the_client_s_preference_wins_and_q0_refuses() {
        assert_eq!(accept("gzip, deflate, br"), Some(Encoding::Brotli));
        assert_eq!(accept("gzip, deflate, br;q=0"), Some(Encoding::Gzip));
        assert_eq!(accept("gzip;q=0.5, br;q=0.9"), Some(Encoding::Brotli));
        assert_eq!(accept("br;q=0.4, gzip;q=0.8"), Some(Encoding::Gzip));
        assert_eq!(accept("identity"), None);
        assert_eq!(accept("*"), Some(Encoding::Brotli));
        assert_eq!(accept("*;q=0, gzip"), Some(Encoding::Gzip));
        assert_eq!(accept("br;q=0, gzip;q=0"), None);
        assert_eq!(accept("BR"), Some(Encoding::Brotli));
        assert_eq!(Encoding::preferred(&HeaderMap::new()), None);
    }

    #[test]
    fn the_bundle_and_text_are_compressible_media_is_not() {
        for yes in [
            "application/wasm",
            "text/javascript; charset=utf-8",
            "application/javascript",
            "text/css",
            "image/svg+xml",
            "application/json",
        ] {
            assert!(compressible(yes), "{yes}");
        }
        for no in ["audio/wav", "image/png", "application/octet-stream", ""] {
            assert!(!compressible(no), "{no}");
        }
    }

    #[tokio::test]
    async fn a_file_is_compressed_once_and_again_only_when_it_changes() {
        use std::io::Read;
        let dir =
            std::env::temp_dir().join(format!("countersign-compressed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("app.js");
        let text = "function hello() { return 'hello'; }\n".repeat(200);
        std::fs::write(&file, &text).unwrap();
        let cache = Compressed::default();
        let (a, b) = tokio::join!(cache.variants(&file), cache.variants(&file));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            Arc::ptr_eq(&a, &b),
            "concurrent requests share one compression"
        );
        assert!(
            Arc::ptr_eq(&a, &cache.variants(&file).await.unwrap()),
            "kept"
        );
        let mut round = String::new();
        brotli::Decompressor::new(&a.brotli[..], 4096)
            .read_to_string(&mut round)
            .unwrap();
        assert_eq!(round, text);
        round.clear();
        flate2::read::GzDecoder::new(&a.gzip[..])
            .read_to_string(&mut round)
            .unwrap();
        assert_eq!(round, text);
        assert!(a.brotli.len() * 10 < text.len());

        // A rebuild writes other content under the same name.
        std::fs::write(&file, text.replace("hello", "bye")).unwrap();
        let c = cache.variants(&file).await.unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        round.clear();
        brotli::Decompressor::new(&c.brotli[..], 4096)
            .read_to_string(&mut round)
            .unwrap();
        assert!(round.contains("bye"));
        assert_eq!(cache.entries.lock().unwrap().len(), 1, "one entry per file");

        std::fs::remove_file(&file).unwrap();
        assert!(cache.variants(&file).await.is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
