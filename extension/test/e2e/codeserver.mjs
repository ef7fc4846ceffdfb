// A real VS Code for the end-to-end test: code-server (VS Code 1.100 in the browser, installed
// from npm next to this file) driven by headless Chromium through playwright-core.
// The recipe, and why each flag is there, is in shared/E2E.md of the project.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const CODE_SERVER = join(here, 'node_modules', '.bin', 'code-server');
export const CHROMIUM = process.env.TRNLENS_CHROMIUM ?? '/usr/bin/chromium';

// Keeps code-server from reaching for the network or showing anything but the editor.
const QUIET_SETTINGS = {
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'update.mode': 'none',
  'telemetry.telemetryLevel': 'off',
  'workbench.startupEditor': 'none',
  'workbench.enableExperiments': false,
  'workbench.tips.enabled': false,
  'chat.disableAIFeatures': true,
  'window.restoreWindows': 'none',
  'editor.minimap.enabled': false,
  'editor.inlayHints.enabled': 'on',
};

/** A code-server profile (user data, extensions, XDG dirs) under `root`, with `settings`. */
export function profileDirs(root, settings) {
  const dirs = {
    userData: join(root, 'user-data'),
    extensions: join(root, 'extensions'),
    xdgConfig: join(root, 'xdg-config'),
    xdgData: join(root, 'xdg-data'),
    log: join(root, 'code-server.log'),
  };
  for (const dir of [dirs.extensions, dirs.xdgConfig, dirs.xdgData, join(dirs.userData, 'User')]) {
    mkdirSync(dir, { recursive: true });
  }
  writeFileSync(
    join(dirs.userData, 'User', 'settings.json'),
    JSON.stringify({ ...QUIET_SETTINGS, ...settings }, null, 2),
  );
  return dirs;
}

function environment(dirs, extra = {}) {
  // Everything code-server writes goes under the test's own folder, never into ~.
  return { ...process.env, ...extra, XDG_CONFIG_HOME: dirs.xdgConfig, XDG_DATA_HOME: dirs.xdgData };
}

export async function installExtension(dirs, vsix) {
  const { stdout, stderr } = await promisify(execFile)(
    CODE_SERVER,
    ['--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions, '--install-extension', vsix],
    { env: environment(dirs), timeout: 120_000 },
  );
  const said = `${stdout}\n${stderr}`;
  if (!/successfully installed/i.test(said)) {
    throw new Error(`installing ${vsix} failed:\n${said}`);
  }
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Starts code-server; returns {url, stop}. `trust` false leaves workspace trust on; `env`
 * adds to the environment code-server (and so the extension host and trnlens's server) sees. */
export async function startCodeServer(dirs, { trust, env = {} }) {
  const port = await freePort();
  const args = [
    '--auth', 'none',
    '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry',
    '--disable-update-check',
    '--user-data-dir', dirs.userData,
    '--extensions-dir', dirs.extensions,
  ];
  if (trust) {
    args.push('--disable-workspace-trust');
  }
  const { openSync } = await import('node:fs');
  const log = openSync(dirs.log, 'a');
  // Its own process group (detached = setsid): stopping it must also stop its file watchers
  // and extension host, which outlive the main process otherwise.
  const child = spawn(CODE_SERVER, args, {
    env: environment(dirs, env),
    detached: true,
    stdio: ['ignore', log, log],
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = () => {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  };
  // Polls /healthz (code-server signals readiness no other way) every 250 ms, up to a deadline.
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`code-server exited with ${child.exitCode}; see ${dirs.log}`);
    }
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.status === 200) {
        return { url, stop };
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  stop();
  throw new Error(`code-server did not answer /healthz within 60 s; see ${dirs.log}`);
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Presses `key` until `widget` shows, waiting up to 5 s for it after each press: a workbench
 * that is still starting drops the first keys (its keybindings are not registered yet). */
export async function pressUntilVisible(page, key, widget, attempts = 5) {
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press(key);
    try {
      await widget.waitFor({ state: 'visible', timeout: 5000 });
      return;
    } catch (error) {
      if (attempt >= attempts) {
        throw new Error(`${key} showed no ${widget} after ${attempts} presses: ${error.message}`);
      }
    }
  }
}

/** Opens the workbench on `folder` and the file `name` in it (Quick Open). */
export async function openFile(page, url, folder, name) {
  await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
  await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
  // Quick Open needs the workbench to have keyboard focus.
  await page.locator('.monaco-workbench').click({ position: { x: 600, y: 300 } });
  const quickOpen = page.locator('.quick-input-widget input');
  await pressUntilVisible(page, 'Control+P', quickOpen);
  await quickOpen.fill(name);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().waitFor();
  await page.keyboard.press('Enter');
  await page.locator('.monaco-editor .view-lines').first().waitFor();
}

/** Runs a command from the Command Palette by its full title (e.g. "trnlens: Show Log"). */
export async function runPaletteCommand(page, title) {
  const input = page.locator('.quick-input-widget input');
  await pressUntilVisible(page, 'Control+Shift+P', input);
  await input.fill(`>${title}`);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor();
  await page.keyboard.press('Enter');
}
