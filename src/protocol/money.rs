//! Money in any currency: the ISO 4217 currencies Countersign's wallet accepts, their minor
//! units, and the offline rate table it converts them with.
//!
//! The wallet holds [`WALLET_CURRENCY`]. A payment in another currency is converted at the rate
//! in [`CURRENCIES`] and debited in the wallet's currency; the approval card shows both amounts
//! and policy thresholds (`context.amount_cents`) compare the converted amount. The rates are a
//! fixed table, not a market feed: Countersign's demo wallet must work offline and give the same
//! answer in every test. They were rounded from mid-market rates of 2026-11-02 and are
//! documented here and in the README; a deployment that moves real money converts with its own
//! ledger, not with this table.
//!
//! Amounts are integers of the currency's minor unit (cents, or yen: JPY has none), never
//! floating point; a conversion rounds half away from zero to the wallet's cent once.
//! Shared by both builds: the browser formats the card's "≈ 20.10 USD" with the same table.

/// The currency the wallet holds and converts into.
pub const WALLET_CURRENCY: &str = "USD";

/// One currency the wallet accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Currency {
    /// The ISO 4217 code.
    pub code: &'static str,
    /// Digits after the decimal point of its minor unit (ISO 4217: 2 for USD, 0 for JPY,
    /// 3 for KWD).
    pub minor_digits: u32,
    /// What one unit is worth in the wallet's currency, in millionths (1 EUR = 1.084 USD →
    /// 1_084_000).
    pub wallet_micros: i64,
}

/// The currencies the wallet accepts, with the rates it converts them at (in USD, 2026-11-02,
/// rounded). One line per currency.
#[rustfmt::skip]
pub const CURRENCIES: &[Currency] = &[
    Currency { code: "USD", minor_digits: 2, wallet_micros: 1_000_000 },
    Currency { code: "EUR", minor_digits: 2, wallet_micros: 1_084_000 },
    Currency { code: "JPY", minor_digits: 0, wallet_micros: 6_700 },
    Currency { code: "GBP", minor_digits: 2, wallet_micros: 1_292_000 },
    Currency { code: "CHF", minor_digits: 2, wallet_micros: 1_139_000 },
    Currency { code: "CAD", minor_digits: 2, wallet_micros: 727_000 },
    Currency { code: "AUD", minor_digits: 2, wallet_micros: 655_000 },
    Currency { code: "NZD", minor_digits: 2, wallet_micros: 596_000 },
    Currency { code: "CNY", minor_digits: 2, wallet_micros: 140_000 },
    Currency { code: "HKD", minor_digits: 2, wallet_micros: 128_600 },
    Currency { code: "SGD", minor_digits: 2, wallet_micros: 752_000 },
    Currency { code: "KRW", minor_digits: 0, wallet_micros: 730 },
    Currency { code: "TWD", minor_digits: 2, wallet_micros: 31_200 },
    Currency { code: "INR", minor_digits: 2, wallet_micros: 11_900 },
    Currency { code: "THB", minor_digits: 2, wallet_micros: 28_600 },
    Currency { code: "SEK", minor_digits: 2, wallet_micros: 94_500 },
    Currency { code: "NOK", minor_digits: 2, wallet_micros: 92_300 },
    Currency { code: "DKK", minor_digits: 2, wallet_micros: 145_300 },
    Currency { code: "PLN", minor_digits: 2, wallet_micros: 251_000 },
    Currency { code: "CZK", minor_digits: 2, wallet_micros: 43_200 },
    Currency { code: "MXN", minor_digits: 2, wallet_micros: 54_800 },
    Currency { code: "BRL", minor_digits: 2, wallet_micros: 184_000 },
    Currency { code: "ZAR", minor_digits: 2, wallet_micros: 55_600 },
    Currency { code: "ILS", minor_digits: 2, wallet_micros: 268_000 },
    Currency { code: "AED", minor_digits: 2, wallet_micros: 272_300 },
    Currency { code: "KWD", minor_digits: 3, wallet_micros: 3_262_000 },
];

/// The currency with this ISO code (any case).
pub fn currency(code: &str) -> Option<&'static Currency> {
    let code = code.trim();
    CURRENCIES
        .iter()
        .find(|c| c.code.eq_ignore_ascii_case(code))
}

/// The ISO codes the wallet accepts, in table order (for a tool's schema).
pub fn codes() -> impl Iterator<Item = &'static str> {
    CURRENCIES.iter().map(|c| c.code)
}

/// Why an amount cannot be paid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error(
        "Unsupported currency {0}: use an ISO 4217 code the wallet knows (USD, EUR, JPY, GBP, …)."
    )]
    UnknownCurrency(String),
    #[error("Invalid amount {0}: the amount must be a positive number.")]
    NotPositive(String),
    #[error("Invalid amount {amount} {code}: {code} has {} decimal place{}.", .digits, if *.digits == 1 { "" } else { "s" })]
    TooPrecise {
        amount: String,
        code: &'static str,
        digits: u32,
    },
    #[error("Invalid amount {0}: too large.")]
    TooLarge(String),
}

/// What a call pays, and to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub money: Money,
    /// Who receives it, as the call names them.
    pub payee: String,
}

/// An amount of one currency, in its minor unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Money {
    pub currency: &'static Currency,
    /// In the currency's minor unit (cents; yen).
    pub minor: i64,
}

/// The largest amount accepted, in major units of any currency (a tool's schema says as much:
/// `process_payment`'s maximum), so that a conversion fits in 64 bits (10^9 units × 10^3 minor
/// units × 3.3 × 10^6 micros < 2^63).
const MAX_MAJOR: i64 = 1_000_000_000;

impl Money {
    /// `amount` (a JSON number's text or an `f64`'s shortest text, e.g. "12.5") of the currency
    /// `code`. The number is read from its decimal text, so 0.1 + 0.2 never becomes 0.30000000004
    /// of anything; more decimals than the currency has is an error, never silently rounded.
    pub fn parse(amount: &str, code: &str) -> Result<Money, MoneyError> {
        let currency = currency(code).ok_or_else(|| MoneyError::UnknownCurrency(code.into()))?;
        let text = amount.trim();
        let minor = minor_units(text, currency.minor_digits).map_err(|e| match e {
            Digits::Invalid => MoneyError::NotPositive(text.into()),
            Digits::TooPrecise => MoneyError::TooPrecise {
                amount: text.into(),
                code: currency.code,
                digits: currency.minor_digits,
            },
            Digits::TooLarge => MoneyError::TooLarge(text.into()),
        })?;
        if minor <= 0 {
            return Err(MoneyError::NotPositive(text.into()));
        }
        Ok(Money { currency, minor })
    }

    /// The amount in the wallet's currency, in cents, rounded half away from zero — and never
    /// to nothing: a real payment costs at least one cent (0.001 KWD, 6 KRW and 0.42 INR are
    /// each worth less than half a cent; charged 0.00 they would count nothing against a
    /// limit or a budget, so a thousand of them would pass unseen).
    pub fn wallet_cents(&self) -> i64 {
        // minor / 10^digits units × micros per unit / 10^4 micros per cent (in 64 bits: amounts
        // are at most MAX_MAJOR units; 128-bit division costs the browser's bundle 1 KB).
        let scale = 10_i64.pow(self.currency.minor_digits) * 10_000;
        match self.minor.checked_mul(self.currency.wallet_micros) {
            Some(micros) => ((micros + scale / 2) / scale).max(1),
            None => i64::MAX,
        }
    }

    /// Whether this is the wallet's own currency (no conversion).
    pub fn is_wallet_currency(&self) -> bool {
        self.currency.code == WALLET_CURRENCY
    }

    /// "3,000" (JPY), "12.50" (USD), "1.250" (KWD): the amount with the currency's decimals and
    /// thousands separated.
    pub fn amount_text(&self) -> String {
        format_minor(self.minor, self.currency.minor_digits)
    }
}

/// Formats `minor` units with `digits` decimals and thousands separators.
pub fn format_minor(minor: i64, digits: u32) -> String {
    let negative = minor < 0;
    let magnitude = minor.unsigned_abs();
    let divisor = 10_u64.pow(digits);
    let whole = (magnitude / divisor).to_string();
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&grouped);
    if digits > 0 {
        out.push('.');
        out.push_str(&format!(
            "{:0width$}",
            magnitude % divisor,
            width = digits as usize
        ));
    }
    out
}

enum Digits {
    Invalid,
    TooPrecise,
    TooLarge,
}

/// "12.5" with 2 digits → 1250. Plain decimal text only (an optional exponent as JSON writes
/// big or tiny floats: "1e3", "2.5E-1").
fn minor_units(text: &str, digits: u32) -> Result<i64, Digits> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (
            &text[..at],
            text[at + 1..].parse::<i32>().map_err(|_| Digits::Invalid)?,
        ),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let int = int.strip_prefix('+').unwrap_or(int);
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(Digits::Invalid);
    }
    // All the digits as one integer, and where the decimal point sits after the exponent.
    let all: String = int.chars().chain(frac.chars()).collect();
    let all = all.trim_start_matches('0');
    let point = i64::from(exponent) - frac.len() as i64;
    // value = all × 10^point; in minor units: all × 10^(point + digits).
    let shift = point + i64::from(digits);
    if all.is_empty() {
        return Ok(0);
    }
    if shift < 0 {
        let cut = (-shift) as usize;
        let (keep, dropped) = if cut >= all.len() {
            ("", all)
        } else {
            all.split_at(all.len() - cut)
        };
        if dropped.bytes().any(|b| b != b'0') {
            return Err(Digits::TooPrecise);
        }
        return parse_bounded(keep, 0, digits);
    }
    parse_bounded(all, shift as usize, digits)
}

/// `digits_text` × 10^zeros, within [`MAX_MAJOR`] major units.
fn parse_bounded(digits_text: &str, zeros: usize, digits: u32) -> Result<i64, Digits> {
    if digits_text.is_empty() {
        return Ok(0);
    }
    if digits_text.len() + zeros > 19 {
        return Err(Digits::TooLarge);
    }
    let mut value: i64 = digits_text.parse().map_err(|_| Digits::TooLarge)?;
    for _ in 0..zeros {
        value = value.checked_mul(10).ok_or(Digits::TooLarge)?;
    }
    let limit = MAX_MAJOR.saturating_mul(10_i64.pow(digits));
    if value > limit {
        return Err(Digits::TooLarge);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_read_from_their_decimal_text() {
        let minor = |amount: &str, code: &str| Money::parse(amount, code).map(|m| m.minor);
        assert_eq!(minor("12.5", "USD"), Ok(1250));
        assert_eq!(minor("12.50", "usd"), Ok(1250));
        assert_eq!(minor("3000", "JPY"), Ok(3000));
        assert_eq!(minor("1.25", "KWD"), Ok(1250));
        assert_eq!(minor("1e3", "JPY"), Ok(1000));
        assert_eq!(minor("2.5E-1", "EUR"), Ok(25));
        assert_eq!(minor("0.1", "USD"), Ok(10));
        assert_eq!(minor("007", "USD"), Ok(700));
        assert!(matches!(
            minor("3000.5", "JPY"),
            Err(MoneyError::TooPrecise { digits: 0, .. })
        ));
        assert!(matches!(
            minor("1.005", "USD"),
            Err(MoneyError::TooPrecise { digits: 2, .. })
        ));
        assert_eq!(minor("0", "USD"), Err(MoneyError::NotPositive("0".into())));
        assert_eq!(
            minor("-5", "USD"),
            Err(MoneyError::NotPositive("-5".into()))
        );
        assert_eq!(
            minor("abc", "USD"),
            Err(MoneyError::NotPositive("abc".into()))
        );
        assert_eq!(minor(".", "USD"), Err(MoneyError::NotPositive(".".into())));
        assert_eq!(
            minor("1e400", "USD"),
            Err(MoneyError::TooLarge("1e400".into()))
        );
        assert_eq!(
            minor("1e30", "USD"),
            Err(MoneyError::TooLarge("1e30".into()))
        );
        assert_eq!(
            minor("5", "XAU"),
            Err(MoneyError::UnknownCurrency("XAU".into()))
        );
        assert_eq!(
            Money::parse("3000.5", "JPY").unwrap_err().to_string(),
            "Invalid amount 3000.5 JPY: JPY has 0 decimal places."
        );
    }

    #[test]
    fn conversions_round_once_to_the_wallets_cent() {
        let usd = |amount: &str, code: &str| Money::parse(amount, code).unwrap().wallet_cents();
        assert_eq!(usd("50", "USD"), 5000);
        assert_eq!(usd("12.34", "USD"), 1234);
        // 3000 × 0.0067 = 20.10 USD.
        assert_eq!(usd("3000", "JPY"), 2010);
        // 10 × 1.084 = 10.84.
        assert_eq!(usd("10", "EUR"), 1084);
        // 1 JPY = 0.0067 USD → 0.67 cents → 1 cent (half away from zero).
        assert_eq!(usd("1", "JPY"), 1);
        assert_eq!(usd("1.5", "KWD"), 489);
        assert_eq!(usd("1000000000", "KWD"), 326_200_000_000);
        assert_eq!(usd("1000000000", "JPY"), 670_000_000);
    }

    #[test]
    fn a_real_payment_never_converts_to_nothing() {
        let usd = |amount: &str, code: &str| Money::parse(amount, code).unwrap().wallet_cents();
        // Each is worth less than half a cent: charged 0.00 they would count nothing against a
        // limit or a budget.
        assert_eq!(usd("0.001", "KWD"), 1);
        assert_eq!(usd("6", "KRW"), 1);
        assert_eq!(usd("0.42", "INR"), 1);
        assert_eq!(usd("0.01", "USD"), 1);
        // Every amount of every currency costs at least a cent.
        for code in codes() {
            let digits = currency(code).unwrap().minor_digits;
            let smallest = format_minor(1, digits).replace(',', "");
            assert!(usd(&smallest, code) >= 1, "{smallest} {code}");
        }
    }

    #[test]
    fn amounts_read_with_the_currencys_decimals() {
        let text = |amount: &str, code: &str| Money::parse(amount, code).unwrap().amount_text();
        assert_eq!(text("3000", "JPY"), "3,000");
        assert_eq!(text("1234567.5", "USD"), "1,234,567.50");
        assert_eq!(text("0.05", "EUR"), "0.05");
        assert_eq!(text("1.25", "KWD"), "1.250");
        assert_eq!(format_minor(-150, 2), "-1.50");
        assert_eq!(format_minor(100, 0), "100");
    }

    #[test]
    fn the_table_is_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for c in CURRENCIES {
            assert_eq!(c.code.len(), 3, "{}", c.code);
            assert!(c.code.bytes().all(|b| b.is_ascii_uppercase()), "{}", c.code);
            assert!(seen.insert(c.code), "{} twice", c.code);
            assert!(c.wallet_micros > 0 && c.minor_digits <= 3, "{}", c.code);
        }
        assert_eq!(currency(WALLET_CURRENCY).unwrap().wallet_micros, 1_000_000);
    }
}
