// What an e2e test file needs around code-server: the repository's paths, a session (a fresh
// profile with the packaged extension, a code-server, a page on a file; a screenshot when it
// fails), going to a line, and a webview panel brought to a given width.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installExtension, openFile, profileDirs, startCodeServer } from './codeserver.mjs';
import { waitFor } from './editor-page.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const EXTENSION_DIR = resolve(here, '..', '..');
export const REPO = resolve(EXTENSION_DIR, '..');
export const VSIX = process.env.TRNLENS_VSIX ?? join(EXTENSION_DIR, 'trnlens.vsix');
export const PYTHON = process.env.TRNLENS_PYTHON ?? join(REPO, '.venv', 'bin', 'python');
export const ARTIFACTS = process.env.TRNLENS_E2E_ARTIFACTS ?? join(here, 'artifacts');

/** `session(name, folder, file, body)`: runs `body(page)` in code-server on `folder/file`, the
 * settings given; on a failure, `PREFIX-NAME-failure.png` and where the logs are. */
export function sessions({ browser, root, prefix, settings }) {
  return async function session(name, folder, file, body) {
    // For a failure to be read in the kept profile's logs (TRNLENS_E2E_KEEP=1):
    // TRNLENS_E2E_SERVER_LOG=DEBUG, the server's log; TRNLENS_E2E_TRACE=messages, the protocol
    const log = {};
    if (process.env.TRNLENS_E2E_SERVER_LOG) log['trnlens.serverLogLevel'] = process.env.TRNLENS_E2E_SERVER_LOG;
    if (process.env.TRNLENS_E2E_TRACE) log['trnlens.trace.server'] = process.env.TRNLENS_E2E_TRACE;
    const dirs = profileDirs(join(root, name), { 'trnlens.interpreter': PYTHON, ...log, ...settings });
    await installExtension(dirs, VSIX);
    const server = await startCodeServer(dirs, { trust: true });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      await openFile(page, server.url, folder, file);
      await body(page);
    } catch (error) {
      await page.screenshot({ path: join(ARTIFACTS, `${prefix}-${name}-failure.png`) }).catch(() => undefined);
      error.message += `\n(code-server profile and logs: ${join(root, name)}; TRNLENS_E2E_KEEP=1 keeps them)`;
      throw error;
    } finally {
      await page.close();
      server.stop();
    }
  };
}

/** Puts the cursor at `where` (`line` or `line:column`) with Go to Line. */
export async function goTo(page, where) {
  await page.locator('.monaco-editor .view-lines').first().click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('Control+G');
  await page.keyboard.type(where);
  await page.keyboard.press('Enter');
}

/** Resizes the window until the webview's page (`html`, a locator in its frame) is `width`
 * px wide: the editor groups share the window's width. Returns the width reached. */
export async function panelTo(page, html, width) {
  const panelWidth = () => html.evaluate(() => document.scrollingElement.clientWidth);
  for (let i = 0; i < 4; i++) {
    const now = await panelWidth();
    if (Math.abs(now - width) <= 12) {
      return now;
    }
    const viewport = page.viewportSize();
    await page.setViewportSize({ width: viewport.width + 2 * (width - now), height: viewport.height });
    await waitFor('the report panel to follow the window', async () => (await panelWidth()) !== now, 10_000);
  }
  return panelWidth();
}
