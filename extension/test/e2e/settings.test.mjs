// Settings that take effect (issue 42, points 2 and 3), in a real VS Code (code-server + Chromium):
//
//   interpreter: the server cannot start (no trnlens in the interpreter the user settings name);
//                `trnlens.interpreter` then written into the folder's .vscode/settings.json on
//                disk and `trnlens: Restart Server` run at once: the server starts with that
//                interpreter (the lens comes). A restart run before VS Code has read the file
//                uses the old value; the extension restarts again when VS Code reports the
//                change (the log shows both).
//   target:      a target picked for the session, then `trnlens.target` and a new target written
//                into .vscode/settings.json on disk: the status bar and the lens name the setting's
//                target, and the picker lists the new one.
//
// Screenshots (TRNLENS_E2E_ARTIFACTS, default test/e2e/artifacts): settings-restart,
// settings-target (and settings-*-failure on a failure).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { launchBrowser, runPaletteCommand } from './codeserver.mjs';
import { lensAbove, plain, toasts, waitFor } from './editor-page.mjs';
import { ARTIFACTS, PYTHON, sessions } from './session.mjs';

const FAST = { 'trnlens.warmup': 1, 'trnlens.steps': 2, 'trnlens.repeats': 3 };
const MODEL = ['import torch', '', '', 'def double(x=torch.ones(4)):', '    return x * 2', ''].join('\n');
const root = mkdtempSync(join(tmpdir(), 'trnlens-settings-'));

async function statusText(page) {
  const items = await page.locator('.statusbar-item').allTextContents();
  return items.map(plain).find((text) => text.includes('trnlens')) ?? '';
}

function workspaceSettings(folder, values) {
  mkdirSync(join(folder, '.vscode'), { recursive: true });
  writeFileSync(join(folder, '.vscode', 'settings.json'), JSON.stringify(values, null, 2));
}

describe('settings that take effect (code-server)', { concurrency: false }, () => {
  let browser;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    for (const name of ['settings-restart', 'settings-target']) {
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

  it('trnlens.interpreter written into settings.json starts the server (Restart Server, or by itself)', async () => {
    const folder = join(root, 'ws-restart');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'model.py'), MODEL);
    // An interpreter without trnlens: the server stays down, as for a user who has not set one.
    const session = sessions({ browser, root, prefix: 'settings',
      settings: { ...FAST, 'trnlens.interpreter': '/usr/bin/true' } });
    await session('restart', folder, 'model.py', async (page) => {
      await waitFor('the notification that the server cannot start',
        async () => (await toasts(page)).some((t) => t.includes('cannot run /usr/bin/true')), 60_000);
      workspaceSettings(folder, { 'trnlens.interpreter': PYTHON });
      await runPaletteCommand(page, 'trnlens: Restart Server');
      await waitFor('the ▶ Profile lens from the restarted server',
        async () => (await lensAbove(page, 'def double(')) ?? null, 90_000);
      await page.screenshot({ path: join(ARTIFACTS, 'settings-restart.png') });
    });
  });

  it('a target set in settings.json after a pick: the status bar, the lens and the picker agree', async () => {
    const folder = join(root, 'ws-target');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'model.py'), MODEL);
    const targets = { 'box-a': { host: 'a.invalid' }, 'box-b': { host: 'b.invalid' } };
    workspaceSettings(folder, { 'trnlens.targets': targets });
    const session = sessions({ browser, root, prefix: 'settings', settings: FAST });
    await session('target', folder, 'model.py', async (page) => {
      await waitFor('the ▶ Profile lens', async () => (await lensAbove(page, 'def double(')) ?? null, 60_000);
      await runPaletteCommand(page, 'trnlens: Select Target');
      await page.locator('.quick-input-widget .monaco-list-row', { hasText: 'box-a' }).first().click();
      await waitFor('the lens to say box-a',
        async () => ((await lensAbove(page, 'def double(')) ?? '').includes('box-a'), 30_000);

      workspaceSettings(folder, {
        'trnlens.targets': { ...targets, 'box-c': { host: 'c.invalid' } },
        'trnlens.target': 'box-b',
      });
      await waitFor('the status bar to say box-b', async () => (await statusText(page)).includes('box-b'), 30_000);
      await waitFor('the lens to say box-b',
        async () => ((await lensAbove(page, 'def double(')) ?? '').includes('box-b'), 30_000);
      await runPaletteCommand(page, 'trnlens: Select Target');
      await page.locator('.quick-input-widget .monaco-list-row', { hasText: 'box-c' }).first()
        .waitFor({ timeout: 30_000 });
      await page.screenshot({ path: join(ARTIFACTS, 'settings-target.png') });
      await page.keyboard.press('Escape');
      assert.ok((await statusText(page)).includes('box-b'));
    });
  });
});
