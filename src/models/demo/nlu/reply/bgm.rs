//! What `change_bgm` did, in words.

use super::format::{around, classify, clean_error, decimal, field, number, pick};
use super::outcome::{Settled, Subject, declined, expired, refused, undecided};
use super::*;

pub(super) fn bgm(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        _ => None,
    };
    let track = output
        .and_then(|v| number(v, "track"))
        .or_else(|| number(&call.args, "track"))
        .map(|t| decimal(t, 0));
    let track = track.as_deref();
    let subject = Subject {
        en: format!("switching the music{}", around(track, " to track ", "")),
        ja: format!("{}BGM変更", around(track, "トラック", "への")),
        nothing_en: "nothing was changed",
        nothing_ja: "BGMは変更していません",
    };
    match settled {
        Settled::Done(v) => {
            let playing = field(v, "playing").and_then(Value::as_bool);
            match (lang, track, playing) {
                (Lang::En, Some(t), Some(false)) => format!("Track {t} is selected but not playing."),
                (Lang::En, Some(t), _) => format!("Now playing track {t}."),
                (Lang::En, None, _) => "The music was changed.".to_string(),
                (Lang::Ja, Some(t), Some(false)) => {
                    format!("トラック{t}を選択しましたが、再生されていません。")
                }
                (Lang::Ja, Some(t), _) => format!("BGMをトラック{t}に切り替えました。"),
                (Lang::Ja, None, _) => "BGMを切り替えました。".to_string(),
            }
        }
        Settled::Failed { error, .. } => match (classify(&error), lang) {
            (Some(Failure::AudioBlocked), _) => pick(
                lang,
                "Your browser blocked audio playback. Click anywhere on the page, then ask again.",
                "ブラウザが音声の再生をブロックしました。ページをクリックしてから、もう一度お試しください。",
            )
            .to_string(),
            (_, Lang::En) => format!(
                "I couldn't switch the music{}: {}.",
                around(track, " to track ", ""),
                clean_error(lang, &error)
            ),
            (_, Lang::Ja) => format!(
                "BGMを{}切り替えられませんでした（{}）。",
                around(track, "トラック", "に"),
                clean_error(lang, &error)
            ),
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}
