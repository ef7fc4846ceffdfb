// The run report inside VS Code (code-server): the `▦ Report` lens above a profiled function opens
// the page in a webview beside the code; clicking an event in its timeline reveals the event's
// source line in the editor. Webviews are nested iframes in VS Code for the web (the outer
// `iframe.webview`, the page in its `#active-frame`): playwright's frame locators reach into them.
import assert from 'node:assert/strict';
import { join } from 'node:path';

const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');

/** `lens`: the lens decoration (a locator) above the profiled function. Returns the details
 * text the page showed for the clicked event. */
export async function reportInWebview(page, lens, artifacts, { line }) {
  await lens.locator('a', { hasText: 'Report' }).first().click();
  const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  const dispatch = frame.locator('svg.timeline g.ev.dispatch').first();
  await dispatch.waitFor({ timeout: 60_000 });
  await frame.locator('table.variants, section.headline').first().waitFor({ timeout: 5_000 });
  // Move the editor's cursor away first, so that the reveal is seen to move it back.
  await page.locator('.monaco-editor .view-lines').first().click({ position: { x: 5, y: 5 } });
  await dispatch.click();
  const details = plain(await frame.locator('#details').innerText());
  assert.match(details, /aten::pow/);
  assert.match(details, /revealed in the editor/);
  const selection = page.locator('#status\\.editor\\.selection');
  await selection.filter({ hasText: `Ln ${line},` }).waitFor({ timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, 'report-webview.png') });
  return details;
}
