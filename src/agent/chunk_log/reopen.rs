//! Opening a session's file, new or not: numbering continues after the last complete line's
//! `sequence_number`, found by reading the file's tail, and a torn last line is closed.

use std::{
    fs::{File, OpenOptions},
    io::{self, BufWriter, Read, Seek, SeekFrom, Write},
    path::Path,
};

use serde::Deserialize;

use super::BUFFER_BYTES;

/// First tail read when reopening a file; grows ×8 while the last line is longer.
const TAIL_WINDOW: u64 = 64 * 1024;

/// Past this, give up on finding the last line and count lines instead (streaming, so a huge
/// last line costs time once, not memory).
const MAX_TAIL_WINDOW: u64 = 16 * 1024 * 1024;

/// Opens (or creates) a session file for appending; returns the writer and the next number.
pub(super) fn open(path: &Path) -> io::Result<(BufWriter<File>, u64)> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    let tail = read_tail(&mut file)?;
    let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
    if !tail.ends_with_newline {
        out.write_all(b"\n")?;
    }
    Ok((out, tail.last_sequence.saturating_add(1)))
}

/// What the end of an existing file says.
struct Tail {
    /// The number of the last line (0 for an empty file).
    last_sequence: u64,
    /// False when the last line was cut short (or the file is not ours).
    ends_with_newline: bool,
}

/// Just the number of a line; serde skips the rest (the chunk) without building it.
#[derive(Deserialize)]
struct Numbered {
    sequence_number: u64,
}

/// Reads backwards from the end until the last complete line with a `sequence_number`.
fn read_tail(file: &mut File) -> io::Result<Tail> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Tail {
            last_sequence: 0,
            ends_with_newline: true,
        });
    }
    let mut window = TAIL_WINDOW;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        Read::by_ref(file).take(len - start).read_to_end(&mut buf)?;
        let ends_with_newline = buf.last() == Some(&b'\n');
        // Complete lines end with a newline; when the window starts mid-file its first line may
        // be cut, so it does not count.
        let mut lines: Vec<&[u8]> = match buf.iter().rposition(|&b| b == b'\n') {
            Some(last) => buf[..last].split(|&b| b == b'\n').collect(),
            None => Vec::new(),
        };
        if start > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        if let Some(found) = lines
            .iter()
            .rev()
            .find_map(|line| serde_json::from_slice::<Numbered>(line).ok())
        {
            return Ok(Tail {
                last_sequence: found.sequence_number,
                ends_with_newline,
            });
        }
        if start == 0 || window >= MAX_TAIL_WINDOW {
            return Ok(Tail {
                last_sequence: count_lines(file)?,
                ends_with_newline,
            });
        }
        window = window.saturating_mul(8).min(MAX_TAIL_WINDOW);
    }
}

/// The number of newline-terminated lines (the fallback numbering).
fn count_lines(file: &mut File) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0; 64 * 1024];
    let mut lines = 0u64;
    loop {
        let read = match file.read(&mut buf) {
            Ok(0) => return Ok(lines),
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}
