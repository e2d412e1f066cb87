//! A bug report reproduced: a session recorded with `COUNTERSIGN_CHUNK_LOG` is played back by the
//! replay model, and the replayed turn emits the same chunks (ids aside).
#![cfg(feature = "ssr")]

use std::{sync::Arc, time::Duration};

use countersign::models::demo::DemoModel;
use countersign::models::replay::ReplayModel;
use countersign::{
    agent::{
        ApprovalDecision, PersonInput, Runtime, RuntimeSettings, TurnEntry, UserTurn,
        chunk_log::ChunkLog,
        clock::{SequentialIds, TokioClock},
        model::Model,
        session::TurnLog,
        store::MemoryStore,
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    },
    protocol::{Chunk, Dialect},
};

fn runtime(model: Arc<dyn Model>, log: Option<Arc<ChunkLog>>) -> Arc<Runtime> {
    let builder = Runtime::builder(
        model,
        ToolRegistry::standard(&ToolSettings {
            approval_timeout: Duration::from_secs(60),
            browser_timeout: Duration::from_secs(10),
            weather: WeatherSource::Offline,
        }),
        Arc::new(TokioClock::starting_at(1_800_000_000_000)),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings::default(),
    );
    match log {
        Some(log) => builder.chunk_log(log).build(),
        None => builder.build(),
    }
}

async fn until_pause_or_end(log: &Arc<TurnLog>, from: usize) -> Vec<TurnEntry> {
    let mut reader = log.subscribe(from);
    let mut out = Vec::new();
    while let Some(entry) = reader.next().await {
        let stop = matches!(entry, TurnEntry::Pause | TurnEntry::End);
        out.push(entry);
        if stop {
            break;
        }
    }
    out
}

/// Chunk types with their tool names and texts (ids differ between runs).
fn shape(entries: &[TurnEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e {
            TurnEntry::Chunk(c) => {
                let v = c.to_value(Dialect::Full).unwrap_or_default();
                let mut line = v["type"].as_str().unwrap_or("?").to_string();
                for key in ["toolName", "delta", "errorText"] {
                    if let Some(s) = v[key].as_str() {
                        line.push(' ');
                        line.push_str(s);
                    }
                }
                if matches!(c, Chunk::ToolInputAvailable(_)) {
                    line.push(' ');
                    line.push_str(&v["input"].to_string());
                }
                line
            }
            TurnEntry::Pause => "PAUSE".into(),
            TurnEntry::End => "END".into(),
        })
        .collect()
}

async fn conversation(rt: &Arc<Runtime>) -> Vec<String> {
    let started = rt
        .start_turn(
            "bug",
            UserTurn {
                text: "check the weather in Paris, then send Bob $5".into(),
                transport: countersign::agent::Transport::Sse,
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap();
    let mut all = until_pause_or_end(&started.log, 0).await;
    let receipt = rt
        .submit(
            "bug",
            &[PersonInput::Approval {
                approval_id: "apv-1".into(),
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .unwrap();
    all.extend(until_pause_or_end(&receipt.log, receipt.from).await);
    shape(&all)
}

#[tokio::test(start_paused = true)]
async fn a_recorded_session_replays_to_the_same_chunks() {
    let dir = std::env::temp_dir().join(format!("countersign-chunk-log-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    let recorded = runtime(
        Arc::new(DemoModel::new(Duration::ZERO)),
        Some(Arc::new(ChunkLog::new(dir.clone()).unwrap())),
    );
    let original = conversation(&recorded).await;
    let log = recorded.chunk_log().unwrap();
    log.flush_all();

    let path = log.path_for("bug");
    let text = std::fs::read_to_string(&path).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["session"], "bug");
    assert_eq!(first["mode"], "sse");
    assert_eq!(first["direction"], "out");
    assert_eq!(first["sequence_number"], 1);
    assert_eq!(first["chunk"]["type"], "start");
    assert_eq!(
        text.lines().last().map(|l| l.contains("[DONE]")),
        Some(true)
    );

    let replay = ReplayModel::from_file(&path).unwrap();
    assert!(replay.label().contains("1 turn"), "{}", replay.label());
    let replayed = conversation(&runtime(Arc::new(replay), None)).await;
    assert_eq!(replayed, original);

    let _ = std::fs::remove_dir_all(&dir);
}
