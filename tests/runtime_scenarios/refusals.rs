//! Tool errors the model reports, invalid arguments, and answers the gate refuses (forged,
//! duplicate, unknown, foreign).

use super::*;

#[tokio::test(start_paused = true)]
async fn insufficient_funds_is_a_tool_error_the_model_reports() {
    let rt = runtime();
    start(&rt, "c", "Send $5000 to Bob").await;
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&[
            "tool-output-error call-1: Insufficient funds: the balance is 1000.00 USD, the payment needs 5000.00 USD."
        ]))
    );
    let text = text_of(&second);
    assert!(
        text.to_lowercase().contains("insufficient") || text.contains("1000"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_arguments_become_a_tool_error_without_asking_anyone() {
    let rt = runtime();
    let (_, entries) = start(&rt, "c", "Send $2000000000 to Bob").await;
    let described = describe(&entries);
    assert_eq!(
        described[0..3],
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment"
        ])
    );
    assert_eq!(
        described[3],
        "tool-input-error call-1: Invalid arguments for process_payment: $.amount: must be at most 1000000000"
    );
    assert!(
        !described
            .iter()
            .any(|l| l.starts_with("tool-approval-request"))
    );
    assert_eq!(described.last().map(String::as_str), Some("END"));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn forged_duplicate_unknown_and_foreign_approvals_are_rejected() {
    let rt = runtime();
    start(&rt, "a", "Send $50 to Hanako").await;
    start(&rt, "b", "Send $10 to Taro").await;
    let session_a = rt.session("a").await.unwrap();
    let session_b = rt.session("b").await.unwrap();
    let before_a = session_a.snapshot();
    let before_b = session_b.snapshot();

    // Unknown (forged) id.
    assert_eq!(
        rt.submit("a", &[approve("apv-999")]).await.unwrap_err(),
        InputError::UnknownApproval {
            approval_id: "apv-999".into()
        }
    );
    // Chat b's approval sent to chat a.
    assert_eq!(
        rt.submit("a", &[approve("apv-2")]).await.unwrap_err(),
        InputError::ApprovalOfOtherChat {
            approval_id: "apv-2".into()
        }
    );
    // A chat that does not exist.
    assert_eq!(
        rt.submit("nope", &[approve("apv-1")]).await.unwrap_err(),
        InputError::ApprovalOfOtherChat {
            approval_id: "apv-1".into()
        }
    );
    // One good and one bad answer together: nothing applies.
    assert!(matches!(
        rt.submit("a", &[approve("apv-1"), approve("apv-404")])
            .await,
        Err(InputError::UnknownApproval { .. })
    ));
    // The same approval twice in one request.
    assert_eq!(
        rt.submit("a", &[approve("apv-1"), deny("apv-1", None)])
            .await
            .unwrap_err(),
        InputError::ApprovalAlreadyAnswered {
            approval_id: "apv-1".into()
        }
    );
    // A browser result for a server tool.
    assert!(matches!(
        rt.submit(
            "a",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }]
        )
        .await,
        Err(InputError::NotABrowserTool { .. })
    ));
    assert_eq!(
        session_a.snapshot(),
        before_a,
        "rejected answers change nothing"
    );
    assert_eq!(session_b.snapshot(), before_b);

    // The real answer works once; a replay is refused.
    answer(&rt, "a", &[approve("apv-1")]).await;
    assert_eq!(session_a.with_wallet(|w| w.balance_cents), 95_000);
    let replay = rt.submit("a", &[approve("apv-1")]).await.unwrap_err();
    assert!(
        matches!(
            replay,
            InputError::ApprovalAlreadyAnswered { .. } | InputError::NoActiveTurn
        ),
        "{replay:?}"
    );
    assert_eq!(session_a.with_wallet(|w| w.balance_cents), 95_000);
    assert_eq!(session_b.with_wallet(|w| w.balance_cents), 100_000);
}
