//! `countersign audit verify <export.jsonl|receipt.json> [--key HEX] [--checkpoints FILE]…`:
//! the checks of [`super::verify`], offline. `--key` is the server's public key as published
//! (`/.well-known/countersign-audit-key`), which the file's signatures must be made with;
//! `--checkpoints` files hold checkpoints kept elsewhere (one JSON object a line, as
//! `/api/audit/checkpoints` sends them), which the chain must still match.
//!
//! Exit codes: 0 the file proves what it says, 1 problems found (a line each), 2 the input
//! cannot be used.

use std::path::Path;

use super::{
    checkpoint::Checkpoint,
    verify::{Trusted, verify},
};

/// What the command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub output: String,
    pub code: u8,
}

const USAGE: &str = "usage: countersign audit verify <export.jsonl|receipt.json> [--key HEX] \
                     [--checkpoints FILE]...";

fn unusable(message: impl std::fmt::Display) -> Report {
    Report {
        output: format!("countersign audit verify: {message}\n"),
        code: 2,
    }
}

/// Runs `countersign audit <args>`.
pub fn run(args: &[String]) -> Report {
    let [cmd, file, rest @ ..] = args else {
        return unusable(USAGE);
    };
    if cmd != "verify" {
        return unusable(USAGE);
    }
    let mut trusted = Trusted::default();
    let mut options = rest.iter();
    while let Some(option) = options.next() {
        let Some(value) = options.next() else {
            return unusable(format!("{option} needs a value\n{USAGE}"));
        };
        match option.as_str() {
            "--key" => trusted.key = Some(value.trim().to_owned()),
            "--checkpoints" => match checkpoints(Path::new(value)) {
                Ok(mut more) => trusted.checkpoints.append(&mut more),
                Err(e) => return unusable(e),
            },
            _ => return unusable(format!("unknown option {option}\n{USAGE}")),
        }
    }
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => return unusable(format!("cannot read {file}: {e}")),
    };
    match verify(&text, &trusted) {
        Err(e) => unusable(format!("{file}: {e}")),
        Ok(report) => {
            let mut output = String::new();
            for problem in &report.problems {
                output.push_str(problem);
                output.push('\n');
            }
            if report.problems.is_empty() {
                output.push_str(&format!("{file}: ok\n"));
            } else {
                output.push_str(&format!("{file}: {} problem(s)\n", report.problems.len()));
            }
            for line in &report.checked {
                output.push_str(&format!("  {line}\n"));
            }
            Report {
                output,
                code: u8::from(!report.problems.is_empty()),
            }
        }
    }
}

/// Checkpoints kept elsewhere: one a line, bare or as `{"checkpoint": …}`.
fn checkpoints(path: &Path) -> Result<Vec<Checkpoint>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let value: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
            let value = value.get("checkpoint").cloned().unwrap_or(value);
            serde_json::from_value(value)
                .map_err(|e| format!("{} line {}: not a checkpoint: {e}", path.display(), i + 1))
        })
        .collect()
}
