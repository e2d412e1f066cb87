//! Grants: an approval the person asked the server to remember, and how a call ran or was
//! refused without asking them (shared by the server and the page).
//!
//! From an approval card the person may approve once, or approve **and grant**: the same call
//! again in this chat ([`GrantScope::Call`]), the tool in this chat ([`GrantScope::Tool`]), or a
//! tool that pays, up to an amount in every chat ([`GrantScope::Budget`]) — each for a time they
//! choose. The request travels in the approval part as Countersign's extension
//! `approval.grant` ([`GrantRequest`]); the server stores the [`Grant`], enforces it with the
//! policy (a grant never runs what a rule denies or insists on asking for), and lists it with
//! its use so far.
//!
//! A call that a rule or a grant decided carries that decision to the page in the tool part's
//! `toolMetadata.countersign` ([`Ruling`]), next to AI SDK v7's automatic approval
//! (`tool-approval-request` with `isAutomatic`, then `tool-approval-response`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::countersign::Requirement;

/// The durations the approval card offers, with their words, shortest first. The one truth
/// about how long a grant lasts: the server accepts any duration from the first to the last
/// ([`MIN_GRANT_SECONDS`], [`MAX_GRANT_SECONDS`]), and the README says so
/// ([`grant_duration_range`]). Long enough to matter for a session of work, short enough that a
/// forgotten grant does not become a standing permission (a week).
pub const GRANT_DURATIONS: [(u64, &str); 5] = [
    (15 * 60, "15 minutes"),
    (3600, "1 hour"),
    (8 * 3600, "8 hours"),
    (24 * 3600, "1 day"),
    (7 * 24 * 3600, "7 days"),
];
/// How short a grant may be: the shortest the card offers.
pub const MIN_GRANT_SECONDS: u64 = GRANT_DURATIONS[0].0;
/// How long a grant may last at most: the longest the card offers.
pub const MAX_GRANT_SECONDS: u64 = GRANT_DURATIONS[GRANT_DURATIONS.len() - 1].0;

/// "15 minutes to 7 days": how long a grant may last, in words.
pub fn grant_duration_range() -> String {
    format!(
        "{} to {}",
        GRANT_DURATIONS[0].1,
        GRANT_DURATIONS[GRANT_DURATIONS.len() - 1].1
    )
}

/// What a grant covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// This exact call (tool and arguments) again, in this chat.
    Call,
    /// This tool with any arguments, in this chat (offered for tools that do not pay).
    Tool,
    /// This tool, in every chat, as long as what it pays in all stays within an amount (offered
    /// for tools that pay).
    Budget,
}

impl GrantScope {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Call => "call",
            GrantScope::Tool => "tool",
            GrantScope::Budget => "budget",
        }
    }

    pub fn parse(text: &str) -> Option<GrantScope> {
        [GrantScope::Call, GrantScope::Tool, GrantScope::Budget]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// The person's "approve and remember", sent as `approval.grant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRequest {
    pub scope: GrantScope,
    /// How long the grant lasts, from now.
    pub seconds: u64,
    /// For [`GrantScope::Budget`]: the most the tool may pay in all, in the wallet's cents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cents: Option<i64>,
}

impl GrantRequest {
    /// Reads `approval.grant` (hand-read, like the rest of the approval object: ADR 0022).
    pub fn from_value(value: &Value) -> Result<GrantRequest, String> {
        let object = value
            .as_object()
            .ok_or("approval.grant must be an object")?;
        let scope = object
            .get("scope")
            .and_then(Value::as_str)
            .and_then(GrantScope::parse)
            .ok_or("approval.grant.scope must be \"call\", \"tool\" or \"budget\"")?;
        let seconds = object
            .get("seconds")
            .and_then(Value::as_u64)
            .ok_or("approval.grant.seconds must be a whole number of seconds")?;
        let max_cents = match object.get("maxCents") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .ok_or("approval.grant.maxCents must be a whole number of cents")?,
            ),
        };
        Ok(GrantRequest {
            scope,
            seconds,
            max_cents,
        })
    }
}

/// A remembered approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub id: String,
    pub scope: GrantScope,
    /// The tool it lets run.
    pub tool: String,
    /// The chat it holds in; `None`: every chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    /// For [`GrantScope::Call`]: the exact arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// For [`GrantScope::Budget`]: the most it lets the tool pay in all (wallet cents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cents: Option<i64>,
    /// What the calls it let run paid (or will pay) so far, wallet cents.
    #[serde(default)]
    pub used_cents: i64,
    /// How many calls it let run.
    #[serde(default)]
    pub uses: u64,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<i64>,
    /// The approval it was granted with, and its chat.
    pub approval_id: String,
    pub granted_in: String,
    /// The person who granted it: it lets run only calls of their chats (`None`: the one
    /// local person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    /// What it lets run, in words ("Payment up to 50.00 USD in every chat").
    pub label: String,
}

/// Where a grant stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantState {
    Active,
    Expired,
    Revoked,
    /// A budget with nothing left.
    UsedUp,
}

impl GrantState {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantState::Active => "active",
            GrantState::Expired => "expired",
            GrantState::Revoked => "revoked",
            GrantState::UsedUp => "used up",
        }
    }
}

impl Grant {
    /// A grant for tests: a budget of 50 USD for `tool`, in every chat, from 0 to 100 000 ms.
    #[cfg(test)]
    pub fn sample(id: &str, tool: &str) -> Grant {
        Grant {
            id: id.into(),
            scope: GrantScope::Budget,
            tool: tool.into(),
            chat: None,
            args: None,
            max_cents: Some(5_000),
            used_cents: 0,
            uses: 0,
            created_at_ms: 0,
            expires_at_ms: 100_000,
            revoked_at_ms: None,
            approval_id: "a".into(),
            granted_in: "c".into(),
            person: None,
            label: format!("{tool} up to 50.00 USD"),
        }
    }

    /// Whose grant it is: a person's id, or the local person's.
    pub fn owner(&self) -> &str {
        self.person
            .as_deref()
            .unwrap_or(super::countersign::LOCAL_PERSON)
    }

    pub fn state(&self, now_ms: i64) -> GrantState {
        if self.revoked_at_ms.is_some() {
            GrantState::Revoked
        } else if now_ms >= self.expires_at_ms {
            GrantState::Expired
        } else if self.max_cents.is_some_and(|max| self.used_cents >= max) {
            GrantState::UsedUp
        } else {
            GrantState::Active
        }
    }

    /// What is left of a budget, in cents.
    pub fn left_cents(&self) -> Option<i64> {
        self.max_cents.map(|max| (max - self.used_cents).max(0))
    }
}

/// Why a call ran, asked or was refused without the person deciding it: the part's
/// `toolMetadata.countersign`, written by the server for its own page (the AI SDK's parts keep
/// `toolMetadata` as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Ruling {
    /// A policy rule let it run.
    AllowedByRule { rule: String },
    /// The person's grant let it run.
    AllowedByGrant { grant: String, label: String },
    /// A policy rule refused it; `reason` is what the model was told.
    DeniedByRule { rule: String, reason: String },
    /// It asks the person; `rule` when a rule insists, `grantable` when the person may remember
    /// the answer as a grant, `needs` when the rule asks for more than the chat's person's
    /// click (several people, a role, someone else, a passkey: [`Requirement`]).
    Asked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        grantable: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        needs: Option<Requirement>,
    },
}

/// The key of [`Ruling`] in a tool part's `toolMetadata`.
pub const RULING_KEY: &str = "countersign";

impl Ruling {
    /// What an approval asked this way needs (the chat's person's click when nothing more).
    pub fn needs(&self) -> Requirement {
        match self {
            Ruling::Asked {
                needs: Some(needs), ..
            } => needs.clone(),
            _ => Requirement::default(),
        }
    }

    /// The `toolMetadata` that carries it.
    pub fn to_metadata(&self) -> serde_json::Map<String, Value> {
        let mut map = serde_json::Map::new();
        if let Ok(value) = serde_json::to_value(self) {
            map.insert(RULING_KEY.into(), value);
        }
        map
    }

    /// Reads it back from a tool part's `toolMetadata` (hand-read: the page's bundle).
    pub fn from_metadata(metadata: &serde_json::Map<String, Value>) -> Option<Ruling> {
        let object = metadata.get(RULING_KEY)?.as_object()?;
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(match object.get("decision")?.as_str()? {
            "allowed_by_rule" => Ruling::AllowedByRule {
                rule: text("rule")?,
            },
            "allowed_by_grant" => Ruling::AllowedByGrant {
                grant: text("grant")?,
                label: text("label").unwrap_or_default(),
            },
            "denied_by_rule" => Ruling::DeniedByRule {
                rule: text("rule")?,
                reason: text("reason").unwrap_or_default(),
            },
            "asked" => Ruling::Asked {
                rule: text("rule"),
                grantable: object
                    .get("grantable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                needs: object.get("needs").and_then(Requirement::from_value),
            },
            _ => return None,
        })
    }

    /// The sentence the page shows for a call that ran or was refused without asking.
    pub fn sentence(&self) -> Option<String> {
        match self {
            Ruling::AllowedByRule { rule } => Some(format!("Ran without asking: rule {rule}")),
            Ruling::AllowedByGrant { label, .. } => {
                Some(format!("Ran without asking: your grant ({label})"))
            }
            Ruling::DeniedByRule { rule, reason } => {
                Some(format!("Refused by rule {rule}: {reason}"))
            }
            Ruling::Asked { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_decision_round_trips_through_tool_metadata() {
        let decisions = [
            Ruling::AllowedByRule {
                rule: "small-payments".into(),
            },
            Ruling::AllowedByGrant {
                grant: "g1".into(),
                label: "Payment up to 50.00 USD in every chat".into(),
            },
            Ruling::DeniedByRule {
                rule: "no-crypto".into(),
                reason: "We never pay crypto exchanges.".into(),
            },
            Ruling::Asked {
                rule: Some("big".into()),
                grantable: false,
                needs: None,
            },
            Ruling::Asked {
                rule: None,
                grantable: true,
                needs: None,
            },
            Ruling::Asked {
                rule: Some("two-people".into()),
                grantable: false,
                needs: Some(Requirement {
                    approvers: 2,
                    role: Some("approver".into()),
                    not_requester: true,
                    step_up: true,
                }),
            },
        ];
        for decision in decisions {
            let metadata = decision.to_metadata();
            assert_eq!(Ruling::from_metadata(&metadata), Some(decision.clone()));
            let through_json: serde_json::Map<String, Value> =
                serde_json::from_value(serde_json::to_value(&metadata).unwrap()).unwrap();
            assert_eq!(Ruling::from_metadata(&through_json), Some(decision));
        }
        assert_eq!(Ruling::from_metadata(&serde_json::Map::new()), None);
    }

    #[test]
    fn grant_requests_are_read_strictly() {
        assert_eq!(
            GrantRequest::from_value(
                &json!({"scope": "budget", "seconds": 3600, "maxCents": 5000})
            ),
            Ok(GrantRequest {
                scope: GrantScope::Budget,
                seconds: 3600,
                max_cents: Some(5000)
            })
        );
        for bad in [
            json!("call"),
            json!({"scope": "everything", "seconds": 60}),
            json!({"scope": "call"}),
            json!({"scope": "call", "seconds": -1}),
            json!({"scope": "budget", "seconds": 60, "maxCents": 1.5}),
        ] {
            assert!(GrantRequest::from_value(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_card_the_server_and_the_readme_agree_on_how_long_a_grant_lasts() {
        assert!(
            GRANT_DURATIONS.windows(2).all(|w| w[0].0 < w[1].0),
            "the card's durations go from the shortest to the longest"
        );
        assert_eq!(MIN_GRANT_SECONDS, 15 * 60);
        assert_eq!(MAX_GRANT_SECONDS, 7 * 24 * 3600);
        assert_eq!(grant_duration_range(), "15 minutes to 7 days");
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&format!("for {}.", grant_duration_range())),
            "the README states the range the server enforces ({})",
            grant_duration_range()
        );
    }

    #[test]
    fn a_grant_knows_where_it_stands() {
        let mut grant = Grant::sample("g", "process_payment");
        grant.used_cents = 1_000;
        grant.expires_at_ms = 100;
        assert_eq!(grant.state(50), GrantState::Active);
        assert_eq!(grant.left_cents(), Some(4_000));
        assert_eq!(grant.state(100), GrantState::Expired);
        grant.used_cents = 5_000;
        assert_eq!(grant.state(50), GrantState::UsedUp);
        grant.revoked_at_ms = Some(10);
        assert_eq!(grant.state(50), GrantState::Revoked);
    }
}
