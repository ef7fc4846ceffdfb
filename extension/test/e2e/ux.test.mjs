// The editor as a user meets it (issue 23), in a real VS Code (code-server + Chromium):
//
//   runs:    a cancelled run's lens reads `▶ Profile` again without any other action; a function
//            without inputs fails with one notification in plain words (no class names), its lens
//            says `failed: needs inputs`, and the quick fix on its name inserts a factory and the
//            directive, after which the factory has no lens and the function profiles; Undo of
//            an edit brings back the lens of the run that measured the restored text; Open in
//            Neuron Explorer on a CPU run is one notification saying why there is nothing to open.
//   report:  a comparison's report in a 500 px wide panel: no horizontal scroll, the speed-up
//            column in view, the tab titled by the function.
//
//   also:    Select Target is a Quick Pick; the Output channel logs each run's outcome.
//
// Screenshots (TRNLENS_E2E_ARTIFACTS, default test/e2e/artifacts): ux-cancelled, ux-missing-inputs,
// ux-quick-fix, ux-undo, ux-explorer-refusal, ux-select-target, ux-output, ux-report-500px (and
// ux-*-failure on a failure).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchBrowser, runPaletteCommand } from './codeserver.mjs';
import { clearNotifications, lensAbove, lensWhere, lineText, toasts, waitFor } from './editor-page.mjs';
import { sessions } from './session.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const extensionDir = resolve(here, '..', '..');
const repo = resolve(extensionDir, '..');
const VSIX = process.env.TRNLENS_VSIX ?? join(extensionDir, 'trnlens.vsix');
const PYTHON = process.env.TRNLENS_PYTHON ?? join(repo, '.venv', 'bin', 'python');
const ARTIFACTS = process.env.TRNLENS_E2E_ARTIFACTS ?? join(here, 'artifacts');
const RUN_TIMEOUT = 120_000; // a first CPU profile takes 5-10 s here; leave room on a busy machine
// A Python class path in a message ("trnlens.lsp.commands.CommandError: ..."), or a traceback.
const CLASS_NAME = /\b[a-z_]+(\.[a-z_]+)+\.[A-Z]\w*(Error|Exception|Refused)\b|CommandError|Traceback/;
// Small runs: the test is about what the editor shows, not the figures.
const FAST = { 'trnlens.warmup': 1, 'trnlens.steps': 2, 'trnlens.repeats': 3 };

const UX_PY = [
  'import time', //                      1
  '', //                                 2
  'import torch', //                     3
  '', //                                 4
  '', //                                 5
  'def slow(x=torch.ones(4)):', //       6
  '    time.sleep(120)', //              7
  '    return x + 1', //                 8
  '', //                                 9
  '', //                                10
  'def scale(x, weight):', //           11
  '    return torch.mul(x, weight)', // 12
  '',
].join('\n');

const root = mkdtempSync(join(tmpdir(), 'trnlens-ux-'));

describe('trnlens as a user meets it (code-server)', { concurrency: false }, () => {
  let browser;

  before(async () => {
    assert.ok(existsSync(VSIX), `no package at ${VSIX}: run npm run package first`);
    assert.ok(existsSync(PYTHON), `no interpreter at ${PYTHON}`);
    mkdirSync(ARTIFACTS, { recursive: true });
    for (const name of ['ux-cancelled', 'ux-missing-inputs', 'ux-quick-fix', 'ux-undo',
      'ux-explorer-refusal', 'ux-select-target', 'ux-output', 'ux-report-500px', 'ux-runs-failure',
      'ux-report-failure']) {
      rmSync(join(ARTIFACTS, `${name}.png`), { force: true });
    }
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    if (!process.env.TRNLENS_E2E_KEEP) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  function session(name, folder, file, body) {
    return sessions({ browser, root, prefix: 'ux', settings: FAST })(name, folder, file, body);
  }

  async function clickLens(page, lineText, linkText) {
    assert.ok(await lensAbove(page, lineText), `no lens above ${lineText}`);
    await page.locator(`[data-e2e-lens="${lineText}"] a`, { hasText: linkText }).first().click();
  }

  async function goTo(page, where) {
    await page.locator('.monaco-editor .view-lines').first().click({ position: { x: 5, y: 5 } });
    await page.keyboard.press('Control+G');
    await page.keyboard.type(where);
    await page.keyboard.press('Enter');
  }

  /** Runs `look` at a barrier ordered after everything that reached the editor so far: Select
   * Target asks the server for its targets (a round trip), then shows a Quick Pick. Whatever the
   * server sent before answering (a message, a command's error answer) was handled by the
   * extension before that answer, and the extension host's calls to the workbench keep their
   * order: a notification any of it causes is on screen once the Quick Pick is. */
  async function afterServerRoundTrip(page, look) {
    await runPaletteCommand(page, 'trnlens: Select Target');
    await page.locator('.quick-input-widget .monaco-list-row', { hasText: 'local' }).first().waitFor({ timeout: 30_000 });
    try {
      return await look();
    } finally {
      await page.keyboard.press('Escape');
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
    }
  }

  /** The toasts that mention `word`, counted once one is up and a round trip to the server has
   * passed after it: a second toast about the same failure (the bug) would be up by then. */
  async function failureToasts(page, word) {
    await waitFor(`a notification about ${word}`, async () => (await toasts(page)).some((t) => t.includes(word)), 60_000);
    return afterServerRoundTrip(page, async () => (await toasts(page)).filter((t) => t.includes(word)));
  }

  it('cancel, missing inputs, quick fix, Undo and a refusal, each told once', async () => {
    const folder = join(root, 'workspace');
    mkdirSync(join(folder, '.trnlens'), { recursive: true });
    writeFileSync(join(folder, 'ux.py'), UX_PY);
    await session('runs', folder, 'ux.py', async (page) => {
      await waitFor('the ▶ Profile lens', () => lensAbove(page, 'def slow('), 60_000);

      // 1. Cancel: the lens goes back to ▶ Profile by itself.
      await clickLens(page, 'def slow(', 'Profile');
      const running = await waitFor('the run pending on the lens', async () => {
        const text = await lensAbove(page, 'def slow(');
        return text && text.startsWith('■') ? text : null;
      }, RUN_TIMEOUT);
      assert.match(running, /click to cancel/);
      await clickLens(page, 'def slow(', 'cancel');
      await lensWhere(page, 'def slow(', (text) => text === '▶ Profile', '▶ Profile back on the cancelled lens', 30_000);
      await page.screenshot({ path: join(ARTIFACTS, 'ux-cancelled.png') });

      // 2. Missing inputs: one notification, plain words, the lens and a warning say so.
      await clearNotifications(page, runPaletteCommand);
      await clickLens(page, 'def scale(', 'Profile');
      const shown = await failureToasts(page, 'scale');
      assert.equal(shown.length, 1, JSON.stringify(shown));
      assert.match(shown[0], /scale\(x, weight\) needs arguments/);
      assert.doesNotMatch(shown[0], CLASS_NAME);
      assert.doesNotMatch(shown[0], /def scale_inputs/); // no code template squashed into a toast
      const failed = await waitFor('the failure on the lens', async () => {
        const text = await lensAbove(page, 'def scale(');
        return text && /failed: needs inputs/.test(text) ? text : null;
      }, 30_000);
      assert.equal(failed, '▶ Profile · failed: needs inputs');
      await page.locator('.squiggly-warning').first().waitFor({ timeout: 30_000 });
      await page.screenshot({ path: join(ARTIFACTS, 'ux-missing-inputs.png') });

      // 3. The quick fix on its name writes the factory and the directive; then it profiles.
      await clearNotifications(page, runPaletteCommand);
      await goTo(page, '11:6');
      await page.keyboard.press('Control+.');
      const fix = page.locator('.action-widget .monaco-list-row', { hasText: 'Add an inputs factory' }).first();
      await fix.waitFor({ timeout: 30_000 });
      // The menu takes keys, as users drive it (a click lands on its pointer block first).
      const focused = page.locator('.action-widget .monaco-list-row.focused', { hasText: 'Add an inputs factory' });
      for (let i = 0; i < 5 && (await focused.count()) === 0; i++) {
        await page.keyboard.press('ArrowDown');
      }
      await page.keyboard.press('Enter');
      await waitFor('the directive in the text', () => lineText(page, '# trnlens: inputs=scale_inputs'), 15_000);
      await waitFor('the factory in the text', () => lineText(page, 'def scale_inputs('), 15_000);
      await waitFor('no missing-inputs warning', async () => (await page.locator('.squiggly-warning').count()) === 0, 30_000);
      // (once the lenses follow the new text: until then the old lens sits where it was)
      await lensWhere(page, 'def scale(', (text) => text === '▶ Profile', '▶ Profile above scale', 30_000);
      assert.equal(await lensAbove(page, 'def scale_inputs('), null); // no lens on an inputs factory
      await clickLens(page, 'def scale(', 'Profile');
      const profiled = await waitFor('scale profiled', async () => {
        const text = await lensAbove(page, 'def scale(');
        return text && /1 dispatch\b/.test(text) ? text : null;
      }, RUN_TIMEOUT);
      assert.doesNotMatch(profiled, /stale|failed/);
      await page.screenshot({ path: join(ARTIFACTS, 'ux-quick-fix.png') });

      // 4. An edit, a new run, then Undo: the lens shows the run of the restored text again.
      const body = page.locator('.monaco-editor .view-line', { hasText: 'return torch.mul(x, weight)' }).first();
      await body.click();
      await page.keyboard.press('Home');
      await page.keyboard.type('x = x + 1');
      await page.keyboard.press('Enter');
      await lensWhere(page, 'def scale(', (text) => /stale/.test(text), 'the stale lens', 30_000);
      await clickLens(page, 'def scale(', 'Profile');
      await waitFor('the edited function profiled', async () => {
        const text = await lensAbove(page, 'def scale(');
        return text && /2 dispatches/.test(text) && !/stale/.test(text) ? text : null;
      }, RUN_TIMEOUT);
      // Undo until the typed line is gone (VS Code undoes typing in a few steps).
      const undone = async () =>
        (await lineText(page, 'x =')) === null &&
        /^ *return torch/.test((await lineText(page, 'return torch.mul(x, weight)')) ?? '');
      // The code of the edited lines, without the inlay hints that may follow it (they change
      // by themselves as runs go stale): every Undo step changes it.
      const edited = async () =>
        JSON.stringify([
          (await lineText(page, 'x ='))?.split('weight)')[0] ?? null,
          (await lineText(page, 'return torch.mul(x, weight)'))?.split('weight)')[0] ?? null,
        ]);
      for (let i = 0; i < 12 && !(await undone()); i++) {
        const before = await edited();
        await page.keyboard.press('Control+Z');
        // One step at a time: the next Ctrl+Z only once the editor shows this one's effect.
        await waitFor('the editor to show the Undo', async () => (await edited()) !== before, 10_000);
      }
      assert.ok(await undone(), await lineText(page, 'return torch.mul(x, weight)'));
      assert.equal(await lineText(page, 'x ='), null);
      const restored = await waitFor('the earlier run back on the lens', async () => {
        const text = await lensAbove(page, 'def scale(');
        return text && /1 dispatch\b/.test(text) && !/stale/.test(text) ? text : null;
      }, 30_000);
      assert.match(restored, /▶ Profile · /);
      await page.screenshot({ path: join(ARTIFACTS, 'ux-undo.png') });

      // 5. Open in Neuron Explorer on a CPU run: one notification, saying why.
      await clearNotifications(page, runPaletteCommand);
      await runPaletteCommand(page, 'trnlens: Open in Neuron Explorer');
      const refusal = await failureToasts(page, 'Neuron');
      assert.equal(refusal.length, 1, JSON.stringify(refusal));
      assert.match(refusal[0], /ran on CPU, so it has no Neuron profile to open/);
      assert.doesNotMatch(refusal[0], CLASS_NAME);
      await page.screenshot({ path: join(ARTIFACTS, 'ux-explorer-refusal.png') });

      // 6. Select Target is a Quick Pick; the Output channel tells every run's outcome.
      await clearNotifications(page, runPaletteCommand);
      await runPaletteCommand(page, 'trnlens: Select Target');
      const pick = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'local' }).first();
      await pick.waitFor({ timeout: 30_000 });
      const placeholder = await page.locator('.quick-input-widget input').first().getAttribute('placeholder');
      assert.equal(placeholder, 'Profile on which target? (now: local)');
      await page.screenshot({ path: join(ARTIFACTS, 'ux-select-target.png') });
      await page.keyboard.press('Escape');
      await runPaletteCommand(page, 'trnlens: Show Log');
      const output = page.locator('.part.panel .monaco-editor .view-lines').first();
      const logged = await waitFor('the runs in the Output channel', async () => {
        const text = (await output.innerText().catch(() => '')).replace(/\u00a0/g, ' ');
        return /slow: cancelled/.test(text) && /scale: failed/.test(text) && /scale: done/.test(text) ? text : null;
      }, 30_000);
      assert.doesNotMatch(logged, /running again/); // the first start is a start
      await page.screenshot({ path: join(ARTIFACTS, 'ux-output.png') });
    });
  });

  it('shows a comparison report in a 500 px panel without sideways scrolling', async () => {
    const folder = join(root, 'workspace-report', 'samples');
    cpSync(join(repo, 'samples'), folder, {
      recursive: true,
      filter: (source) => !source.includes('.trnlens') && !source.includes('__pycache__'),
    });
    mkdirSync(join(folder, '.trnlens'));
    execFileSync(
      PYTHON,
      ['-m', 'trnlens', 'compare', 'rmsnorm.py::rmsnorm_naive', 'rmsnorm.py::rmsnorm_fused',
        '--warmup', '1', '--steps', '2', '--repeats', '3'],
      { cwd: folder, timeout: RUN_TIMEOUT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await session('report', folder, 'rmsnorm.py', async (page) => {
      await waitFor('the lenses', () => lensAbove(page, 'def rmsnorm_naive('), 60_000);
      await goTo(page, '17');
      await runPaletteCommand(page, 'trnlens: Show Run Report');
      const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
      await frame.locator('table.variants').waitFor({ timeout: 60_000 });
      const tab = page.locator('.tabs-container .tab', { hasText: 'Compare rmsnorm_naive' });
      await tab.first().waitFor({ timeout: 10_000 }); // titled by the function, not a run id
      // Make the report's panel 500 px wide: the editor groups share the window's width.
      const html = frame.locator('html');
      const panelWidth = () => html.evaluate(() => document.scrollingElement.clientWidth);
      for (let i = 0; i < 4; i++) {
        const width = await panelWidth();
        if (Math.abs(width - 500) <= 12) {
          break;
        }
        const viewport = page.viewportSize();
        await page.setViewportSize({ width: viewport.width + 2 * (500 - width), height: viewport.height });
        // The workbench lays the panel out anew after the window's resize: measure it after that.
        await waitFor('the report panel to follow the window', async () => (await panelWidth()) !== width, 10_000);
      }
      const seen = await html.evaluate(() => {
        const scroller = document.scrollingElement;
        const speedup = [...document.querySelectorAll('table.variants th')].find((th) => th.textContent === 'speed-up');
        return {
          scrollWidth: scroller.scrollWidth,
          clientWidth: scroller.clientWidth,
          speedupRight: speedup ? speedup.getBoundingClientRect().right : null,
        };
      });
      assert.ok(Math.abs(seen.clientWidth - 500) <= 12, JSON.stringify(seen));
      assert.ok(seen.scrollWidth <= seen.clientWidth, JSON.stringify(seen));
      assert.ok(seen.speedupRight !== null && seen.speedupRight <= seen.clientWidth, JSON.stringify(seen));
      await page.screenshot({ path: join(ARTIFACTS, 'ux-report-500px.png') });
    });
  });
});
