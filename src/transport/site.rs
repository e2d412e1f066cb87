//! The built site's files: the page's bundle under `/<site-pkg-dir>/` (wasm, JS, CSS, and the
//! lazily loaded parts of the wasm when it is split) and the public assets (favicon, background
//! music, robots.txt), served the way a real network wants them
//! (docs/adr/0015-assets-over-a-real-network.md):
//!
//! * **Compressed, whatever the build.** `cargo leptos build --release --precompress` writes a
//!   brotli (`.br`) and a gzip (`.gz`) sibling of every file; tower-http's `ServeDir` picks one
//!   by `Accept-Encoding` with the right `Content-Encoding` and `Content-Length`, answers ranges
//!   and conditional requests, and falls back to the plain file. A build without them (a plain
//!   `cargo leptos build --release`, `watch`) has each file compressed by the server the first
//!   time a browser asks for it, once, and kept (`compressed`). Nothing is compressed per
//!   request.
//! * **Cached by name.** With cargo-leptos's `hash-files` the bundle's names carry a digest of
//!   their content (`countersign.<hash>.wasm`), listed in `hash.txt` next to the server binary;
//!   those files are `immutable` for a year, so a repeat visit fetches only the HTML. Files
//!   whose name does not change with their content revalidate (`no-cache`) or, for the public
//!   assets, keep a day.
//! * **Only what a browser runs.** wasm-bindgen's TypeScript declarations (`*.d.ts`) are built
//!   next to the bundle; they are not served.
//!
//! Any path that is not a file renders the app's not-found page (404).

mod compressed;

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

pub use compressed::{Compressed, Encoding};

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

/// What the server knows of the built site: where it is, what the bundle is called, and the
/// files it compressed itself.
#[derive(Debug, Clone)]
pub struct Site {
    pub root: PathBuf,
    pub pkg_dir: String,
    pub bundle: BundleNames,
    pub compressed: Arc<Compressed>,
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
            compressed: Arc::default(),
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
        if b.hashed && (name == b.js || name == b.wasm || name == b.css || content_hashed(name)) {
            IMMUTABLE
        } else {
            REVALIDATE
        }
    }

    /// The file a URL path names under the site root, if it names one there: percent-decoded,
    /// with no `.`, `..` or empty segment (`ServeDir` serves only such paths).
    fn file_of(&self, path: &str) -> Option<PathBuf> {
        let decoded = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .ok()?;
        let mut file = self.root.clone();
        for segment in decoded.strip_prefix('/')?.split('/') {
            if segment.is_empty()
                || segment == "."
                || segment == ".."
                || segment.contains(['\\', '\0'])
            {
                return None;
            }
            file.push(segment);
        }
        Some(file)
    }
}

/// Whether a file of the package directory is named after its content, as cargo-leptos's
/// `hash-files` names every file it writes there but the wasm-bindgen snippets:
/// `<stem>.<22 characters of base64url>.<extension>` (the lazily loaded parts of a split wasm,
/// their loader and manifest, besides the three files `hash.txt` lists).
fn content_hashed(name: &str) -> bool {
    if name.starts_with("snippets/") || name.contains('/') {
        return false;
    }
    let mut parts = name.rsplit('.');
    let (Some(_extension), Some(hash), Some(stem)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !stem.is_empty()
        && hash.len() == 22
        && hash
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// wasm-bindgen's TypeScript declarations (`countersign.d.ts`, and with `hash-files`
/// `countersign.d.<hash>.ts`): built next to the bundle, never served.
fn typescript(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|name| name.ends_with(".ts"))
}

/// Bytes read from a file per body chunk: large enough that a 300 KB bundle leaves in a few
/// writes (tower-http's default is 64 KiB).
const CHUNK: usize = 256 * 1024;

/// A cloneable service answering every request.
pub type Fallback = BoxCloneSyncService<Request, Response, Infallible>;

/// The static files of `site`, with `not_found` answering what is not a file.
pub fn service(site: Arc<Site>, not_found: Fallback) -> Fallback {
    let not_found = not_found.map_response(mark_fallback as fn(Response) -> Response);
    let files = ServeDir::new(&site.root)
        .precompressed_br()
        .precompressed_gzip()
        .append_index_html_on_directories(false)
        .with_buf_chunk_size(CHUNK)
        .call_fallback_on_method_not_allowed(true)
        .fallback(not_found.clone());
    BoxCloneSyncService::new(tower::service_fn(move |request: Request| {
        let path = request.uri().path().to_owned();
        let files = files.clone();
        let not_found = not_found.clone();
        let site = site.clone();
        async move {
            if typescript(&path) {
                return not_found.oneshot(request).await;
            }
            let encoding = Encoding::preferred(request.headers());
            let head = request.method() == axum::http::Method::HEAD;
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
                if let Some(encoding) = encoding {
                    compress_response(&site, &path, encoding, head, &mut response).await;
                }
                let headers = response.headers_mut();
                headers.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static(site.cache_control(&path)),
                );
                // The same URL has several encodings.
                headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
            }
            Ok(response)
        }
    }))
}

/// A whole plain file `ServeDir` answered (no precompressed sibling matched) sent compressed
/// instead, from [`Compressed`], when it is worth it.
async fn compress_response(
    site: &Site,
    path: &str,
    encoding: Encoding,
    head: bool,
    response: &mut Response,
) {
    let headers = response.headers();
    let worth_it = response.status() == StatusCode::OK
        && !headers.contains_key(header::CONTENT_ENCODING)
        && headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(compressed::compressible)
        && headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|len| len >= compressed::MIN_BYTES);
    if !worth_it {
        return;
    }
    let Some(file) = site.file_of(path) else {
        return;
    };
    let Some(variants) = site.compressed.variants(&file).await else {
        return;
    };
    let body = variants.get(encoding).clone();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_ENCODING, encoding.header_value());
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    // Ranges would be of the plain file: this representation is sent whole.
    headers.remove(header::ACCEPT_RANGES);
    *response.body_mut() = if head {
        Body::empty()
    } else {
        Body::from(body)
    };
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
            compressed: Arc::default(),
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

    /// What a plain `cargo leptos build --release` writes: the files and no compressed
    /// siblings (the names as `hash-files` makes them, a lazily loaded part of the wasm among
    /// them), and wasm-bindgen's TypeScript declarations.
    fn plain_build(name: &str) -> (Arc<Site>, PathBuf, Vec<u8>) {
        let (site, root) = built_site(name);
        let pkg = root.join("pkg");
        // Not compressible by accident: a wasm-like mix of text and counters.
        let wasm: Vec<u8> = (0..40_000u32)
            .flat_map(|i| format!("fn{} ", i % 977).into_bytes())
            .collect();
        std::fs::write(
            pkg.join("split_people_1.AbCdEfGhIjKlMnOpQrSt_-.wasm"),
            &wasm,
        )
        .unwrap();
        std::fs::write(
            pkg.join("app.J1.js"),
            "export function run() {}\n".repeat(100),
        )
        .unwrap();
        std::fs::write(pkg.join("app.d.ts"), b"export function hydrate(): void;").unwrap();
        std::fs::write(pkg.join("app.d.AbCdEfGhIjKlMnOpQrSt_-.ts"), b"declare").unwrap();
        std::fs::write(root.join("robots.txt"), b"User-agent: *").unwrap();
        (site, root, wasm)
    }

    fn decoded(encoding: Option<&str>, body: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        match encoding {
            Some("br") => {
                brotli::Decompressor::new(body, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Some("gzip") => {
                flate2::read::GzDecoder::new(body)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            _ => out = body.to_vec(),
        }
        out
    }

    #[tokio::test]
    async fn without_precompressed_files_each_file_is_compressed_by_the_server_and_kept() {
        let (site, root, wasm) = plain_build("plain");
        let path = "/pkg/split_people_1.AbCdEfGhIjKlMnOpQrSt_-.wasm";
        for (accept, encoding) in [
            (Some("gzip, deflate, br"), Some("br")),
            (Some("gzip, br;q=0"), Some("gzip")),
            (Some("identity"), None),
            (None, None),
        ] {
            let headers: Vec<(&str, &str)> =
                accept.map(|a| ("accept-encoding", a)).into_iter().collect();
            let (status, h, got) = get(&site, path, &headers).await;
            assert_eq!(status, StatusCode::OK, "{accept:?}");
            assert_eq!(header(&h, "content-encoding"), encoding, "{accept:?}");
            assert_eq!(
                header(&h, "content-length"),
                Some(got.len().to_string().as_str())
            );
            assert_eq!(decoded(encoding, &got), wasm, "{accept:?}");
            assert_eq!(header(&h, "content-type"), Some("application/wasm"));
            assert_eq!(header(&h, "vary"), Some("accept-encoding"));
            assert_eq!(
                header(&h, "cache-control"),
                Some(IMMUTABLE),
                "a lazily loaded part is named after its content"
            );
            if encoding.is_some() {
                assert!(
                    got.len() * 4 < wasm.len(),
                    "{} of {}",
                    got.len(),
                    wasm.len()
                );
                assert_eq!(header(&h, "accept-ranges"), None);
            }
        }
        // Compressed once: the entry for the file is there, and a second request is served the
        // same bytes.
        assert_eq!(site.compressed.files(), 1);
        let (_, _, first) = get(&site, path, &[("accept-encoding", "br")]).await;
        let (_, _, second) = get(&site, path, &[("accept-encoding", "br")]).await;
        assert_eq!(first, second);
        assert_eq!(site.compressed.files(), 1);

        // HEAD tells the compressed length; a range is of the plain file.
        let request = Request::head(path).header("accept-encoding", "br");
        let response = service(site.clone(), not_found())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.headers()["content-encoding"], "br");
        assert_eq!(
            response.headers()["content-length"],
            first.len().to_string().as_str()
        );
        let (status, h, got) = get(
            &site,
            path,
            &[("range", "bytes=0-3"), ("accept-encoding", "br")],
        )
        .await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(header(&h, "content-encoding"), None);
        assert_eq!(got, &wasm[..4]);

        // The JS too; a file too small to be worth it goes out as it is.
        let (_, h, got) = get(&site, "/pkg/app.J1.js", &[("accept-encoding", "br")]).await;
        assert_eq!(header(&h, "content-encoding"), Some("br"));
        assert!(
            String::from_utf8(decoded(Some("br"), &got))
                .unwrap()
                .starts_with("export")
        );
        let (_, h, got) = get(&site, "/robots.txt", &[("accept-encoding", "br")]).await;
        assert_eq!(header(&h, "content-encoding"), None);
        assert_eq!(got, b"User-agent: *");
        let _ = std::fs::remove_dir_all(root);
    }

    #[tokio::test]
    async fn typescript_declarations_are_not_served() {
        let (site, root, _) = plain_build("typescript");
        for path in ["/pkg/app.d.ts", "/pkg/app.d.AbCdEfGhIjKlMnOpQrSt_-.ts"] {
            let (status, _, body) = get(&site, path, &[("accept-encoding", "br")]).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
            assert_eq!(body, b"the not-found page");
        }
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
        assert_eq!(
            hashed.cache_control("/pkg/split_inbox_77.AbCdEfGhIjKlMnOpQrSt_-.wasm"),
            IMMUTABLE
        );
        assert_eq!(
            hashed.cache_control("/pkg/__wasm_split.AbCdEfGhIjKlMnOpQrSt_-.js"),
            IMMUTABLE
        );
        assert_eq!(
            hashed.cache_control("/pkg/snippets/x-AbCdEfGhIjKlMnOpQrSt_-/inline0.js"),
            REVALIDATE
        );
        assert_eq!(hashed.cache_control("/pkg/app.short.wasm"), REVALIDATE);
        assert_eq!(hashed.cache_control("/favicon.svg"), PUBLIC_ASSET);
        assert_eq!(hashed.cache_control("/bgm/track1.wav"), PUBLIC_ASSET);
        assert_eq!(hashed.css_href(), "/pkg/app.C3.css");
        let plain = site(false);
        assert_eq!(plain.cache_control("/pkg/app.wasm"), REVALIDATE);
        assert_eq!(
            plain.cache_control("/pkg/split_inbox_77.AbCdEfGhIjKlMnOpQrSt_-.wasm"),
            REVALIDATE,
            "without hash-files no name is trusted to change with its content"
        );
        assert_eq!(plain.css_href(), "/pkg/app.css");
    }
}
