// Reading the VS Code workbench as a user sees it (code-server in Chromium): lens texts above a
// line, notification toasts, waiting on what the screen shows.

/** Monaco renders spaces as U+00A0; compare text as the user reads it. */
export const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');

/** Polls `probe` every 500 ms until it returns something truthy, which it returns, or throws
 * at the deadline: for states the page raises no event for (a lens's text, a hover's). */
export async function waitFor(what, probe, timeout) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) {
      return last;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out waiting for ${what} (last seen: ${JSON.stringify(last)})`);
}

/** Waits until the lens above `lineText` reads as `accepts(text)` wants, and returns that text;
 * on a timeout the error says the lens's last text (a bare true/false says nothing). */
export async function lensWhere(page, lineText, accepts, what, timeout) {
  let text;
  try {
    return await waitFor(what, async () => {
      text = await lensAbove(page, lineText);
      return text !== null && accepts(text) ? text : null;
    }, timeout);
  } catch (error) {
    error.message += ` (the lens read: ${JSON.stringify(text)})`;
    throw error;
  }
}

/** The text of the code lens right above the line containing `lineText` (its decorators
 * included: a lens sits above them), marked `data-e2e-lens` for clicking; null when none. */
export async function lensAbove(page, lineText) {
  return page.evaluate((lineText) => {
    const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');
    const lines = [...document.querySelectorAll('.monaco-editor .view-line')].sort(
      (a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top,
    );
    let index = lines.findIndex((el) => plain(el.textContent).includes(lineText));
    if (index < 0) {
      return null;
    }
    while (index > 0 && plain(lines[index - 1].textContent).trim().startsWith('@')) {
      index--;
    }
    const top = lines[index].getBoundingClientRect().top;
    let best = null;
    let bestGap = Infinity;
    for (const lens of document.querySelectorAll('.monaco-editor .codelens-decoration')) {
      const gap = top - lens.getBoundingClientRect().bottom;
      if (gap >= -2 && gap < bestGap) {
        best = lens;
        bestGap = gap;
      }
    }
    // A lens further up belongs to a line above this one.
    if (!best || bestGap > 8) {
      return null;
    }
    best.setAttribute('data-e2e-lens', lineText);
    return plain(best.textContent);
  }, lineText);
}

/** The texts of the notification toasts on screen now. */
export async function toasts(page) {
  // innerText: what is shown (textContent would add the CSS of the toast's list).
  const texts = await page.locator('.notifications-toasts .notification-toast').allInnerTexts();
  return texts.map(plain);
}

/** Closes every notification (the palette's "Clear All Notifications"). */
export async function clearNotifications(page, runPaletteCommand) {
  await runPaletteCommand(page, 'Notifications: Clear All Notifications');
  await waitFor('no notification toast', async () => ((await toasts(page)).length === 0 ? true : null), 10_000);
}

/** The rendered text of the line containing `lineText`, with its inlay hints. */
export async function lineText(page, needle) {
  return page.evaluate((needle) => {
    const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');
    const line = [...document.querySelectorAll('.monaco-editor .view-line')].find((el) =>
      plain(el.textContent).includes(needle),
    );
    return line ? plain(line.textContent) : null;
  }, needle);
}

/** Hovers the mouse over `word` in the line after the one containing `lineText`, and returns
 * the hover's text once it contains `expected`. */
export async function hoverOver(page, lineText, word, expected) {
  const point = await page.evaluate(
    ({ lineText, word }) => {
      const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');
      const lines = [...document.querySelectorAll('.monaco-editor .view-line')].sort(
        (a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top,
      );
      const index = lines.findIndex((el) => plain(el.textContent).includes(lineText));
      const span = [...(lines[index + 1]?.querySelectorAll('span span') ?? [])].find((el) =>
        plain(el.textContent).includes(word),
      );
      if (!span) {
        return null;
      }
      const box = span.getBoundingClientRect();
      return { x: box.left + box.width / 2, y: box.top + box.height / 2 };
    },
    { lineText, word },
  );
  if (!point) {
    throw new Error(`no "${word}" after "${lineText}"`);
  }
  return waitFor(
    `a hover saying ${expected}`,
    async () => {
      await page.mouse.move(point.x, point.y + 40);
      await page.mouse.move(point.x, point.y);
      const hover = page.locator('.monaco-hover:not(.hidden)').first();
      await hover.waitFor({ timeout: 5000 }).catch(() => undefined);
      const text = plain(await hover.textContent().catch(() => ''));
      return expected.test(text) ? text : null;
    },
    30_000,
  );
}
