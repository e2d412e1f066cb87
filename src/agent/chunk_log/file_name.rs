//! Where the file of a session is: a client's session id as a safe, distinct file name (see
//! "Where the file of a session is" in the parent module's docs).

/// The extension of every session file.
const EXTENSION: &str = ".jsonl";

/// Names whose encoding is longer than this are shortened and hashed (well under the 255 bytes
/// most file systems allow, leaving room for the extension).
const MAX_STEM: usize = 120;

/// How much of a too-long encoding a hashed name keeps.
const KEPT_BEFORE_HASH: usize = 96;

/// The bytes a file name keeps: lower-case letters, digits, `-` and `_`; upper-case letters are
/// escaped so that ids differing only in case stay apart on case-insensitive file systems.
const FILE_NAME: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .add(b'A')
    .add(b'B')
    .add(b'C')
    .add(b'D')
    .add(b'E')
    .add(b'F')
    .add(b'G')
    .add(b'H')
    .add(b'I')
    .add(b'J')
    .add(b'K')
    .add(b'L')
    .add(b'M')
    .add(b'N')
    .add(b'O')
    .add(b'P')
    .add(b'Q')
    .add(b'R')
    .add(b'S')
    .add(b'T')
    .add(b'U')
    .add(b'V')
    .add(b'W')
    .add(b'X')
    .add(b'Y')
    .add(b'Z')
    .remove(b'-')
    .remove(b'_');

/// The file name of `session`'s log: see "Where the file of a session is" in the module docs.
pub fn file_name(session: &str) -> String {
    if session.is_empty() {
        return format!("~empty{EXTENSION}");
    }
    let mut stem = percent_encoding::percent_encode(session.as_bytes(), FILE_NAME).to_string();
    if stem.len() > MAX_STEM {
        // Cut on an escape boundary, never inside `%XX`.
        let bytes = stem.as_bytes();
        let mut end = 0;
        while end < bytes.len() {
            let width = if bytes[end] == b'%' { 3 } else { 1 };
            if end + width > KEPT_BEFORE_HASH {
                break;
            }
            end += width;
        }
        stem = format!("{}~{:016x}", &stem[..end], fnv1a64(session.as_bytes()));
    }
    stem.push_str(EXTENSION);
    stem
}

/// 64-bit FNV-1a: stable across Rust versions (unlike `DefaultHasher`), so a long id maps to
/// the same file after an upgrade. Not collision-resistant against a crafted id; the worst a
/// collision does is put two debug logs in one file.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
