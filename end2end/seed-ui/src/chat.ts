// The chat engine: the AI SDK's own AbstractChat (npm `ai`, the version the seed pinned), with a
// plain ChatState instead of React's, and the seed's two option builders
// (lib/sse/use-chat-options.ts, lib/bidi/use-chat-options.ts).

import {
  AbstractChat,
  DefaultChatTransport,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type ChatTransport,
  type UIMessage,
} from "ai";
import { SeedBidiTransport } from "./bidi";
import { bidiSendAutomaticallyWhen, clearSentApprovalStates, sseSendAutomaticallyWhen } from "./send-automatically-when";

export type Mode = "adk-sse" | "adk-bidi";

/** @ai-sdk/react's ReactChatState without React: setters notify, replaced messages are cloned. */
class PlainChatState implements ChatState<UIMessage> {
  #messages: UIMessage[];
  #status: ChatStatus = "ready";
  #error: Error | undefined = undefined;

  constructor(
    initial: UIMessage[],
    private readonly changed: () => void,
  ) {
    this.#messages = initial;
  }

  get status() {
    return this.#status;
  }
  set status(status: ChatStatus) {
    this.#status = status;
    this.changed();
  }
  get error() {
    return this.#error;
  }
  set error(error: Error | undefined) {
    this.#error = error;
    this.changed();
  }
  get messages() {
    return this.#messages;
  }
  set messages(messages: UIMessage[]) {
    this.#messages = [...messages];
    this.changed();
  }
  pushMessage = (message: UIMessage) => {
    this.#messages = this.#messages.concat(message);
    this.changed();
  };
  popMessage = () => {
    this.#messages = this.#messages.slice(0, -1);
    this.changed();
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.#messages = [...this.#messages.slice(0, index), this.snapshot(message), ...this.#messages.slice(index + 1)];
    this.changed();
  };
  snapshot = <T>(value: T): T => structuredClone(value);
}

export class SeedChat extends AbstractChat<UIMessage> {
  constructor(
    init: Omit<ChatInit<UIMessage>, "messages">,
    initial: UIMessage[],
    changed: () => void,
  ) {
    super({ ...init, state: new PlainChatState(initial, changed) });
  }
}

export interface Built {
  chat: SeedChat;
  /** BIDI only: the transport, for interrupts and inspection. */
  bidi?: SeedBidiTransport;
}

/**
 * lib/build-use-chat-options.ts: clears the sent-approval Set, then builds the mode's transport
 * and chat id. The ids are constant per endpoint (`forceNewInstance` is never true in the seed).
 */
export function buildChat(mode: Mode, backend: string, apiKey: string, initial: UIMessage[], changed: () => void): Built {
  clearSentApprovalStates();
  if (mode === "adk-sse") {
    const endpoint = `${backend}/stream`;
    const chatId = `chat-adk-sse-${endpoint.replace(/[^a-zA-Z0-9]/g, "-")}`;
    const transport = new DefaultChatTransport<UIMessage>({
      api: endpoint,
      // Adds the key and keeps the SDK's default body ({id, messages, trigger, messageId}).
      prepareSendMessagesRequest: async (options: any) => {
        const { body: _body, ...rest } = options;
        const headers = { ...(rest.headers || {}), ...(apiKey ? { "X-API-Key": apiKey } : {}) };
        return { ...rest, api: endpoint, headers };
      },
    });
    const chat = new SeedChat(
      { id: chatId, transport: transport as ChatTransport<UIMessage>, sendAutomaticallyWhen: sseSendAutomaticallyWhen },
      initial,
      changed,
    );
    return { chat };
  }
  const wsUrl = `${backend.replace(/^http/, "ws")}/live`;
  const chatId = `chat-adk-bidi-${wsUrl.replace(/[^a-zA-Z0-9]/g, "-")}`;
  const bidi = new SeedBidiTransport(wsUrl);
  const chat = new SeedChat({ id: chatId, transport: bidi, sendAutomaticallyWhen: bidiSendAutomaticallyWhen }, initial, changed);
  return { chat, bidi };
}
