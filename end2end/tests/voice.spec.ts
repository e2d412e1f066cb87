// BIDI's voice in the browser (issue #36, ADR 0037): the talk button, the level meter, a refused
// microphone, the agent's speech played and stopped, a spoken payment that only a click can
// approve (a spoken yes is shown as the person's words, "You said …"), and hands-free with the
// demo model finding the utterance in the open microphone itself (ADR 0036).
//
// Debian's Chromium has a fake microphone that plays a WAV file
// (--use-file-for-fake-audio-capture=<wav>%noloop), read once per launch: each scenario that
// speaks launches its own browser with its clip. What the page plays is observed by the test
// itself: an init script (test code, never shipped) taps every node the page connects to its
// speakers with a recorder beside the destination.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import {
  chromium,
  type Browser,
  type Page,
  type TestInfo,
  type WebSocketRoute,
} from "@playwright/test";
import { test, expect, waitForHydration } from "./fixtures";
import { pendingApproval, send, setMode, toolCards, userMessages } from "./chat";

/** The committed clips (16 kHz mono PCM16 WAV, tests/fixtures/voice/README.md). */
const CLIPS = process.env.COUNTERSIGN_E2E_VOICE_DIR ?? path.resolve(__dirname, "../../tests/fixtures/voice");
const clip = (name: string) => path.join(CLIPS, `${name}.wav`);

/** The largest audio frame the server takes (the voice contract, ADR 0035). */
const MAX_FRAME_BYTES = 16_000;

// ---- test-only instruments ------------------------------------------------------------------

/**
 * Runs in the page before its scripts: every node connected to a context's destination is also
 * connected to a recorder there, which logs each block's RMS with its time on the audio clock.
 * The page's own code is not touched; this only observes what reaches the speakers.
 */
const TAP = () => {
  type Block = { t: number; rms: number; n: number };
  const tap = {
    contexts: [] as { rate: number; blocks: Block[]; context: BaseAudioContext }[],
    // Each context's audio clock when the person last pressed (the pointer went down): when a
    // barge-in began, read in the page, not after the test's own round trips to it.
    pressed: [] as { rate: number; now: number }[],
  };
  (window as unknown as { __tap: typeof tap }).__tap = tap;
  window.addEventListener(
    "pointerdown",
    () => {
      tap.pressed = tap.contexts.map(({ rate, context }) => ({ rate, now: context.currentTime }));
    },
    true,
  );
  const connect = AudioNode.prototype.connect as (this: AudioNode, ...args: unknown[]) => unknown;
  const recorders = new WeakMap<BaseAudioContext, ScriptProcessorNode>();
  AudioNode.prototype.connect = function (this: AudioNode, ...args: unknown[]) {
    const result = connect.apply(this, args);
    const target = args[0];
    if (target instanceof AudioDestinationNode && !(this instanceof ScriptProcessorNode)) {
      const context = this.context;
      let recorder = recorders.get(context);
      if (!recorder) {
        recorder = context.createScriptProcessor(1024, 1, 1);
        const log = { rate: context.sampleRate, blocks: [] as Block[], context };
        recorder.onaudioprocess = (e) => {
          const data = e.inputBuffer.getChannelData(0);
          let sum = 0;
          for (const s of data) sum += s * s;
          log.blocks.push({ t: e.playbackTime, rms: Math.sqrt(sum / data.length), n: data.length });
        };
        connect.call(recorder, context.destination);
        recorders.set(context, recorder);
        tap.contexts.push(log);
      }
      connect.call(this, recorder);
    }
    return result;
  } as typeof AudioNode.prototype.connect;
};

/** What the tap heard: per context, the span of audible blocks and their level. */
async function heard(page: Page, after = 0) {
  return page.evaluate((after) => {
    const tap = (window as unknown as { __tap: { contexts: { rate: number; context: BaseAudioContext; blocks: { t: number; rms: number; n: number }[] }[] } }).__tap;
    return tap.contexts.map(({ rate, blocks, context }) => {
      const loud = blocks.filter((b) => b.t >= after && b.rms > 0.01);
      const first = loud[0];
      const last = loud[loud.length - 1];
      // The longest run of silent blocks between two audible ones (a gap in the speech).
      let gap = 0;
      let silent = 0;
      let started = false;
      for (const b of blocks.filter((b) => b.t >= after)) {
        if (b.rms > 0.01) {
          if (started) gap = Math.max(gap, silent);
          started = true;
          silent = 0;
        } else if (started) silent += b.n / rate;
      }
      return {
        rate,
        now: context.currentTime,
        audible: loud.length ? last.t + last.n / rate - first.t : 0,
        start: first?.t ?? null,
        end: last ? last.t + last.n / rate : null,
        rms: loud.length ? Math.sqrt(loud.reduce((a, b) => a + b.rms * b.rms, 0) / loud.length) : 0,
        gap,
      };
    });
  }, after);
}

/** The playback context's report (the one with audible blocks), or null. */
async function playback(page: Page, after = 0) {
  const contexts = await heard(page, after);
  return contexts.find((c) => c.audible > 0) ?? null;
}

/** The audio clock of the playback context (the one at the device rate, not the 16 kHz mic's). */
async function audioNow(page: Page): Promise<number> {
  const contexts = await heard(page);
  return Math.max(...contexts.filter((c) => c.rate !== 16000).map((c) => c.now));
}

/** The playback context's audio clock when the pointer last went down in the page. */
async function pressedAt(page: Page): Promise<number> {
  const pressed = await page.evaluate(
    () => (window as unknown as { __tap: { pressed: { rate: number; now: number }[] } }).__tap.pressed,
  );
  const playing = pressed.filter((c) => c.rate !== 16000);
  expect(playing.length, "the press was seen by the page while its speech context existed").toBeGreaterThan(0);
  return Math.max(...playing.map((c) => c.now));
}

/** A mono PCM16 WAV of `seconds` of a tone (a microphone input that is clearly not silence). */
function toneWav(file: string, seconds: number, rate = 16_000) {
  const samples = Math.round(seconds * rate);
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) {
    data.writeInt16LE(Math.round(0.3 * 32767 * Math.sin((2 * Math.PI * 300 * i) / rate)), i * 2);
  }
  const header = Buffer.alloc(44);
  header.write("RIFF", 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVEfmt ", 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36);
  header.writeUInt32LE(data.length, 40);
  writeFileSync(file, Buffer.concat([header, data]));
}

/** PCM16LE mono 24 kHz of a tone: the agent's speech as the server sends it. */
function speechPcm(seconds: number): Buffer {
  const samples = Math.round(seconds * 24_000);
  const pcm = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) {
    pcm.writeInt16LE(Math.round(0.4 * 32767 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  }
  return pcm;
}

/** The bytes of a WAV's data chunk. */
function wavDataBytes(file: string): number {
  const wav = readFileSync(file);
  let at = 12;
  while (at + 8 <= wav.length) {
    const id = wav.toString("ascii", at, at + 4);
    const size = wav.readUInt32LE(at + 4);
    if (id === "data") return size;
    at += 8 + size + (size % 2);
  }
  throw new Error(`${file} has no data chunk`);
}

type Sent = { text: unknown[]; binary: Buffer[]; order: string[] };

/** Records what the page sends on its live socket. */
function recordSent(page: Page): Sent {
  const sent: Sent = { text: [], binary: [], order: [] };
  page.on("websocket", (ws) => {
    if (!ws.url().includes("/api/live")) return;
    ws.on("framesent", ({ payload }) => {
      if (typeof payload === "string") {
        try {
          const frame = JSON.parse(payload);
          sent.text.push(frame);
          sent.order.push(frame.type === "audio_control" ? `control:${frame.action}` : `text:${frame.type}`);
        } catch {
          sent.order.push("text:?");
        }
      } else {
        sent.binary.push(payload);
        sent.order.push("binary");
      }
    });
  });
  return sent;
}

const audioBytes = (sent: Sent) => sent.binary.reduce((n, b) => n + b.length, 0);

/**
 * What the page sent and showed, for a failure's message: the controls in order, how much audio
 * went out and how loud it was (in 0.5 s steps, so a lost or silent start shows), and the voice
 * bar's status and problem lines.
 */
async function whatHappened(page: Page, sent: Sent): Promise<string> {
  const samples = Buffer.concat(sent.binary.map((b) => Buffer.from(b)));
  const loudness: number[] = [];
  for (let at = 0; at + 1 < samples.length; at += 16_000) {
    let peak = 0;
    for (let i = at; i + 1 < Math.min(samples.length, at + 16_000); i += 2) peak = Math.max(peak, Math.abs(samples.readInt16LE(i)));
    loudness.push(peak);
  }
  // Read without waiting: a line that is not there is part of the answer.
  const line = async (id: string) => {
    const found = page.getByTestId(id);
    return (await found.count()) > 0 ? found.first().textContent({ timeout: 1_000 }) : null;
  };
  const status = await line("voice-status");
  const problem = await line("voice-problem");
  const controls = sent.order.filter((o) => !o.startsWith("binary"));
  return [
    `controls sent: ${controls.join(", ") || "none"}`,
    `audio sent: ${sent.binary.length} frames, ${samples.length} bytes; peak per 0.5 s: ${loudness.join(" ")}`,
    `voice status: ${status ?? "(none)"}; problem: ${problem ?? "(none)"}`,
  ].join("\n");
}

/**
 * A browser whose microphone plays `wav` (or none: `grant` false refuses the microphone), with
 * the fixture's checks: a page error, console error or HTTP error fails the test.
 */
async function launch(testInfo: TestInfo, wav: string | null, grant = true) {
  const base = testInfo.project.use.launchOptions ?? {};
  const args = [...(base.args ?? []), "--use-fake-device-for-media-stream"];
  if (grant) args.push("--use-fake-ui-for-media-stream");
  else args.push("--deny-permission-prompts");
  if (wav) args.push(`--use-file-for-fake-audio-capture=${wav}%noloop`);
  const browser = await chromium.launch({ ...base, args });
  const context = await browser.newContext({
    baseURL: testInfo.project.use.baseURL,
    viewport: { width: 1280, height: 800 },
  });
  const page = await context.newPage();
  await page.addInitScript(TAP);
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`);
  });
  return { browser, page, problems };
}

/** A browser whose microphone plays three seconds of a loud tone (written for the test). */
async function launchWithTone(testInfo: TestInfo) {
  const dir = testInfo.outputPath("mic");
  mkdirSync(dir, { recursive: true });
  const wav = path.join(dir, "tone.wav");
  toneWav(wav, 3);
  return launch(testInfo, wav);
}

async function close(run: { browser: Browser; problems: string[] }) {
  await run.browser.close();
  expect(run.problems, "the page reported problems").toEqual([]);
}

/** Opens the chat page on `chat` (or a new chat) in BIDI mode. */
async function openBidi(page: Page, chat?: string) {
  await page.goto(chat ? `/?chat=${encodeURIComponent(chat)}` : "/");
  await waitForHydration(page);
  if (!chat) await page.getByTestId("new-chat").click();
  if ((await page.getByTestId("mode-bidi").getAttribute("aria-pressed")) !== "true") {
    await setMode(page, "bidi");
  }
  await expect(page.getByTestId("connection-status")).toHaveText(/Live/);
  await expect(page.getByTestId("talk")).toBeEnabled();
}

/**
 * How much audio past a clip's own length a hold waits for before it lets go (0.4 s at 16 kHz,
 * 16-bit mono; the fake microphone goes on with silence after the clip). So no timing of the
 * page's capture can cut the clip's end: a hold released at 90 % of the clip's length could, if
 * anything but the clip was taken in first (one full run heard "yes, approve it" as "Yes").
 */
const PAST_THE_CLIP = 12_800;

/** Holds the talk button until `bytes` of audio went out, then lets go. */
async function holdToTalk(page: Page, sent: Sent, bytes: number) {
  await page.getByTestId("talk").hover();
  await page.mouse.down();
  await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "true");
  await expect.poll(() => audioBytes(sent), { timeout: 15_000 }).toBeGreaterThanOrEqual(bytes);
  await page.mouse.up();
  await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "false");
  await expect.poll(() => sent.order[sent.order.length - 1]).toBe("control:stop");
}

// ---- the page alone (any server) ------------------------------------------------------------

test.describe("voice: the page", () => {
  test("the voice bar is there in BIDI mode only, and its talk button says its key", async ({ page }) => {
    await page.goto("/");
    await waitForHydration(page);
    await setMode(page, "sse");
    await expect(page.getByTestId("voice-bar")).toHaveCount(0);
    await setMode(page, "bidi");
    const talk = page.getByTestId("talk");
    await expect(talk).toBeVisible();
    await expect(talk).toHaveAttribute("title", /Alt\+V/);
    await expect(talk).toHaveAttribute("aria-pressed", "false");
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "false");
    // The meter shows only while the microphone is open.
    await expect(page.getByTestId("voice-level")).toHaveCount(0);
    await setMode(page, "sse");
    await expect(page.getByTestId("voice-bar")).toHaveCount(0);
  });

  test("a refused microphone says so, and typing still works", async ({}, testInfo) => {
    const run = await launch(testInfo, null, false);
    const { page } = run;
    await openBidi(page);
    await page.getByTestId("talk").focus();
    await page.keyboard.down("Space");
    await expect(page.getByTestId("voice-problem")).toContainText(/microphone was refused/i);
    await page.keyboard.up("Space");
    await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "false");
    await expect(page.getByTestId("voice-level")).toHaveCount(0);
    // Text keeps working over the same socket.
    const input = page.getByTestId("composer-input");
    await input.fill("What's the weather in Tokyo?");
    await input.press("Enter");
    await expect(page.locator('[data-testid="assistant-text"]').last()).toContainText(/Tokyo/);
    await close(run);
  });

  test("holding talk streams the microphone as binary PCM frames between audio_control start and stop, with a level meter", async ({}, testInfo) => {
    const run = await launchWithTone(testInfo);
    const { page } = run;
    const sent = recordSent(page);
    await openBidi(page);

    // Held with the mouse.
    await page.getByTestId("talk").hover();
    await page.mouse.down();
    const meter = page.getByTestId("voice-level");
    await expect(meter).toBeVisible();
    await expect(page.getByLabel("Microphone level")).toBeVisible();
    // The tone is loud: the meter reads well above silence.
    await expect.poll(async () => Number(await meter.getAttribute("value"))).toBeGreaterThan(0.5);
    await expect.poll(() => audioBytes(sent)).toBeGreaterThanOrEqual(16_000);
    await page.mouse.up();
    await expect(meter).toHaveCount(0);
    await expect.poll(() => sent.order[sent.order.length - 1]).toBe("control:stop");

    const controls = sent.text.filter((f) => (f as { type: string }).type === "audio_control") as {
      action: string;
      id: string;
      mode: string;
    }[];
    expect(controls.map((c) => c.action)).toEqual(["start", "stop"]);
    for (const c of controls) {
      expect(c.mode).toBe("push_to_talk");
      expect(c.id).toMatch(/^chat-/);
    }
    // Audio only between start and stop; every frame whole samples, within the limit.
    const first = sent.order.indexOf("control:start");
    const last = sent.order.lastIndexOf("control:stop");
    sent.order.forEach((kind, i) => {
      if (kind === "binary") expect(i > first && i < last, `frame ${i} inside start…stop`).toBe(true);
    });
    for (const frame of sent.binary) {
      expect(frame.length % 2).toBe(0);
      expect(frame.length).toBeLessThanOrEqual(MAX_FRAME_BYTES);
    }
    // It is the tone: PCM16 at 16 kHz, loud (not silence).
    const pcm = Buffer.concat(sent.binary);
    let sum = 0;
    for (let i = 0; i + 1 < pcm.length; i += 2) sum += (pcm.readInt16LE(i) / 32768) ** 2;
    expect(Math.sqrt(sum / (pcm.length / 2))).toBeGreaterThan(0.05);

    // Held with the keyboard (Alt+V), from the composer: nothing is typed into it.
    await page.getByTestId("composer-input").focus();
    const before = sent.binary.length;
    await page.keyboard.down("Alt");
    await page.keyboard.down("v");
    await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "true");
    await expect.poll(() => sent.binary.length).toBeGreaterThan(before);
    await page.keyboard.up("v");
    await page.keyboard.up("Alt");
    await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "false");
    await expect(page.getByTestId("composer-input")).toHaveValue("");
    await expect.poll(() => sent.order[sent.order.length - 1]).toBe("control:stop");

    // Hands-free: on until turned off, in its own mode.
    await page.getByTestId("hands-free").click();
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "true");
    await expect(meter).toBeVisible();
    await page.getByTestId("hands-free").click();
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "false");
    await expect.poll(() => sent.order[sent.order.length - 1]).toBe("control:stop");
    const modes = (sent.text.filter((f) => (f as { type: string }).type === "audio_control") as { mode: string }[]).map((c) => c.mode);
    expect(modes.slice(-2)).toEqual(["hands_free", "hands_free"]);
    await close(run);
  });

  test("the agent's speech plays as its frames arrive, gapless, and stops at once on interrupted or when the person talks", async ({}, testInfo) => {
    const run = await launchWithTone(testInfo);
    const { page } = run;
    // The page's own socket to the real server, with the test able to speak as the server
    // (binary speech frames and data-voice chunks, as the voice contract has them).
    let socket: WebSocketRoute | null = null;
    await page.routeWebSocket(/\/api\/live/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => server.send(m));
      server.onMessage((m) => ws.send(m));
      socket = ws;
    });
    await openBidi(page);
    await expect.poll(() => socket !== null).toBe(true);
    const say = (chunk: object) => socket!.send(`data: ${JSON.stringify(chunk)}`);

    // One second of speech in five frames of 0.2 s, sent at once: played back to back.
    say({ type: "start", messageId: "m-spoken" });
    const pcm = speechPcm(1);
    for (let i = 0; i < 5; i++) socket!.send(pcm.subarray(i * 9_600, (i + 1) * 9_600));
    await expect
      .poll(async () => (await playback(page))?.audible ?? 0, { timeout: 10_000 })
      .toBeGreaterThan(0.95);
    await expect.poll(async () => (await audioNow(page)) > ((await playback(page))?.end ?? 0) + 0.1).toBe(true);
    const played = (await playback(page))!;
    expect(played.audible).toBeGreaterThan(0.95);
    expect(played.audible).toBeLessThan(1.1);
    expect(played.gap).toBeLessThan(0.03);
    expect(played.rms).toBeGreaterThan(0.2);

    // `interrupted` stops it at once, and what still arrives of that message is not played.
    for (let i = 0; i < 10; i++) socket!.send(speechPcm(0.5));
    await expect.poll(async () => (await playback(page, (await audioNow(page)) - 0.05)) !== null).toBe(true);
    let stoppedAt = await audioNow(page);
    say({ type: "data-voice", data: { state: "interrupted" }, transient: true });
    socket!.send(speechPcm(0.5));
    await expect.poll(async () => (await audioNow(page)) > stoppedAt + 0.6).toBe(true);
    expect(await playback(page, stoppedAt + 0.15), "playback went on after interrupted").toBeNull();
    say({ type: "finish" });
    socket!.send("data: [DONE]");

    // The next message speaks again; holding talk over it stops it (barge-in).
    say({ type: "start", messageId: "m-spoken-2" });
    for (let i = 0; i < 10; i++) socket!.send(speechPcm(0.5));
    await expect.poll(async () => (await playback(page, (await audioNow(page)) - 0.05)) !== null).toBe(true);
    await page.getByTestId("talk").hover();
    await page.mouse.down();
    await expect(page.getByTestId("talk")).toHaveAttribute("aria-pressed", "true");
    // Measured from the press itself (the page's clock when the pointer went down): before, from
    // a reading taken before the test's hover and press reached the page, whose round trips
    // alone took over 0.15 s now and then on a busy machine.
    stoppedAt = await pressedAt(page);
    expect(await playback(page, stoppedAt - 0.05), "it was playing when the person pressed").not.toBeNull();
    await expect.poll(async () => (await audioNow(page)) > stoppedAt + 0.6).toBe(true);
    expect(await playback(page, stoppedAt + 0.15), "playback went on while the person talked").toBeNull();
    await page.mouse.up();
    say({ type: "finish" });
    socket!.send("data: [DONE]");
    // The server of today may refuse voice (an error chunk shown as a banner): not a page problem.
    await close(run);
  });
});

// ---- voice end to end (the server's and the demo's voice: ADR 0035, 0036) --------------------

test.describe("voice: a spoken payment", () => {
  test.skip(
    !existsSync(clip("pay")) || !existsSync(clip("yes")),
    `needs the voice clips pay.wav and yes.wav in ${CLIPS} (the voice-demo lane's, or COUNTERSIGN_E2E_VOICE_DIR)`,
  );
  test.setTimeout(120_000);

  test("a spoken payment shows the card and the click runs it, heard and kept; a spoken yes to the next one runs nothing and its card still decides", async ({}, testInfo) => {
    // 1. Say the payment.
    const first = await launch(testInfo, clip("pay"));
    let page = first.page;
    let sent = recordSent(page);
    await openBidi(page);
    await holdToTalk(page, sent, wavDataBytes(clip("pay")) + PAST_THE_CLIP);
    const chat = (sent.text.find((f) => (f as { type: string }).type === "audio_control") as { id: string }).id;
    // What the person said is their message (the input transcript).
    await expect(userMessages(page).last()).toContainText(/pay|send/i, { timeout: 30_000 });
    const card = () => toolCards(page, "process_payment");
    await pendingApproval(card());
    // Reload keeps the card.
    await page.reload();
    await waitForHydration(page);
    await expect(page.getByTestId("connection-status")).toHaveText(/Live/);
    const approval = await pendingApproval(card());
    // 3. The click runs it; the agent's spoken answer plays and is kept with a player.
    await approval.getByTestId("approve").click();
    await expect(card()).toHaveAttribute("data-state", "output-available", { timeout: 30_000 });
    const spoken = page.getByTestId("spoken-answer").last();
    await expect(spoken).toBeVisible({ timeout: 30_000 });
    const snapshot = await (await page.request.get(`/api/chats/${encodeURIComponent(chat)}`)).json();
    const withAudio = (snapshot.messages as { metadata?: { audio?: { duration: number } } }[]).filter(
      (m) => m.metadata?.audio,
    );
    const duration = withAudio[withAudio.length - 1].metadata!.audio!.duration;
    expect(duration).toBeGreaterThan(0.3);
    await expect.poll(async () => (await playback(page))?.audible ?? 0, { timeout: 30_000 }).toBeGreaterThan(duration * 0.5);
    // Played to its end: what was heard spans the answer's length (its leading and trailing
    // silence aside), not silence, with no gap a listener would hear.
    await expect.poll(async () => (await audioNow(page)) > ((await playback(page))?.end ?? 0) + 0.3, { timeout: 30_000 }).toBe(true);
    const played = (await playback(page))!;
    expect(played.audible).toBeGreaterThan(duration * 0.6);
    expect(played.audible).toBeLessThan(duration + 0.2);
    expect(played.rms).toBeGreaterThan(0.02);
    const audio = spoken.getByTestId("spoken-audio");
    await expect(audio).toHaveAttribute("src", new RegExp(`^/api/chats/${chat}/files/[0-9a-f]{64}$`));
    const wav = await page.request.get((await audio.getAttribute("src"))!);
    expect(wav.ok()).toBe(true);
    expect((await wav.body()).subarray(0, 4).toString("ascii")).toBe("RIFF");
    await expect(spoken).toContainText("Spoken answer");

    // 4. A reload keeps the answer's player.
    await page.reload();
    await waitForHydration(page);
    await expect(page.getByTestId("spoken-answer").last()).toBeVisible();
    await first.browser.close();
    expect(first.problems, "the page reported problems").toEqual([]);

    // 5. The same payment asked for again by typing; "yes, approve it" said while its card waits
    // is an aside of the waiting turn and approves nothing (ADR 0035: a spoken word is never a
    // countersignature): the agent answers in the waiting message that the card still waits, no
    // message of the person's is added, the card stays pending, and only its click runs it.
    const second = await launch(testInfo, clip("yes"));
    page = second.page;
    sent = recordSent(page);
    await openBidi(page, chat);
    await send(page, "pay forty euros to alice");
    await expect(card()).toHaveCount(2, { timeout: 30_000 });
    await pendingApproval(card().last());
    const said = await userMessages(page).count();
    await holdToTalk(page, sent, wavDataBytes(clip("yes")) + PAST_THE_CLIP);
    await expect(page.locator('[data-testid="assistant-text"]').last()).toContainText(/still waiting/i, { timeout: 30_000 });
    await expect(userMessages(page)).toHaveCount(said);
    // What was said shows as the person's words inside the waiting message, not as a message.
    const aside = page.getByTestId("aside-words");
    await expect(aside).toHaveCount(1);
    await expect(aside).toContainText("You said");
    await expect(aside.locator("q")).toHaveText(/^yes,? approve it$/i);
    const stillPending = await pendingApproval(card().last());
    await expect(card().first()).toHaveAttribute("data-state", "output-available");
    await stillPending.getByTestId("approve").click();
    await expect(card().last()).toHaveAttribute("data-state", "output-available", { timeout: 30_000 });
    await second.browser.close();
    expect(second.problems, "the page reported problems").toEqual([]);
  });
});

// ---- hands-free with the demo model (ADR 0036): it finds the utterance itself ----------------

test.describe("voice: hands-free", () => {
  test.skip(!existsSync(clip("pay")), `needs the voice clip pay.wav in ${CLIPS}`);
  test.setTimeout(120_000);

  test("hands-free: the open microphone's words are heard and answered while it stays open, and the card still decides", async ({}, testInfo) => {
    const run = await launch(testInfo, clip("pay"));
    const { page } = run;
    const sent = recordSent(page);
    await openBidi(page);
    await page.getByTestId("hands-free").click();
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "true");
    // The demo finds where the payment starts and ends in the open microphone's stream: heard
    // as the person's message, answered aloud, its card shown; nobody turned the microphone off.
    try {
      await expect(userMessages(page).last()).toHaveText(/Pay forty euros? to Alice/, { timeout: 30_000 });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${await whatHappened(page, sent)}`);
    }
    const card = toolCards(page, "process_payment");
    const approval = await pendingApproval(card);
    await expect.poll(async () => (await playback(page))?.audible ?? 0, { timeout: 30_000 }).toBeGreaterThan(1);
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "true");
    await expect(page.getByTestId("voice-level")).toBeVisible();
    const controls = (sent.text.filter((f) => (f as { type: string }).type === "audio_control") as { action: string; mode: string }[]).map(
      (c) => `${c.action}:${c.mode}`,
    );
    expect(controls).toEqual(["start:hands_free"]);
    // Still listening: the microphone's frames keep going out.
    const frames = sent.binary.length;
    await expect.poll(() => sent.binary.length).toBeGreaterThan(frames);
    // Heard once: the clip's silence after it starts nothing more.
    await expect(userMessages(page)).toHaveCount(1);
    // Only the click runs it.
    await approval.getByTestId("approve").click();
    await expect(card).toHaveAttribute("data-state", "output-available", { timeout: 30_000 });
    await page.getByTestId("hands-free").click();
    await expect(page.getByTestId("hands-free")).toHaveAttribute("aria-pressed", "false");
    await expect.poll(() => sent.order[sent.order.length - 1]).toBe("control:stop");
    await expect(userMessages(page)).toHaveCount(1);
    await close(run);
  });
});
