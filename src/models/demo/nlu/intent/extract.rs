//! Stage 5: the slots of one fragment (city, amount, currency, recipients, description,
//! track) read from its tokens.

use super::fragments::View;
use super::tokens::Tok;
use super::*;

/// Builds the intent for `topic` from a fragment. `verbless` fragments borrowed their topic, so
/// a payment's recipient may simply be the first name in them ("…, Bob 40 dollars").
pub(super) fn extract(topic: Topic, view: &View, verbless: bool) -> Intent {
    match topic {
        Topic::Payment => payment(view, verbless),
        Topic::Weather => weather(view),
        Topic::Location => Intent::Location,
        Topic::Bgm => bgm(view),
        Topic::Capabilities => Intent::Capabilities,
        Topic::Greeting => Intent::Greeting,
    }
}

pub(super) fn payment(view: &View, verbless: bool) -> Intent {
    let amount = amount(view);
    let currency = amount
        .as_ref()
        .and_then(|a| a.currency)
        .or_else(|| {
            (0..view.len()).find_map(|k| match view.tok(k) {
                Some(Tok::Currency(code)) => Some(*code),
                _ => None,
            })
        })
        .unwrap_or(lexicon::DEFAULT_CURRENCY)
        .to_string();
    let mut recipients = recipients(view, verbless);
    if recipients.len() > 1 {
        return Intent::Clarify(Clarification::SeveralRecipients {
            recipients,
            amount: amount.map(|a| a.value),
            currency,
        });
    }
    match (amount, recipients.pop()) {
        (Some(a), Some(recipient)) => Intent::Payment {
            amount: a.value,
            currency,
            recipient,
            description: description(view, Some(a.at)),
        },
        (Some(a), None) => Intent::Clarify(Clarification::PaymentRecipient {
            amount: a.value,
            currency,
        }),
        (None, Some(recipient)) => Intent::Clarify(Clarification::PaymentAmount { recipient }),
        (None, None) => Intent::Clarify(Clarification::PaymentDetails),
    }
}

pub(super) struct Amount {
    pub(super) value: f64,
    pub(super) currency: Option<&'static str>,
    /// Token index of the number.
    pub(super) at: usize,
}

/// The payment amount: the first number with a currency next to it ("$50", "30 dollars",
/// "50ドル"), else the first number. A minus sign or "minus" in front makes it negative.
pub(super) fn amount(view: &View) -> Option<Amount> {
    let currency_at = |k: Option<usize>| match k.and_then(|k| view.tok(k)) {
        Some(Tok::Currency(code)) => Some(*code),
        _ => None,
    };
    let is_negation = |k: Option<usize>| {
        k.is_some_and(|k| {
            matches!(view.tok(k), Some(Tok::Minus))
                || lexicon::NEGATIVE_WORDS.contains(&view.word(k).unwrap_or(view.raw(k)))
        })
    };
    let mut first: Option<Amount> = None;
    for k in 0..view.len() {
        let Some(Tok::Num(x)) = view.tok(k) else {
            continue;
        };
        let prev = k.checked_sub(1);
        let prev2 = k.checked_sub(2);
        let prefix = currency_at(prev).or_else(|| {
            if matches!(prev.and_then(|p| view.tok(p)), Some(Tok::Minus)) {
                currency_at(prev2)
            } else {
                None
            }
        });
        let negative = is_negation(prev) || (currency_at(prev).is_some() && is_negation(prev2));
        let found = Amount {
            value: if negative { -x } else { *x },
            currency: prefix.or_else(|| currency_at(Some(k + 1))),
            at: k,
        };
        if found.currency.is_some() {
            return Some(found);
        }
        first.get_or_insert(found);
    }
    first
}

/// Who to pay, in order of how explicit the text is:
/// 1. the name before the last に/へ ("花子さんに", "Aliceに"),
/// 2. the name after "to" ("to Bob"),
/// 3. the name right after the verb ("pay Alice", "send Bob $5"),
/// 4. in a verbless fragment, its first name ("…, Bob 40 dollars").
///
/// Names joined by "and"/"と" are all returned, so the caller can ask how to split.
pub(super) fn recipients(view: &View, verbless: bool) -> Vec<String> {
    // The last に wins: in "ニューヨークにいる花子に" the recipient is next to the verb.
    for k in (0..view.len()).rev() {
        if view.is_particle(k, lexicon::RECIPIENT_PARTICLES) {
            let names = names_before(view, k);
            if !names.is_empty() {
                return names;
            }
        }
    }
    let verbs = |k: usize| {
        view.word(k).is_some_and(|w| {
            lexicon::SEND_VERBS.contains(&w)
                || lexicon::TRIGGERS
                    .iter()
                    .any(|(t, phrases)| *t == Topic::Payment && phrases.contains(&w))
        })
    };
    let after_word = (0..view.len())
        .filter(|&k| view.is_word_in(k, lexicon::RECIPIENT_WORDS))
        .chain((0..view.len()).filter(|&k| verbs(k)));
    for k in after_word {
        let names = names_after(view, k + 1);
        if !names.is_empty() {
            return names;
        }
    }
    if verbless {
        for k in 0..view.len() {
            let names = names_after(view, k);
            if !names.is_empty() {
                return names;
            }
        }
    }
    Vec::new()
}

/// Names starting at token `k` (after optional determiners), joined by "and", "," or "と".
pub(super) fn names_after(view: &View, mut k: usize) -> Vec<String> {
    while view.is_word_in(k, lexicon::DETERMINERS) {
        k += 1;
    }
    let mut names = Vec::new();
    while let Some((name, next)) = name_run(view, k) {
        names.push(name);
        match next {
            Some(joiner)
                if is_name_joiner(view, joiner) && name_run(view, joiner + 1).is_some() =>
            {
                k = joiner + 1
            }
            _ => break,
        }
    }
    names
}

/// A run of name tokens starting at `k`: (the name, the token after it and any honorific).
fn name_run(view: &View, k: usize) -> Option<(String, Option<usize>)> {
    let end = (k..view.len())
        .find(|&j| !view.is_name(j))
        .unwrap_or(view.len());
    if end == k {
        return None;
    }
    let after = if matches!(view.tok(end), Some(Tok::Honorific)) {
        end + 1
    } else {
        end
    };
    Some((
        view.slice(k..end).to_string(),
        (after < view.len()).then_some(after),
    ))
}

/// Names ending just before the particle at `k`, walking back over honorifics and joiners:
/// "AliceとBobに" gives [Alice, Bob].
pub(super) fn names_before(view: &View, k: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut end = k;
    loop {
        if end > 0 && matches!(view.tok(end - 1), Some(Tok::Honorific)) {
            end -= 1;
        }
        let start = (0..end).rev().take_while(|&j| view.is_name(j)).last();
        let Some(start) = start else { break };
        names.push(view.slice(start..end).to_string());
        match start.checked_sub(1) {
            Some(joiner) if is_name_joiner(view, joiner) => end = joiner,
            _ => break,
        }
    }
    names.reverse();
    names
}

fn is_name_joiner(view: &View, k: usize) -> bool {
    let raw = view.raw(k);
    lexicon::NAME_JOINERS.contains(&raw)
        && matches!(
            view.tok(k),
            Some(Tok::Word(_) | Tok::Punct(_) | Tok::Particle)
        )
}

/// What the payment is for: "for lunch" / "as a gift", or "ランチ代として". Stops before the
/// recipient or the amount, and drops trailing politeness ("for lunch please" → "lunch").
pub(super) fn description(view: &View, amount_at: Option<usize>) -> String {
    for k in 0..view.len() {
        if view.is_particle(k, lexicon::DESCRIPTION_PARTICLES) {
            let start = (0..k)
                .rev()
                .take_while(|&j| {
                    matches!(view.tok(j), Some(Tok::Cjk | Tok::Word(_)))
                        || view.is_particle(j, lexicon::NOUN_LINKERS)
                })
                .last();
            if let Some(start) = start {
                return view.slice(start..k).to_string();
            }
        }
    }
    for k in 0..view.len() {
        if !view.is_word_in(k, lexicon::DESCRIPTION_WORDS) {
            continue;
        }
        let start = k + 1;
        let mut end = (start..view.len())
            .find(|&j| {
                view.is_word_in(j, lexicon::RECIPIENT_WORDS)
                    || matches!(view.tok(j), Some(Tok::Currency(_)))
                    || Some(j) == amount_at
            })
            .unwrap_or(view.len());
        while end > start
            && (view.is_word_in(end - 1, lexicon::TRAILING_FILLERS)
                || matches!(view.tok(end - 1), Some(Tok::Punct(_))))
        {
            end -= 1;
        }
        if end > start {
            return view.slice(start..end).to_string();
        }
    }
    String::new()
}

pub(super) fn weather(view: &View) -> Intent {
    match weather_location(view) {
        Some(location) => Intent::Weather { location },
        None => Intent::Clarify(Clarification::WeatherLocation),
    }
}

/// The city to look up, most reliable first:
/// 1. a city from the lexicon anywhere (canonical English name);
/// 2. a name after "in"/"for"/"at" ("weather in Springfield");
/// 3. a name before の/は/で ahead of the weather word ("札幌の天気");
/// 4. a name right before the weather word ("springfield weather").
fn weather_location(view: &View) -> Option<String> {
    if let Some(city) = known_city(view) {
        return Some(city.to_string());
    }
    for k in 0..view.len() {
        if view.is_word_in(k, lexicon::LOCATION_WORDS) {
            let mut start = k + 1;
            while view.is_word_in(start, lexicon::DETERMINERS) {
                start += 1;
            }
            if let Some((name, _)) = name_run(view, start) {
                return Some(title_case(&name));
            }
        }
    }
    let trigger = lexicon::TRIGGERS
        .iter()
        .filter(|(t, _)| *t == Topic::Weather)
        .flat_map(|(_, phrases)| phrases.iter())
        .filter_map(|p| view.find(p).map(|(range, _)| range.start))
        .min()?;
    let before_particle = (1..trigger)
        .rev()
        .find(|&k| view.is_particle(k, lexicon::LOCATION_PARTICLES) && view.is_name(k - 1));
    if let Some(k) = before_particle {
        return Some(title_case(view.raw(k - 1)));
    }
    let start = (0..trigger).rev().take_while(|&j| view.is_name(j)).last()?;
    Some(title_case(view.slice(start..trigger)))
}

/// The leftmost (then longest) city alias in the fragment, as its canonical name.
pub(super) fn known_city(view: &View) -> Option<&'static str> {
    lexicon::CITIES
        .iter()
        .flat_map(|(name, aliases)| aliases.iter().map(move |a| (*name, *a)))
        .filter_map(|(name, alias)| view.find(alias).map(|(_, at)| (at, alias.len(), name)))
        .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, name)| name)
}

/// "springfield" → "Springfield"; words with capitals already ("McAllen") are left alone, as is
/// non-Latin text.
fn title_case(name: &str) -> String {
    name.split(' ')
        .map(|word| {
            if word.chars().any(char::is_uppercase) {
                return word.to_string();
            }
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn bgm(view: &View) -> Intent {
    let right_after_trigger = lexicon::TRIGGERS
        .iter()
        .filter(|(t, _)| *t == Topic::Bgm)
        .flat_map(|(_, phrases)| phrases.iter())
        .filter_map(|p| view.find(p))
        .find_map(|(range, _)| match view.tok(range.end) {
            Some(Tok::Num(n)) => Some(*n),
            _ => None,
        });
    let any_number = || {
        (0..view.len()).find_map(|k| match view.tok(k) {
            Some(Tok::Num(n)) => Some(*n),
            _ => None,
        })
    };
    let requested = right_after_trigger
        .or_else(|| ordinal(view))
        .or_else(any_number);
    match requested {
        None => Intent::Clarify(Clarification::BgmTrack),
        Some(n) => match lexicon::BGM_TRACKS.iter().find(|&&t| f64::from(t) == n) {
            Some(&track) => Intent::ChangeBgm { track },
            None => Intent::Clarify(Clarification::TrackOutOfRange { requested: n }),
        },
    }
}

pub(super) fn ordinal(view: &View) -> Option<f64> {
    (0..view.len()).find_map(|k| {
        let w = view.word(k)?;
        lexicon::ORDINALS
            .iter()
            .find(|(name, _)| *name == w)
            .map(|(_, v)| f64::from(*v))
    })
}
