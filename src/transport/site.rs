//! The built site's files: the page's bundle under `/<site-pkg-dir>/` (wasm, JS, CSS) and the
//! public assets (favicon, background music, robots.txt), served the way a real network wants
//! them (docs/adr/0015-assets-over-a-real-network.md):
//!
//! * **Precompressed.** `cargo leptos build --release --precompress` writes a brotli (`.br`) and
//!   a gzip (`.gz`) sibling of every file; tower-http's `ServeDir` picks one by
//!   `Accept-Encoding` with the right `Content-Encoding` and `Content-Length`, answers ranges and
//!   conditional requests, and falls back to the plain file. Nothing is compressed per request.
//! * **Cached by name.** With cargo-leptos's `hash-files` the bundle's names carry a digest of
//!   their content (`countersign.<hash>.wasm`), listed in `hash.txt` next to the server binary;
//!   those files are `immutable` for a year, so a repeat visit fetches only the HTML. Files
//!   whose name does not change with their content revalidate (`no-cache`) or, for the public
//!   assets, keep a day.
//!
//! Any path that is not a file renders the app's not-found page (404).

use std::{
    convert::Infallible,
    path::{Path, PathBuf},
    sync::Arc,
};

use axum::{
    body::Body,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use leptos::config::LeptosOptions;
use tower::{ServiceExt, util::BoxCloneSyncService};
use tower_http::services::ServeDir;

/// A year: how long a content-hashed file may be cached.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Pages and files whose name stays when their content changes: ask the server each time (it
/// answers 304 when nothing changed).
pub const REVALIDATE: &str = "no-cache";
/// The public assets (favicon, music, robots.txt): a day.
pub const PUBLIC_ASSET: &str = "public, max-age=86400";

/// The names of the page's bundle files under the package directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleNames {
    pub js: String,
    pub wasm: String,
    pub css: String,
    /// Whether the names carry content hashes (then they may be cached for good).
    pub hashed: bool,
}

impl BundleNames {
    /// The plain names cargo-leptos writes without `hash-files`.
    pub fn plain(output_name: &str) -> Self {
        BundleNames {
            js: format!("{output_name}.js"),
            wasm: format!("{output_name}.wasm"),
            css: format!("{output_name}.css"),
            hashed: false,
        }
    }

    /// The names a cargo-leptos `hash.txt` lists (`js: <hash>`, `wasm: <hash>`, `css: <hash>`
    /// lines), or why they cannot be read from it.
    pub fn from_hash_file(output_name: &str, text: &str) -> Result<Self, String> {
        let hash_of = |kind: &str| {
            text.lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(key, _)| key.trim() == kind)
                .map(|(_, hash)| hash.trim())
                .filter(|hash| {
                    !hash.is_empty()
                        && hash
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
                .ok_or_else(|| format!("it has no valid `{kind}:` line"))
        };
        Ok(BundleNames {
            js: format!("{output_name}.{}.js", hash_of("js")?),
            wasm: format!("{output_name}.{}.wasm", hash_of("wasm")?),
            css: format!("{output_name}.{}.css", hash_of("css")?),
            hashed: true,
        })
    }
}

/// What the server knows of the built site: where it is and what the bundle is called.
#[derive(Debug, Clone)]
pub struct Site {
    pub root: PathBuf,
    pub pkg_dir: String,
    pub bundle: BundleNames,
}

impl Site {
    /// Finds the bundle's names for `options`. With `hash-files` they come from the hash file
    /// next to the running binary (where cargo-leptos writes it and where Leptos's hydration
    /// scripts read it). When that file is missing (a binary copied without it, a test build)
    /// the site is served under its plain names and `options` is changed to match, with a
    /// warning that says what to do.
    pub fn discover(options: &mut LeptosOptions) -> Site {
        let output = options.output_name.to_string();
        let bundle = if options.hash_files {
            let hash_file = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(Path::to_path_buf))
                .unwrap_or_default()
                .join(options.hash_file.as_ref());
            match std::fs::read_to_string(&hash_file)
                .map_err(|e| e.to_string())
                .and_then(|text| BundleNames::from_hash_file(&output, &text))
            {
                Ok(bundle) => bundle,
                Err(reason) => {
                    tracing::warn!(
                        file = %hash_file.display(),
                        %reason,
                        "hash-files is on but the hash file cannot be read: serving the plain \
                         file names. Build with `cargo leptos build`, or copy hash.txt next to \
                         the binary (or set LEPTOS_HASH_FILES=false)"
                    );
                    options.hash_files = false;
                    BundleNames::plain(&output)
                }
            }
        } else {
            BundleNames::plain(&output)
        };
        Site {
            root: PathBuf::from(options.site_root.as_ref()),
            pkg_dir: options.site_pkg_dir.to_string(),
            bundle,
        }
    }

    /// The stylesheet's URL path.
    pub fn css_href(&self) -> String {
        format!("/{}/{}", self.pkg_dir, self.bundle.css)
    }

    /// The `Cache-Control` of the file at `path` (a URL path).
    pub fn cache_control(&self, path: &str) -> &'static str {
        let Some(name) = path
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(self.pkg_dir.as_str()))
            .and_then(|p| p.strip_prefix('/'))
        else {
            return PUBLIC_ASSET;
        };
        let b = &self.bundle;
        if b.hashed && (name == b.js || name == b.wasm || name == b.css) {
            IMMUTABLE
        } else {
            REVALIDATE
        }
    }
}

/// Bytes read from a file per body chunk: large enough that a 300 KB bundle leaves in a few
/// writes (tower-http's default is 64 KiB).
const CHUNK: usize = 256 * 1024;

/// A cloneable service answering every request.
pub type Fallback = BoxCloneSyncService<Request, Response, Infallible>;

/// The static files of `site`, with `not_found` answering what is not a file.
pub fn service(site: Arc<Site>, not_found: Fallback) -> Fallback {
    let files = ServeDir::new(&site.root)
        .precompressed_br()
        .precompressed_gzip()
        .append_index_html_on_directories(false)
        .with_buf_chunk_size(CHUNK)
        .call_fallback_on_method_not_allowed(true)
        .fallback(not_found.map_response(mark_fallback as fn(Response) -> Response));
    BoxCloneSyncService::new(tower::service_fn(move |request: Request| {
        let path = request.uri().path().to_owned();
        let files = files.clone();
        let site = site.clone();
        async move {
            let mut response = match files.oneshot(request).await {
                Ok(response) => response.map(Body::new),
                Err(e) => {
                    tracing::error!(%path, error = %e, "cannot serve a site file");
                    return Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response());
                }
            };
            let from_disk = response.extensions().get::<FromFallback>().is_none();
            let served = matches!(
                response.status(),
                StatusCode::OK | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
            );
            if from_disk && served {
                let headers = response.headers_mut();
                headers.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static(site.cache_control(&path)),
                );
                // The same URL has several encodings (the `.br` and `.gz` siblings).
                headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
            }
            Ok(response)
        }
    }))
}

/// Marks a response as the fallback's (not a file), so it keeps its own headers.
#[derive(Debug, Clone, Copy)]
struct FromFallback;

fn mark_fallback(mut response: Response) -> Response {
    response.extensions_mut().insert(FromFallback);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(hashed: bool) -> Site {
        Site {
            root: PathBuf::from("target/site"),
            pkg_dir: "pkg".into(),
            bundle: if hashed {
                BundleNames::from_hash_file("app", "js: J1\nwasm: W2\ncss: C3\n").unwrap()
            } else {
                BundleNames::plain("app")
            },
        }
    }

    /// A built site in a temporary directory: the bundle with its `.br` and `.gz` siblings (not
    /// real compressions: the test checks which file is sent), and a public file.
    fn built_site(name: &str) -> (Arc<Site>, PathBuf) {
        let root =
            std::env::temp_dir().join(format!("countersign-site-{name}-{}", std::process::id()));
        let pkg = root.join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("app.W2.wasm"), b"raw wasm bytes, all of them").unwrap();
        std::fs::write(pkg.join("app.W2.wasm.br"), b"brotli").unwrap();
        std::fs::write(pkg.join("app.W2.wasm.gz"), b"gzipped!").unwrap();
        std::fs::write(root.join("favicon.svg"), b"<svg/>").unwrap();
        let mut site = site(true);
        site.root = root.clone();
        (Arc::new(site), root)
    }

    fn not_found() -> Fallback {
        Fallback::new(tower::service_fn(|_request: Request| async {
            let mut response = (StatusCode::NOT_FOUND, "the not-found page").into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static(REVALIDATE));
            Ok(response)
        }))
    }

    async fn get(
        site: &Arc<Site>,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        use http_body_util::BodyExt;
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = service(site.clone(), not_found())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes().to_vec();
        (parts.status, parts.headers, body)
    }

    fn header<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
        headers.get(name).and_then(|v| v.to_str().ok())
    }

    #[tokio::test]
    async fn the_bundle_is_sent_in_the_encoding_the_client_takes_with_its_headers() {
        let (site, root) = built_site("encodings");
        let wasm = "/pkg/app.W2.wasm";
        for (accept, encoding, body) in [
            (Some("br, gzip"), Some("br"), &b"brotli"[..]),
            (
                Some("gzip, deflate, br;q=0"),
                Some("gzip"),
                &b"gzipped!"[..],
            ),
            (Some("gzip;q=0.5, br;q=0.9"), Some("br"), &b"brotli"[..]),
            (Some("identity"), None, &b"raw wasm bytes, all of them"[..]),
            (None, None, &b"raw wasm bytes, all of them"[..]),
        ] {
            let headers: Vec<(&str, &str)> =
                accept.map(|a| ("accept-encoding", a)).into_iter().collect();
            let (status, h, got) = get(&site, wasm, &headers).await;
            assert_eq!(status, StatusCode::OK, "{accept:?}");
            assert_eq!(header(&h, "content-encoding"), encoding, "{accept:?}");
            assert_eq!(got, body, "{accept:?}");
            assert_eq!(
                header(&h, "content-length"),
                Some(body.len().to_string().as_str())
            );
            assert_eq!(header(&h, "content-type"), Some("application/wasm"));
            assert_eq!(header(&h, "cache-control"), Some(IMMUTABLE));
            assert_eq!(header(&h, "vary"), Some("accept-encoding"));
        }
        // A range applies to the representation chosen.
        let (status, h, got) = get(&site, wasm, &[("range", "bytes=0-2")]).await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(got, b"raw");
        assert_eq!(header(&h, "content-range"), Some("bytes 0-2/27"));
        let (status, _, got) = get(
            &site,
            wasm,
            &[("range", "bytes=1-3"), ("accept-encoding", "br")],
        )
        .await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(got, b"rot");
        let _ = std::fs::remove_dir_all(root);
    }

    #[tokio::test]
    async fn public_files_keep_a_day_and_missing_ones_get_the_not_found_page() {
        let (site, root) = built_site("public");
        let (status, h, _) = get(&site, "/favicon.svg", &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(header(&h, "cache-control"), Some(PUBLIC_ASSET));
        let (status, h, body) = get(&site, "/pkg/app.OLD.wasm", &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, b"the not-found page");
        assert_eq!(
            header(&h, "cache-control"),
            Some(REVALIDATE),
            "the page keeps its own"
        );
        assert_eq!(header(&h, "vary"), None);
        let (status, _, _) = get(&site, "/pkg/", &[]).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "no directory listings or index files"
        );
        let (status, _, _) = get(&site, "/pkg/../../etc/passwd", &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn the_hash_file_names_the_bundle() {
        let names = BundleNames::from_hash_file("app", "js: a-B_1\nwasm: w\ncss: c\n").unwrap();
        assert_eq!(names.js, "app.a-B_1.js");
        assert_eq!(names.wasm, "app.w.wasm");
        assert_eq!(names.css, "app.c.css");
        for broken in [
            "",
            "js: x\nwasm: y\n",
            "js: x\nwasm: ../y\ncss: z\n",
            "js:\nwasm: y\ncss: z",
        ] {
            assert!(
                BundleNames::from_hash_file("app", broken).is_err(),
                "{broken:?}"
            );
        }
    }

    #[test]
    fn only_hashed_bundle_files_are_immutable() {
        let hashed = site(true);
        assert_eq!(hashed.cache_control("/pkg/app.W2.wasm"), IMMUTABLE);
        assert_eq!(hashed.cache_control("/pkg/app.J1.js"), IMMUTABLE);
        assert_eq!(hashed.cache_control("/pkg/app.C3.css"), IMMUTABLE);
        assert_eq!(hashed.cache_control("/pkg/app.OLD.wasm"), REVALIDATE);
        assert_eq!(
            hashed.cache_control("/pkg/snippets/x/inline0.js"),
            REVALIDATE
        );
        assert_eq!(hashed.cache_control("/favicon.svg"), PUBLIC_ASSET);
        assert_eq!(hashed.cache_control("/bgm/track1.wav"), PUBLIC_ASSET);
        assert_eq!(hashed.css_href(), "/pkg/app.C3.css");
        let plain = site(false);
        assert_eq!(plain.cache_control("/pkg/app.wasm"), REVALIDATE);
        assert_eq!(plain.css_href(), "/pkg/app.css");
    }
}
