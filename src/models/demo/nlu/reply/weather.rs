//! What `get_weather` did, in words.

use super::format::{clean_error, decimal, number, parenthesized, text};
use super::outcome::{Settled, Subject, declined, expired, refused, undecided};
use super::*;

pub(super) fn weather(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        Settled::Failed { output, .. } => *output,
        _ => None,
    };
    let place = output
        .and_then(|v| text(v, "location"))
        .or_else(|| text(&call.args, "location"));
    let place = match (lang, place) {
        (Lang::Ja, Some(p)) => lexicon::city_in_japanese(p).unwrap_or(p).to_string(),
        (_, Some(p)) => p.to_string(),
        (Lang::En, None) => "that city".to_string(),
        (Lang::Ja, None) => "その都市".to_string(),
    };
    let subject = Subject {
        en: format!("the weather lookup for {place}"),
        ja: format!("{place}の天気の取得"),
        nothing_en: "nothing was done",
        nothing_ja: "何も実行していません",
    };
    match settled {
        Settled::Done(v) => weather_report(lang, &place, v),
        Settled::Failed { error, .. } => {
            let error = clean_error(lang, &error);
            match lang {
                Lang::En => format!("I couldn't get the weather for {place}: {error}."),
                Lang::Ja => format!("{place}の天気を取得できませんでした（{error}）。"),
            }
        }
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

fn weather_report(lang: Lang, place: &str, v: &Value) -> String {
    let condition = text(v, "condition")
        .or_else(|| text(v, "description"))
        .map(|c| match lang {
            Lang::En => c.to_lowercase(),
            Lang::Ja => condition_in_japanese(c),
        });
    let temperature = number(v, "temperature_c")
        .or_else(|| number(v, "temperature"))
        .map(|t| format!("{}°C", decimal(t, 1)));
    let main: Vec<String> = condition.into_iter().chain(temperature).collect();
    if main.is_empty() {
        return match lang {
            Lang::En => format!(
                "I got a weather result for {place}, but it had no temperature or conditions."
            ),
            Lang::Ja => {
                format!("{place}の天気を取得しましたが、気温や天候の情報がありませんでした。")
            }
        };
    }
    let humidity = number(v, "humidity").map(|h| decimal(h, 0));
    let wind = number(v, "wind_kmh").map(|w| decimal(w, 1));
    let source = text(v, "source");
    let offline = source.is_some_and(|s| s.eq_ignore_ascii_case(lexicon::OFFLINE_SOURCE));
    let source_name = source.filter(|_| !offline).map(|s| {
        lexicon::WEATHER_SOURCES
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(s))
            .map_or(s, |(_, label)| label)
    });
    match lang {
        Lang::En => {
            let extras: Vec<String> = humidity
                .map(|h| format!("humidity {h}%"))
                .into_iter()
                .chain(wind.map(|w| format!("wind {w} km/h")))
                .collect();
            let extras = parenthesized(&extras.join(", "), " (", ")");
            let mut out = format!("Weather in {place}: {}{extras}.", main.join(", "));
            if offline {
                out.push_str(" This is offline sample data, not a live reading.");
            } else if let Some(name) = source_name {
                out.push_str(&format!(" Source: {name}."));
            }
            out
        }
        Lang::Ja => {
            let extras: Vec<String> = humidity
                .map(|h| format!("湿度{h}%"))
                .into_iter()
                .chain(wind.map(|w| format!("風速{w}km/h")))
                .collect();
            let extras = parenthesized(&extras.join("、"), "（", "）");
            let mut out = format!("{place}の天気: {}{extras}。", main.join("、"));
            if offline {
                out.push_str("※オフラインのサンプルデータで、実際の天気ではありません。");
            } else if let Some(name) = source_name {
                out.push_str(&format!("出典: {name}。"));
            }
            out
        }
    }
}

fn condition_in_japanese(condition: &str) -> String {
    let lower = condition.to_lowercase();
    lexicon::CONDITIONS_JA
        .iter()
        .find(|(en, _)| lower.contains(en))
        .map_or_else(|| condition.to_string(), |(_, ja)| ja.to_string())
}
