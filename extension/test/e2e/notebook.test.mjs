// End to end in a real VS Code notebook editor: code-server's built-in `ipynb` extension (VS
// Code's own Jupyter serializer; the Jupyter extension and its kernels come from a marketplace
// this machine cannot reach) opens samples/rmsnorm_notebook.ipynb, the packaged extension's
// client sends its Python cells by LSP notebook sync, and the cells show trnlens's lenses, the
// static finding's squiggle, and a run of `rms` (made beforehand with
// `trnlens profile samples/rmsnorm_notebook.ipynb::rms`, stored in the project) on the cell line
// it measured, and the hover names that line as the cell shows it. No kernel runs here: the run
// comes from the store, as after a `%trnlens` magic.
//
// Environment: TRNLENS_VSIX, TRNLENS_PYTHON, TRNLENS_E2E_ARTIFACTS (as e2e.test.mjs).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { installExtension, launchBrowser, openFile, profileDirs, startCodeServer } from './codeserver.mjs';
import { hoverOver, lensAbove, lineText, waitFor } from './editor-page.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const extensionDir = resolve(here, '..', '..');
const repo = resolve(extensionDir, '..');
const VSIX = process.env.TRNLENS_VSIX ?? join(extensionDir, 'trnlens.vsix');
const PYTHON = process.env.TRNLENS_PYTHON ?? join(repo, '.venv', 'bin', 'python');
const ARTIFACTS = process.env.TRNLENS_E2E_ARTIFACTS ?? join(here, 'artifacts');
const NOTEBOOK = 'rmsnorm_notebook.ipynb';

const root = mkdtempSync(join(tmpdir(), 'trnlens-e2e-notebook-'));
const samples = join(root, 'workspace', 'samples');

describe('trnlens in a VS Code notebook', { concurrency: false }, () => {
  let browser;

  before(async () => {
    assert.ok(existsSync(VSIX), `no package at ${VSIX}: run npm run package first`);
    mkdirSync(ARTIFACTS, { recursive: true });
    rmSync(join(ARTIFACTS, 'notebook.png'), { force: true });
    rmSync(join(ARTIFACTS, 'notebook-hover.png'), { force: true });
    cpSync(join(repo, 'samples'), samples, {
      recursive: true,
      filter: (source) => !source.includes('.trnlens') && !source.includes('__pycache__'),
    });
    mkdirSync(join(samples, '.trnlens'));
    // The run the cells show: the CLI's, of the function defined in the notebook's cell.
    execFileSync(PYTHON, ['-m', 'trnlens', 'profile', `${NOTEBOOK}::rms`, '--warmup', '1', '--steps', '2',
      '--repeats', '3', '--quiet'], { cwd: samples, stdio: 'ignore', timeout: 300_000 });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    if (!process.env.TRNLENS_E2E_KEEP) {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('shows lenses, the finding and the stored run on the cells', async () => {
    const dirs = profileDirs(join(root, 'notebook'), { 'trnlens.interpreter': PYTHON, 'notebook.lineNumbers': 'on' });
    await installExtension(dirs, VSIX);
    const server = await startCodeServer(dirs, { trust: true });
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    try {
      await openFile(page, server.url, samples, NOTEBOOK);
      // VS Code's notebook editor, not the JSON text: the cells are editors of their own.
      await page.locator('.notebookOverlay .view-line', { hasText: /def.rms\(/ }).first().waitFor({ timeout: 60_000 });
      const lens = await waitFor(
        'the run on the lens of the cell\'s function',
        async () => {
          const text = await lensAbove(page, 'def rms(');
          return text && /dispatch/.test(text) ? text : null;
        },
        120_000,
      );
      assert.match(lens, /6 dispatches/);
      const hint = await waitFor(
        'the measured line\'s inlay hint in the cell',
        async () => {
          const text = await lineText(page, 'return x * torch.rsqrt');
          return text && /dispatch/.test(text) ? text : null;
        },
        30_000,
      );
      assert.match(hint, /100% · [\d.]+ (µs|ms|s) · 6 dispatches/);
      await waitFor('the finding\'s squiggle in the cell', async () =>
        (await page.locator('.notebookOverlay .squiggly-warning, .notebookOverlay .squiggly-info').count()) > 0, 30_000);
      // Issue 42, point 1: the hover names the line as the cell shows it (line 6 of the fourth
      // cell, counted from 1 as VS Code's status bar and ruff count), not the joined cells' line
      // or the editor's cell URI; the finding's measured part says the same.
      const hover = await hoverOver(page, 'def rms(', 'rsqrt', /line \d+ \(cell \d+\) of rms/);
      assert.match(hover, /line 6 \(cell 4\) of rms/);
      assert.match(hover, /measured: 6 dispatches, .* per step on line 6 \(cell 4\) \(rms, /);
      assert.doesNotMatch(hover, /vscode-notebook-cell/);
      await page.screenshot({ path: join(ARTIFACTS, 'notebook-hover.png') });
      await page.screenshot({ path: join(ARTIFACTS, 'notebook.png') });
    } catch (error) {
      await page.screenshot({ path: join(ARTIFACTS, 'notebook-failure.png') }).catch(() => undefined);
      throw error;
    } finally {
      await page.close();
      server.stop();
    }
  });
});
