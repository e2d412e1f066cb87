// The seed UI's `sendAutomaticallyWhen` (lib/core/send-automatically-when.ts at 747de68),
// reimplemented from its behaviour as written down in the seed-dialect notes, §D.2: the same
// checks in the same order, the same module-level Set of sent approval states, the same list of
// "Frontend Execute" tools. SSE and BIDI differ only in the mode prefix of the Set's keys.
//
// "Tool part" and "text part" are the AI SDK's own predicates (`isToolUIPart`, `isTextUIPart`),
// as in the seed: in ai@6.0.25 `isToolUIPart` also counts `dynamic-tool`.

import { isTextUIPart, isToolUIPart, type UIMessage } from "ai";

/** Survives every Chat instance; cleared on every mode switch or remount. */
const sentApprovalStates = new Set<string>();

export function clearSentApprovalStates(): void {
  sentApprovalStates.clear();
}

/** Tools the browser executes after approval (lib/tool-utils.ts defaults). */
const FRONTEND_EXECUTE_TOOLS = new Set(["get_location", "take_photo", "get_camera"]);

export type AutoSendMode = "sse" | "bidi";

type AnyPart = Record<string, any> & { type: string };

function toolName(part: AnyPart): string {
  if (part.toolName) return part.toolName;
  return part.type.startsWith("tool-") ? part.type.slice(5) : "";
}

const isTool = (p: AnyPart) => isToolUIPart(p as any);
const isText = (p: AnyPart) => isTextUIPart(p as any);
const inState = (state: string) => (p: AnyPart) => isTool(p) && p.state === state;

export function sendAutomaticallyWhenCore(messages: UIMessage[], mode: AutoSendMode): boolean {
  try {
    // 0. Only an assistant message can be continued.
    const last = messages[messages.length - 1];
    if (!last || last.role !== "assistant") return false;
    const parts = ((last as any).parts ?? []) as AnyPart[];

    // 1. Text means "the backend already answered", unless an approval workflow is active.
    const hasApprovedTool = parts.some(inState("approval-responded"));
    const hasPendingApproval = parts.some(inState("approval-requested"));
    if (!hasApprovedTool && !hasPendingApproval && parts.some(isText)) {
      const prefix = `${mode}:${(last as any).id || "unknown"}:`;
      for (const key of Array.from(sentApprovalStates)) {
        if (key.startsWith(prefix)) sentApprovalStates.delete(key);
      }
      return false;
    }

    // 2. A tool output (from addToolOutput).
    const withOutput = parts.filter((p) => inState("output-available")(p) && p.output !== undefined);
    const hasToolOutput = withOutput.length > 0;
    if (hasToolOutput) {
      if (parts.some(isText)) return false;
      if (hasApprovedTool || hasPendingApproval) {
        if (hasApprovedTool) {
          const approved = new Set(parts.filter(inState("approval-responded")).map((p) => p.toolCallId));
          if (withOutput.some((p) => approved.has(p.toolCallId))) return true;
        }
        // fall through to the approval checks
      } else {
        return true; // pure frontend execute
      }
    }

    // 3. Nothing answered yet.
    if (!hasApprovedTool) return false;

    // 4. An approved Frontend-Execute tool waits for its addToolOutput().
    for (const part of parts.filter(inState("approval-responded"))) {
      if (FRONTEND_EXECUTE_TOOLS.has(toolName(part)) && part.approval?.approved === true && part.output === undefined) {
        return false;
      }
    }

    // 5. Every approval of the message must be answered first.
    if (hasPendingApproval) return false;

    // 6. Loop guard.
    const ids = parts
      .filter(inState("approval-responded"))
      .map((p) => p.toolCallId)
      .sort()
      .join(",");
    const key = `${mode}:${(last as any).id || "unknown"}:${ids}`;
    if (!hasToolOutput && sentApprovalStates.has(key)) return false;

    // 7. Any failed tool in the message stops the send.
    for (const part of parts.filter(isTool)) {
      if (part.state === "output-error") return false;
      if (part.error) return false;
    }

    // 8. Send, once.
    sentApprovalStates.add(key);
    return true;
  } catch {
    return false;
  }
}

export const sseSendAutomaticallyWhen = ({ messages }: { messages: UIMessage[] }) =>
  sendAutomaticallyWhenCore(messages, "sse");

export const bidiSendAutomaticallyWhen = ({ messages }: { messages: UIMessage[] }) =>
  sendAutomaticallyWhenCore(messages, "bidi");
