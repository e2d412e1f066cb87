//! A turn with and without a person's approval: a tool that needs none, a payment approved,
//! denied, edited or left to expire, parallel approvals answered in any order, a chain that asks in
//! its second step, and parked turns woken by each answer and each deadline.

use super::*;

#[tokio::test(start_paused = true)]
async fn weather_runs_without_approval_in_one_response() {
    let rt = runtime();
    let (_, entries) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(
        describe(&entries),
        with_final(lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_weather",
            r#"tool-input-available call-1 {"location":"Tokyo"}"#,
            "finish-step",
            "tool-output-available call-1",
        ]))
    );
    let output = output_of(&entries, "call-1");
    assert_eq!(output["source"], "offline");
    let text = text_of(&entries);
    assert!(text.contains("Tokyo") && text.contains("18"), "{text}");
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn payment_waits_for_approval_then_runs() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Send $50 to Hanako").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment",
            r#"tool-input-available call-1 {"amount":50,"currency":"USD","description":"","recipient":"Hanako"}"#,
            "tool-approval-request apv-1 call-1",
            "finish-step",
            "PAUSE",
        ])
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::AwaitingPerson));
    assert_eq!(
        session.with_wallet(|w| w.balance_cents),
        100_000,
        "nothing paid before approval"
    );

    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-1"]))
    );
    let output = output_of(&second, "call-1");
    assert_eq!(output["success"], true);
    assert_eq!(output["wallet_balance"], 950);
    assert_eq!(output["transaction_id"], "txn-1");
    assert!(text_of(&second).contains("950"), "{}", text_of(&second));
    assert_eq!(session.with_wallet(|w| w.balance_cents), 95_000);
    assert_eq!(session.turn_status(), Some(TurnStatus::Finished));
    assert!(is_well_formed(&history(&rt, "c").await));
}

/// The inbox's news comes once the store shows it. A page that follows the inbox (long polling
/// `inbox_view`, which reads the store) and is woken by the approval that lets a payment run must
/// then read the approval gone, or be woken again when it is. The regression this guards: the
/// inbox moved when the answer was taken, before the payment's commit removed the approval's
/// row, and not again at that commit, so the page kept showing a decided approval.
#[tokio::test(start_paused = true)]
async fn the_inbox_moves_only_once_the_store_shows_the_decision() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    assert!(rt.inbox.waiting("apv-1").await.unwrap().is_some());
    // The page shows the approval waiting at this version and waits for the next.
    let mut known = rt.inbox.version();
    let receipt = rt.submit("c", &[approve("apv-1")]).await.expect("accepted");
    loop {
        let now = rt.inbox.changed_since(known, Duration::from_secs(20)).await;
        assert_ne!(
            now, known,
            "the page read the approval still waiting, and no news came after the decision"
        );
        known = now;
        if rt.inbox.waiting("apv-1").await.unwrap().is_none() {
            break;
        }
    }
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&["tool-output-available call-1"]))
    );
}

#[tokio::test(start_paused = true)]
async fn denial_with_a_reason_reaches_the_model() {
    let rt = runtime();
    start(&rt, "c", "花子さんに50ドル送金してください").await;
    let second = answer(&rt, "c", &[deny("apv-1", Some("金額が多すぎる"))]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&[
            "tool-approval-response apv-1 denied: 金額が多すぎる",
            "tool-output-denied call-1"
        ]))
    );
    assert!(
        text_of(&second).contains("金額が多すぎる"),
        "{}",
        text_of(&second)
    );
    let history = history(&rt, "c").await;
    let Some(HistoryItem::ToolResults { results }) = history.iter().rev().nth(1) else {
        panic!("results before the final answer: {history:?}");
    };
    assert_eq!(
        results[0].outcome,
        Outcome::Denied {
            reason: Some("金額が多すぎる".into()),
            by: None,
        }
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn approving_with_an_edited_amount_runs_the_edited_call() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let edited = json!({"amount": 20, "recipient": "Hanako", "currency": "USD", "description": ""});
    let second = answer(
        &rt,
        "c",
        &[PersonInput::Approval {
            approval_id: "apv-1".into(),
            decision: ApprovalDecision::ApproveWithEdits {
                args: edited.clone(),
            },
            step_up: None,
        }],
    )
    .await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert_eq!(output_of(&second, "call-1")["amount"], 20);
    assert_eq!(output_of(&second, "call-1")["wallet_balance"], 980);
    let text = text_of(&second);
    assert!(text.contains("20"), "{text}");
    let history = history(&rt, "c").await;
    let Some(HistoryItem::ToolResults { results }) = history.iter().rev().nth(1) else {
        panic!("{history:?}");
    };
    assert_eq!(results[0].edited_args, Some(edited));
}

#[tokio::test(start_paused = true)]
async fn an_invalid_edit_is_rejected_and_changes_nothing() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let err = rt
        .submit(
            "c",
            &[PersonInput::Approval {
                approval_id: "apv-1".into(),
                decision: ApprovalDecision::ApproveWithEdits {
                    args: json!({"amount": -20, "recipient": "Hanako"}),
                },
                step_up: None,
            }],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, InputError::InvalidEdit { .. }), "{err}");
    let session = rt.session("c").await.unwrap();
    assert!(session.has_pending_approval("apv-1"));
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(output_of(&second, "call-1")["amount"], 50);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_approval_expires_distinctly_from_a_denial() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Process a payment of $100 to Alice").await;
    assert_eq!(describe(&first).last().map(String::as_str), Some("PAUSE"));
    // No task waits for the deadline: the runtime's timer wakes the parked turn.
    parked(&rt, "c").await;
    tokio::time::advance(APPROVAL_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&[
            "tool-output-error call-1: Approval expired: nobody answered within 1 minute. Nothing was done."
        ]))
    );
    let text = text_of(&rest);
    assert!(
        text.to_lowercase().contains("expired") || text.contains("time"),
        "{text}"
    );
    let err = rt.submit("c", &[approve("apv-1")]).await.unwrap_err();
    assert!(
        matches!(
            err,
            InputError::ApprovalExpired { .. } | InputError::NoActiveTurn
        ),
        "{err:?}"
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
    let history = history(&rt, "c").await;
    assert!(history.iter().any(|h| matches!(h, HistoryItem::ToolResults { results } if results[0].outcome == Outcome::Expired)));
}

async fn two_payments(rt: &Arc<Runtime>) -> Vec<TurnEntry> {
    let (_, first) = start(rt, "c", "Pay Alice 30 dollars and Bob 40 dollars").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment",
            r#"tool-input-available call-1 {"amount":30,"currency":"USD","description":"","recipient":"Alice"}"#,
            "tool-input-start call-2 process_payment",
            r#"tool-input-available call-2 {"amount":40,"currency":"USD","description":"","recipient":"Bob"}"#,
            "tool-approval-request apv-1 call-1",
            "tool-approval-request apv-2 call-2",
            "finish-step",
            "PAUSE",
        ])
    );
    first
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_answered_approve_then_deny() {
    let rt = runtime();
    two_payments(&rt).await;
    let a = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&a),
        lines(&["tool-output-available call-1", "PAUSE"])
    );
    let b = answer(&rt, "c", &[deny("apv-2", None)]).await;
    assert_eq!(
        describe(&b),
        with_final(lines(&[
            "tool-approval-response apv-2 denied",
            "tool-output-denied call-2"
        ]))
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 97_000);
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_answered_in_reverse_order() {
    let rt = runtime();
    two_payments(&rt).await;
    let b = answer(&rt, "c", &[deny("apv-2", Some("not Bob"))]).await;
    assert_eq!(
        describe(&b),
        lines(&[
            "tool-approval-response apv-2 denied: not Bob",
            "tool-output-denied call-2",
            "PAUSE"
        ])
    );
    let a = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&a),
        with_final(lines(&["tool-output-available call-1"]))
    );
    let text = text_of(&a);
    assert!(text.contains("Alice") && text.contains("not Bob"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_both_denied_in_one_answer() {
    let rt = runtime();
    two_payments(&rt).await;
    let both = answer(&rt, "c", &[deny("apv-1", None), deny("apv-2", None)]).await;
    assert_eq!(
        describe(&both),
        with_final(lines(&[
            "tool-approval-response apv-1 denied",
            "tool-output-denied call-1",
            "tool-approval-response apv-2 denied",
            "tool-output-denied call-2"
        ]))
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn a_sequential_chain_asks_in_its_second_step_and_holds_text_until_the_end() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "check the weather in Paris, then send Bob $5").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_weather",
            r#"tool-input-available call-1 {"location":"Paris"}"#,
            "finish-step",
            "tool-output-available call-1",
            "start-step",
            "tool-input-start call-2 process_payment",
            r#"tool-input-available call-2 {"amount":5,"currency":"USD","description":"","recipient":"Bob"}"#,
            "tool-approval-request apv-1 call-2",
            "finish-step",
            "PAUSE",
        ])
    );
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-2"]))
    );
    let text = text_of(&second);
    assert!(text.contains("Paris") && text.contains("Bob"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_parked_turn_wakes_for_each_answer_of_parallel_approvals() {
    let rt = runtime();
    let first = two_payments(&rt).await;
    parked(&rt, "c").await;
    let log = rt.session("c").await.unwrap().current_log().unwrap();
    let second = answer(&rt, "c", &[approve("apv-2")]).await;
    assert_eq!(
        describe(&second),
        lines(&["tool-output-available call-2", "PAUSE"])
    );
    parked(&rt, "c").await;
    let third = answer(&rt, "c", &[deny("apv-1", None)]).await;
    assert_eq!(describe(&third).last().map(String::as_str), Some("END"));
    // One log from `start` to the end: the parked turn went on where it paused.
    let all = read_all(&log).await;
    assert_eq!(all.len(), first.len() + second.len() + third.len());
    assert_eq!(
        all.iter()
            .filter(|e| matches!(e, TurnEntry::Chunk(Chunk::Start(_))))
            .count(),
        1
    );
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn parked_turns_expire_each_at_their_own_deadline() {
    let rt = runtime();
    // A payment (60 s to answer) parks first; a browser call (10 s) parks after it with an
    // earlier deadline, which the runtime's one timer must not sleep past.
    start(&rt, "pay", "Send $50 to Hanako").await;
    parked(&rt, "pay").await;
    let (music, first) = start(&rt, "music", "Switch the music to track 2").await;
    parked(&rt, "music").await;
    tokio::time::advance(BROWSER_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&music, first.len()).await;
    // Ids are the runtime's: the payment's call was call-1.
    assert_eq!(
        describe(&rest)[0],
        "tool-output-error call-2: The browser did not return a result within 10 s."
    );
    let pay = rt.session("pay").await.unwrap();
    assert!(pay.has_pending_approval("apv-1"));
    assert!(pay.is_parked());
    tokio::time::advance(APPROVAL_TIMEOUT).await;
    let pay_log = pay.current_log().unwrap();
    let ended = read_all(&pay_log).await;
    assert!(
        describe(&ended)
            .iter()
            .any(|l| l.contains("Approval expired")),
        "{:?}",
        describe(&ended)
    );
    assert!(!pay.has_pending_approval("apv-1"));
}

#[tokio::test(start_paused = true)]
async fn progressive_mode_streams_text_of_every_step() {
    let rt = runtime_with(TextTiming::Progressive, Duration::ZERO);
    let (_, entries) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(describe(&entries).last().map(String::as_str), Some("END"));
    assert!(text_of(&entries).contains("Tokyo"));
}
