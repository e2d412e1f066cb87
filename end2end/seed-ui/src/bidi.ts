// The seed UI's own BIDI ChatTransport (lib/bidi/{transport,event_receiver,event_sender}.ts at
// 747de68), reimplemented from the rules in the seed-dialect notes, §D.1 — including the ones
// that make it fragile, because those are what a server has to live with:
//
// * one WebSocket per transport, reused by every sendMessages();
// * each WebSocket text frame is one SSE event ("data: {chunk}" or "data: [DONE]"); other frames
//   are JSON and only `pong` is used;
// * after a `tool-approval-request`, the next `finish-step` is enqueued and then the stream is
//   CLOSED (BIDI Blocking Mode): the chat goes "ready" until the person answers;
// * `ws.onmessage` is re-bound to a stream controller only inside sendMessages(), so every frame
//   between that close and the next sendMessages() goes to a closed controller and is dropped;
// * a 60 s watchdog starts at an approval request and errors the stream unless that finish-step
//   comes;
// * a ping every 2 s; ESC sends an interrupt.
//
// Audio (data-pcm playback, WAV injection) is left out: the demo model sends none.

import type { ChatTransport, UIMessage, UIMessageChunk } from "ai";

type Controller = ReadableStreamDefaultController<UIMessageChunk>;

/** What the page can inspect (tests read it through `window.seedUi`). */
export interface BidiDebug {
  /** Chunks that arrived while the active controller was closed, and were lost. */
  dropped: string[];
  /** Times the approval watchdog fired. */
  watchdogFired: number;
}

const BACKEND_RESPONSE_TIMEOUT_MS = 60_000;
const PING_INTERVAL_MS = 2_000;

/** lib/bidi/event_receiver.ts: one SSE-formatted frame at a time into the active controller. */
class EventReceiver {
  private doneReceived = false;
  private waitingForFinishStepAfterApproval = false;

  constructor(
    private readonly hooks: {
      onApprovalRequest: () => void;
      onApprovalStreamClosed: () => void;
      debug: BidiDebug;
    },
  ) {}

  reset() {
    this.doneReceived = false;
    this.waitingForFinishStepAfterApproval = false;
  }

  isDoneReceived() {
    return this.doneReceived;
  }

  handle(data: string, controller: Controller) {
    if (!data.startsWith("data: ")) {
      // Non-SSE frames: JSON, of which only `pong` means anything (latency).
      try {
        JSON.parse(data);
      } catch {
        console.warn("[Event Receiver] Non-SSE, non-JSON message:", data.slice(0, 100));
      }
      return;
    }
    const json = data.slice(6).trim();
    if (json === "[DONE]") {
      if (this.doneReceived) {
        console.warn("[Event Receiver] Protocol violation: Multiple [DONE] markers received. Ignoring.");
        return;
      }
      this.doneReceived = true;
      try {
        controller.close();
      } catch {
        // already closed
      }
      return;
    }
    let chunk: any;
    try {
      chunk = JSON.parse(json);
    } catch {
      console.warn("[Event Receiver] Malformed JSON in SSE message:", json.slice(0, 100));
      return; // skipped; the stream stays open
    }
    if (chunk?.type === "data-pcm") return; // played, never enqueued (no audio here)

    if (chunk?.type === "tool-approval-request") {
      this.enqueue(controller, chunk);
      this.waitingForFinishStepAfterApproval = true;
      this.hooks.onApprovalRequest();
      return;
    }
    if (this.waitingForFinishStepAfterApproval && chunk?.type === "finish-step") {
      this.enqueue(controller, chunk);
      try {
        controller.close();
      } catch {
        // already closed
      }
      this.doneReceived = true;
      this.waitingForFinishStepAfterApproval = false;
      this.hooks.onApprovalStreamClosed();
      return;
    }
    this.enqueue(controller, chunk);
  }

  /** Enqueue; on a closed controller the chunk is lost (the seed only logs it). */
  private enqueue(controller: Controller, chunk: any) {
    try {
      controller.enqueue(chunk as UIMessageChunk);
    } catch {
      this.hooks.debug.dropped.push(String(chunk?.type));
      console.warn(`[Event Receiver] Controller already closed, skipping chunk: ${chunk?.type}`);
    }
  }
}

export class SeedBidiTransport implements ChatTransport<UIMessage> {
  private ws: WebSocket | null = null;
  private currentController: Controller | null = null;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private watchdog: ReturnType<typeof setTimeout> | null = null;
  private readonly receiver: EventReceiver;

  constructor(
    private readonly url: string,
    readonly debug: BidiDebug = { dropped: [], watchdogFired: 0 },
    private readonly connectTimeoutMs = 30_000,
  ) {
    this.receiver = new EventReceiver({
      onApprovalRequest: () => this.startWatchdog(),
      onApprovalStreamClosed: () => this.clearWatchdog(),
      debug,
    });
  }

  /** ESC while loading (lib/bidi/event_sender.ts `interrupt`). */
  interrupt(reason: "user_abort" | "timeout" | "error" = "user_abort") {
    this.send({ type: "interrupt", version: "1.0", timestamp: Date.now(), reason });
  }

  close() {
    this.clearWatchdog();
    this.stopPing();
    this.ws?.close();
    this.ws = null;
  }

  async sendMessages(options: Parameters<ChatTransport<UIMessage>["sendMessages"]>[0]) {
    return new ReadableStream<UIMessageChunk>({
      start: async (controller) => {
        try {
          const ws = this.ws;
          if (!ws || ws.readyState === WebSocket.CLOSED || ws.readyState === WebSocket.CLOSING) {
            const socket = new WebSocket(this.url);
            this.ws = socket;
            await new Promise<void>((resolve, reject) => {
              const timer = setTimeout(() => {
                reject(new Error("WebSocket connection timeout"));
                socket.close();
              }, this.connectTimeoutMs);
              socket.onopen = () => {
                clearTimeout(timer);
                this.startPing();
                resolve();
              };
              socket.onerror = () => {
                clearTimeout(timer);
                reject(new Error("WebSocket connection failed"));
              };
            });
            this.currentController = controller;
            this.receiver.reset();
            this.bind(controller);
          } else {
            const done = this.receiver.isDoneReceived();
            if (done) {
              try {
                this.currentController?.close();
              } catch {
                // already closed
              }
              this.currentController = controller;
              this.receiver.reset();
            }
            // No [DONE] yet: keep feeding the current controller ("BIDI Blocking Mode").
            this.bind(done ? controller : (this.currentController ?? controller));
          }
          this.send({
            type: "message",
            version: "1.0",
            timestamp: Date.now(),
            id: options.chatId,
            messages: options.messages,
            trigger: options.trigger,
            messageId: options.messageId,
          });
        } catch (error) {
          controller.error(error);
        }
      },
      cancel: () => {
        this.ws?.close();
        this.ws = null;
      },
    });
  }

  async reconnectToStream() {
    return null;
  }

  /** The only place frames get a controller: inside sendMessages(). */
  private bind(controller: Controller) {
    const ws = this.ws;
    if (!ws) return;
    ws.onmessage = (event) => this.receiver.handle(String(event.data), controller);
    ws.onerror = () => {
      this.stopPing();
      try {
        controller.error(new Error("WebSocket error"));
      } catch {
        // already closed
      }
    };
    ws.onclose = () => {
      this.stopPing();
      try {
        controller.close();
      } catch {
        // already closed
      }
    };
  }

  private send(frame: Record<string, unknown>) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  private startPing() {
    this.stopPing();
    this.pingTimer = setInterval(() => {
      this.send({ type: "ping", version: "1.0", timestamp: Date.now() });
    }, PING_INTERVAL_MS);
  }

  private stopPing() {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
  }

  private startWatchdog() {
    this.clearWatchdog();
    this.watchdog = setTimeout(() => {
      this.watchdog = null;
      this.debug.watchdogFired++;
      try {
        this.currentController?.error(
          new Error(
            `Backend response timeout: No response within ${BACKEND_RESPONSE_TIMEOUT_MS / 1000} seconds after approval-request`,
          ),
        );
      } catch {
        // already closed
      }
    }, BACKEND_RESPONSE_TIMEOUT_MS);
  }

  private clearWatchdog() {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
  }
}
