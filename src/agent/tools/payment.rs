//! `process_payment`: a real per-session wallet ledger.
//!
//! The wallet starts at 1000.00 USD and its balance carries across turns. Amounts are kept in
//! cents (never floating point). A payment is idempotent by tool call id: running the same call
//! twice (a retried request, a restart in the middle of execution) returns the first transaction
//! instead of charging again.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ApprovalPolicy, ServerTool, ToolContext, ToolEffects, ToolError, ToolLocation, ToolSettings,
    ToolSpec,
};
use crate::agent::clock::{IdKind, Millis, rfc3339};
use crate::protocol::ToolPresentation;

/// The only currency the demo wallet holds.
pub const WALLET_CURRENCY: &str = "USD";
/// The opening balance of every new wallet, in cents.
pub const OPENING_BALANCE_CENTS: i64 = 100_000;

/// One completed payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    pub id: String,
    pub tool_call_id: String,
    pub amount_cents: i64,
    pub currency: String,
    pub recipient: String,
    pub description: String,
    pub balance_after_cents: i64,
    pub timestamp_ms: Millis,
}

impl Transaction {
    /// The tool output the model and the UI see.
    pub fn to_output(&self) -> Value {
        json!({
            "success": true,
            "transaction_id": self.id,
            "amount": cents_to_number(self.amount_cents),
            "currency": self.currency,
            "recipient": self.recipient,
            "description": self.description,
            "wallet_balance": cents_to_number(self.balance_after_cents),
            "timestamp": rfc3339(self.timestamp_ms),
        })
    }
}

/// A session's wallet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wallet {
    pub currency: String,
    pub balance_cents: i64,
    pub transactions: Vec<Transaction>,
}

impl Default for Wallet {
    fn default() -> Self {
        Wallet {
            currency: WALLET_CURRENCY.to_string(),
            balance_cents: OPENING_BALANCE_CENTS,
            transactions: Vec::new(),
        }
    }
}

/// Why a payment was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PaymentError {
    #[error("Invalid amount {0}: the amount must be positive.")]
    NotPositive(f64),
    #[error("Invalid amount {0}: use at most two decimal places.")]
    TooPrecise(f64),
    #[error("Unsupported currency {0}: this wallet holds US dollars (USD) only.")]
    Currency(String),
    #[error(
        "Insufficient funds: the balance is {balance:.2} USD, the payment needs {requested:.2} USD."
    )]
    InsufficientFunds { balance: f64, requested: f64 },
    #[error("The recipient must not be empty.")]
    NoRecipient,
}

fn cents_to_number(cents: i64) -> Value {
    if cents.rem_euclid(100) == 0 {
        json!(cents / 100)
    } else {
        json!(cents as f64 / 100.0)
    }
}

impl Wallet {
    pub fn balance(&self) -> f64 {
        self.balance_cents as f64 / 100.0
    }

    /// Pays `amount` to `recipient`, or returns the transaction already made for this call.
    #[allow(clippy::too_many_arguments)]
    pub fn pay(
        &mut self,
        tool_call_id: &str,
        amount: f64,
        currency: &str,
        recipient: &str,
        description: &str,
        now_ms: Millis,
        transaction_id: impl FnOnce() -> String,
    ) -> Result<Transaction, PaymentError> {
        if let Some(done) = self
            .transactions
            .iter()
            .find(|t| t.tool_call_id == tool_call_id)
        {
            return Ok(done.clone());
        }
        if !amount.is_finite() || amount <= 0.0 {
            return Err(PaymentError::NotPositive(amount));
        }
        let cents = (amount * 100.0).round();
        if (cents - amount * 100.0).abs() > 1e-6 {
            return Err(PaymentError::TooPrecise(amount));
        }
        if !currency.eq_ignore_ascii_case(&self.currency) {
            return Err(PaymentError::Currency(currency.to_string()));
        }
        let recipient = recipient.trim();
        if recipient.is_empty() {
            return Err(PaymentError::NoRecipient);
        }
        let cents = cents as i64;
        if cents > self.balance_cents {
            return Err(PaymentError::InsufficientFunds {
                balance: self.balance(),
                requested: cents as f64 / 100.0,
            });
        }
        self.balance_cents -= cents;
        let transaction = Transaction {
            id: transaction_id(),
            tool_call_id: tool_call_id.to_string(),
            amount_cents: cents,
            currency: self.currency.clone(),
            recipient: recipient.to_string(),
            description: description.to_string(),
            balance_after_cents: self.balance_cents,
            timestamp_ms: now_ms,
        };
        self.transactions.push(transaction.clone());
        Ok(transaction)
    }
}

/// The `process_payment` tool.
pub struct PaymentTool;

impl PaymentTool {
    pub fn spec(settings: &ToolSettings) -> ToolSpec {
        ToolSpec {
            name: "process_payment".into(),
            description: "Send money from the person's wallet (US dollars) to a recipient. \
                          Always needs the person's approval; they may change the amount."
                .into(),
            purpose: "send payments from the person's wallet".into(),
            presentation: ToolPresentation::new(
                "Payment",
                "Pay {amount:.2} {currency|USD} to {recipient}[ for {description}]",
            )
            .label("wallet_balance", "balance after")
            .hide("success"),
            parameters: json!({
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000,
                               "description": "Amount to pay, e.g. 50 or 12.5."},
                    "recipient": {"type": "string", "minLength": 1, "maxLength": 100,
                                  "description": "Who receives the money (name, email or username)."},
                    "currency": {"type": "string", "enum": ["USD"], "default": "USD",
                                 "description": "ISO currency code; the wallet holds USD only."},
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
        }
    }
}

#[async_trait]
impl ServerTool for PaymentTool {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let amount = args["amount"]
            .as_f64()
            .ok_or_else(|| ToolError("amount must be a number".into()))?;
        let recipient = args["recipient"].as_str().unwrap_or_default();
        let currency = args["currency"].as_str().unwrap_or(WALLET_CURRENCY);
        let description = args["description"].as_str().unwrap_or_default();
        let now = ctx.clock.now_ms();
        let ids = ctx.ids.clone();
        ctx.session
            .with_wallet(|wallet| {
                wallet.pay(
                    &ctx.tool_call_id,
                    amount,
                    currency,
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

    fn pay(wallet: &mut Wallet, call: &str, amount: f64) -> Result<Transaction, PaymentError> {
        wallet.pay(call, amount, "USD", "Hanako", "", 0, || {
            format!("txn-{call}")
        })
    }

    #[test]
    fn payments_debit_the_balance_across_calls() {
        let mut w = Wallet::default();
        let t = pay(&mut w, "a", 50.0).unwrap();
        assert_eq!(t.balance_after_cents, 95_000);
        pay(&mut w, "b", 0.25).unwrap();
        assert_eq!(w.balance_cents, 94_975);
        assert_eq!(w.transactions.len(), 2);
    }

    #[test]
    fn the_same_call_never_pays_twice() {
        let mut w = Wallet::default();
        let first = pay(&mut w, "a", 10.0).unwrap();
        let again = pay(&mut w, "a", 10.0).unwrap();
        assert_eq!(first, again);
        assert_eq!(w.balance_cents, 99_000);
    }

    #[test]
    fn refusals_leave_the_wallet_untouched() {
        let mut w = Wallet::default();
        assert_eq!(pay(&mut w, "a", 0.0), Err(PaymentError::NotPositive(0.0)));
        assert_eq!(pay(&mut w, "a", -5.0), Err(PaymentError::NotPositive(-5.0)));
        assert_eq!(
            pay(&mut w, "a", 1.005),
            Err(PaymentError::TooPrecise(1.005))
        );
        assert!(matches!(
            pay(&mut w, "a", 1000.01),
            Err(PaymentError::InsufficientFunds { .. })
        ));
        assert_eq!(
            w.pay("a", 5.0, "EUR", "B", "", 0, || "x".into()),
            Err(PaymentError::Currency("EUR".into()))
        );
        assert_eq!(
            w.pay("a", 5.0, "USD", "  ", "", 0, || "x".into()),
            Err(PaymentError::NoRecipient)
        );
        assert_eq!(w, Wallet::default());
        // The whole balance can be spent.
        assert_eq!(pay(&mut w, "z", 1000.0).unwrap().balance_after_cents, 0);
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
    }

    #[test]
    fn the_output_names_amount_balance_and_transaction() {
        let mut w = Wallet::default();
        let out = w
            .pay("a", 12.5, "usd", "Bob", "lunch", 1_700_000_000_000, || {
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
