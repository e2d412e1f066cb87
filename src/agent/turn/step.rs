//! One model step as it streams in: text and reasoning blocks, tool calls validated and given
//! our ids, the step recorded in the history, its calls sent through the gate.

use super::{Block, StepOutput, TurnDriver};
use serde_json::Value;

use crate::agent::{
    BrowserCalls,
    clock::{IdKind, Millis},
    gate::{ApprovalResolution, CallPhase, Gate, Request, StepCall},
    history::{AssistantPart, HistoryItem, Outcome, ToolCall, ToolResult},
    model::ModelEvent,
    policy::ChatWallet,
    runtime::TextTiming,
    schema::validate,
    session::HeldText,
    store::{AuditEvent, AuditKind},
    tools::ToolLocation,
};
use crate::protocol::{Chunk, chunk::ToolApprovalRequest, grant::Ruling};

impl TurnDriver {
    /// Handles one model event. Returns true when the step is over.
    pub(super) fn on_model_event(&mut self, step: &mut StepOutput, event: ModelEvent) -> bool {
        match event {
            ModelEvent::TextDelta(delta) => {
                if delta.is_empty() {
                    return false;
                }
                if let Some(block) = step.reasoning.take() {
                    self.end_reasoning(step, block);
                }
                let progressive = self.timing == TextTiming::Progressive;
                let block = step.text.get_or_insert_with(|| {
                    let id = self.text_id();
                    Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    }
                });
                if progressive && block.text.is_empty() {
                    let id = block.id.clone();
                    self.emit(Chunk::text_start(id));
                }
                block.text.push_str(&delta);
                if progressive {
                    let id = step.text.as_ref().map(|b| b.id.clone()).unwrap_or_default();
                    self.emit(Chunk::text_delta(id, delta));
                }
            }
            ModelEvent::TextData(data) => {
                // The open text block's, or else the step's last text part's; a signature that
                // comes before any text (Gemini 3 may sign an empty last part) gets a part of
                // its own, so it still goes back.
                if let Some(block) = step.text.as_mut() {
                    block.provider_data = Some(data);
                } else if let Some(AssistantPart::Text { provider_data, .. }) = step
                    .parts
                    .iter_mut()
                    .rev()
                    .find(|p| matches!(p, AssistantPart::Text { .. }))
                {
                    *provider_data = Some(data);
                } else {
                    step.parts.push(AssistantPart::Text {
                        text: String::new(),
                        provider_data: Some(data),
                    });
                }
            }
            ModelEvent::ReasoningDelta {
                text,
                provider_data,
            } => {
                if text.is_empty() {
                    return false;
                }
                if let Some(block) = step.text.take() {
                    self.end_text(step, block);
                }
                if step.reasoning.is_none() {
                    let id = self.rt.ids.next_id(IdKind::Reasoning);
                    self.emit(Chunk::reasoning_start(id.clone()));
                    step.reasoning = Some(Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    });
                }
                if let Some(block) = step.reasoning.as_mut() {
                    block.text.push_str(&text);
                    if provider_data.is_some() {
                        block.provider_data = provider_data;
                    }
                    let id = block.id.clone();
                    self.emit(Chunk::reasoning_delta(id, text));
                }
            }
            ModelEvent::ToolCall(call) => {
                self.close_blocks(step);
                self.accept_call(step, call);
            }
            ModelEvent::Audio(pcm) => self.speak(pcm),
            ModelEvent::Interrupted => self.interrupted(),
            ModelEvent::Finish { reason, usage } => {
                self.with_turn(|t| t.usage.add(usage));
                step.finish = Some(reason);
                return true;
            }
        }
        false
    }

    /// Validates a call, gives it our id and emits its input chunks.
    pub(super) fn accept_call(&mut self, step: &mut StepOutput, mut call: ToolCall) {
        call.id = self.rt.ids.next_id(IdKind::ToolCall);
        let rt = self.rt.clone();
        let tool = rt.tools.get(&call.name);
        let problem = match &tool {
            None => Some(format!(
                "Unknown tool {:?}. Available tools: {}.",
                call.name,
                self.rt.tools.names().join(", ")
            )),
            // One canonical form before anything judges or shows the call (ADR 0027).
            Some(tool) => match tool.spec.canonical_args(&call.args) {
                Ok(args) => {
                    call.args = args;
                    validate(&tool.spec.parameters, &call.args).err()
                }
                Err(e) => Some(e),
            }
            .map(|e| format!("Invalid arguments for {}: {e}", call.name)),
        };
        self.emit(Chunk::tool_input_start(call.id.clone(), call.name.clone()));
        let location = tool
            .map(|t| t.spec.location)
            .unwrap_or(ToolLocation::Server);
        let phase = match problem {
            Some(message) => {
                self.emit(Chunk::tool_input_error(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                    message.clone(),
                ));
                CallPhase::Done {
                    outcome: Outcome::Error { message },
                    edited_args: None,
                }
            }
            None => {
                self.emit(Chunk::tool_input_available(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                ));
                // Decided at the end of the step (gate_calls).
                CallPhase::Ready {
                    args: call.args.clone(),
                    edited: false,
                }
            }
        };
        let announced = matches!(phase, CallPhase::Done { .. });
        step.parts
            .push(AssistantPart::ToolCall { call: call.clone() });
        step.calls.push(StepCall {
            call,
            location,
            phase,
            announced,
            gated_by: None,
            ruling: None,
            signatures: Vec::new(),
            signed_args: None,
            proposed_by: None,
            denied_by: None,
            revision: 0,
            revision_shown: 0,
            dropped: Vec::new(),
            countersign_closed: false,
        });
    }

    /// At the end of a step: the policy rules on each valid call — it waits for approval, a
    /// rule or a grant lets it run or refuses it, or it runs as its tool says — and each call
    /// let run waits for the browser or is ready to run on the server. A call a rule or a grant
    /// decided is an automatic approval on the wire (AI SDK v7: `isAutomatic` request, then its
    /// response), audited with the rule or grant.
    ///
    /// What the calls let run claim (payments, grants' budgets) is reserved in the store in the
    /// same step as the decision (issue #33): the gate decides on a copy of the calls, which
    /// become the step's once the store kept their claims.
    pub(super) async fn gate_calls(&mut self, step: &mut StepOutput) {
        let now = self.rt.clock.now_ms();
        let (requests, facts) = self.decide_calls(step, now).await;
        // The calls are the turn's before anyone hears of them: an answer sent the moment its
        // card shows (or the model is told the call waits) finds its call waiting, not a turn
        // between steps whose calls are not there yet.
        let calls = std::mem::take(&mut step.calls);
        self.with_turn(|t| t.calls = calls.clone());
        let version = self.rt.policy().status().version;
        for request in requests {
            let Some(call) = calls
                .iter()
                .find(|c| c.call.id == request.tool_call_id)
                .map(|c| c.call.clone())
            else {
                continue;
            };
            let event = self.request_event(&request, &call, &facts, version.clone(), now);
            self.commits.record(event);
            self.show_request(&calls, &request, &call, now);
        }
    }

    /// The policy's decision on the step's calls, kept with what they claim (issue #33): the
    /// step's calls as the gate left them, what it asked or decided for each, and the facts the
    /// rules decided from, by call id.
    async fn decide_calls(
        &self,
        step: &mut StepOutput,
        now: Millis,
    ) -> (Vec<Request>, Vec<(String, Value)>) {
        let rt = self.rt.clone();
        let mut gate = Gate::new(&rt.tools);
        if self.transport.browser_calls() == BrowserCalls::Unreported {
            gate = gate.acknowledging_browser_calls();
        }
        let (wallet, owner) = {
            let state = self.session.state();
            (
                ChatWallet::of(&state.record.wallet),
                state.record.owner().to_owned(),
            )
        };
        let requester = rt.requester(&owner);
        let proposed = &step.calls;
        // The step may be decided more than once (`Policy::decide`): each time hands out the
        // same approval ids, in order.
        let mut issued: Vec<String> = Vec::new();
        let (calls, requests, facts) = rt
            .policy()
            .decide(
                &rt.tools,
                &self.session.id,
                &requester,
                &wallet,
                now,
                |decider| {
                    let mut calls = proposed.clone();
                    let mut used = 0;
                    let next_id = || {
                        if used == issued.len() {
                            issued.push(rt.ids.next_id(IdKind::Approval));
                        }
                        used += 1;
                        issued[used - 1].clone()
                    };
                    let requests = gate.request(&mut calls, now, next_id, decider);
                    (calls, requests, decider.take_facts())
                },
            )
            .await;
        step.calls = calls;
        (requests, facts)
    }

    /// The audit event of what the policy did with `call`: asked for approval, let it run (by a
    /// rule or a grant) or refused it, with the rule's policy `version` and the `facts` it
    /// decided from (ADR 0029: anyone can decide again).
    fn request_event(
        &self,
        request: &Request,
        call: &ToolCall,
        facts: &[(String, Value)],
        version: Option<String>,
        now: Millis,
    ) -> AuditEvent {
        let kind = match &request.ruling {
            Ruling::Asked { .. } => AuditKind::Requested,
            Ruling::AllowedByRule { .. } | Ruling::AllowedByGrant { .. } => AuditKind::Allowed,
            Ruling::DeniedByRule { .. } => AuditKind::Refused,
        };
        let mut event = self.audit_event(kind, call, &request.approval_id, now);
        match &request.ruling {
            Ruling::Asked { rule, .. } => {
                event.deadline_ms = Some(request.deadline_ms);
                event.rule = rule.clone();
            }
            Ruling::AllowedByRule { rule } => event.rule = Some(rule.clone()),
            Ruling::AllowedByGrant { grant, label } => {
                event.grant = Some(grant.clone());
                event.reason = Some(label.clone());
            }
            Ruling::DeniedByRule { rule, reason } => {
                event.rule = Some(rule.clone());
                event.reason = Some(reason.clone());
            }
        }
        if event.rule.is_some() {
            event.policy_version = version;
        }
        // What the rules decided from, so that anyone can decide again (ADR 0029).
        event.facts = facts
            .iter()
            .find(|(call, _)| *call == request.tool_call_id)
            .map(|(_, facts)| facts.clone());
        event
    }

    /// Tells the clients what the policy did with `call`: the approval request (a card, or an
    /// automatic approval followed by its response, which the record keeps as answered), and
    /// for a card that needs several people its progress, 0 of N so far.
    fn show_request(
        &mut self,
        calls: &[StepCall],
        request: &Request,
        call: &ToolCall,
        now: Millis,
    ) {
        // An approval that needs several people says so to every client, strict ai@6.0.0
        // included (which keeps data parts): 0 of N so far.
        if !request.ruling.needs().is_plain()
            && let Some(call) = calls.iter().find(|c| c.call.id == request.tool_call_id)
            && let Some(part) = super::countersign::progress_part(
                call,
                crate::protocol::countersign::ProgressState::Waiting,
            )
        {
            self.emit(part);
        }
        let descriptor = Some(Value::Object(request.ruling.to_metadata()));
        let automatic = request.is_automatic();
        self.emit(Chunk::ToolApprovalRequest(Box::new(ToolApprovalRequest {
            approval_id: request.approval_id.clone(),
            tool_call_id: request.tool_call_id.clone(),
            signature: None,
            approval_descriptor: descriptor,
            reason: match &request.ruling {
                Ruling::Asked {
                    rule: Some(rule), ..
                } => Some(format!("The policy rule {rule:?} asks for this call")),
                _ => None,
            },
            is_automatic: automatic.then_some(true),
        })));
        if !automatic {
            // The card is shown: a model still talking is told the call waits (ADR 0035).
            self.rt
                .models()
                .answering(self.transport)
                .awaiting_approval(&self.session.id, call);
        }
        if automatic {
            let approved = !matches!(request.ruling, Ruling::DeniedByRule { .. });
            self.emit(Chunk::tool_approval_response(
                request.approval_id.clone(),
                approved,
                request.ruling.sentence(),
            ));
            self.session.state().record.resolved_approvals.insert(
                request.approval_id.clone(),
                ApprovalResolution::Automatic {
                    at_ms: now,
                    approved,
                },
            );
        }
    }

    /// Adds the step's assistant item to the history.
    pub(super) fn record_step(&mut self, step: &mut StepOutput) {
        let parts: Vec<AssistantPart> = std::mem::take(&mut step.parts)
            .into_iter()
            .filter(|p| {
                !matches!(p, AssistantPart::Text { text, provider_data: None } if text.is_empty())
            })
            .collect();
        if !parts.is_empty() {
            self.session
                .state()
                .record
                .history
                .push(HistoryItem::Assistant { parts });
        }
    }

    pub(super) fn close_blocks(&mut self, step: &mut StepOutput) {
        if let Some(block) = step.reasoning.take() {
            self.end_reasoning(step, block);
        }
        if let Some(block) = step.text.take() {
            self.end_text(step, block);
        }
    }

    fn end_reasoning(&mut self, step: &mut StepOutput, block: Block) {
        self.emit(Chunk::reasoning_end(block.id));
        step.parts.push(AssistantPart::Reasoning {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Ends a text block: emitted now in progressive mode, kept for the step's end in hold mode.
    fn end_text(&mut self, step: &mut StepOutput, block: Block) {
        if self.timing == TextTiming::Progressive {
            self.emit(Chunk::text_end(block.id));
        } else {
            self.with_turn(|t| {
                t.held_text.push(HeldText {
                    id: block.id.clone(),
                    text: block.text.clone(),
                })
            });
        }
        step.parts.push(AssistantPart::Text {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Emits all held text (hold mode) as complete text blocks, in generation order.
    pub(super) fn flush_held_text(&mut self) {
        let held = self
            .with_turn(|t| std::mem::take(&mut t.held_text))
            .unwrap_or_default();
        for block in held {
            self.emit(Chunk::text_start(block.id.clone()));
            self.emit(Chunk::text_delta(block.id.clone(), block.text));
            self.emit(Chunk::text_end(block.id));
        }
    }

    /// Ends every call of a failed step with the failure.
    pub(super) fn fail_calls(&mut self, step: &mut StepOutput, message: &str) {
        if step.calls.is_empty() {
            return;
        }
        let mut results = Vec::new();
        for call in step.calls.drain(..) {
            let outcome = match call.phase {
                CallPhase::Done { outcome, .. } => outcome,
                _ => {
                    let text = format!("Not run: {message}");
                    self.emit(Chunk::tool_output_error(call.call.id.clone(), text.clone()));
                    Outcome::Error { message: text }
                }
            };
            results.push(ToolResult {
                call_id: call.call.id,
                name: call.call.name,
                outcome,
                edited_args: None,
            });
        }
        self.session
            .state()
            .record
            .history
            .push(HistoryItem::ToolResults { results });
    }
}
