import { existsSync } from "node:fs";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { createDeployment } from "../graphql/support.js";
import { skipDatabaseIndependent } from "../support/database-independent.js";

const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
// Its subject is GraphiQL in a browser, not the database: the query and the SSE subscription it makes
// are tested on each database in test/graphql/ (subscriptions.test.ts), so CI's PostgreSQL run leaves
// the browser out (support/database-independent.ts).
const run = available && !skipDatabaseIndependent;
if (!available) console.warn(`test/browser/graphiql.test.ts skipped: ${CHROMIUM} is missing (apt-get install chromium)`);

let t: TestApp;
let url: string;
let ws: NewWorkspace;
let browser: Browser;

beforeAll(async () => {
  if (!run) return;
  t = await startTestApp({ PIPELINE_STEP_MS: "40", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** What an editor (Monaco) shows, as text. */
const editorText = (page: Page, selector: string) =>
  page.$eval(selector, (el) => ((el.querySelector(".view-lines") as HTMLElement | null)?.innerText ?? "").replace(/\u00a0/g, " "));

/** Replaces an editor's whole text, as a paste would (no auto-closing brackets). */
async function setEditor(page: Page, selector: string, text: string) {
  // Monaco's input is a hidden textarea: focused directly, nothing lying over the editor can take the click.
  await page.focus(`${selector} textarea`);
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyA");
  await page.keyboard.up("Control");
  await page.keyboard.press("Backspace");
  await page.keyboard.sendCharacter(text);
}

async function waitForText(page: Page, selector: string, text: string, timeout = 60_000) {
  await page.waitForFunction(
    (sel: string, wanted: string) =>
      ((document.querySelector(sel)?.querySelector(".view-lines") as HTMLElement | null)?.innerText ?? "").replace(/\u00a0/g, " ").includes(wanted),
    { timeout, polling: 100 },
    selector,
    text,
  );
}

/**
 * Replaces the query editor's text and waits until GraphiQL has taken it into its state: it does so
 * a moment after the keystrokes (debounced), and a click before that runs the previous text. The
 * active tab's state, which GraphiQL keeps in localStorage, shows when it has.
 */
async function setQuery(page: Page, query: string) {
  await setEditor(page, ".graphiql-query-editor", query);
  await page.waitForFunction(
    (wanted: string) => {
      const state = JSON.parse(localStorage.getItem("graphiql:tabState") ?? "null") as { tabs: { query: string }[]; activeTabIndex: number } | null;
      return state?.tabs[state.activeTabIndex]?.query === wanted;
    },
    { timeout: 60_000, polling: 100 },
    query,
  );
}

/**
 * Runs the editor's operation until the response shows `text`. After setQuery the first click runs
 * the new text; a click the page misses (busy on a loaded machine) is made again.
 */
async function runUntil(page: Page, text: string, attempts = 4) {
  for (let attempt = 1; ; attempt++) {
    await page.click(".graphiql-execute-button");
    try {
      return await waitForText(page, ".graphiql-response", text, attempt === attempts ? 60_000 : 15_000);
    } catch (err) {
      if (attempt === attempts) throw err;
    }
  }
}

describe.skipIf(!run)("GraphiQL in a real browser", { timeout: 180_000 }, () => {
  it("loads offline with the key's place shown, runs a query, and follows a revisionStatusChanged subscription to DEPLOYED", async () => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const offsite: string[] = [];
    await page.setRequestInterception(true);
    page.on("request", (req) => {
      const target = new URL(req.url());
      // Nothing from anywhere but this server (blob: workers are the page's own).
      if (target.protocol.startsWith("http") && target.origin !== url) {
        offsite.push(req.url());
        void req.abort();
      } else void req.continue();
    });
    await page.goto(`${url}/graphql`, { waitUntil: "load" });
    // The hint line says where the key goes; the Headers editor opens with its place.
    expect(await page.$eval("#dcp-key-hint", (el) => el.textContent)).toContain('{"x-api-key"');
    await page.waitForSelector(".graphiql-query-editor .view-lines", { timeout: 60_000 });

    const headersTab = await page.waitForSelector("xpath/.//button[normalize-space(.)='Headers']");
    await headersTab!.click();
    const headersEditor = ".graphiql-editor-tool .graphiql-editor:not(.hidden)";
    await waitForText(page, headersEditor, '"x-api-key": ""');
    await setEditor(page, headersEditor, JSON.stringify({ "x-api-key": ws.apiKey }));

    // A query.
    const d = await createDeployment(t, ws.apiKey);
    await setQuery(page, "query Mine { deployments(first: 5) { edges { node { id name } } } }");
    await runUntil(page, d.name);
    expect(await editorText(page, ".graphiql-response")).toContain(`"name": "${d.name}"`);

    // A subscription, from the current status to DEPLOYED, over SSE with the same headers.
    await t.app.worker!.stop();
    const next = await createDeployment(t, ws.apiKey);
    await setQuery(page, `subscription Watch { revisionStatusChanged(revisionId: "${next.revisionId}") { status previousStatus } }`);
    await runUntil(page, "CREATING");
    t.app.worker!.start();
    await waitForText(page, ".graphiql-response", "DEPLOYED");
    const shown = await editorText(page, ".graphiql-response");
    expect(shown).toContain('"previousStatus": "DEPLOYING"');
    expect(shown).not.toContain("errors");
    expect(offsite).toEqual([]);
    await page.close();
  });
});
