// The run report in headless Chromium (the one the e2e uses), outside any editor: it renders
// without console errors or blocked resources under its own CSP, loads nothing but itself,
// and an event click shows the event's details. Used by tests/report/test_browser.py:
//
//   node report-browser.mjs REPORT.html SCREENSHOT.png   -> prints one JSON object
//
// Chromium comes from TRNLENS_CHROMIUM (default /usr/bin/chromium), playwright-core from this
// folder's node_modules (scripts/extension-test.sh installs it; it downloads no browser).
import { pathToFileURL } from 'node:url';
import { launchBrowser } from './codeserver.mjs';

/** Opens the report in `page` and exercises it; returns what was seen. */
export async function checkReport(page, reportPath, screenshotPath) {
  const problems = [];
  const requests = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') {
      problems.push(`${message.type()}: ${message.text()}`);
    }
  });
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('request', (request) => requests.push(request.url()));
  const url = pathToFileURL(reportPath).href;
  await page.goto(url);
  await page.locator('svg.timeline g.ev').first().waitFor({ timeout: 15_000 });
  const lanes = await page.locator('svg.timeline g.lane').evaluateAll((gs) => [...new Set(gs.map((g) => g.dataset.lane))]);

  // Click the first dispatch: its details (name, duration, shapes, source line) appear.
  const dispatch = page.locator('svg.timeline g.ev.dispatch').first();
  await dispatch.click();
  const details = await page.locator('#details').innerText();

  // Zoom in: the axis spans less time; reset puts it back.
  const axisEnd = async () => page.locator('svg.timeline g.tick text').last().textContent();
  const before = await axisEnd();
  await page.locator('[data-zoom="in"]').click();
  await page.locator('[data-zoom="in"]').click();
  const zoomed = await axisEnd();
  await page.locator('[data-zoom="reset"]').click();
  const reset = await axisEnd();

  // Sort the first op table by self CPU (descending, then ascending).
  const table = page.locator('table.ops').first();
  const column = async () => table.locator('tbody tr td:nth-child(3)').evaluateAll((tds) => tds.map((td) => Number(td.dataset.v)));
  await table.locator('th', { hasText: 'self CPU' }).first().click();
  const descending = await column();
  await table.locator('th', { hasText: 'self CPU' }).first().click();
  const ascending = await column();

  // A measured line: in a browser the page says where it is.
  let where = null;
  const line = page.locator('table.lines tr.measured').first();
  if ((await line.count()) > 0) {
    await line.click();
    where = await page.locator('#where').innerText();
  }
  await dispatch.click();
  await page.screenshot({ path: screenshotPath, fullPage: true });
  const narrow = await narrowLayout(page, screenshotPath.replace(/\.png$/, '-500px.png'));
  const foreign = requests.filter((r) => r !== url);
  return { problems, foreign, lanes, details, before, zoomed, reset, descending, ascending, where, narrow };
}

/** The page at a side panel's default width (500 px): what scrolls, what is in view. */
export async function narrowLayout(page, screenshotPath) {
  const size = page.viewportSize();
  await page.setViewportSize({ width: 500, height: 900 });
  // the timeline redraws on resize (report.js): wait for its axis to fit the new width
  await page.waitForFunction(() => {
    const svg = document.querySelector('svg.timeline');
    return !svg || Number(svg.getAttribute('width')) <= document.documentElement.clientWidth;
  });
  const seen = await narrowMetrics(page);
  if (screenshotPath) {
    await page.screenshot({ path: screenshotPath });
  }
  await page.setViewportSize(size);
  return seen;
}

/** Runs in any document holding a report (a page, or the webview's frame). */
export function narrowMetrics(target) {
  return target.evaluate(() => {
    const scroller = document.scrollingElement;
    const clientWidth = scroller.clientWidth;
    const speedup = [...document.querySelectorAll('table.variants th')].find((th) => th.textContent === 'speed-up');
    const box = speedup?.getBoundingClientRect();
    const labels = [...document.querySelectorAll('svg.timeline g.tick text')]
      .filter((text) => text.getAttribute('display') !== 'none' && text.textContent)
      .map((text) => text.getBoundingClientRect())
      .sort((a, b) => a.left - b.left);
    const overlaps = labels.filter((r, i) => i > 0 && r.left < labels[i - 1].right).length;
    const heads = [...document.querySelectorAll('table.ops')].map((table) =>
      [...table.querySelectorAll('th')].map((th) => th.textContent),
    );
    // the key columns (issue 42): a variant's name, speed-up and time; a line's place, share,
    // time and dispatches (its source wraps): in view without scrolling the table's box
    const headline = [...document.querySelectorAll('table.variants th')]
      .find((th) => th.textContent.startsWith('time / step'))?.getBoundingClientRect();
    const lines = [...document.querySelectorAll('table.lines')].map((table) => {
      const wide = table.closest('.wide') ?? table;
      return { scrollWidth: wide.scrollWidth, clientWidth: wide.clientWidth };
    });
    return {
      scrollWidth: scroller.scrollWidth,
      clientWidth,
      speedup: box ? { left: box.left, right: box.right } : null,
      headline: headline ? { left: headline.left, right: headline.right } : null,
      lines,
      axisLabels: labels.length,
      overlaps,
      opHeads: heads,
    };
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [report, screenshot] = process.argv.slice(2);
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    console.log(JSON.stringify(await checkReport(page, report, screenshot)));
  } finally {
    await browser.close();
  }
}
