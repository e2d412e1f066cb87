//! `process_payment`: a real per-session wallet ledger, in any currency.
//!
//! The wallet starts at 1000.00 USD and its balance carries across turns. A payment names an
//! ISO 4217 currency (USD when it names none); one in another currency is converted at the
//! wallet's fixed rate table ([`crate::protocol::money`]) and debited in US dollars, and the
//! transaction keeps both amounts. Amounts are integers of minor units (never floating point).
//! A payment is idempotent by tool call id: running the same call twice (a retried request, a
//! restart in the middle of execution) returns the first transaction instead of charging again.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ApprovalPolicy, ServerTool, ToolContext, ToolEffects, ToolError, ToolLocation, ToolSettings,
    ToolSpec,
};
use crate::agent::clock::{IdKind, Millis, rfc3339};
use crate::agent::journal::Appended;
use crate::protocol::{
    ToolPresentation,
    money::{self, Money, MoneyError, Payment, WALLET_CURRENCY},
};

/// The opening balance of every new wallet, in cents.
pub const OPENING_BALANCE_CENTS: i64 = 100_000;

/// What a payment in another currency paid, as the call named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paid {
    /// In the currency's minor unit (yen; cents).
    pub amount_minor: i64,
    pub currency: String,
}

/// One completed payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    pub id: String,
    pub tool_call_id: String,
    /// What the wallet was debited, in its currency's cents.
    pub amount_cents: i64,
    /// The wallet's currency.
    pub currency: String,
    /// The amount as the call named it, when that was another currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid: Option<Paid>,
    pub recipient: String,
    pub description: String,
    pub balance_after_cents: i64,
    pub timestamp_ms: Millis,
}

impl Transaction {
    /// The tool output the model and the UI see: the amount as the call named it, and, when it
    /// was another currency, what the wallet was charged for it.
    pub fn to_output(&self) -> Value {
        let mut output = json!({
            "success": true,
            "transaction_id": self.id,
            "recipient": self.recipient,
            "description": self.description,
            "wallet_balance": cents_to_number(self.balance_after_cents),
            "timestamp": rfc3339(self.timestamp_ms),
        });
        match &self.paid {
            Some(paid) => {
                let digits = money::currency(&paid.currency).map_or(2, |c| c.minor_digits);
                output["amount"] = minor_to_number(paid.amount_minor, digits);
                output["currency"] = json!(paid.currency);
                output["charged"] = cents_to_number(self.amount_cents);
                output["charged_currency"] = json!(self.currency);
            }
            None => {
                output["amount"] = cents_to_number(self.amount_cents);
                output["currency"] = json!(self.currency);
            }
        }
        output
    }
}

/// A session's wallet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wallet {
    pub currency: String,
    pub balance_cents: i64,
    /// What it has paid in all, in its cents, and to whom (each payee as [`payee_key`] writes
    /// it): running totals kept as it pays, so that deciding a payment reads none of the
    /// payments before it (ADR 0045, fourth amendment). The payees grow with the people paid,
    /// not with the payments.
    pub paid_cents: i64,
    pub payees: BTreeSet<String>,
    /// Every payment, oldest first (appended to: a commit writes only the new ones). A wallet
    /// loaded with its chat's head holds only the ones made since ([`Appended::read`]).
    pub transactions: Appended<Transaction>,
}

impl Default for Wallet {
    fn default() -> Self {
        Wallet {
            currency: WALLET_CURRENCY.to_string(),
            balance_cents: OPENING_BALANCE_CENTS,
            paid_cents: 0,
            payees: BTreeSet::new(),
            transactions: Appended::default(),
        }
    }
}

/// A payee as the wallet's running totals keep it, and as [`Wallet::has_paid`] compares it:
/// without surrounding space, ASCII letters in lower case.
pub fn payee_key(payee: &str) -> String {
    payee.trim().to_ascii_lowercase()
}

/// A wallet as JSON keeps it. One written before the wallet kept running totals has none.
#[derive(Deserialize)]
struct WalletJson {
    currency: String,
    balance_cents: i64,
    #[serde(default)]
    paid_cents: Option<i64>,
    #[serde(default)]
    payees: Option<BTreeSet<String>>,
    #[serde(default)]
    transactions: Appended<Transaction>,
}

/// A stored wallet that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum WalletJsonError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("it keeps no running totals and its payments were not read")]
    NoTotals,
}

impl WalletJson {
    /// The wallet, with `payments` as its payments; its running totals summed from them when
    /// the JSON has none (only possible if they were read whole).
    fn into_wallet(self, payments: Appended<Transaction>) -> Result<Wallet, WalletJsonError> {
        let (paid_cents, payees) = match (self.paid_cents, self.payees) {
            (Some(cents), Some(payees)) => (cents, payees),
            _ => {
                let all = payments.whole().ok_or(WalletJsonError::NoTotals)?;
                (
                    all.iter().map(|t| t.amount_cents).sum(),
                    all.iter().map(|t| payee_key(&t.recipient)).collect(),
                )
            }
        };
        Ok(Wallet {
            currency: self.currency,
            balance_cents: self.balance_cents,
            paid_cents,
            payees,
            transactions: payments,
        })
    }
}

impl<'de> Deserialize<'de> for Wallet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut json = WalletJson::deserialize(d)?;
        let payments = std::mem::take(&mut json.transactions);
        json.into_wallet(payments).map_err(serde::de::Error::custom)
    }
}

impl Wallet {
    /// The wallet stored as `json` (its payments left out), with `payments` as its payments:
    /// all of them, or (for a wallet that keeps running totals) only how many there are.
    pub fn from_stored(
        json: &str,
        payments: Appended<Transaction>,
    ) -> Result<Self, WalletJsonError> {
        serde_json::from_str::<WalletJson>(json)?.into_wallet(payments)
    }

    /// Whether the wallet stored as `json` keeps running totals: if not (written by an older
    /// version), a load reads its payments whole to sum them, once; its next commit keeps them.
    pub fn keeps_totals(json: &str) -> bool {
        #[derive(Deserialize)]
        struct Totals {
            paid_cents: Option<serde::de::IgnoredAny>,
            payees: Option<serde::de::IgnoredAny>,
        }
        serde_json::from_str::<Totals>(json)
            .is_ok_and(|t| t.paid_cents.is_some() && t.payees.is_some())
    }
}

/// Why a payment was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PaymentError {
    #[error(transparent)]
    Money(#[from] MoneyError),
    #[error(
        "Insufficient funds: the balance is {} USD, the payment needs {} USD.",
        plain_cents(*.balance_cents),
        plain_cents(*.requested_cents)
    )]
    InsufficientFunds {
        balance_cents: i64,
        requested_cents: i64,
    },
    #[error("The recipient must not be empty.")]
    NoRecipient,
}

/// Cents as "1000.00" (no thousands separators: the model reads these figures).
fn plain_cents(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, (cents % 100).abs())
}

fn cents_to_number(cents: i64) -> Value {
    minor_to_number(cents, 2)
}

/// Minor units as a JSON number: a whole number when there is no fraction.
fn minor_to_number(minor: i64, digits: u32) -> Value {
    let unit = 10_i64.pow(digits);
    if minor.rem_euclid(unit) == 0 {
        json!(minor / unit)
    } else {
        json!(minor as f64 / unit as f64)
    }
}

/// What a call of `process_payment` pays, from its (validated) arguments.
pub fn payment_of(args: &Value) -> Result<Money, MoneyError> {
    let amount = match args.get("amount") {
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => return Err(MoneyError::NotPositive(other.to_string())),
        None => return Err(MoneyError::NotPositive("(none)".into())),
    };
    let currency = args
        .get("currency")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .unwrap_or(WALLET_CURRENCY);
    Money::parse(&amount, currency)
}

impl Wallet {
    /// What the wallet has paid in all, in its cents.
    pub fn paid_cents(&self) -> i64 {
        self.paid_cents
    }

    /// Whether the wallet has paid `payee` before (names compared without case or surrounding
    /// space).
    pub fn has_paid(&self, payee: &str) -> bool {
        self.payees.contains(&payee_key(payee))
    }

    /// Pays `money` to `recipient`, or returns the transaction already made for this call.
    pub fn pay(
        &mut self,
        tool_call_id: &str,
        money: Money,
        recipient: &str,
        description: &str,
        now_ms: Millis,
        transaction_id: impl FnOnce() -> String,
    ) -> Result<Transaction, PaymentError> {
        // A payment made before a load of the chat's head only is not read here: its call's
        // result was committed in the same transaction as it (`ToolEffects::InRecord`), so that
        // call is over and never runs again; and the store refuses a second payment of one
        // call (the ledger is unique by chat and call).
        if let Some(done) = self
            .transactions
            .read()
            .iter()
            .find(|t| t.tool_call_id == tool_call_id)
        {
            return Ok(done.clone());
        }
        // The recipient is canonical (ADR 0027): it is recorded exactly as the rules saw it.
        if recipient.trim().is_empty() {
            return Err(PaymentError::NoRecipient);
        }
        let cents = money.wallet_cents();
        if cents > self.balance_cents {
            return Err(PaymentError::InsufficientFunds {
                balance_cents: self.balance_cents,
                requested_cents: cents,
            });
        }
        self.balance_cents -= cents;
        let transaction = Transaction {
            id: transaction_id(),
            tool_call_id: tool_call_id.to_string(),
            amount_cents: cents,
            currency: self.currency.clone(),
            paid: (money.currency.code != self.currency).then(|| Paid {
                amount_minor: money.minor,
                currency: money.currency.code.to_string(),
            }),
            recipient: recipient.to_string(),
            description: description.to_string(),
            balance_after_cents: self.balance_cents,
            timestamp_ms: now_ms,
        };
        self.paid_cents = self.paid_cents.saturating_add(cents);
        self.payees.insert(payee_key(recipient));
        self.transactions.push(transaction.clone());
        Ok(transaction)
    }
}

/// The `process_payment` tool.
pub struct PaymentTool;

impl PaymentTool {
    pub fn spec(settings: &ToolSettings) -> ToolSpec {
        let codes: Vec<&str> = money::codes().collect();
        ToolSpec {
            name: "process_payment".into(),
            description: "Send money from the person's wallet to a recipient, in any currency the \
                          wallet knows (ISO 4217 code; the wallet holds US dollars and converts at \
                          its fixed rate table). Needs the person's approval unless a policy rule \
                          or their grant allows it; they may change the amount."
                .into(),
            purpose: "send payments from the person's wallet".into(),
            presentation: ToolPresentation::new(
                "Payment",
                "Pay {amount:money(currency)} {currency|USD}[ (≈ {amount:wallet(currency)} USD)] \
                 to {recipient}[ for {description}]",
            )
            .label("wallet_balance", "balance after")
            .label("charged", "charged (USD)")
            .hide("charged_currency")
            .hide("success"),
            parameters: json!({
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000_000,
                               "description": "Amount to pay in the currency, e.g. 50 or 12.5 \
                                               (whole units for currencies without cents, like JPY)."},
                    "recipient": {"type": "string", "minLength": 1, "maxLength": 100,
                                  "description": "Who receives the money (name, email or username)."},
                    "currency": {"type": "string", "enum": codes, "default": "USD",
                                 "description": "ISO 4217 code of the amount's currency."},
                    "description": {"type": "string", "maxLength": 200, "default": "",
                                    "description": "What the payment is for."}
                },
                "required": ["amount", "recipient"],
                "additionalProperties": false
            }),
            location: ToolLocation::Server,
            approval: ApprovalPolicy::Always,
            approval_timeout: settings.approval_timeout,
            result_timeout: settings.browser_timeout,
            acknowledgment: None,
            // The payment is a ledger row in the session record, committed with the result.
            effects: ToolEffects::InRecord,
            server: None,
            pays: Some(|args| {
                Some(Payment {
                    money: payment_of(args).ok()?,
                    payee: args.get("recipient")?.as_str()?.to_owned(),
                })
            }),
            // Canonical (ADR 0027): what a rule compares is the name the ledger records.
            names: vec!["recipient".into(), "currency".into(), "description".into()],
        }
    }
}

#[async_trait]
impl ServerTool for PaymentTool {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let money = payment_of(&args).map_err(|e| ToolError(e.to_string()))?;
        let recipient = args["recipient"].as_str().unwrap_or_default();
        let description = args["description"].as_str().unwrap_or_default();
        let now = ctx.clock.now_ms();
        let ids = ctx.ids.clone();
        ctx.session
            .with_wallet(|wallet| {
                wallet.pay(
                    &ctx.tool_call_id,
                    money,
                    recipient,
                    description,
                    now,
                    || ids.next_id(IdKind::Transaction),
                )
            })
            .map(|t| t.to_output())
            .map_err(|e| ToolError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(amount: &str) -> Money {
        Money::parse(amount, "USD").unwrap()
    }

    fn pay(wallet: &mut Wallet, call: &str, amount: &str) -> Result<Transaction, PaymentError> {
        wallet.pay(call, usd(amount), "Hanako", "", 0, || format!("txn-{call}"))
    }

    #[test]
    fn payments_debit_the_balance_across_calls() {
        let mut w = Wallet::default();
        let t = pay(&mut w, "a", "50").unwrap();
        assert_eq!(t.balance_after_cents, 95_000);
        pay(&mut w, "b", "0.25").unwrap();
        assert_eq!(w.balance_cents, 94_975);
        assert_eq!(w.transactions.len(), 2);
        assert_eq!(w.paid_cents(), 5_025);
    }

    /// ADR 0045, fourth amendment: what a decision needs of the payments is kept as running
    /// totals, so a wallet loaded without its payments still knows it.
    #[test]
    fn the_wallet_keeps_what_it_paid_and_to_whom() {
        let mut w = Wallet::default();
        w.pay("a", usd("10"), "  Hanako ", "", 0, || "t-a".into())
            .unwrap();
        w.pay(
            "b",
            Money::parse("1000", "JPY").unwrap(),
            "KEN",
            "",
            0,
            || "t-b".into(),
        )
        .unwrap();
        let all: i64 = w.transactions.read().iter().map(|t| t.amount_cents).sum();
        assert_eq!(w.paid_cents(), all);
        assert_eq!(w.payees, BTreeSet::from(["hanako".into(), "ken".into()]));
        assert!(w.has_paid("HANAKO") && w.has_paid(" ken") && !w.has_paid("Kenji"));

        // Stored without its payments and loaded as their number: the totals are kept.
        let stored = serde_json::to_string(&Wallet {
            transactions: Appended::default(),
            ..w.clone()
        })
        .unwrap();
        assert!(Wallet::keeps_totals(&stored));
        let head = Wallet::from_stored(&stored, Appended::on_disk(2)).unwrap();
        assert_eq!(
            (head.paid_cents(), &head.payees),
            (w.paid_cents(), &w.payees)
        );
        assert_eq!(
            (head.transactions.len(), head.transactions.read()),
            (2, &[][..])
        );
        assert!(head.transactions.whole().is_none());

        // A wallet written before the totals were kept sums them from its payments: only if
        // they were read whole.
        let mut old: Value = serde_json::to_value(&w).unwrap();
        old.as_object_mut().unwrap().remove("paid_cents");
        old.as_object_mut().unwrap().remove("payees");
        let old_json = old.to_string();
        assert!(!Wallet::keeps_totals(&old_json));
        assert_eq!(serde_json::from_str::<Wallet>(&old_json).unwrap(), w);
        let without =
            json!({"currency": "USD", "balance_cents": w.balance_cents, "transactions": []});
        let whole = Appended::committed(w.transactions.read().to_vec());
        assert_eq!(Wallet::from_stored(&without.to_string(), whole).unwrap(), w);
        assert!(matches!(
            Wallet::from_stored(&without.to_string(), Appended::on_disk(2)),
            Err(WalletJsonError::NoTotals)
        ));
    }

    #[test]
    fn the_same_call_never_pays_twice() {
        let mut w = Wallet::default();
        let first = pay(&mut w, "a", "10").unwrap();
        let again = pay(&mut w, "a", "10").unwrap();
        assert_eq!(first, again);
        assert_eq!(w.balance_cents, 99_000);
    }

    #[test]
    fn refusals_leave_the_wallet_untouched() {
        let mut w = Wallet::default();
        assert!(matches!(
            pay(&mut w, "a", "1000.01"),
            Err(PaymentError::InsufficientFunds { .. })
        ));
        assert_eq!(
            w.pay("a", usd("5"), "  ", "", 0, || "x".into()),
            Err(PaymentError::NoRecipient)
        );
        assert_eq!(w, Wallet::default());
        // The whole balance can be spent.
        assert_eq!(pay(&mut w, "z", "1000").unwrap().balance_after_cents, 0);
    }

    #[test]
    fn arguments_that_are_not_money_are_refused_in_words() {
        let error = |args: Value| payment_of(&args).unwrap_err().to_string();
        assert_eq!(
            error(json!({"amount": 3000.5, "currency": "JPY", "recipient": "K"})),
            "Invalid amount 3000.5 JPY: JPY has 0 decimal places."
        );
        assert_eq!(
            error(json!({"amount": 1.005, "recipient": "K"})),
            "Invalid amount 1.005 USD: USD has 2 decimal places."
        );
        assert!(error(json!({"amount": 0, "recipient": "K"})).contains("must be a positive"));
        assert!(
            error(json!({"amount": 5, "currency": "XAU"})).contains("Unsupported currency XAU")
        );
    }

    #[test]
    fn another_currency_is_converted_and_both_amounts_kept() {
        let mut w = Wallet::default();
        let yen =
            payment_of(&json!({"amount": 3000, "currency": "JPY", "recipient": "Kenji"})).unwrap();
        let t = w.pay("k", yen, "Kenji", "", 0, || "txn-k".into()).unwrap();
        // 3000 JPY at 0.0067 USD.
        assert_eq!(t.amount_cents, 2_010);
        assert_eq!(w.balance_cents, 97_990);
        let out = t.to_output();
        assert_eq!(out["amount"], 3000);
        assert_eq!(out["currency"], "JPY");
        assert_eq!(out["charged"], 20.1);
        assert_eq!(out["charged_currency"], "USD");
        assert_eq!(out["wallet_balance"], 979.9);
        // A stored transaction from before currencies still reads.
        let old: Transaction = serde_json::from_value(json!({
            "id": "t", "tool_call_id": "c", "amount_cents": 500, "currency": "USD",
            "recipient": "B", "description": "", "balance_after_cents": 99_500, "timestamp_ms": 0
        }))
        .unwrap();
        assert_eq!(old.to_output()["amount"], 5);
    }

    #[test]
    fn the_approval_sentence_reads_naturally() {
        let spec = PaymentTool::spec(&ToolSettings::default());
        let say = |args: Value| spec.presentation.sentence(&args);
        assert_eq!(
            say(json!({"amount": 50, "recipient": "Hanako", "currency": "USD"})),
            "Pay 50.00 USD to Hanako"
        );
        assert_eq!(
            say(json!({"amount": 12.5, "recipient": "Bob", "description": "lunch"})),
            "Pay 12.50 USD to Bob for lunch"
        );
        assert_eq!(
            say(json!({"amount": 3000, "recipient": "Kenji", "currency": "JPY"})),
            "Pay 3,000 JPY (≈ 20.10 USD) to Kenji"
        );
    }

    #[test]
    fn every_currency_of_the_schema_is_one_the_wallet_converts() {
        let spec = PaymentTool::spec(&ToolSettings::default());
        let codes = spec.parameters["properties"]["currency"]["enum"]
            .as_array()
            .unwrap();
        assert!(codes.len() >= 20);
        for code in codes {
            let args = json!({"amount": 1, "currency": code, "recipient": "X"});
            assert!((spec.pays.unwrap())(&args).is_some(), "{code}");
        }
    }

    #[test]
    fn the_output_names_amount_balance_and_transaction() {
        let mut w = Wallet::default();
        let out = w
            .pay("a", usd("12.5"), "Bob", "lunch", 1_700_000_000_000, || {
                "txn-1".into()
            })
            .unwrap()
            .to_output();
        assert_eq!(out["success"], true);
        assert_eq!(out["transaction_id"], "txn-1");
        assert_eq!(out["amount"], 12.5);
        assert_eq!(out["wallet_balance"], 987.5);
        assert_eq!(out["currency"], "USD");
        assert_eq!(out["description"], "lunch");
        assert_eq!(out["timestamp"], "2023-11-14T22:13:20.000Z");
    }
}
