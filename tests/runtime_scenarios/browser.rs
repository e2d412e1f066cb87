//! Tools that run in the browser: approved then answered, answered in one go, refused, denied
//! before they reach it, results that come too early, and a browser that never answers.

use super::*;

#[tokio::test(start_paused = true)]
async fn location_approved_then_the_browser_answers() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Where am I?").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_location",
            "tool-input-available call-1 {}",
            "tool-approval-request apv-1 call-1",
            "finish-step",
            "PAUSE",
        ])
    );
    // Pattern B: the approval and the browser's result arrive separately.
    let approved = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(describe(&approved), lines(&["PAUSE"]));
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Output {
                output: json!({"latitude": 48.8566, "longitude": 2.3522, "accuracy": 25, "city": "Paris"}),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert!(text_of(&result).contains("Paris"), "{}", text_of(&result));
}

#[tokio::test(start_paused = true)]
async fn location_approval_and_result_in_one_answer() {
    let rt = runtime();
    start(&rt, "c", "私の位置を教えて").await;
    let result = answer(
        &rt,
        "c",
        &[
            approve("apv-1"),
            PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output {
                    output: json!({"latitude": 35.68, "longitude": 139.76, "accuracy": 20}),
                },
            },
        ],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
}

#[tokio::test(start_paused = true)]
async fn location_approved_then_the_browser_refuses() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    answer(&rt, "c", &[approve("apv-1")]).await;
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Error {
                message: "User denied Geolocation".into(),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&[
            "tool-output-error call-1: User denied Geolocation"
        ]))
    );
    assert!(!text_of(&result).is_empty());
}

#[tokio::test(start_paused = true)]
async fn location_denied_never_reaches_the_browser() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    let result = answer(&rt, "c", &[deny("apv-1", None)]).await;
    assert_eq!(
        describe(&result),
        with_final(lines(&[
            "tool-approval-response apv-1 denied",
            "tool-output-denied call-1"
        ]))
    );
    let err = rt
        .submit(
            "c",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(err, InputError::NoActiveTurn);
}

#[tokio::test(start_paused = true)]
async fn a_browser_result_before_approval_is_rejected() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    let err = rt
        .submit(
            "c",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        InputError::NotApprovedYet {
            tool_call_id: "call-1".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn change_bgm_waits_for_the_browser() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Switch the music to track 2").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 change_bgm",
            r#"tool-input-available call-1 {"track":2}"#,
            "finish-step",
            "PAUSE",
        ])
    );
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Output {
                output: json!({"track": 2, "playing": true}),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert!(text_of(&result).contains('2'));
}

#[tokio::test(start_paused = true)]
async fn a_silent_browser_times_out() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "トラック1に変更して").await;
    tokio::time::advance(BROWSER_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&[
            "tool-output-error call-1: The browser did not return a result within 10 s."
        ]))
    );
}
