//! What `process_payment` did, in words: the facts from its output or arguments.

use super::format::{around, capitalize, classify, clean_error, decimal, money, number, text};
use super::outcome::{Settled, Subject, declined, expired, refused, undecided};
use super::*;

/// The facts of a payment: the tool's output wins over the executed arguments, because the
/// output says what was actually done.
struct PaymentFacts {
    /// The amount as money ("$1,200.50"), rounded to cents like any price.
    pub(super) amount: Option<String>,
    /// The amount exactly as the tool got it ("1.234"), for errors about precision.
    exact_amount: Option<String>,
    /// The ISO code of the payment's currency.
    pub(super) currency: String,
    pub(super) recipient: Option<String>,
    pub(super) description: Option<String>,
    pub(super) transaction: Option<String>,
    pub(super) balance: Option<String>,
    /// "You changed the amount from X" when the executed amount differs from the proposal.
    edited_from: Option<String>,
}

fn payment_facts(lang: Lang, call: &ToolOutcome, output: Option<&Value>) -> PaymentFacts {
    let from_output = |key: &str| output.and_then(|v| text(v, key));
    let currency = from_output("currency")
        .or_else(|| text(&call.args, "currency"))
        .unwrap_or(lexicon::DEFAULT_CURRENCY);
    let paid = output
        .and_then(|v| number(v, "amount"))
        .or_else(|| number(&call.args, "amount"));
    let proposed = call.proposed.as_ref().and_then(|p| number(p, "amount"));
    let edited_from = match (proposed, paid) {
        (Some(before), Some(after)) if (before - after).abs() > 1e-9 => {
            let before_currency = call
                .proposed
                .as_ref()
                .and_then(|p| text(p, "currency"))
                .unwrap_or(currency);
            Some(money(lang, before, before_currency))
        }
        _ => None,
    };
    // The wallet's currency: a payment in another one says what it was charged in.
    let balance_currency = from_output("wallet_currency")
        .or_else(|| from_output("charged_currency"))
        .unwrap_or(currency);
    PaymentFacts {
        amount: paid.map(|a| money(lang, a, currency)),
        exact_amount: paid.map(|a| decimal(a, 9)),
        currency: currency.trim().to_uppercase(),
        recipient: from_output("recipient")
            .or_else(|| text(&call.args, "recipient"))
            .map(str::to_string),
        description: from_output("description")
            .or_else(|| text(&call.args, "description"))
            .map(str::to_string),
        transaction: from_output("transaction_id").map(str::to_string),
        balance: output
            .and_then(|v| number(v, "wallet_balance"))
            .map(|b| money(lang, b, balance_currency)),
        edited_from,
    }
}

pub(super) fn payment(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        Settled::Failed { output, .. } => *output,
        _ => None,
    };
    let facts = payment_facts(lang, call, output);
    let (amount, recipient) = (facts.amount.as_deref(), facts.recipient.as_deref());
    let subject = Subject {
        en: format!(
            "the payment{}{}",
            around(amount, " of ", ""),
            around(recipient, " to ", "")
        ),
        ja: format!(
            "{}{}送金",
            around(recipient, "", "への"),
            around(amount, "", "の")
        ),
        nothing_en: "no money was sent",
        nothing_ja: "送金していません",
    };
    match settled {
        Settled::Done(_) => sent(lang, &facts),
        Settled::Failed { error, .. } => failed(lang, &facts, &subject, &error),
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

impl PaymentFacts {
    /// "send $5 to Bob", with whatever is known.
    fn send_en(&self) -> String {
        format!(
            "{}{}",
            self.amount.as_deref().unwrap_or("the payment"),
            around(self.recipient.as_deref(), " to ", "")
        )
    }

    /// The balance sentence: after a payment the balance is "now" lower; after a failure it is
    /// unchanged.
    fn balance(&self, lang: Lang, changed: bool) -> String {
        match (self.balance.as_deref(), lang, changed) {
            (Some(b), Lang::En, true) => format!(" Your balance is now {b}."),
            (Some(b), Lang::En, false) => format!(" Your balance is {b}."),
            (Some(b), Lang::Ja, _) => format!("残高は{b}です。"),
            (None, ..) => String::new(),
        }
    }
}

/// A payment that went through: what was sent, to whom, for what, and an edit by the approver.
fn sent(lang: Lang, facts: &PaymentFacts) -> String {
    let (amount, recipient) = (facts.amount.as_deref(), facts.recipient.as_deref());
    let description = facts.description.as_deref();
    let transaction = facts.transaction.as_deref();
    let edited = facts.edited_from.as_deref().zip(amount);
    match lang {
        Lang::En => format!(
            "Sent {}{}{}.{}{}",
            facts.send_en(),
            around(description, " for “", "”"),
            around(transaction, " (transaction ", ")"),
            edited
                .map(|(before, after)| format!(
                    " You changed the amount from {before} to {after} when approving."
                ))
                .unwrap_or_default(),
            facts.balance(lang, true)
        ),
        Lang::Ja => format!(
            "{}{}{}送金しました{}。{}{}",
            around(description, "「", "」として、"),
            around(recipient, "", "に"),
            around(amount, "", "を"),
            around(transaction, "（取引ID: ", "）"),
            edited
                .map(|(before, after)| format!(
                    "承認時に金額が{before}から{after}に変更されました。"
                ))
                .unwrap_or_default(),
            facts.balance(lang, true)
        ),
    }
}

/// A payment that failed, said by the kind of failure where it is known.
fn failed(lang: Lang, facts: &PaymentFacts, subject: &Subject, error: &str) -> String {
    let recipient = facts.recipient.as_deref();
    let send_en = facts.send_en();
    match (classify(error), lang) {
        (Some(Failure::InsufficientFunds), Lang::En) => format!(
            "I couldn't send {send_en}: insufficient funds.{}",
            facts.balance(lang, false)
        ),
        (Some(Failure::InsufficientFunds), Lang::Ja) => format!(
            "残高不足のため、{}はできませんでした。{}",
            subject.ja,
            facts.balance(lang, false)
        ),
        // Rounded money would hide the problem ("$1.23"), so show the amount as given.
        (Some(Failure::TooPrecise), Lang::En) => format!(
            "I couldn't send {} {}{}: amounts can have at most two decimal places.",
            facts.exact_amount.as_deref().unwrap_or("that amount"),
            facts.currency,
            around(recipient, " to ", "")
        ),
        (Some(Failure::TooPrecise), Lang::Ja) => format!(
            "{}{} {}の送金は、金額の小数点以下が2桁を超えているためできませんでした。",
            around(recipient, "", "への"),
            facts.exact_amount.as_deref().unwrap_or(""),
            facts.currency
        ),
        (Some(Failure::UnsupportedCurrency), Lang::En) => format!(
            "I couldn't send {send_en}: the wallet can't pay in {}.",
            facts.currency
        ),
        (Some(Failure::UnsupportedCurrency), Lang::Ja) => format!(
            "ウォレットが{}での支払いに対応していないため、{}はできませんでした。",
            facts.currency, subject.ja
        ),
        (Some(Failure::InvalidAmount), Lang::En) => {
            format!("I couldn't send {send_en}: the amount must be greater than zero.")
        }
        (Some(Failure::InvalidAmount), Lang::Ja) => format!(
            "金額は0より大きくする必要があるため、{}はできませんでした。",
            subject.ja
        ),
        (Some(Failure::Refused), _) => declined(lang, subject, None, None),
        (Some(Failure::TimedOut), Lang::En) => {
            format!(
                "{} timed out, so no money was sent.",
                capitalize(&subject.en)
            )
        }
        (Some(Failure::TimedOut), Lang::Ja) => {
            format!("{}はタイムアウトしたため、送金していません。", subject.ja)
        }
        (_, Lang::En) => format!("I couldn't send {send_en}: {}.", clean_error(lang, error)),
        (_, Lang::Ja) => {
            format!(
                "{}に失敗しました（{}）。",
                subject.ja,
                clean_error(lang, error)
            )
        }
    }
}
