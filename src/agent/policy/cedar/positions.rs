//! Where in the policy file a problem is: byte offsets as lines and columns, and the rule a
//! syntax error is in.

use std::collections::BTreeMap;

use miette::Diagnostic;

use super::RuleInfo;
use crate::agent::policy::PolicyProblem;

/// Where a diagnostic about rule `id` points: its first label, else the rule's line.
pub(super) fn rule_position(
    rules: &BTreeMap<String, RuleInfo>,
    id: &str,
    diagnostic: &dyn Diagnostic,
    lines: &LineIndex,
    text: &str,
) -> (usize, usize) {
    diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset())
        .filter(|offset| *offset < text.len())
        .map(|offset| lines.position(offset))
        .unwrap_or_else(|| rules.get(id).map_or((0, 0), |r| (r.line, 1)))
}

/// Byte offsets to 1-based lines and columns.
pub(super) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(super) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|start| *start <= offset);
        let start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        (line, offset - start + 1)
    }

    /// A parse error as a problem, naming the nearest `@id` before it.
    pub(super) fn problem(
        &self,
        text: &str,
        error: &dyn Diagnostic,
        rule: Option<&str>,
    ) -> PolicyProblem {
        let offset = error
            .labels()
            .and_then(|mut labels| labels.next())
            .map(|l| l.offset())
            .unwrap_or(0)
            .min(text.len());
        let (line, column) = self.position(offset);
        let nearest = rule
            .map(str::to_owned)
            .or_else(|| nearest_id(&text[..offset]));
        let mut problem = PolicyProblem::at(nearest.as_deref(), line, column, error.to_string());
        problem.help = error.help().map(|h| h.to_string());
        problem
    }
}

/// The last `@id("…")` in `before`: the rule a syntax error is in (or right after).
fn nearest_id(before: &str) -> Option<String> {
    let at = before.rfind("@id(")?;
    let rest = &before[at + 4..];
    let open = rest.find('"')?;
    let close = rest[open + 1..].find('"')?;
    Some(rest[open + 1..open + 1 + close].to_owned())
}
