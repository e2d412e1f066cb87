//! What `get_location` did, in words.

use super::format::{around, classify, clean_error, decimal, number, pick, text};
use super::outcome::{Settled, Subject, declined, expired, refused, undecided};
use super::*;

pub(super) fn location(lang: Lang, settled: Settled) -> String {
    let subject = Subject {
        en: "sharing your location".to_string(),
        ja: "位置情報の共有".to_string(),
        nothing_en: "I didn't access it",
        nothing_ja: "位置情報は取得していません",
    };
    match settled {
        Settled::Done(v) => location_report(lang, v),
        Settled::Failed { error, .. } => match classify(&error) {
            Some(Failure::Refused) => pick(
                lang,
                "Your browser blocked location access (permission denied). Allow it in the site \
                 settings and ask again.",
                "ブラウザが位置情報へのアクセスをブロックしました（許可されていません）。\
                 サイトの設定で許可してから、もう一度お試しください。",
            )
            .to_string(),
            Some(Failure::TimedOut) => pick(
                lang,
                "Your browser couldn't determine your location in time. Please try again.",
                "ブラウザが時間内に現在地を取得できませんでした。もう一度お試しください。",
            )
            .to_string(),
            Some(Failure::Unavailable) => pick(
                lang,
                "Your browser couldn't determine your location (position unavailable).",
                "ブラウザが現在地を特定できませんでした（位置情報を利用できません）。",
            )
            .to_string(),
            _ => match lang {
                Lang::En => format!(
                    "I couldn't get your location: {}.",
                    clean_error(lang, &error)
                ),
                Lang::Ja => format!(
                    "現在地を取得できませんでした（{}）。",
                    clean_error(lang, &error)
                ),
            },
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

fn location_report(lang: Lang, v: &Value) -> String {
    let city = text(v, "city").map(|c| match lang {
        Lang::Ja => lexicon::city_in_japanese(c).unwrap_or(c).to_string(),
        Lang::En => format!("{c}{}", around(text(v, "country"), ", ", "")),
    });
    let coords = number(v, "latitude")
        .zip(number(v, "longitude"))
        .map(|(lat, lon)| (format!("{lat:.4}"), format!("{lon:.4}")));
    let accuracy = number(v, "accuracy").map(|a| decimal(a, 0));
    let accuracy = accuracy.as_deref();
    match (lang, city, coords) {
        (Lang::En, Some(city), Some((lat, lon))) => format!(
            "You're in {city} ({lat}, {lon}{}).",
            around(accuracy, ", accurate to about ", " m")
        ),
        (Lang::En, Some(city), None) => format!("You're in {city}."),
        (Lang::En, None, Some((lat, lon))) => format!(
            "You're at {lat}, {lon}{}.",
            around(accuracy, " (accurate to about ", " m)")
        ),
        (Lang::En, None, None) => "I got a location result, but it had no coordinates.".to_string(),
        (Lang::Ja, Some(city), Some((lat, lon))) => format!(
            "現在地は{city}です（緯度{lat}、経度{lon}{}）。",
            around(accuracy, "、誤差約", "m")
        ),
        (Lang::Ja, Some(city), None) => format!("現在地は{city}です。"),
        (Lang::Ja, None, Some((lat, lon))) => format!(
            "現在地は緯度{lat}、経度{lon}です{}。",
            around(accuracy, "（誤差約", "m）")
        ),
        (Lang::Ja, None, None) => {
            "位置情報を取得しましたが、座標が含まれていませんでした。".to_string()
        }
    }
}
