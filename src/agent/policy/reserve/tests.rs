//! Decisions that reserve, on two policies sharing one store (two instances on one database):
//! neither passes a daily limit or a grant's budget the other already used, a payment a person
//! approved is checked again with the day's total when it starts, and a store that fails lets
//! nothing that spends run without a person.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use async_trait::async_trait;
use serde_json::json;

use super::super::tests::{
    EXAMPLE, LOCAL_REQUESTER, NOON, grant, pay, policy, registry, verdict_as_want,
};
use super::super::*;
use crate::agent::store::{
    AuditEvent, Claim, MemoryStore, PolicyStore, Reserved, Spent, StoreError, Unused,
};
use crate::protocol::grant::GrantScope;

/// Decides `payments` (call id, USD) of `chat` as one step on `policy`: what each got.
async fn payments(policy: &Policy, chat: &str, payments: &[(&str, f64)]) -> Vec<String> {
    let registry = registry();
    let tool = registry.get("process_payment").unwrap();
    policy
        .decide(
            &registry,
            chat,
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |decider| {
                payments
                    .iter()
                    .map(|(id, usd)| {
                        verdict_as_want(&decider.decide(id, &tool.spec, &pay(*usd, "Jack"), NOON))
                    })
                    .collect()
            },
        )
        .await
}

/// Payments a person approved, about to start on `policy`: how each was cleared.
async fn approved(
    policy: &Policy,
    chat: &str,
    payments: &[(&str, f64)],
) -> Vec<Result<(), Refusal>> {
    let registry = registry();
    let tool = registry.get("process_payment").unwrap();
    policy
        .decide(
            &registry,
            chat,
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |decider| {
                payments
                    .iter()
                    .map(|(id, usd)| decider.clear_to_run(id, &tool.spec, &pay(*usd, "Jill"), NOON))
                    .collect()
            },
        )
        .await
}

/// Two instances (policies with rules `text`) on one store.
async fn two_instances(text: Option<&str>, store: &Arc<MemoryStore>) -> (Policy, Policy) {
    let make = || text.map_or_else(Policy::tool_defaults, policy);
    let (a, b) = (make(), make());
    a.restore(store.clone(), NOON).await.unwrap();
    b.restore(store.clone(), NOON).await.unwrap();
    (a, b)
}

#[tokio::test]
async fn two_instances_on_one_store_never_pass_a_daily_limit_together() {
    let store = Arc::new(MemoryStore::default());
    let (a, b) = two_instances(Some(EXAMPLE), &store).await;
    // A lets four 10 USD payments run without asking: 40 of the day's 50 USD.
    let four = payments(
        &a,
        "chat-a",
        &[("a1", 10.0), ("a2", 10.0), ("a3", 10.0), ("a4", 10.0)],
    );
    assert_eq!(four.await, ["Rule(small-payments)"; 4]);
    // B has not heard of them; it decides on the store's total: 10 more fit, once.
    let two = payments(&b, "chat-b", &[("b1", 10.0), ("b2", 10.0)]).await;
    assert_eq!(two, ["Rule(small-payments)", "Ask(None, true)"]);
    // And A, in turn, counts B's.
    assert_eq!(
        payments(&a, "chat-a", &[("a5", 0.01)]).await,
        ["Ask(None, true)"]
    );
    assert_eq!(store.spent(NOON).await.unwrap().today_cents, 5_000);
    // A call A let run ended without paying: its share goes back for every instance.
    a.settle("a1", false, None);
    a.flush(NOON).await;
    assert_eq!(
        payments(&b, "chat-b", &[("b3", 10.0)]).await,
        ["Rule(small-payments)"]
    );
}

#[tokio::test]
async fn a_grant_used_up_on_another_instance_runs_nothing_here() {
    let store = Arc::new(MemoryStore::default());
    let mut budget = grant("g-budget", GrantScope::Budget, "process_payment");
    budget.max_cents = Some(5_000);
    budget.used_cents = 1_000;
    store.save_grant(&budget).await.unwrap();
    let (a, b) = two_instances(None, &store).await;
    // 40 USD left: A spends them.
    assert_eq!(
        payments(&a, "chat-a", &[("a1", 20.0), ("a2", 20.0)]).await,
        ["Grant(g-budget)", "Grant(g-budget)"]
    );
    // B's copy still says 40 USD left; the store says none.
    assert_eq!(
        payments(&b, "chat-b", &[("b1", 10.0)]).await,
        ["Ask(None, true)"]
    );
    let used = |p: &Policy| (p.grants()[0].used_cents, p.grants()[0].uses);
    assert_eq!((used(&a), used(&b)), ((5_000, 2), (5_000, 2)));
    // A payment of A's that failed gives its 20 USD back: B may use them.
    a.settle("a2", true, None);
    a.flush(NOON).await;
    assert_eq!(
        payments(&b, "chat-b", &[("b2", 20.0)]).await,
        ["Grant(g-budget)"]
    );
    assert_eq!(store.grants().await.unwrap()[0].used_cents, 5_000);
}

/// At most 100 USD a day, whoever approved; up to 10 USD a payment runs without asking.
const DAILY_LIMIT: &str = r#"
@id("small") permit (principal, action == Action::"process_payment", resource)
when { context.amount_cents <= 1000 };

@id("daily-limit") @reason("At most 100 USD a day.")
forbid (principal, action == Action::"process_payment", resource)
when { context.spent_today_cents + context.amount_cents > 10000 };
"#;

#[tokio::test]
async fn a_payment_a_person_approved_is_checked_again_with_the_days_total_when_it_starts() {
    let store = Arc::new(MemoryStore::default());
    let (a, b) = two_instances(Some(DAILY_LIMIT), &store).await;
    let nine: Vec<(String, f64)> = (1..=9).map(|i| (format!("a{i}"), 10.0)).collect();
    let nine: Vec<(&str, f64)> = nine.iter().map(|(id, usd)| (id.as_str(), *usd)).collect();
    assert_eq!(payments(&a, "chat-a", &nine).await, ["Rule(small)"; 9]);
    // On B, a person approved 20 USD while the day's total was 0: it is refused now, by the
    // rule, with its reason; 10 USD still fit, and then nothing does.
    let refused = Refusal::Rule {
        rule: "daily-limit".into(),
        reason: "At most 100 USD a day.".into(),
    };
    assert_eq!(
        approved(&b, "chat-b", &[("p1", 20.0), ("p2", 10.0), ("p3", 0.01)]).await,
        [Err(refused.clone()), Ok(()), Err(refused)]
    );
    assert_eq!(store.spent(NOON).await.unwrap().today_cents, 10_000);
    // A payment that pays nothing needs nothing reserved.
    let registry = registry();
    let weather = registry.get("get_weather").unwrap();
    let cleared = b
        .decide(
            &registry,
            "chat-b",
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |d| {
                let cleared = d.clear_to_run("w", &weather.spec, &json!({"city": "Paris"}), NOON);
                (cleared, d.claims().len())
            },
        )
        .await;
    assert_eq!(cleared, (Ok(()), 0));
}

/// A store whose database does not answer.
struct Down;

#[async_trait]
impl PolicyStore for Down {
    async fn save_grant(&self, _: &Grant) -> Result<(), StoreError> {
        Err(StoreError::new("down"))
    }
    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        Ok(Vec::new())
    }
    async fn spent(&self, _: Millis) -> Result<Spent, StoreError> {
        Ok(Spent::default())
    }
    async fn reserve(
        &self,
        _: Millis,
        _: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        Err(StoreError::new("down"))
    }
    async fn release(&self, _: &[Unused]) -> Result<(), StoreError> {
        Err(StoreError::new("down"))
    }
    async fn append_audit(&self, _: &[AuditEvent]) -> Result<(), StoreError> {
        Err(StoreError::new("down"))
    }
    async fn keep_policy_text(&self, _: &str, _: &str, _: Millis) -> Result<(), StoreError> {
        Ok(())
    }
    async fn policy_text(&self, _: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn without_a_store_that_answers_nothing_that_spends_runs_without_a_person() {
    let policy = policy(EXAMPLE);
    policy.restore(Arc::new(Down), NOON).await.unwrap();
    // A payment the rules would run asks the person (who may still approve it)...
    assert_eq!(
        payments(&policy, "c", &[("x", 5.0)]).await,
        ["Ask(None, false)"]
    );
    // ...and when approved it does not start, saying why.
    assert_eq!(
        approved(&policy, "c", &[("y", 5.0)]).await,
        [Err(Refusal::Unrecorded)]
    );
    // What spends nothing is decided as ever.
    let registry = registry();
    let weather = registry.get("get_weather").unwrap();
    let verdict = policy
        .decide(
            &registry,
            "c",
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |d| verdict_as_want(&d.decide("w", &weather.spec, &json!({"city": "Oslo"}), NOON)),
        )
        .await;
    assert_eq!(verdict, "Rule(weather)");
}

/// A memory store on which another instance revokes grant `g-budget` the first time a
/// decision is being kept (between the store's read and its write).
struct RevokedMeanwhile {
    inner: MemoryStore,
    reserves: AtomicUsize,
}

#[async_trait]
impl PolicyStore for RevokedMeanwhile {
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        self.inner.save_grant(grant).await
    }
    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.inner.grants().await
    }
    async fn spent(&self, now: Millis) -> Result<Spent, StoreError> {
        self.inner.spent(now).await
    }
    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        if self.reserves.fetch_add(1, Ordering::SeqCst) > 0 {
            return self.inner.reserve(now, decide).await;
        }
        let claims = decide(&self.inner.spent(now).await?);
        let mut revoked = self.inner.grants().await?.remove(0);
        revoked.revoked_at_ms = Some(now);
        self.inner.save_grant(&revoked).await?;
        self.inner.reserve(now, &mut |_| claims.clone()).await
    }
    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError> {
        self.inner.release(unused).await
    }
    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        self.inner.append_audit(events).await
    }
    async fn keep_policy_text(
        &self,
        digest: &str,
        text: &str,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.inner.keep_policy_text(digest, text, at).await
    }
    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError> {
        self.inner.policy_text(digest).await
    }
    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.policy_texts().await
    }
}

#[tokio::test]
async fn a_grant_revoked_while_a_call_is_decided_lets_nothing_run_and_the_call_asks() {
    let store = Arc::new(RevokedMeanwhile {
        inner: MemoryStore::default(),
        reserves: AtomicUsize::new(0),
    });
    let mut budget = grant("g-budget", GrantScope::Budget, "process_payment");
    budget.max_cents = Some(5_000);
    store.save_grant(&budget).await.unwrap();
    let policy = Policy::tool_defaults();
    policy.restore(store.clone(), NOON).await.unwrap();
    // A step that neither pays nor uses a grant is decided without the store.
    let registry = registry();
    let weather = registry.get("get_weather").unwrap();
    let verdict = policy
        .decide(
            &registry,
            "c",
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |d| verdict_as_want(&d.decide("w", &weather.spec, &json!({"city": "Oslo"}), NOON)),
        )
        .await;
    assert_eq!(verdict, "Default");
    assert_eq!(store.reserves.load(Ordering::SeqCst), 0);
    assert_eq!(
        payments(&policy, "c", &[("x", 5.0)]).await,
        ["Ask(None, true)"]
    );
    assert_eq!(store.reserves.load(Ordering::SeqCst), 2, "decided again");
    let kept = store.inner.grants().await.unwrap().remove(0);
    assert_eq!((kept.used_cents, kept.uses), (0, 0));
    assert!(policy.grants()[0].revoked_at_ms.is_some());
}
