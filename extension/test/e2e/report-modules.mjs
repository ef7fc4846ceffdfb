// The report's module tree (an icicle chart of one step) in headless Chromium: it renders
// under the page's CSP without console errors, loads nothing but itself, and each block says its
// figures. Used by tests/report/test_icicle_browser.py:
//
//   node report-modules.mjs REPORT.html SCREENSHOT.png   -> prints one JSON object
import { pathToFileURL } from 'node:url';
import { launchBrowser } from './codeserver.mjs';

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [report, screenshot] = process.argv.slice(2);
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const problems = [];
    const requests = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
    page.on('request', (request) => requests.push(request.url()));
    const url = pathToFileURL(report).href;
    await page.goto(url);
    const section = page.locator('section.modules-section');
    await section.locator('svg.icicle g.icicle-node').first().waitFor({ timeout: 15_000 });
    const nodes = await section.locator('svg.icicle g.icicle-node.module').evaluateAll((gs) =>
      gs.map((g) => {
        const box = g.querySelector('rect').getBoundingClientRect();
        return {
          name: g.dataset.name, direction: g.dataset.direction || null,
          title: g.querySelector('title').textContent, width: box.width, y: box.y,
        };
      }));
    const libraryRows = await section.locator('table.library-lines tbody tr').count();
    const findings = await section.locator('ul.library-findings li').allInnerTexts();
    await section.scrollIntoViewIfNeeded();
    await section.screenshot({ path: screenshot });
    const foreign = requests.filter((r) => r !== url);
    console.log(JSON.stringify({ problems, foreign, nodes, libraryRows, findings }));
  } finally {
    await browser.close();
  }
}
