//! Reloading the policy file when it changes, and checking its rules again when the tools do.
//!
//! Polled (once a second) rather than watched with inotify: editors replace files in several
//! ways (write in place, write and rename, delete and create), a poll of the file's length and
//! modification time sees them all, and it costs one `stat` a second.

use std::{sync::Arc, time::Duration, time::SystemTime};

use super::{Policy, ToolFacts};
use crate::agent::{clock::Clock, tools::ToolRegistry};

/// How often the file is looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// What a file looked like when last loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
}

fn seen(path: &std::path::Path) -> Option<Seen> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Seen {
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// Follows the policy's file and the tool registry until the runtime is dropped. Does nothing
/// without a policy file.
pub fn watch(policy: Arc<Policy>, tools: Arc<ToolRegistry>, clock: Arc<dyn Clock>) {
    let Some(path) = policy.file().map(ToOwned::to_owned) else {
        return;
    };
    let weak = Arc::downgrade(&policy);
    drop(policy);
    tokio::spawn(async move {
        let mut last = seen(&path);
        let mut listed = tools.snapshot();
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(policy) = weak.upgrade() else {
                return;
            };
            let now = seen(&path);
            let current = tools.snapshot();
            if now != last {
                last = now;
                if policy
                    .reload(&ToolFacts::all(&tools), clock.now_ms())
                    .is_ok()
                    && let Err(e) = policy.keep_text(clock.now_ms()).await
                {
                    tracing::error!(error = %e.report(), "cannot keep the new policy's text for the audit log");
                }
                listed = current;
            } else if !Arc::ptr_eq(&listed, &current) {
                listed = current;
                policy.recheck(&ToolFacts::all(&tools));
            }
        }
    });
}
