//! Stage 4: a clause's tokens cut into fragments (one tool call each), topics lent between
//! neighbours, and the view on tokens that extraction reads.

use super::extract::{description, extract, known_city, names_after, names_before, ordinal};
use super::tokens::{Tok, Token, is_hiragana, tokenize};
use super::*;

/// A window on some tokens of one clause, with the lookups extraction needs.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub(super) text: &'a str,
    pub(super) toks: &'a [Token],
    /// Per token: could it be (part of) a name? Computed once per clause by
    /// [`token_is_name`], because extraction asks this many times per token.
    pub(super) names: &'a [bool],
}

impl<'a> View<'a> {
    pub(super) fn len(&self) -> usize {
        self.toks.len()
    }

    pub(super) fn tok(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(k).map(|t| &t.tok)
    }

    pub(super) fn word(&self, k: usize) -> Option<&'a str> {
        match self.tok(k) {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        }
    }

    pub(super) fn raw(&self, k: usize) -> &'a str {
        self.toks.get(k).map_or("", |t| &self.text[t.span.clone()])
    }

    pub(super) fn is_particle(&self, k: usize, set: &[&str]) -> bool {
        matches!(self.tok(k), Some(Tok::Particle)) && set.contains(&self.raw(k))
    }

    pub(super) fn is_word_in(&self, k: usize, set: &[&str]) -> bool {
        self.word(k).is_some_and(|w| set.contains(&w))
    }

    /// The original text of tokens `range`, spacing and case preserved.
    pub(super) fn slice(&self, range: Range<usize>) -> &'a str {
        match (
            self.toks.get(range.start),
            range.end.checked_sub(1).and_then(|e| self.toks.get(e)),
        ) {
            (Some(first), Some(last)) if range.start < range.end => {
                &self.text[first.span.start..last.span.end]
            }
            _ => "",
        }
    }

    fn byte_range(&self) -> Range<usize> {
        match (self.toks.first(), self.toks.last()) {
            (Some(first), Some(last)) => first.span.start..last.span.end,
            _ => 0..0,
        }
    }

    /// Where `phrase` occurs: (token range, byte offset). ASCII phrases match whole words,
    /// others match as substrings (see the lexicon's conventions).
    pub(super) fn find(&self, phrase: &str) -> Option<(Range<usize>, usize)> {
        if phrase.is_ascii() {
            let words: Vec<&str> = phrase.split_whitespace().collect();
            let n = words.len();
            (0..self.len())
                .find(|&k| (0..n).all(|j| self.word(k + j) == Some(words[j])))
                .map(|k| (k..k + n, self.toks[k].span.start))
        } else {
            let whole = self.byte_range();
            let at = whole.start + self.text[whole.clone()].find(phrase)?;
            let end = at + phrase.len();
            let first = self.toks.iter().position(|t| t.span.end > at)?;
            let last = self.toks.iter().rposition(|t| t.span.start < end)?;
            Some((first..last + 1, at))
        }
    }

    fn contains_any(&self, phrases: &[&str]) -> bool {
        phrases.iter().any(|p| self.find(p).is_some())
    }

    /// Could token `k` be (part of) a person's or place's name?
    pub(super) fn is_name(&self, k: usize) -> bool {
        self.names.get(k).copied().unwrap_or(false)
    }

    fn has_number(&self) -> bool {
        (0..self.len()).any(|k| matches!(self.tok(k), Some(Tok::Num(_))))
    }

    fn sub(&self, range: Range<usize>) -> View<'a> {
        View {
            text: self.text,
            toks: &self.toks[range.clone()],
            names: &self.names[range],
        }
    }
}

/// Whether token `k` of a clause could be (part of) a name: a Latin word with no job in the
/// grammar, or a Japanese noun. Japanese verbs and adjectives end in hiragana; names rarely do,
/// unless an honorific follows ("はなこさん").
fn token_is_name(text: &str, toks: &[Token], k: usize) -> bool {
    match toks.get(k).map(|t| &t.tok) {
        Some(Tok::Word(w)) => !lexicon::is_reserved_word(w),
        Some(Tok::Cjk) => {
            let word = toks.get(k).map_or("", |t| &text[t.span.clone()]);
            let noun_like = word.chars().next_back().is_some_and(|c| !is_hiragana(c))
                || matches!(toks.get(k + 1).map(|t| &t.tok), Some(Tok::Honorific));
            noun_like && !lexicon::is_reserved_japanese(word)
        }
        _ => false,
    }
}

pub(super) fn understand_clause(clause: &str, lang: Lang) -> Vec<Intent> {
    let toks = tokenize(clause);
    let names: Vec<bool> = (0..toks.len())
        .map(|k| token_is_name(clause, &toks, k))
        .collect();
    let whole = View {
        text: clause,
        toks: &toks,
        names: &names,
    };
    let mut frags: Vec<Fragment> = split_into_fragments(&whole)
        .into_iter()
        .map(|range| Fragment {
            topics: topics(&whole.sub(range.clone())),
            range,
            borrowed: None,
        })
        .collect();
    lend_topics(&whole, &mut frags, lang);

    let mut intents: Vec<Intent> = Vec::new();
    for frag in &frags {
        let view = whole.sub(frag.range.clone());
        let intent = fragment_intent(&whole, frag).map(|(_, intent)| intent);
        for intent in intent.into_iter().flat_map(|i| split_each(i, &view)) {
            if !intents.contains(&intent) {
                intents.push(intent);
            }
        }
    }
    intents
}

/// "Send $5 each to Alice and Bob" / "花子と太郎に10ドルずつ": with "each", one amount for
/// several people is no longer ambiguous, so it becomes one payment per person.
fn split_each(intent: Intent, view: &View) -> Vec<Intent> {
    match intent {
        Intent::Clarify(Clarification::SeveralRecipients {
            recipients,
            amount: Some(amount),
            currency,
        }) if view.contains_any(lexicon::EACH_WORDS) => {
            let description = description(view, None);
            recipients
                .into_iter()
                .map(|recipient| Intent::Payment {
                    amount,
                    currency: currency.clone(),
                    recipient,
                    description: description.clone(),
                })
                .collect()
        }
        other => vec![other],
    }
}

/// A stretch of one clause that asks for one thing.
struct Fragment {
    /// Token range in the clause.
    pub(super) range: Range<usize>,
    /// Topics its own words trigger, in table order.
    topics: Vec<Topic>,
    /// The topic taken from a neighbour when it has no trigger of its own.
    borrowed: Option<Topic>,
}

/// Cuts a clause at parallel separators. Separator tokens belong to no fragment; empty
/// fragments are dropped.
fn split_into_fragments(view: &View) -> Vec<Range<usize>> {
    let is_separator = |k: usize| match view.tok(k) {
        Some(Tok::Punct(c)) => lexicon::PARALLEL_PUNCT.contains(c),
        Some(Tok::Word(w)) => lexicon::PARALLEL_WORDS.contains(&w.as_str()),
        Some(Tok::Particle) => lexicon::PARALLEL_PARTICLES.contains(&view.raw(k)),
        _ => false,
    };
    let mut out = Vec::new();
    let mut start = 0;
    for k in 0..=view.len() {
        if k == view.len() || is_separator(k) {
            if k > start {
                out.push(start..k);
            }
            start = k + 1;
        }
    }
    out
}

/// The topics a fragment's own words trigger. "send"/"give"/"送って" count as a payment only
/// when money is mentioned too.
fn topics(view: &View) -> Vec<Topic> {
    let mut out: Vec<Topic> = lexicon::TRIGGERS
        .iter()
        .filter(|(_, phrases)| view.contains_any(phrases))
        .map(|(topic, _)| *topic)
        .collect();
    if !out.contains(&Topic::Payment)
        && view.contains_any(lexicon::SEND_VERBS)
        && mentions_money(view)
    {
        out.insert(0, Topic::Payment);
    }
    out
}

/// A currency, a money word, or a number that is not counting something ("send 20 to Bob"
/// yes, "send 5 messages to Bob" no).
fn mentions_money(view: &View) -> bool {
    view.contains_any(lexicon::MONEY_WORDS)
        || (0..view.len()).any(|k| match view.tok(k) {
            Some(Tok::Currency(_)) => true,
            Some(Tok::Num(_)) => {
                !matches!(view.tok(k + 1), Some(Tok::Word(_))) || !view.is_name(k + 1)
            }
            _ => false,
        })
}

/// Fragments without a tool topic of their own borrow one from the nearest neighbour that has
/// one, looking first where the verb usually is (before in English, after in Japanese).
///
/// A borrowing fragment becomes its own request ("…, $20 to Bob") unless it would add to its
/// neighbour rather than stand beside it; then it is glued back on. That happens when it is too
/// thin to be a request ("for lunch and drinks" stays one description, "to Alice and Bob" one
/// list of names), or when the neighbour is itself incomplete and this fragment completes it
/// ("Pay Alice and Bob 30 dollars", "お天気はどう？東京"). A fragment that names its own
/// recipient ("Aliceに…", "… to Bob") is never glued, so no name is silently dropped.
fn lend_topics(whole: &View, frags: &mut Vec<Fragment>, lang: Lang) {
    let order: Vec<usize> = match lang {
        Lang::En => (0..frags.len()).collect(),
        Lang::Ja => (0..frags.len()).rev().collect(),
    };
    let mut glued: Vec<usize> = Vec::new();
    for i in order {
        let view = whole.sub(frags[i].range.clone());
        if !frags[i].topics.is_empty() || !has_content(&view) {
            continue;
        }
        let is_head = |j: usize| {
            let f: &Fragment = &frags[j];
            !glued.contains(&j) && (f.borrowed.is_some() || f.topics.iter().any(|t| t.is_tool()))
        };
        let before = (0..i).rev().find(|&j| is_head(j));
        let after = (i + 1..frags.len()).find(|&j| is_head(j));
        let head = match lang {
            Lang::En => before.or(after),
            Lang::Ja => after.or(before),
        };
        let Some(h) = head else { continue };
        let Some((topic, head_intent)) = fragment_intent(whole, &frags[h]) else {
            continue;
        };
        let completes_head = matches!(head_intent, Intent::Clarify(_));
        let glue = !names_own_recipient(&view) && (completes_head || !stands_alone(topic, &view));
        if glue {
            let range = &frags[i].range;
            let merged = frags[h].range.start.min(range.start)..frags[h].range.end.max(range.end);
            frags[h].range = merged;
            glued.push(i);
        } else {
            frags[i].borrowed = Some(topic);
        }
    }
    let mut index = 0;
    frags.retain(|_| {
        let keep = !glued.contains(&index);
        index += 1;
        keep
    });
}

/// The topic and intent of a fragment as it stands now.
fn fragment_intent(whole: &View, frag: &Fragment) -> Option<(Topic, Intent)> {
    let view = whole.sub(frag.range.clone());
    match frag.borrowed {
        Some(topic) => Some((topic, extract(topic, &view, true))),
        None => best_intent(&view, &frag.topics),
    }
}

/// Whether a fragment has its own recipient marker with a name: "to Bob", "Aliceに".
fn names_own_recipient(view: &View) -> bool {
    (0..view.len()).any(|k| {
        (view.is_word_in(k, lexicon::RECIPIENT_WORDS) && !names_after(view, k + 1).is_empty())
            || (view.is_particle(k, lexicon::RECIPIENT_PARTICLES)
                && !names_before(view, k).is_empty())
    })
}

/// Whether a verbless fragment carries enough to be its own request of `topic`.
fn stands_alone(topic: Topic, view: &View) -> bool {
    match topic {
        Topic::Payment => view.has_number(),
        Topic::Weather => known_city(view).is_some() || (0..view.len()).any(|k| view.is_name(k)),
        Topic::Bgm => view.has_number() || ordinal(view).is_some(),
        Topic::Location | Topic::Capabilities | Topic::Greeting => false,
    }
}

/// Whether a fragment says anything beyond filler ("please", "thanks", "教えて").
fn has_content(view: &View) -> bool {
    (0..view.len())
        .any(|k| matches!(view.tok(k), Some(Tok::Num(_) | Tok::Currency(_))) || view.is_name(k))
        || known_city(view).is_some()
}

/// The intent a fragment most plausibly asks for: the first complete request among its tool
/// topics, else the first that needs a question, else small talk.
fn best_intent(view: &View, topics: &[Topic]) -> Option<(Topic, Intent)> {
    let candidates: Vec<(Topic, Intent)> = topics
        .iter()
        .filter(|t| t.is_tool())
        .map(|&t| (t, extract(t, view, false)))
        .collect();
    if let Some(pos) = candidates
        .iter()
        .position(|(_, i)| !matches!(i, Intent::Clarify(_)))
    {
        return candidates.into_iter().nth(pos);
    }
    if let Some(first) = candidates.into_iter().next() {
        return Some(first);
    }
    [Topic::Capabilities, Topic::Greeting]
        .into_iter()
        .find(|t| topics.contains(t))
        .map(|t| (t, extract(t, view, false)))
}
