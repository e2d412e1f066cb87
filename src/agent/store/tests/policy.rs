//! Budgets, daily totals and reservations (issue #33): the policy store's contract.

use super::*;

/// Decisions in these contracts are made on day 0, after the fixtures' payments (at 4).
const NOW: Millis = 10;

/// A claim of `cents` by call `call` of `chat`, through `grant`.
fn claim(chat: &str, call: &str, cents: i64, grant: Option<&str>) -> Claim {
    Claim {
        chat: chat.into(),
        call: call.into(),
        cents,
        grant: grant.map(Into::into),
    }
}

/// Reserves `claims` on `store` at `at`: how it went, and the day's total the decision saw.
async fn reserve_at(store: &dyn PolicyStore, at: Millis, claims: Vec<Claim>) -> (Reserved, i64) {
    let mut seen = None;
    let reserved = store
        .reserve(at, &mut |spent| {
            seen = Some(spent.today_cents);
            claims.clone()
        })
        .await
        .unwrap();
    (reserved, seen.expect("the decision saw the day's spending"))
}

/// The day's total at [`NOW`], and the budget grant's use (cents, uses) as the store has them,
/// both from `spent` and from `grants`.
async fn totals(store: &dyn PolicyStore) -> (i64, i64, u64) {
    let spent = store.spent(NOW).await.unwrap();
    let listed = store.grants().await.unwrap();
    let grant = listed.iter().find(|g| g.id == "g-budget").unwrap();
    let seen = spent.grants.iter().find(|g| g.id == "g-budget").unwrap();
    assert_eq!((seen.used_cents, seen.uses), (grant.used_cents, grant.uses));
    (spent.today_cents, grant.used_cents, grant.uses)
}

/// Budgets and daily totals (issue #33): reservations count once, all or nothing, never past a
/// grant's budget; a payment counts once whether reserved, paid, or both; what did not run goes
/// back, once; a revocation keeps the use and stops the grant.
pub(crate) async fn policy_contract<S: SessionStore + PolicyStore>(store: &S) {
    // A budget of 50 USD that used 10 with the call it was granted with.
    let mut grant = Grant::sample("g-budget", "process_payment");
    grant.used_cents = 1_000;
    store.save_grant(&grant).await.unwrap();
    assert_eq!(totals(store).await, (0, 1_000, 0));

    // A 10 USD payment (call-0 of "chat") runs by the grant: the day and the grant count it.
    let paying = claim("chat", "call-0", 1_000, Some("g-budget"));
    let kept = reserve_at(store, NOW, vec![paying.clone()]).await;
    assert_eq!(kept, (Reserved::Kept, 0));
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    // Kept again (a retry, a restart): it counts once.
    assert_eq!(
        reserve_at(store, NOW, vec![paying]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // All or nothing: a claim past the budget (31 USD of the 30 left) refuses the other one too.
    let past = vec![
        claim("chat", "call-5", 500, None),
        claim("other", "call-6", 3_100, Some("g-budget")),
    ];
    assert_eq!(
        reserve_at(store, NOW, past).await,
        (Reserved::Refused, 1_000)
    );
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // The payment is made and committed: its ledger row counts it, not twice, and the grant
    // keeps its use; the next reservation sweeps its reservation away.
    store.commit(&waiting_record(), &[]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // A call that did not run gives back its share of the day and of the grant, once.
    let unused = claim("other", "call-7", 2_000, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![unused]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (3_000, 4_000, 2));
    let ended = Unused {
        chat: "other".into(),
        call: "call-7".into(),
    };
    store.release(std::slice::from_ref(&ended)).await.unwrap();
    store.release(&[ended]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    // The paid call's reservation is gone: releasing it gives nothing back.
    let paid = Unused {
        chat: "chat".into(),
        call: "call-0".into(),
    };
    store.release(&[paid]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // Exactly the budget fits (30 USD left).
    let rest = claim("other", "call-8", 3_000, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![rest]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (4_000, 5_000, 2));
    let none_left = claim("other", "call-9", 1, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![none_left]).await.0,
        Reserved::Refused
    );

    // A revocation written later keeps the use, and nothing reserves from a revoked grant.
    store
        .release(&[Unused {
            chat: "other".into(),
            call: "call-8".into(),
        }])
        .await
        .unwrap();
    grant.revoked_at_ms = Some(NOW);
    store.save_grant(&grant).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    let after = claim("other", "call-10", 100, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![after]).await.0,
        Reserved::Refused
    );

    // Nor from one that expired (at 100 000 ms), though it has room.
    let other = Grant::sample("g-other", "process_payment");
    store.save_grant(&other).await.unwrap();
    let late = claim("other", "call-11", 100, Some("g-other"));
    assert_eq!(
        reserve_at(store, 100_000, vec![late.clone()]).await.0,
        Reserved::Refused
    );
    assert_eq!(
        reserve_at(store, 99_999, vec![late]).await.0,
        Reserved::Kept
    );

    // The next UTC day starts from nothing.
    let tomorrow = crate::agent::policy::spending::start_of_day(NOW) + 86_400_000;
    assert_eq!(store.spent(tomorrow).await.unwrap().today_cents, 0);
}

/// Reservations decided at once through `stores` (handles of one database: an instance each)
/// never fit more under a limit than fits: 30 claims of 7 USD, each kept only while the day's
/// total stays within 100 USD, keep 14.
pub(crate) async fn reservation_race_contract(stores: &[&dyn PolicyStore]) {
    let attempts = (0..30).map(|i| {
        let store = stores[i % stores.len()];
        async move {
            let call = format!("race-{i}");
            let mut fits = false;
            let reserved = store
                .reserve(NOW, &mut |spent| {
                    fits = spent.today_cents + 700 <= 10_000;
                    if fits {
                        vec![claim("race", &call, 700, None)]
                    } else {
                        Vec::new()
                    }
                })
                .await
                .unwrap();
            reserved == Reserved::Kept && fits
        }
    });
    let kept = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|kept| *kept)
        .count();
    assert_eq!(kept, 14);
    for store in stores {
        assert_eq!(store.spent(NOW).await.unwrap().today_cents, 9_800);
    }
}
