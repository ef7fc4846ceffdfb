// A multi-rank run's report in headless Chromium: the ranks section draws one lane group per
// rank on one axis with the slowest rank marked, a click on a wait shows its details, and the
// page stays clean under its CSP. Used by tests/report/test_ranks_browser.py:
//
//   node report-ranks.mjs REPORT.html SCREENSHOT.png   -> prints one JSON object
import { pathToFileURL } from 'node:url';
import { launchBrowser } from './codeserver.mjs';

const [report, screenshot] = process.argv.slice(2);
const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const problems = [];
  const requests = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('request', (r) => requests.push(r.url()));
  const url = pathToFileURL(report).href;
  await page.goto(url);
  const svg = page.locator('svg.timeline.ranks');
  await svg.locator('g.ev').first().waitFor({ timeout: 15_000 });
  const groups = await svg.locator('text.group').allTextContents();
  const marked = await svg.locator('text.group.straggler').allTextContents();
  const lanes = await svg.locator('g.lane').evaluateAll((gs) => [...new Set(gs.map((g) => g.dataset.lane))]);
  await svg.locator('g.ev.gap').first().click();
  const details = await page.locator('#details').innerText();
  const headline = await page.locator('.headline-ranks').innerText();
  await page.locator('section.ranks-section').screenshot({ path: screenshot });
  const foreign = requests.filter((r) => r !== url);
  console.log(JSON.stringify({ problems, foreign, groups, marked, lanes, details, headline }));
} finally {
  await browser.close();
}
