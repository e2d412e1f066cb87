// An MCP server's tool under the gate, in the browser: the fifth server of playwright.config.ts
// runs @modelcontextprotocol/server-filesystem (from npm, over stdio) with one allowed directory,
// and its "model" replays end2end/fixtures/mcp-model.jsonl, which asks files__write_file to write
// note.txt there. The card says which server the tool comes from, its title and what its
// annotations claim, and shows the arguments; approving really writes the file on disk, denying
// writes nothing. (The replay plays the same answer after either: it is a recording.) Its second
// turn calls @modelcontextprotocol/server-everything's trigger-elicitation-request, whose server
// asks the person a form of questions mid-call: the question is a card in the chat, what does not
// fit the form is refused, and the answer reaches the server (its tool output repeats it).

import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import * as path from "node:path";
import type { Locator, Page } from "@playwright/test";
import { test, expect } from "./fixtures";
import {
  expectAnswer,
  expectCompleted,
  pendingApproval,
  send,
  startChat,
  toolCards,
  waitForReloadedApp,
  type Mode,
} from "./chat";

const MCP_URL = process.env.COUNTERSIGN_E2E_MCP_URL;
/** The filesystem server's allowed directory (fixed: the recording names a path in it). */
const ROOT = process.env.COUNTERSIGN_E2E_MCP_ROOT ?? "/tmp/countersign-e2e-mcp/files";
const NOTE = path.join(ROOT, "note.txt");
const CONTENT = "Countersigned in the browser.";
const TOOL = "files__write_file";
/** The everything server's tool that asks the person questions mid-call. */
const ASK_TOOL = "everything__trigger-elicitation-request";

test.skip(
  !MCP_URL,
  "against servers started elsewhere (external mode) there is no MCP server: set COUNTERSIGN_E2E_MCP_URL",
);

test.beforeAll(async () => {
  // The recording and this spec must agree on what is written where.
  const recording = readFileSync(path.join(__dirname, "..", "fixtures", "mcp-model.jsonl"), "utf8");
  const call = recording
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line).chunk)
    .find((chunk) => chunk?.type === "tool-input-available");
  expect(call, "the recording calls the MCP tool").toMatchObject({
    toolName: TOOL,
    input: { path: NOTE, content: CONTENT },
  });

  // The page reads the tools once when it starts: wait until the MCP server's are registered.
  await expect
    .poll(
      async () => {
        const status = await (await fetch(new URL("/api/mcp", MCP_URL))).json();
        const files = status.servers?.find((s: any) => s.name === "files");
        const everything = status.servers?.find((s: any) => s.name === "everything");
        return files?.state === "connected" &&
          files.tools.includes(TOOL) &&
          everything?.tools.includes(ASK_TOOL)
          ? "ready"
          : JSON.stringify(status);
      },
      { message: "the MCP servers are connected with their tools", timeout: 20_000 },
    )
    .toBe("ready");
});

test.beforeEach(() => {
  // Empty the allowed directory (not the directory itself: the MCP server is confined to it).
  for (const entry of readdirSync(ROOT)) rmSync(path.join(ROOT, entry), { recursive: true, force: true });
});

/** Starts a chat on the MCP server, has the model call write_file, returns its pending card. */
async function askToWrite(page: Page, mode: Mode) {
  await startChat(page, mode, MCP_URL);
  await send(page, "Save a note in the files folder");
  const card = toolCards(page, TOOL);
  await expect(card).toHaveCount(1);
  const approval = await pendingApproval(card);
  return { card, approval };
}

/**
 * The turn is over: the recording's closing words are shown and Stop is gone. (A replay reports
 * no usage, so there is no usage footer to wait for.)
 */
async function expectReplayFinished(page: Page) {
  await expectAnswer(page, "That is all I was asked to do with note.txt.");
  await expect(page.getByTestId("stop")).toBeHidden();
}

/** The `<dt>`/`<dd>` pairs of one of the card's lists. */
async function pairs(list: Locator): Promise<Record<string, string>> {
  const terms = await list.locator("dt").allInnerTexts();
  const details = await list.locator("dd").allInnerTexts();
  return Object.fromEntries(terms.map((term, i) => [term.trim(), details[i]?.trim()]));
}

test("the card of an MCP tool says whose it is and what it claims; approving writes the file (sse)", async ({
  page,
}) => {
  const { card, approval } = await askToWrite(page, "sse");

  await expect(card.locator(".tool-head .tool-title")).toHaveText("Write File");
  await expect(card.getByTestId("tool-source")).toHaveText("MCP server files");
  await expect(card.getByTestId("tool-notes")).toHaveText(
    "can delete or overwrite data · repeating it changes nothing more",
  );
  expect(await pairs(card.locator("dl.tool-args"))).toEqual({ path: NOTE, content: CONTENT });
  await expect(approval.getByTestId("approval-summary")).toHaveText("Let files run Write File");
  expect(existsSync(NOTE), "nothing is written before the approval").toBe(false);

  await approval.getByTestId("approve").click();
  await expectCompleted(card);
  expect(readFileSync(NOTE, "utf8")).toBe(CONTENT);
  expect(readdirSync(ROOT)).toEqual(["note.txt"]);
  // The server's own answer, shown as the tool's output.
  await expect(card.locator("dl.tool-output")).toContainText(`Successfully wrote to ${NOTE}`);
  await expectReplayFinished(page);
});

test("the Tools panel lists every tool by where it comes from, with what each needs", async ({ page }) => {
  await startChat(page, "sse", MCP_URL);
  const link = page.getByTestId("tools-link");
  await link.click();
  const panel = page.getByTestId("tools-panel");
  await expect(panel).toBeVisible();
  expect(new URL(page.url()).pathname, "the chat stays where it is").toBe("/");
  await expect(link).toHaveAttribute("aria-expanded", "true");
  const group = (source: string) => panel.locator(`[data-testid="tools-page-group"][data-source="${source}"]`);
  await expect(group("countersign")).toContainText("process_payment");
  await expect(group("files")).toHaveAttribute("data-state", "connected");
  await expect(group("files").locator(`[data-tool="${TOOL}"]`)).toHaveAttribute("data-needs", "asks");
  await expect(group("files").locator('[data-tool="files__read_text_file"]')).toHaveAttribute("data-needs", "runs");
  await expect(group("everything").locator(`[data-tool="${ASK_TOOL}"]`)).toHaveAttribute("data-needs", "runs");
  await page.getByTestId("tools-panel-close").click();
  await expect(panel).toHaveCount(0);
  await expect(link).toHaveAttribute("aria-expanded", "false");
});

test("denying an MCP tool's call writes nothing (bidi)", async ({ page }) => {
  const { card, approval } = await askToWrite(page, "bidi");
  await expect(card.getByTestId("tool-source")).toHaveText("MCP server files");

  await approval.getByTestId("deny").click();
  await approval.getByTestId("deny-reason").fill("not today");
  await approval.getByTestId("deny-confirm").click();

  await expect(card).toHaveAttribute("data-state", "output-denied");
  await expect(card.getByTestId("tool-status")).toHaveText(/Denied/);
  await expect(card.getByTestId("approval-card")).toHaveCount(0);
  // The recording's next step plays after a denial too; by then the call is long settled.
  await expectReplayFinished(page);
  expect(readdirSync(ROOT), "the denied call wrote nothing").toEqual([]);
});

for (const mode of ["sse", "bidi"] as Mode[]) {
  test(`a question an MCP server asks mid-call is a card in the chat, and the answer reaches it (${mode})`, async ({
    page,
  }) => {
    // The recording's first turn: the note, approved.
    const { card: write, approval } = await askToWrite(page, mode);
    await approval.getByTestId("approve").click();
    await expectCompleted(write);
    await expectReplayFinished(page);

    // Its second turn: the everything server asks while its tool runs.
    await send(page, "Ask me your questions");
    const tool = toolCards(page, ASK_TOOL);
    await expect(tool).toHaveCount(1);
    await expect(tool.getByTestId("tool-source")).toHaveText("MCP server everything");
    const question = page.getByTestId("question-card");
    await expect(question).toHaveCount(1);
    await expect(question).toHaveAttribute("data-state", "open");
    await expect(question.getByTestId("question-source")).toHaveText("MCP server everything");
    await expect(question.getByTestId("question-message")).toHaveText(
      "Please provide inputs for the following fields:",
    );
    // A reload while the server waits: the page re-attaches to the running turn and the
    // question is there again, still open.
    await page.reload();
    await waitForReloadedApp(page);
    await expect(question).toHaveCount(1);
    await expect(question).toHaveAttribute("data-state", "open");
    await expect(page.getByTestId("question-countdown")).toHaveText(/^Expires in \d+:\d\d$/);
    // The form follows the server's schema: titles, defaults, choices by their titles.
    const form = question.getByTestId("question-form");
    await expect(form.getByTestId("edit-field-firstLine")).toHaveValue("It was a dark and stormy night.");
    await expect(form.getByTestId("edit-field-integer")).toHaveValue("42");
    await expect(form.getByTestId("edit-field-titledSingleSelectEnum").locator("option:checked")).toHaveText(
      "Superman",
    );
    await expect(form.getByTestId("edit-field-legacyTitledEnum").locator("option")).toContainText([
      "Cats",
      "Dogs",
    ]);

    // The name is required: refused before it is sent, and the question stays open.
    await form.getByTestId("question-send").click();
    await expect(page.getByTestId("question-error")).toContainText("name");
    await expect(question).toHaveAttribute("data-state", "open");

    await form.getByTestId("edit-field-name").fill("Ada Lovelace");
    await form.getByTestId("edit-field-check").check();
    await form.getByTestId("edit-field-email").fill("ada@example.org");
    await form.getByTestId("edit-field-integer").fill("7");
    await form.getByTestId("edit-field-untitledSingleSelectEnum").selectOption("Joey");
    await form.getByTestId("edit-field-titledMultipleSelectEnum").getByLabel("Salmon").check();
    await form.getByTestId("question-send").click();

    await expect(question).toHaveAttribute("data-state", "answered");
    await expect(question.getByTestId("question-status")).toHaveText("Answered");
    await expect(page.getByTestId("question-countdown")).toHaveCount(0);
    await expect(question.getByTestId("question-form")).toHaveCount(0);
    const answer = await pairs(question.getByTestId("question-answer"));
    // Each field by the label it had in the form, each choice by its title.
    expect(answer).toMatchObject({
      String: "Ada Lovelace",
      Boolean: "yes",
      "String with email format": "ada@example.org",
      Integer: "7",
      "Titled Multiple Select Enum": "Tuna, Salmon",
      "Titled Single Select Enum": "Superman",
    });
    // The server got the answer: its tool's output repeats it.
    await expectCompleted(tool);
    await expect(tool.locator("dl.tool-output")).toContainText("- Name: Ada Lovelace");
    await expect(tool.locator("dl.tool-output")).toContainText("- Favorite Integer: 7");
    await expectAnswer(page, "Thank you: the server has your answers.");
  });
}
