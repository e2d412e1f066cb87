//! One tool outcome, settled (failures inside outputs brought to the surface), and the
//! sentences every tool shares: declined, refused, undecided, expired; tools without words of
//! their own.

use super::bgm::bgm;
use super::format::{around, clean_error, text};
use super::location::location;
use super::payment::payment;
use super::weather::weather;
use super::*;

/// An [`Outcome`] with failures hidden inside successful outputs brought to the surface: an
/// output with `"success": false` or an `error` field is still a failure. An error message is
/// what the tool or the browser said (e.g. "Insufficient funds", "User denied Geolocation"); an
/// interrupted call reads as the failure "interrupted".
pub(super) enum Settled<'a> {
    Done(&'a Value),
    Failed {
        error: String,
        output: Option<&'a Value>,
    },
    /// Denied, with the reason, by someone other than the person (their name) or by them.
    Denied(Option<&'a str>, Option<&'a str>),
    Expired,
    /// A policy rule refused it (its reason).
    Refused(&'a str),
    /// The person set it aside without deciding, or wrote again before answering.
    Undecided,
}

fn settle(outcome: &Outcome) -> Settled<'_> {
    match outcome {
        Outcome::Output { output } => {
            let succeeded = output.get("success").and_then(Value::as_bool);
            let error = text(output, "error");
            if succeeded == Some(false) || (succeeded.is_none() && error.is_some()) {
                Settled::Failed {
                    error: error.unwrap_or_default().to_string(),
                    output: Some(output),
                }
            } else {
                Settled::Done(output)
            }
        }
        Outcome::Error { message } => Settled::Failed {
            error: message.clone(),
            output: None,
        },
        Outcome::Interrupted => Settled::Failed {
            error: "interrupted".into(),
            output: None,
        },
        Outcome::Denied { reason, by } => Settled::Denied(
            reason.as_deref().map(str::trim).filter(|r| !r.is_empty()),
            by.as_deref(),
        ),
        Outcome::Expired => Settled::Expired,
        Outcome::DeniedByRule { reason, .. } => Settled::Refused(reason),
        Outcome::Dismissed | Outcome::Superseded => Settled::Undecided,
    }
}

pub(super) fn describe(lang: Lang, call: &ToolOutcome) -> String {
    let settled = settle(&call.outcome);
    match call.tool.as_str() {
        lexicon::GET_WEATHER => weather(lang, call, settled),
        lexicon::PROCESS_PAYMENT => payment(lang, call, settled),
        lexicon::GET_LOCATION => location(lang, settled),
        lexicon::CHANGE_BGM => bgm(lang, call, settled),
        _ => other_tool(lang, call, settled),
    }
}

/// What a call was about, for the sentences every tool shares (declined, expired).
pub(super) struct Subject {
    pub(super) en: String,
    pub(super) ja: String,
    /// What did not happen, said after "so": "no money was sent".
    pub(super) nothing_en: &'static str,
    pub(super) nothing_ja: &'static str,
}

/// `by`: the approver who denied it, when it was not the person (who must not hear that they
/// declined it).
pub(super) fn declined(
    lang: Lang,
    subject: &Subject,
    reason: Option<&str>,
    by: Option<&str>,
) -> String {
    match (lang, by) {
        (Lang::En, Some(by)) => format!(
            "{by} denied {}, so {}.{}",
            subject.en,
            subject.nothing_en,
            around(reason, " Their reason: “", "”.")
        ),
        (Lang::Ja, Some(by)) => format!(
            "{}は{by}さんに拒否されたため、{}{}。",
            subject.ja,
            subject.nothing_ja,
            around(reason, "（理由:「", "」）")
        ),
        (Lang::En, None) => format!(
            "You declined {}, so {}.{}",
            subject.en,
            subject.nothing_en,
            around(reason, " Your reason: “", "”.")
        ),
        (Lang::Ja, None) => format!(
            "{}は拒否されたため、{}{}。",
            subject.ja,
            subject.nothing_ja,
            around(reason, "（理由:「", "」）")
        ),
    }
}

pub(super) fn refused(lang: Lang, subject: &Subject, reason: &str) -> String {
    match lang {
        Lang::En => format!(
            "The organisation's policy does not allow {}, so {}. {}",
            subject.en,
            subject.nothing_en,
            reason.trim()
        ),
        Lang::Ja => format!(
            "{}はポリシーで許可されていないため、{}。{}",
            subject.ja,
            subject.nothing_ja,
            reason.trim()
        ),
    }
}

pub(super) fn undecided(lang: Lang, subject: &Subject) -> String {
    match lang {
        Lang::En => format!(
            "You haven't decided on {} yet, so {}. Ask me again from its card when you're ready.",
            subject.en, subject.nothing_en
        ),
        Lang::Ja => format!(
            "{}はまだ決定されていないため、{}。準備ができたらカードからもう一度依頼してください。",
            subject.ja, subject.nothing_ja
        ),
    }
}

pub(super) fn expired(lang: Lang, subject: &Subject) -> String {
    match lang {
        Lang::En => format!(
            "The approval request for {} timed out, so {}.",
            subject.en, subject.nothing_en
        ),
        Lang::Ja => format!(
            "{}は承認の期限が切れたため、{}。",
            subject.ja, subject.nothing_ja
        ),
    }
}

/// Tools this module has no words for still get an honest, if plain, sentence.
fn other_tool(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let tool = call.tool.as_str();
    let subject = Subject {
        en: format!("the “{tool}” call"),
        ja: format!("「{tool}」の実行"),
        nothing_en: "nothing was done",
        nothing_ja: "何も実行していません",
    };
    match settled {
        Settled::Done(_) => match lang {
            Lang::En => format!("The “{tool}” call finished."),
            Lang::Ja => format!("「{tool}」を実行しました。"),
        },
        Settled::Failed { error, .. } => match lang {
            Lang::En => format!("The “{tool}” call failed: {}.", clean_error(lang, &error)),
            Lang::Ja => format!(
                "「{tool}」の実行に失敗しました（{}）。",
                clean_error(lang, &error)
            ),
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}
