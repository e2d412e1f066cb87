//! What the demo model can hear: a JSGF grammar for the recogniser, written from the same
//! tables the parser reads (`super::lexicon`), so what the recogniser accepts is what the demo
//! understands (a test below holds the two together), and the written form of what was heard.
//!
//! Speech has no spelling, so the grammar is English only and closed: payments to the
//! [`SPOKEN_NAMES`](super::lexicon::SPOKEN_NAMES), the weather in a known city, where am I,
//! the music, small talk, and the [`SPOKEN_ANSWERS`](super::lexicon::SPOKEN_ANSWERS) a person
//! may say to a card (words only). A phrase with a word the recogniser's dictionary lacks is
//! left out (`knows`), so a table line can never break the grammar.

use super::lexicon::{self, Topic};

/// The grammar's name in its header.
const NAME: &str = "countersign_demo";

/// The JSGF grammar of everything the demo can hear; `knows` says which words the recogniser's
/// pronouncing dictionary has (lowercase).
pub fn spoken_grammar(knows: impl Fn(&str) -> bool) -> String {
    let words = Words { knows };
    let mut rules = words.number_rules();
    rules.extend(words.payment_rules());
    rules.extend(words.other_rules());
    prune_empty(&mut rules);
    render(&rules)
}

/// A rule of the grammar: its name and its alternatives.
type Rule = (&'static str, Vec<String>);

/// The phrases of the lexicon the recogniser can say (`knows`: its dictionary has the word).
struct Words<F> {
    knows: F,
}

impl<F: Fn(&str) -> bool> Words<F> {
    /// The phrases made only of lowercase words the dictionary has, repeats next to each other
    /// dropped.
    fn pick(&self, phrases: Vec<String>) -> Vec<String> {
        let speakable = |phrase: &str| {
            phrase
                .split_whitespace()
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase() || b == b'\'') && (self.knows)(w))
        };
        let mut kept: Vec<String> = phrases.into_iter().filter(|p| speakable(p)).collect();
        kept.dedup();
        kept
    }

    /// The phrases that start a topic.
    fn triggers(&self, topic: Topic) -> Vec<String> {
        self.pick(
            lexicon::TRIGGERS
                .iter()
                .filter(|(t, _)| *t == topic)
                .flat_map(|(_, phrases)| phrases.iter().map(|p| p.to_string()))
                .collect(),
        )
    }

    /// The number words in `range` that are said alone (one to nineteen, the tens).
    fn numbers(&self, range: std::ops::RangeInclusive<u32>) -> Vec<String> {
        self.pick(
            lexicon::NUMBER_WORDS
                .iter()
                .filter(|(_, v)| range.contains(v) && (*v < 20 || v % 10 == 0))
                .map(|(w, _)| w.to_string())
                .collect(),
        )
    }

    /// Amounts from one to nine hundred and ninety-nine, in words.
    fn number_rules(&self) -> Vec<Rule> {
        vec![
            ("digit", self.numbers(1..=9)),
            ("teen", self.numbers(10..=19)),
            ("tens", self.numbers(20..=90)),
            (
                "below_hundred",
                vec!["<tens> [<digit>]".into(), "<teen>".into(), "<digit>".into()],
            ),
            (
                "amount",
                vec![
                    "<below_hundred>".into(),
                    "(a | <digit>) hundred [[and] <below_hundred>]".into(),
                ],
            ),
        ]
    }

    /// A payment: a verb, an amount, a currency's spoken name and a person's name.
    fn payment_rules(&self) -> Vec<Rule> {
        vec![
            (
                "currency",
                self.pick(
                    lexicon::CURRENCIES
                        .iter()
                        .flat_map(|c| {
                            c.aliases
                                .iter()
                                .filter(move |a| **a != c.code.to_ascii_lowercase())
                        })
                        .map(|a| a.to_string())
                        .collect(),
                ),
            ),
            (
                "name",
                self.pick(
                    lexicon::SPOKEN_NAMES
                        .iter()
                        .map(|n| n.to_lowercase())
                        .collect(),
                ),
            ),
            (
                "pay",
                self.pick(
                    self.triggers(Topic::Payment)
                        .into_iter()
                        .chain(lexicon::SEND_VERBS.iter().map(|v| v.to_string()))
                        .collect(),
                ),
            ),
            (
                "payment",
                vec!["<pay> <amount> <currency> to <name>".into()],
            ),
        ]
    }

    /// The weather, where am I, the music, small talk and the answers to a card.
    fn other_rules(&self) -> Vec<Rule> {
        vec![
            (
                "city",
                self.pick(
                    lexicon::CITIES
                        .iter()
                        .flat_map(|(_, aliases)| aliases.iter().map(|a| a.to_string()))
                        .collect(),
                ),
            ),
            (
                "weather",
                vec!["[what is the] (weather | forecast) in <city>".into()],
            ),
            ("location", self.triggers(Topic::Location)),
            (
                "track",
                self.pick(
                    lexicon::BGM_TRACKS
                        .iter()
                        .filter_map(|t| {
                            lexicon::NUMBER_WORDS
                                .iter()
                                .find(|(_, v)| *v == u32::from(*t))
                                .map(|(w, _)| w.to_string())
                        })
                        .collect(),
                ),
            ),
            (
                "music",
                vec!["(play | change the music to) track <track>".into()],
            ),
            (
                "small_talk",
                self.pick(
                    self.triggers(Topic::Greeting)
                        .into_iter()
                        .chain(self.triggers(Topic::Capabilities))
                        .collect(),
                ),
            ),
            (
                "answer",
                self.pick(
                    lexicon::SPOKEN_ANSWERS
                        .iter()
                        .map(|a| a.to_string())
                        .collect(),
                ),
            ),
        ]
    }
}

/// A rule left empty (every word unknown) takes the rules that need it out too.
fn prune_empty(rules: &mut Vec<Rule>) {
    loop {
        let empty: Vec<&str> = rules
            .iter()
            .filter(|(_, alts)| alts.is_empty())
            .map(|(name, _)| *name)
            .collect();
        if empty.is_empty() {
            return;
        }
        rules.retain(|(_, alts)| !alts.is_empty());
        for (_, alts) in rules.iter_mut() {
            alts.retain(|alt| !empty.iter().any(|e| alt.contains(&format!("<{e}>"))));
        }
    }
}

/// The grammar's text: its header, the public rule (the topics still there) and every rule.
fn render(rules: &[Rule]) -> String {
    let top: Vec<String> = [
        "payment",
        "weather",
        "location",
        "music",
        "small_talk",
        "answer",
    ]
    .iter()
    .filter(|name| rules.iter().any(|(n, _)| n == *name))
    .map(|name| format!("<{name}>"))
    .collect();
    let mut out = format!("#JSGF V1.0;\ngrammar {NAME};\n");
    out.push_str(&format!("public <utterance> = {};\n", top.join(" | ")));
    for (name, alts) in rules {
        out.push_str(&format!("<{name}> = {};\n", alts.join(" | ")));
    }
    out
}

/// Every word the grammar may use, for checking them against a dictionary.
pub fn spoken_words() -> Vec<String> {
    let mut words: Vec<String> = spoken_grammar(|_| true)
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once('=').map(|(_, alts)| alts.to_string()))
        .flat_map(|alts| {
            alts.split(|c: char| {
                !(c.is_ascii_lowercase() || c == '\'' || c == '<' || c == '>' || c == '_')
            })
            .filter(|w| !w.is_empty() && !w.starts_with('<'))
            .map(str::to_string)
            .collect::<Vec<_>>()
        })
        .collect();
    words.sort();
    words.dedup();
    words
}

/// What the recogniser heard (lowercase words), written as a person would type it: a capital
/// first letter, names as [`SPOKEN_NAMES`](super::lexicon::SPOKEN_NAMES) write them, and known
/// cities by their names ("new york" → "New York").
pub fn written(heard: &str) -> String {
    let words: Vec<&str> = heard.split_whitespace().collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut at = 0;
    while at < words.len() {
        let city = lexicon::CITIES
            .iter()
            .flat_map(|(name, aliases)| aliases.iter().map(move |a| (*name, *a)))
            .filter(|(_, alias)| alias.is_ascii())
            .map(|(name, alias)| (name, alias.split_whitespace().count(), alias))
            .filter(|(_, n, alias)| words.get(at..at + n).is_some_and(|w| w.join(" ") == *alias))
            .max_by_key(|(_, n, _)| *n);
        if let Some((name, n, _)) = city {
            out.push(name.to_string());
            at += n;
            continue;
        }
        let word = words[at];
        let name = lexicon::SPOKEN_NAMES
            .iter()
            .find(|n| n.eq_ignore_ascii_case(word));
        out.push(name.map_or_else(|| word.to_string(), |n| n.to_string()));
        at += 1;
    }
    let text = out.join(" ");
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Intent, understand};
    use super::*;

    #[test]
    fn the_grammar_is_jsgf_of_the_lexicons_words() {
        let grammar = spoken_grammar(|_| true);
        assert!(
            grammar.starts_with(
                "#JSGF V1.0;\ngrammar countersign_demo;\npublic <utterance> = <payment> | "
            ),
            "{grammar}"
        );
        for line in grammar.lines().skip(2) {
            assert!(line.ends_with(';') && line.contains(" = "), "{line}");
        }
        for word in [
            "pay", "forty", "euros", "alice", "paris", "approve", "deny", "hello",
        ] {
            assert!(spoken_words().iter().any(|w| w == word), "{word}");
        }
    }

    #[test]
    fn a_word_the_dictionary_lacks_leaves_its_phrase_out_and_an_empty_rule_its_users() {
        let grammar = spoken_grammar(|w| w != "paris" && w != "alice");
        assert!(
            !grammar.contains("paris") && !grammar.contains("alice"),
            "{grammar}"
        );
        assert!(grammar.contains("bob"));
        let no_names = spoken_grammar(|w| !["alice", "bob", "carol"].contains(&w));
        assert!(
            !no_names.contains("<payment>") && !no_names.contains("<name>"),
            "{no_names}"
        );
        assert!(
            no_names.contains("public <utterance> = <weather>"),
            "{no_names}"
        );
    }

    /// What the recogniser may hear, written out, is what the demo acts on.
    #[test]
    fn every_spoken_request_the_grammar_allows_is_understood_as_that_request() {
        for name in lexicon::SPOKEN_NAMES {
            for (words, amount) in [
                ("forty", 40.0),
                ("forty two", 42.0),
                ("a hundred and five", 105.0),
                ("twelve", 12.0),
                ("three hundred", 300.0),
            ] {
                for (currency, code) in [
                    ("euros", "EUR"),
                    ("dollars", "USD"),
                    ("pounds", "GBP"),
                    ("yen", "JPY"),
                ] {
                    for verb in ["pay", "send", "transfer"] {
                        let heard = format!("{verb} {words} {currency} to {}", name.to_lowercase());
                        let plan = understand(&written(&heard));
                        let Some(Intent::Payment {
                            amount: a,
                            currency: c,
                            recipient,
                            ..
                        }) = plan.steps.first().and_then(|s| s.first())
                        else {
                            panic!("{heard}: {plan:?}");
                        };
                        assert_eq!(
                            (*a, c.as_str(), recipient.as_str()),
                            (amount, code, *name),
                            "{heard}"
                        );
                    }
                }
            }
        }
        for (name, aliases) in lexicon::CITIES {
            for alias in aliases.iter().filter(|a| a.is_ascii()) {
                for heard in [
                    format!("weather in {alias}"),
                    format!("what is the forecast in {alias}"),
                ] {
                    let plan = understand(&written(&heard));
                    assert_eq!(
                        plan.steps,
                        vec![vec![Intent::Weather {
                            location: name.to_string()
                        }]],
                        "{heard}"
                    );
                }
            }
        }
        for track in lexicon::BGM_TRACKS {
            let word = lexicon::NUMBER_WORDS
                .iter()
                .find(|(_, v)| *v == u32::from(*track))
                .unwrap()
                .0;
            for heard in [
                format!("play track {word}"),
                format!("change the music to track {word}"),
            ] {
                assert_eq!(
                    understand(&written(&heard)).steps,
                    vec![vec![Intent::ChangeBgm { track: *track }]],
                    "{heard}"
                );
            }
        }
        assert_eq!(
            understand(&written("where am i")).steps,
            vec![vec![Intent::Location]]
        );
        for answer in lexicon::SPOKEN_ANSWERS {
            let plan = understand(&written(answer));
            assert!(
                plan.steps.iter().flatten().all(|i| i.tool_call().is_none()),
                "{answer}: {plan:?}"
            );
        }
    }

    #[test]
    fn what_was_heard_is_written_as_a_person_types_it() {
        assert_eq!(
            written("pay forty euros to alice"),
            "Pay forty euros to Alice"
        );
        assert_eq!(written("weather in new york"), "Weather in New York");
        assert_eq!(written("yes approve it"), "Yes approve it");
        assert_eq!(written(""), "");
    }
}
