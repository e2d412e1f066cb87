//! Each executed call checked against what the chain says: its request or rule, the recorded
//! policy evaluated again on the arguments that ran, and the signatures that policy asked for —
//! who signed (roles at signing and when it ran, present, not the requester) and with which
//! passkey assertion (step 3 of [`super`]).

use super::*;

/// What the chain says of one person up to a record.
#[derive(Default)]
struct Person {
    /// Their roles from a record on: `(seq, roles)`.
    roles: Vec<(i64, BTreeSet<String>)>,
    removed: Option<i64>,
    /// Their passkeys' public keys, and where they were recorded.
    passkeys: HashMap<String, (i64, Value)>,
}

impl Person {
    fn roles_at(&self, seq: i64) -> Option<&BTreeSet<String>> {
        self.roles
            .iter()
            .rev()
            .find(|(at, _)| *at < seq)
            .map(|(_, r)| r)
    }

    fn present_at(&self, seq: i64) -> bool {
        self.removed.is_none_or(|at| at > seq)
    }
}

fn people_of(records: &[Rec]) -> HashMap<String, Person> {
    let mut people: HashMap<String, Person> = HashMap::new();
    for r in records {
        let e = &r.event;
        let Some(id) = e.args.get("person").and_then(Value::as_str) else {
            continue;
        };
        let roles = || -> Option<BTreeSet<String>> {
            serde_json::from_value(e.args.get("roles")?.clone()).ok()
        };
        match e.kind {
            AuditKind::Enrolled => {
                let person = people.entry(id.to_owned()).or_default();
                if let Some(roles) = roles() {
                    person.roles.push((r.seq, roles));
                }
                if let Some(passkey) = e.args.get("passkey").and_then(Value::as_str) {
                    let key = e.args.get("public_key").cloned().unwrap_or(Value::Null);
                    person.passkeys.insert(passkey.to_owned(), (r.seq, key));
                }
            }
            AuditKind::RolesChanged => {
                if let Some(roles) = roles() {
                    people
                        .entry(id.to_owned())
                        .or_default()
                        .roles
                        .push((r.seq, roles));
                }
            }
            AuditKind::Removed => {
                people
                    .entry(id.to_owned())
                    .or_default()
                    .removed
                    .get_or_insert(r.seq);
            }
            _ => {}
        }
    }
    people
}

/// Checks every executed call after `since` (or only `only`); returns how many it checked.
pub(super) fn check_calls(
    records: &[Rec],
    since: i64,
    policies: &HashMap<String, String>,
    origin: Option<&str>,
    only: Option<i64>,
    problems: &mut Vec<String>,
) -> usize {
    let people = people_of(records);
    // Countersign's own tools, for what a payment's arguments pay (the amount a rule reads).
    let tools = ToolRegistry::standard(&ToolSettings::default());
    let context = Context {
        records,
        people: &people,
        policies,
        origin,
        tools: &tools,
    };
    let mut checked = 0;
    for r in records.iter().filter(|r| r.seq > since) {
        if only.is_some_and(|seq| seq != r.seq) {
            continue;
        }
        if r.event.kind == AuditKind::Executed {
            checked += 1;
            for problem in context.call(r) {
                problems.push(format!("#{}: {problem}", r.seq));
            }
        } else if only.is_none()
            && r.event.step_up.is_some()
            && let Err(problem) = context.step_up(
                r,
                &r.event
                    .edited_args
                    .clone()
                    .unwrap_or_else(|| r.event.args.clone()),
            )
        {
            problems.push(format!("#{}: {problem}", r.seq));
        }
    }
    checked
}

struct Context<'a> {
    records: &'a [Rec],
    people: &'a HashMap<String, Person>,
    policies: &'a HashMap<String, String>,
    origin: Option<&'a str>,
    tools: &'a ToolRegistry,
}

/// A signature on the table when the call ran.
struct Signed<'a> {
    record: &'a Rec,
    person: Option<&'a str>,
    args: Value,
}

/// The signatures of a call after its decision record `decision`, the last proposal's only (a
/// new proposal starts the count again); an end of the call among them is a problem.
fn signatures_after<'a>(
    decision: &Rec,
    story: &[&'a Rec],
    problems: &mut Vec<String>,
) -> Vec<Signed<'a>> {
    let mut signed: Vec<Signed> = Vec::new();
    for r in story.iter().filter(|r| r.seq > decision.seq) {
        let e = &r.event;
        match e.kind {
            AuditKind::Proposed => signed.clear(),
            AuditKind::Countersigned | AuditKind::Approved | AuditKind::Edited => {
                signed.push(Signed {
                    record: r,
                    person: e.actor.as_ref().and_then(|a| a.person.as_deref()),
                    args: e.edited_args.clone().unwrap_or_else(|| e.args.clone()),
                });
            }
            AuditKind::Denied
            | AuditKind::Expired
            | AuditKind::Dismissed
            | AuditKind::Superseded
            | AuditKind::Interrupted => {
                problems.push(format!("it ran after it ended ({})", e.kind.as_str()));
            }
            _ => {}
        }
    }
    signed
}

impl Context<'_> {
    /// What is wrong with executed call `executed`.
    fn call(&self, executed: &Rec) -> Vec<String> {
        let e = &executed.event;
        let Some(approval) = e.approval_id.as_deref() else {
            return vec!["an executed call with no approval".into()];
        };
        let ran = e.edited_args.clone().unwrap_or_else(|| e.args.clone());
        let story: Vec<&Rec> = self
            .records
            .iter()
            .filter(|r| r.seq < executed.seq && r.event.approval_id.as_deref() == Some(approval))
            .collect();
        let Some(decision) = story.iter().find(|r| {
            matches!(
                r.event.kind,
                AuditKind::Requested | AuditKind::Allowed | AuditKind::Refused
            )
        }) else {
            return vec![format!(
                "call {} ran with no request or rule before it: it lacks its receipt",
                e.tool_call_id
            )];
        };
        match decision.event.kind {
            AuditKind::Refused => vec!["it ran although a rule refused it".into()],
            AuditKind::Allowed => self.allowed(decision, &ran),
            _ => self.requested(executed, decision, &story, &ran),
        }
    }

    /// A call a rule or a grant let run.
    fn allowed(&self, decision: &Rec, ran: &Value) -> Vec<String> {
        let e = &decision.event;
        if let Some(grant) = &e.grant {
            let made = self.records.iter().any(|r| {
                r.seq < decision.seq
                    && r.event.kind == AuditKind::Granted
                    && r.event.grant.as_ref() == Some(grant)
            });
            let revoked = self.records.iter().any(|r| {
                r.seq < decision.seq
                    && r.event.kind == AuditKind::Revoked
                    && r.event.grant.as_ref() == Some(grant)
            });
            return match (made, revoked) {
                (false, _) => vec![format!("grant {grant} let it run, but no record made it")],
                (true, true) => vec![format!("grant {grant} let it run after it was revoked")],
                (true, false) => Vec::new(),
            };
        }
        let Some(rule) = &e.rule else {
            return vec!["it ran without asking, with no rule or grant named".into()];
        };
        match self.verdict(decision, ran) {
            Err(problem) => vec![problem],
            Ok(RuleVerdict::Run { rule: r }) if r == *rule => Vec::new(),
            Ok(other) => vec![format!(
                "rule {rule:?} let it run, but the recorded policy says {} for these arguments",
                words(&other)
            )],
        }
    }

    /// A call that asked: what was required of the arguments that ran, and whether the
    /// signatures on the table when it ran give it.
    fn requested(
        &self,
        executed: &Rec,
        decision: &Rec,
        story: &[&Rec],
        ran: &Value,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let required = match self.required(decision, ran) {
            Ok(required) => required,
            Err(problem) => return vec![problem],
        };
        let requester = decision
            .event
            .facts
            .as_ref()
            .and_then(|f| f.get("requester")?.get("id")?.as_str());
        let signed = signatures_after(decision, story, &mut problems);
        let digest = args_digest(ran);
        let counted: Vec<&Signed> = signed
            .iter()
            .filter(|s| args_digest(&s.args) == digest)
            .collect();
        if counted.is_empty() {
            problems.push("no approval of the arguments that ran".into());
            return problems;
        }
        if required.is_plain() {
            if let Some(requester) = requester
                && !counted
                    .iter()
                    .any(|s| s.person.unwrap_or(crate::agent::people::LOCAL) == requester)
            {
                problems.push(format!(
                    "only the person who asked ({requester}) may approve it, and they did not"
                ));
            }
            return problems;
        }
        let mut who: Vec<&str> = Vec::new();
        for s in &counted {
            // A person's later signatures add nothing (and are not judged again).
            if s.person.is_some_and(|p| who.contains(&p)) {
                continue;
            }
            match self.signer(&required, s, executed, requester) {
                Ok(person) => who.push(person),
                Err(problem) => problems.push(format!("#{}: {problem}", s.record.seq)),
            }
        }
        let needed = required.approvers.max(1) as usize;
        if who.len() < needed {
            problems.push(format!(
                "it needed {} and had {} valid signature(s) for the arguments that ran",
                required.words(),
                who.len()
            ));
        }
        problems
    }

    /// The person behind signature `s` if it counts toward `required` for the call that ran
    /// at `executed`: they held the role when they signed and when it ran, were not removed
    /// before it ran, are not the requester where the rule forbids it, and confirmed with a
    /// passkey where it asks for one. Else what is wrong with it.
    fn signer<'a>(
        &self,
        required: &Requirement,
        s: &Signed<'a>,
        executed: &Rec,
        requester: Option<&str>,
    ) -> Result<&'a str, String> {
        let Some(person) = s.person else {
            return Err("a signature of no person".into());
        };
        let state = self.people.get(person);
        if let Some(role) = &required.role {
            let holds = |seq| {
                state
                    .and_then(|p| p.roles_at(seq))
                    .is_some_and(|r| r.contains(role))
            };
            if !holds(s.record.seq) || !holds(executed.seq) {
                return Err(format!(
                    "{person} did not have the role {role} when they signed or when it ran"
                ));
            }
        }
        if !state.is_none_or(|p| p.present_at(executed.seq)) {
            return Err(format!("{person} was removed before it ran"));
        }
        if required.not_requester && requester == Some(person) {
            return Err("the person who asked signed it".into());
        }
        if required.step_up {
            self.step_up(s.record, &s.args)?;
        }
        Ok(person)
    }

    /// What the recorded policy requires of `ran` (and of the arguments first asked for: an
    /// edit's requirement only grows, ADR 0028).
    fn required(&self, decision: &Rec, ran: &Value) -> Result<Requirement, String> {
        if decision.event.facts.is_none() {
            return match &decision.event.rule {
                Some(rule) => Err(format!(
                    "rule {rule:?} asked, but its facts were not recorded"
                )),
                // No policy file: each tool's own setting asks the person.
                None => Ok(Requirement::default()),
            };
        }
        let mut required = Requirement::default();
        for (args, original) in [(&decision.event.args, true), (ran, false)] {
            match self.verdict(decision, args)? {
                RuleVerdict::Ask { rule, needs } => {
                    if original && decision.event.rule.as_ref() != Some(&rule) {
                        return Err(format!(
                            "the recorded policy asks by rule {rule:?}, not {:?}",
                            decision.event.rule
                        ));
                    }
                    if let Some(needs) = needs {
                        required = required.merge(&needs);
                    }
                }
                RuleVerdict::NoMatch | RuleVerdict::Error { .. } => {}
                other if original => {
                    return Err(format!(
                        "it was asked for, but the recorded policy says {} for the arguments",
                        words(&other)
                    ));
                }
                RuleVerdict::Deny { rule, .. } => {
                    return Err(format!(
                        "rule {rule:?} of the recorded policy refuses the arguments that ran"
                    ));
                }
                RuleVerdict::Run { .. } => {}
            }
        }
        Ok(required)
    }

    /// The recorded policy's verdict on `args` with the facts of `decision`.
    fn verdict(&self, decision: &Rec, args: &Value) -> Result<RuleVerdict, String> {
        let e = &decision.event;
        let facts = e
            .facts
            .as_ref()
            .ok_or("no facts were recorded with the decision")?;
        let digest = facts
            .get("policy")
            .and_then(Value::as_str)
            .ok_or("the decision names no policy")?;
        let text = self
            .policies
            .get(digest)
            .ok_or_else(|| format!("the text of policy {digest} is not in the file"))?;
        let (rules, _) = CedarRules::parse(text).map_err(|p| {
            format!(
                "policy {digest} does not parse: {}",
                p.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        })?;
        let text_of = |key: &str| facts.get(key).and_then(Value::as_str).map(str::to_owned);
        let requester = facts
            .get("requester")
            .ok_or("the facts name no requester")?;
        let requester = Requester {
            id: requester
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: requester
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            roles: serde_json::from_value(requester.get("roles").cloned().unwrap_or_default())
                .unwrap_or_default(),
        };
        let tool = ToolFacts {
            name: e.tool.clone(),
            server: text_of("server"),
            parameters: facts.get("parameters").cloned().unwrap_or_default(),
            pays: facts.get("pays").and_then(Value::as_bool).unwrap_or(false),
        };
        let number = |key: &str| facts.get(key).and_then(Value::as_i64).unwrap_or(0);
        let builtin = self.tools.get(&e.tool).filter(|_| tool.server.is_none());
        let pays = match (tool.pays, builtin.as_ref().and_then(|t| t.spec.pays)) {
            (false, _) => None,
            (true, Some(pays)) => pays(args),
            (true, None) => {
                return Err(format!(
                    "what a call of {} pays cannot be worked out here",
                    e.tool
                ));
            }
        };
        if args == &e.args
            && let Some(recorded) = facts
                .get("payment")
                .and_then(|p| p.get("amount_cents"))
                .and_then(Value::as_i64)
            && pays.as_ref().map(|p| p.money.wallet_cents()) != Some(recorded)
        {
            return Err(format!(
                "the recorded amount ({recorded} cents) is not what the arguments pay"
            ));
        }
        let asks_by_default = match &builtin {
            Some(t) if args != &e.args => t.spec.approval.requires_approval(args),
            _ => facts
                .get("asks_by_default")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        };
        Ok(rules.decide(&CallFacts {
            chat: &e.session_id,
            requester: &requester,
            tool: &tool,
            args,
            pays,
            new_payee: facts
                .get("new_payee")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            asks_by_default,
            spent_today_cents: number("spent_today_cents"),
            spent_in_chat_cents: number("spent_in_chat_cents"),
            now_ms: number("now_ms"),
        }))
    }

    /// Whether the step-up assertion of signature `r` (over `signed`) holds: a passkey the
    /// chain recorded for its person before it, the challenge of this approval and these
    /// arguments, this site's origin, and the key's signature.
    fn step_up(&self, r: &Rec, signed: &Value) -> Result<(), String> {
        let e = &r.event;
        let proof = e.step_up.as_ref().ok_or("no passkey assertion")?;
        let person = e
            .actor
            .as_ref()
            .and_then(|a| a.person.as_deref())
            .ok_or("a passkey assertion of no person")?;
        let field = |name: &str| -> Result<Vec<u8>, String> {
            proof
                .get(name)
                .and_then(Value::as_str)
                .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
                .ok_or_else(|| format!("its passkey assertion has no {name}"))
        };
        let credential = proof
            .get("credentialId")
            .and_then(Value::as_str)
            .ok_or("its passkey assertion names no passkey")?;
        let (enrolled, key) = self
            .people
            .get(person)
            .and_then(|p| p.passkeys.get(credential))
            .ok_or_else(|| format!("passkey {credential} was never recorded as {person}'s"))?;
        if *enrolled > r.seq {
            return Err(format!("passkey {credential} was recorded after it signed"));
        }
        let key: webauthn_rs::prelude::COSEKey =
            serde_json::from_value(key.clone()).map_err(|_| {
                format!("the recorded public key of passkey {credential} does not read")
            })?;
        let client_data = field("clientDataJSON")?;
        let auth_data = field("authenticatorData")?;
        let signature = field("signature")?;
        let nonce = field("nonce")?;
        let client: Value = serde_json::from_slice(&client_data)
            .map_err(|_| "its client data is not JSON".to_owned())?;
        if client.get("type").and_then(Value::as_str) != Some("webauthn.get") {
            return Err("its client data is not an assertion's".into());
        }
        let binding = Binding {
            person: person.to_owned(),
            chat: e.session_id.clone(),
            approval_id: e.approval_id.clone().unwrap_or_default(),
            args_digest: args_digest(signed),
        };
        let challenge = URL_SAFE_NO_PAD.encode(step_up_challenge(&binding, &nonce));
        if client
            .get("challenge")
            .and_then(Value::as_str)
            .map(|c| c.trim_end_matches('='))
            != Some(challenge.as_str())
        {
            return Err(
                "its passkey assertion was made for another approval or other arguments".into(),
            );
        }
        if let Some(origin) = self.origin {
            if client
                .get("origin")
                .and_then(Value::as_str)
                .map(|o| o.trim_end_matches('/'))
                != Some(origin.trim_end_matches('/'))
            {
                return Err(format!(
                    "its passkey assertion was made on another site than {origin}"
                ));
            }
            let host = url::Url::parse(origin)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned));
            if let Some(host) = host
                && auth_data.get(..32) != Some(Sha256::digest(host.as_bytes()).as_slice())
            {
                return Err(format!("its passkey assertion is not for {host}"));
            }
        }
        let flags = auth_data.get(32).copied().unwrap_or(0);
        if flags & 0x01 == 0 || flags & 0x04 == 0 {
            return Err(
                "its passkey assertion was made without the person present and verified".into(),
            );
        }
        let mut data = auth_data.clone();
        data.extend_from_slice(&Sha256::digest(&client_data));
        match key.verify_signature(&signature, &data) {
            Ok(true) => Ok(()),
            _ => Err(format!(
                "its passkey signature does not verify with passkey {credential}"
            )),
        }
    }
}

fn words(verdict: &RuleVerdict) -> String {
    match verdict {
        RuleVerdict::Run { rule } => format!("rule {rule:?} runs it"),
        RuleVerdict::Ask { rule, .. } => format!("rule {rule:?} asks"),
        RuleVerdict::Deny { rule, .. } => format!("rule {rule:?} refuses it"),
        RuleVerdict::NoMatch => "no rule matches".into(),
        RuleVerdict::Error { message } => format!("a rule fails ({message})"),
    }
}
