//! The demo model's vocabulary: every word it knows, as data.
//!
//! The parser in `super::intent` and the writer in `super::reply` contain no literal vocabulary;
//! they read these tables. Teaching the demo model a new city, currency, verb or phrasing is
//! therefore a one-line change here, and a test phrasing in `intent.rs` to prove it.
//!
//! Conventions shared by every phrase table:
//! - An ASCII phrase ("where am i", "weather") matches whole words, case-insensitively, so
//!   "hi" does not fire inside "this". Multi-word phrases match consecutive words.
//! - A non-ASCII phrase ("天気", "送金") matches as a substring, because Japanese is written
//!   without spaces and the tokenizer's segmentation is only approximate.
//! - Order matters where a comment says so (earlier entries win ties).

/// Tool names exactly as the product spec declares them. The runner and `super::reply` key
/// on these, so the two can never disagree on a spelling.
pub const GET_WEATHER: &str = "get_weather";
/// See [`GET_WEATHER`].
pub const PROCESS_PAYMENT: &str = "process_payment";
/// See [`GET_WEATHER`].
pub const GET_LOCATION: &str = "get_location";
/// See [`GET_WEATHER`].
pub const CHANGE_BGM: &str = "change_bgm";

/// What a stretch of text is about. Tool topics become tool calls; the last two are small talk
/// that is answered directly and only when nothing actionable was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Topic {
    Payment,
    Weather,
    Location,
    Bgm,
    Capabilities,
    Greeting,
}

impl Topic {
    /// Whether this topic leads to a tool call (as opposed to a direct, tool-free answer).
    pub(super) fn is_tool(self) -> bool {
        !matches!(self, Topic::Capabilities | Topic::Greeting)
    }
}

/// Words that put a fragment of text on a topic. Table order is priority order: when one
/// fragment mentions two topics and both yield a complete request, the earlier row wins.
/// (A complete request always beats one that would need a clarifying question.)
#[rustfmt::skip]
pub(super) const TRIGGERS: &[(Topic, &[&str])] = &[
    (Topic::Payment, &["pay", "payment", "transfer", "wire", "remit", "reimburse", "送金", "振り込", "振込", "払"]),
    (Topic::Weather, &["weather", "forecast", "temperature", "rain", "raining", "rainy", "snow", "snowing", "sunny", "cloudy", "windy", "humid", "umbrella", "天気", "気温", "予報", "雨", "雪", "晴れ"]),
    (Topic::Location, &["where am i", "where i am", "my location", "current location", "location", "my position", "my coordinates", "geolocation", "locate me", "現在地", "位置", "居場所", "どこにいる", "今どこ", "ここはどこ"]),
    (Topic::Bgm, &["bgm", "music", "track", "song", "tune", "soundtrack", "トラック", "音楽", "曲"]),
    (Topic::Capabilities, &["who are you", "what are you", "what can you do", "what can you help", "what do you do", "capabilities", "help", "あなたは誰", "あなたは何", "何ができ", "できること", "使い方", "ヘルプ", "自己紹介"]),
    (Topic::Greeting, &["hello", "hi", "hey", "howdy", "greetings", "good morning", "good afternoon", "good evening", "こんにちは", "こんばんは", "おはよう", "はじめまして", "やあ", "ハロー"]),
];

/// Verbs that mean "pay" only when the same fragment also mentions money (an amount, a currency
/// or one of [`MONEY_WORDS`]): "send $5 to Bob" is a payment, "send a message to Bob" is not.
pub(super) const SEND_VERBS: &[&str] = &["send", "give", "送って", "送る", "送り"];

/// Nouns that make a [`SEND_VERBS`] verb about money even without an amount ("send money to
/// Bob"), so the model asks for the amount instead of pretending not to understand.
pub(super) const MONEY_WORDS: &[&str] = &["money", "cash", "funds", "お金", "代金"];

/// Sequence markers: text is cut here into consecutive model steps ("do A, then B").
/// Each entry is `(kept, cut)`: `kept` stays at the end of the earlier clause (so the verb
/// "調べて" keeps its て), `cut` is dropped. ASCII markers need word boundaries on both sides.
/// Longer markers at the same position win ("and then" over "then").
#[rustfmt::skip]
pub(super) const SEQUENCE_MARKERS: &[(&str, &str)] = &[
    ("", "and then"),
    ("", ", then"),
    ("", "then"),
    ("", "and after that"),
    ("", "after that"),
    ("", "afterwards"),
    ("", "afterward"),
    ("", "once that's done"),
    ("", "when that's done"),
    ("て", "から"),
    ("で", "から"),
    ("", "その後"),
    ("", "そのあと"),
    ("", "それから"),
    ("", "次に"),
    ("", "そして"),
];

/// Words, punctuation and particles that join independent requests inside one step
/// ("weather in Tokyo and Osaka", "Aliceに30ドル、Bobに40ドル"). Such requests become parallel
/// tool calls of one model step.
pub(super) const PARALLEL_WORDS: &[&str] = &["and", "also", "plus"];
/// See [`PARALLEL_WORDS`].
pub(super) const PARALLEL_PUNCT: &[char] = &[',', ';', '&', '.', '!', '?', '、', '。'];
/// See [`PARALLEL_WORDS`]. Only matched as particles (after a noun), never inside words.
pub(super) const PARALLEL_PARTICLES: &[&str] = &["と", "や"];

/// Japanese particles the tokenizer splits off after a noun (kanji, katakana, Latin or digit).
/// The longest match wins, so compounds like "として" or "では" are listed whole. A particle is
/// only recognised right after a non-hiragana character, which keeps verb endings such as
/// "教えて" and "送金して" in one piece.
#[rustfmt::skip]
pub(super) const PARTICLES: &[&str] = &[
    "として", "について", "からの", "から", "まで", "より", "には", "では", "へは", "とは", "への", "での", "との",
    "にも", "でも", "へ", "に", "を", "の", "は", "が", "で", "と", "も", "や", "て",
];

/// Name suffixes split off (and left out of) recipient names: "花子さん" pays "花子".
pub(super) const HONORIFICS: &[&str] = &["さん", "さま", "様", "くん", "君", "ちゃん", "氏"];

/// A currency the demo model can name. `code` is what the payment tool receives.
pub(super) struct CurrencyWords {
    /// ISO 4217 code sent to `process_payment`.
    pub code: &'static str,
    /// Prefix used when writing amounts in English ("$50"); empty means "50 CHF" style.
    pub symbol: &'static str,
    /// Suffix used when writing amounts in Japanese ("50ドル").
    pub ja_unit: &'static str,
    /// Everything that names it: symbols, English words (lowercase), Japanese units.
    pub aliases: &'static [&'static str],
}

/// The currency used when a request names an amount but no currency ("send 20 to Bob"), as the
/// tool's own default is.
pub(super) const DEFAULT_CURRENCY: &str = "USD";

/// Currencies by code. One line per currency.
#[rustfmt::skip]
pub(super) const CURRENCIES: &[CurrencyWords] = &[
    CurrencyWords { code: "USD", symbol: "$", ja_unit: "ドル", aliases: &["$", "dollar", "dollars", "usd", "buck", "bucks", "ドル", "米ドル"] },
    CurrencyWords { code: "EUR", symbol: "€", ja_unit: "ユーロ", aliases: &["€", "euro", "euros", "eur", "ユーロ"] },
    CurrencyWords { code: "JPY", symbol: "¥", ja_unit: "円", aliases: &["¥", "yen", "jpy", "円"] },
    CurrencyWords { code: "GBP", symbol: "£", ja_unit: "ポンド", aliases: &["£", "pound", "pounds", "gbp", "quid", "ポンド"] },
    CurrencyWords { code: "CHF", symbol: "", ja_unit: "スイスフラン", aliases: &["franc", "francs", "chf", "スイスフラン"] },
    CurrencyWords { code: "INR", symbol: "₹", ja_unit: "ルピー", aliases: &["₹", "rupee", "rupees", "inr", "ルピー"] },
    CurrencyWords { code: "KRW", symbol: "₩", ja_unit: "ウォン", aliases: &["₩", "krw", "ウォン"] },
    CurrencyWords { code: "CNY", symbol: "", ja_unit: "人民元", aliases: &["yuan", "rmb", "cny", "人民元"] },
];

/// English cardinal words and their values; "twenty-five" and "one hundred and five" are
/// composed from these by the parser.
#[rustfmt::skip]
pub(super) const NUMBER_WORDS: &[(&str, u32)] = &[
    ("zero", 0), ("one", 1), ("two", 2), ("three", 3), ("four", 4), ("five", 5), ("six", 6),
    ("seven", 7), ("eight", 8), ("nine", 9), ("ten", 10), ("eleven", 11), ("twelve", 12),
    ("thirteen", 13), ("fourteen", 14), ("fifteen", 15), ("sixteen", 16), ("seventeen", 17),
    ("eighteen", 18), ("nineteen", 19), ("twenty", 20), ("thirty", 30), ("forty", 40),
    ("fifty", 50), ("sixty", 60), ("seventy", 70), ("eighty", 80), ("ninety", 90),
];

/// English scale words. `hundred` multiplies the group being built; the others close a group
/// ("two thousand five hundred").
#[rustfmt::skip]
pub(super) const SCALE_WORDS: &[(&str, f64)] =
    &[("hundred", 1e2), ("thousand", 1e3), ("million", 1e6), ("billion", 1e9)];

/// Articles that stand for "one" before a scale word ("a hundred dollars").
pub(super) const NUMBER_ARTICLES: &[&str] = &["a", "an"];
/// The word allowed between a scale and a number ("one hundred and five").
pub(super) const NUMBER_AND: &str = "and";

/// English ordinals, used to pick a music track ("the second track").
#[rustfmt::skip]
pub(super) const ORDINALS: &[(&str, u32)] =
    &[("first", 1), ("second", 2), ("third", 3), ("fourth", 4), ("fifth", 5)];

/// Kanji digits. Combined with [`KANJI_UNITS`] they spell numbers: 五十 = 50, 千五百 = 1500.
#[rustfmt::skip]
pub(super) const KANJI_DIGITS: &[(char, u32)] = &[
    ('〇', 0), ('零', 0), ('一', 1), ('二', 2), ('三', 3), ('四', 4), ('五', 5), ('六', 6), ('七', 7),
    ('八', 8), ('九', 9),
];

/// Kanji powers of ten. `big` units (万, 億) close a group like "thousand" does in English, so
/// 1万2千 = 12000 and 三百万 = 3,000,000.
#[rustfmt::skip]
pub(super) const KANJI_UNITS: &[(char, f64, bool)] = &[
    ('十', 1e1, false),
    ('百', 1e2, false),
    ('千', 1e3, false),
    ('万', 1e4, true),
    ('億', 1e8, true),
];

/// A run of kanji numerals counts as a number only when a currency unit or one of these
/// counters follows it; otherwise it is part of a word (千葉, 一緒, 十分).
pub(super) const NUMERAL_COUNTERS: &[&str] = &["番", "曲"];

/// Cities: the canonical English name the weather tool needs, then every alias that names it.
/// Leftmost match wins, then the longest, so "東京都" is Tokyo even though it contains "京都".
/// The first non-ASCII alias is also how replies write the city in Japanese.
#[rustfmt::skip]
pub(super) const CITIES: &[(&str, &[&str])] = &[
    ("Tokyo", &["tokyo", "東京", "東京都", "とうきょう"]),
    ("Osaka", &["osaka", "大阪"]),
    ("Kyoto", &["kyoto", "京都"]),
    ("Yokohama", &["yokohama", "横浜"]),
    ("Nagoya", &["nagoya", "名古屋"]),
    ("Sapporo", &["sapporo", "札幌"]),
    ("Fukuoka", &["fukuoka", "福岡"]),
    ("Kobe", &["kobe", "神戸"]),
    ("Sendai", &["sendai", "仙台"]),
    ("Hiroshima", &["hiroshima", "広島"]),
    ("Naha", &["naha", "那覇"]),
    ("Chiba", &["chiba", "千葉"]),
    ("Paris", &["paris", "パリ"]),
    ("London", &["london", "ロンドン"]),
    ("New York", &["new york", "new york city", "nyc", "ニューヨーク"]),
    ("San Francisco", &["san francisco", "サンフランシスコ"]),
    ("Los Angeles", &["los angeles", "ロサンゼルス"]),
    ("Chicago", &["chicago", "シカゴ"]),
    ("Toronto", &["toronto", "トロント"]),
    ("Honolulu", &["honolulu", "ホノルル"]),
    ("Rio de Janeiro", &["rio de janeiro", "rio", "リオデジャネイロ"]),
    ("Berlin", &["berlin", "ベルリン"]),
    ("Rome", &["rome", "ローマ"]),
    ("Madrid", &["madrid", "マドリード"]),
    ("Moscow", &["moscow", "モスクワ"]),
    ("Sydney", &["sydney", "シドニー"]),
    ("Seoul", &["seoul", "ソウル"]),
    ("Beijing", &["beijing", "peking", "北京"]),
    ("Shanghai", &["shanghai", "上海"]),
    ("Hong Kong", &["hong kong", "香港"]),
    ("Taipei", &["taipei", "台北"]),
    ("Singapore", &["singapore", "シンガポール"]),
    ("Bangkok", &["bangkok", "バンコク"]),
];

/// The music tracks `change_bgm` accepts. Any other number gets an honest "no such track".
pub(super) const BGM_TRACKS: &[u8] = &[1, 2];

/// Names a person may say as a payment's recipient. Typed, any name is read; spoken, the
/// recogniser only hears names it is told of (`super::grammar`), written as here. Chosen to
/// sound unlike each other and the rest of the grammar (measured in ADR 0036).
pub(super) const SPOKEN_NAMES: &[&str] = &["Alice", "Bob", "Carol"];

/// What a person may say back while a card waits. Heard, these are only words: they never
/// approve or deny anything (only the card or the inbox does); the grammar lets the recogniser
/// hear them for what they are instead of forcing them into a request.
pub(super) const SPOKEN_ANSWERS: &[&str] = &[
    "yes",
    "yes approve it",
    "approve it",
    "no",
    "no deny it",
    "deny it",
];

/// English words that introduce a recipient ("to Bob").
pub(super) const RECIPIENT_WORDS: &[&str] = &["to"];
/// Japanese particles that mark a recipient ("花子に", "Bobへ").
pub(super) const RECIPIENT_PARTICLES: &[&str] = &["に", "へ", "には", "への"];
/// English words that introduce a place ("in Paris", "for Tokyo").
pub(super) const LOCATION_WORDS: &[&str] = &["in", "for", "at", "near", "around"];
/// Japanese particles that follow a place before the weather word ("札幌の天気").
pub(super) const LOCATION_PARTICLES: &[&str] = &["の", "は", "で", "では"];
/// English words that introduce a payment description ("for lunch").
pub(super) const DESCRIPTION_WORDS: &[&str] = &["for", "as"];
/// Particles that join nouns into one phrase ("ランチの代金として" is one description).
pub(super) const NOUN_LINKERS: &[&str] = &["の"];
/// Japanese particles that follow a payment description ("ランチ代として").
pub(super) const DESCRIPTION_PARTICLES: &[&str] = &["として"];
/// Words that make the following amount negative. Kept so the tool, not the parser, rejects it.
pub(super) const NEGATIVE_WORDS: &[&str] = &["minus", "negative", "マイナス"];
/// Words that make one amount apply to every recipient ("$5 each to Alice and Bob").
pub(super) const EACH_WORDS: &[&str] = &["each", "apiece", "ずつ"];
/// Words skipped in front of a name ("pay the plumber", "send $5 to my mom").
pub(super) const DETERMINERS: &[&str] = &["the", "my", "our", "a", "an"];
/// Words that join several names ("Alice and Bob", "AliceとBob").
pub(super) const NAME_JOINERS: &[&str] = &["and", "&", ",", "、", "と", "や"];
/// Polite or filler words trimmed from the end of a description ("for lunch please").
pub(super) const TRAILING_FILLERS: &[&str] =
    &["please", "thanks", "thank", "you", "now", "today", "asap"];

/// English words that are never names or cities, so "send $5 to Bob today" pays "Bob" and
/// "weather in Paris right now" looks up "Paris". Trigger words, currencies, numbers and the
/// role words above are excluded automatically and need not be repeated here.
#[rustfmt::skip]
pub(super) const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "my", "me", "i", "i'm", "you", "your", "we", "us", "our", "it", "it's", "its",
    "this", "that", "these", "those", "he", "she", "they", "them", "his", "her", "their", "please",
    "pls", "kindly", "can", "could", "would", "will", "should", "shall", "may", "might", "must", "do",
    "does", "did", "is", "are", "am", "was", "were", "be", "been", "have", "has", "had", "what",
    "what's", "whats", "how", "how's", "hows", "where", "where's", "who", "who's", "when", "which",
    "why", "today", "tomorrow", "tonight", "yesterday", "now", "currently", "right", "moment",
    "morning", "afternoon", "evening", "week", "weekend", "like", "some", "any", "all", "just",
    "also", "too", "very", "really", "thanks", "thank", "ok", "okay", "yes", "no", "not", "there",
    "here", "to", "in", "at", "for", "of", "on", "from", "with", "by", "about", "as", "into", "and",
    "or", "but", "then", "so", "first", "amount", "sum", "total", "check", "show", "get", "tell",
    "find", "know", "let", "see", "look", "want", "need", "make", "switch", "change", "play", "set",
    "put", "turn", "start", "stop", "go", "give", "take", "process", "run", "use", "back", "again",
    "outside", "going", "something", "anything", "message", "email", "mail", "text",
];

/// Japanese words that are never names or cities (pronouns, time words), so "今日の天気" asks
/// which city rather than looking up a city called "今日".
#[rustfmt::skip]
pub(super) const JA_STOP_WORDS: &[&str] = &[
    "私", "僕", "俺", "わたし", "ぼく", "あなた", "今日", "明日", "昨日", "今", "現在", "本日", "今週", "来週",
    "週末", "ここ", "そこ", "どこ", "今日中", "すぐ", "お金", "金", "みんな", "誰", "何", "全部",
];

/// Longer messages are not parsed at all (see `super::intent::understand`): no demo request is
/// this long, and the grammar should never be a way to keep a server thread busy.
pub(super) const MAX_INPUT_CHARS: usize = 1_000;

/// Slash commands, matched at the very start of a message. `/lorem N` is for benchmarks.
pub(super) const LOREM_COMMAND: &str = "/lorem";
/// See [`LOREM_COMMAND`].
pub(super) const HELP_COMMAND: &str = "/help";
/// Words produced by a bare `/lorem`.
pub(super) const DEFAULT_LOREM_WORDS: usize = 100;
/// Upper bound for `/lorem N`, so a typo cannot make the server allocate gigabytes.
pub(super) const MAX_LOREM_WORDS: usize = 100_000;
/// The filler text `/lorem` cycles through.
#[rustfmt::skip]
pub(super) const LOREM_WORDS: &[&str] = &[
    "lorem", "ipsum", "dolor", "sit", "amet,", "consectetur", "adipiscing", "elit,", "sed", "do",
    "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua.", "ut",
    "enim", "ad", "minim", "veniam,", "quis", "nostrud", "exercitation", "ullamco", "laboris",
    "nisi", "ut", "aliquip", "ex", "ea", "commodo", "consequat.", "duis", "aute", "irure", "dolor",
    "in", "reprehenderit", "in", "voluptate", "velit", "esse", "cillum", "dolore", "eu", "fugiat",
    "nulla", "pariatur.", "excepteur", "sint", "occaecat", "cupidatat", "non", "proident,", "sunt",
    "in", "culpa", "qui", "officia", "deserunt", "mollit", "anim", "id", "est", "laborum.",
];

/// What went wrong, read from a tool's error text so replies can explain it in the user's
/// language instead of echoing English internals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    InsufficientFunds,
    /// More precision than the currency has ("1.234 dollars").
    TooPrecise,
    InvalidAmount,
    UnsupportedCurrency,
    AudioBlocked,
    Refused,
    TimedOut,
    Unavailable,
}

/// Lowercase fragments of error texts, first match wins (so "NotAllowedError" from audio
/// playback is not mistaken for a refused permission).
#[rustfmt::skip]
pub(super) const FAILURE_PATTERNS: &[(&str, Failure)] = &[
    ("insufficient", Failure::InsufficientFunds),
    ("decimal places", Failure::TooPrecise),
    ("invalid amount", Failure::InvalidAmount),
    ("unsupported currency", Failure::UnsupportedCurrency),
    ("must be positive", Failure::InvalidAmount),
    ("notallowederror", Failure::AudioBlocked),
    ("autoplay", Failure::AudioBlocked),
    ("play() failed", Failure::AudioBlocked),
    ("permission", Failure::Refused),
    ("denied", Failure::Refused),
    ("rejected", Failure::Refused),
    ("not allowed", Failure::Refused),
    ("timed out", Failure::TimedOut),
    ("timeout", Failure::TimedOut),
    ("unavailable", Failure::Unavailable),
];

/// Weather conditions in Japanese, matched as lowercase substrings of the tool's English
/// condition, most specific first ("rain showers" before "rain"). Unknown conditions are shown
/// as the tool wrote them.
#[rustfmt::skip]
pub(super) const CONDITIONS_JA: &[(&str, &str)] = &[
    ("thunderstorm", "雷雨"),
    ("freezing drizzle", "着氷性の霧雨"),
    ("freezing rain", "着氷性の雨"),
    ("drizzle", "霧雨"),
    ("rain showers", "にわか雨"),
    ("snow showers", "にわか雪"),
    ("showers", "にわか雨"),
    ("snow", "雪"),
    ("rain", "雨"),
    ("fog", "霧"),
    ("mist", "霧"),
    ("overcast", "曇り"),
    ("partly cloudy", "晴れ時々曇り"),
    ("mainly clear", "おおむね晴れ"),
    ("cloud", "曇り"),
    ("clear", "晴れ"),
    ("sunny", "晴れ"),
];

/// How replies credit a weather `source`. `offline` is special-cased by the reply writer so the
/// person is told the numbers are not real.
pub(super) const WEATHER_SOURCES: &[(&str, &str)] = &[("open-meteo", "Open-Meteo")];
/// The `source` value of the weather tool's built-in sample data.
pub(super) const OFFLINE_SOURCE: &str = "offline";

// ---------------------------------------------------------------------------------------------
// Small lookups over the tables above. They hold no vocabulary of their own.
// ---------------------------------------------------------------------------------------------

/// The currency a one-character symbol ("$", "€") stands for.
pub(super) fn currency_by_symbol(c: char) -> Option<&'static str> {
    let mut buf = [0u8; 4];
    let s: &str = c.encode_utf8(&mut buf);
    CURRENCIES
        .iter()
        .find(|cur| {
            cur.aliases
                .iter()
                .any(|a| *a == s && !a.chars().any(char::is_alphanumeric))
        })
        .map(|cur| cur.code)
}

/// The currency an English word ("dollars", "usd") names, or any ISO 4217 code the wallet
/// converts ("cad", "sek"). `word` must be lowercase.
pub(super) fn currency_by_word(word: &str) -> Option<&'static str> {
    CURRENCIES
        .iter()
        .find(|cur| cur.aliases.iter().any(|a| a.is_ascii() && *a == word))
        .map(|cur| cur.code)
        .or_else(|| {
            (word.len() == 3 && word.bytes().all(|b| b.is_ascii_lowercase()))
                .then(|| crate::protocol::money::currency(word))
                .flatten()
                .map(|c| c.code)
        })
}

/// The Japanese currency unit at the start of `text` ("ドル送金して" → USD, 6 bytes), longest
/// alias first so "米ドル" is not read as "米" + "ドル".
pub(super) fn currency_unit_at(text: &str) -> Option<(&'static str, usize)> {
    CURRENCIES
        .iter()
        .flat_map(|cur| cur.aliases.iter().map(move |a| (cur.code, *a)))
        .filter(|(_, a)| {
            !a.is_ascii() && a.chars().any(char::is_alphanumeric) && text.starts_with(a)
        })
        .max_by_key(|(_, a)| a.len())
        .map(|(code, a)| (code, a.len()))
}

/// The table row of an ISO code, for writing amounts.
pub(super) fn currency(code: &str) -> Option<&'static CurrencyWords> {
    CURRENCIES
        .iter()
        .find(|cur| cur.code.eq_ignore_ascii_case(code))
}

/// How a canonical city name is written in Japanese, if the table knows it.
pub(super) fn city_in_japanese(canonical: &str) -> Option<&'static str> {
    CITIES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(canonical))
        .and_then(|(_, aliases)| aliases.iter().find(|a| !a.is_ascii()).copied())
}

/// Whether an English word (lowercase) has a job in the grammar and so cannot be a name.
pub(super) fn is_reserved_word(word: &str) -> bool {
    let in_phrases = |phrases: &[&str]| {
        phrases
            .iter()
            .any(|p| p.is_ascii() && p.split_whitespace().any(|w| w == word))
    };
    STOP_WORDS.contains(&word)
        || TRIGGERS.iter().any(|(_, phrases)| in_phrases(phrases))
        || in_phrases(SEND_VERBS)
        || in_phrases(MONEY_WORDS)
        || in_phrases(PARALLEL_WORDS)
        || in_phrases(NEGATIVE_WORDS)
        || in_phrases(EACH_WORDS)
        || in_phrases(DETERMINERS)
        || in_phrases(RECIPIENT_WORDS)
        || in_phrases(LOCATION_WORDS)
        || in_phrases(DESCRIPTION_WORDS)
        || in_phrases(TRAILING_FILLERS)
        || ORDINALS.iter().any(|(w, _)| *w == word)
        || NUMBER_WORDS.iter().any(|(w, _)| *w == word)
        || SCALE_WORDS.iter().any(|(w, _)| *w == word)
}

/// Whether a Japanese word has a job in the grammar (a trigger like "送金して", a pronoun or a
/// time word) and so cannot be a name or a city.
pub(super) fn is_reserved_japanese(word: &str) -> bool {
    let contains_any = |phrases: &[&str]| phrases.iter().any(|p| !p.is_ascii() && word.contains(p));
    JA_STOP_WORDS.contains(&word)
        || TRIGGERS.iter().any(|(_, phrases)| contains_any(phrases))
        || contains_any(SEND_VERBS)
        || contains_any(MONEY_WORDS)
        || contains_any(NEGATIVE_WORDS)
}
