// The composition root, wired to the stubbed `vscode` and to a stand-in for the one module that
// constructs vscode-languageclient's LanguageClient (which needs a real VS Code).
import './vscode-stub';
import { FakeEventEmitter, reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import Module = require('node:module');
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import type { ClientLike, ServerSpec } from '../../src/client';
import type { ClientSettings } from '../../src/languageclient';
import { PACKAGE_JSON, settle } from './helpers';

interface Started {
  spec: ServerSpec;
  settings: ClientSettings;
  notifications: Array<{ method: string; params: unknown }>;
  stopped: number;
}
const started: Started[] = [];

const fakeLanguageClient = {
  createLanguageClient(spec: ServerSpec, settings: ClientSettings): ClientLike {
    const record: Started = { spec, settings, notifications: [], stopped: 0 };
    started.push(record);
    return {
      start: async () => undefined,
      stop: async () => void record.stopped++,
      sendRequest: async () => undefined as never,
      sendNotification: async (method, params) => void record.notifications.push({ method, params }),
      initializeResult: { capabilities: { executeCommandProvider: { commands: [] } } },
      onDidChangeState: () => ({ dispose: () => undefined }),
    };
  },
};
type Load = (request: string, parent: { filename?: string } | undefined, isMain: boolean) => unknown;
const loader = Module as unknown as { _load: Load };
const load = loader._load;
loader._load = function (request, parent, isMain) {
  if (request === './languageclient' && parent?.filename?.endsWith('extension.js')) {
    return fakeLanguageClient;
  }
  return load.call(this, request, parent, isMain);
};
const extension = require('../../src/extension') as typeof import('../../src/extension');

/** Folders of the stand-in interpreters, removed when the file's tests end (nothing left in /tmp). */
const fakeDirs: string[] = [];
after(() => {
  for (const dir of fakeDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A stand-in interpreter: answers the install probe with `answer` ("3.11 1": has trnlens). */
function fakePython(answer: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'trnlens-fake-python-'));
  fakeDirs.push(dir);
  const path = join(dir, 'python');
  writeFileSync(path, `#!/bin/sh\necho "${answer}"\n`);
  chmodSync(path, 0o755);
  return path;
}

function changeSettings(...keys: string[]) {
  state.configurationChanged.fire({
    affectsConfiguration: (section: string) =>
      keys.some((key) => key === section || key.startsWith(`${section}.`)),
  });
}

async function activate() {
  const context = { subscriptions: [] as Array<{ dispose(): unknown }>, extension: { packageJSON: PACKAGE_JSON } };
  await extension.activate(context);
  await settle(100);
  return context;
}

describe('activate', () => {
  beforeEach(() => {
    reset();
    started.length = 0;
  });
  afterEach(async () => {
    await extension.deactivate();
  });

  it('registers the commands and starts the server with the configured interpreter', async () => {
    const python = fakePython('3.11 1');
    state.settings.set('trnlens.interpreter', { globalValue: python });
    state.settings.set('trnlens.steps', { globalValue: 9 });
    await activate();
    assert.deepEqual(
      [...state.commands.keys()].sort(),
      PACKAGE_JSON.contributes.commands.map((c) => c.command).sort(),
    );
    assert.equal(started.length, 1);
    assert.equal(started[0].spec.command, python);
    assert.deepEqual(started[0].spec.args, ['-m', 'trnlens', 'serve', '--log-level', 'WARNING']);
    assert.equal(started[0].settings.trusted(), true);
    const section = await started[0].settings.middleware.workspace!.configuration!(
      { items: [{ section: 'trnlens' }] },
      {} as never,
      (() => []) as never,
    );
    assert.deepEqual(section, [{ steps: 9 }]);
    assert.match(String(state.statusItems[0].text), /trnlens: local/);
    assert.ok(state.channels[0].lines.some((line) => line.includes(`interpreter: ${python} (from setting)`)));
  });

  it('passes server settings to the running server, and restarts for the interpreter', async () => {
    state.settings.set('trnlens.interpreter', { globalValue: fakePython('3.11 1') });
    await activate();
    changeSettings('trnlens.hints.enabled');
    await settle(10);
    assert.deepEqual(started[0].notifications, [{ method: 'workspace/didChangeConfiguration', params: { settings: null } }]);
    assert.equal(started.length, 1);
    const other = fakePython('3.12 1');
    state.settings.set('trnlens.interpreter', { globalValue: other });
    changeSettings('trnlens.interpreter');
    changeSettings('trnlens.interpreter');
    await settle(700);
    assert.equal(started.length, 2, 'one restart for a burst of changes');
    assert.equal(started[0].stopped, 1);
    assert.equal(started[1].spec.command, other);
  });

  it('restarts as trusted once the workspace is trusted', async () => {
    state.trusted = false;
    state.settings.set('trnlens.interpreter', { globalValue: fakePython('3.11 1') });
    await activate();
    assert.equal(started[0].settings.trusted(), false);
    assert.match(String(state.statusItems[0].text), /analysis only/);
    state.trusted = true;
    state.trustGranted.fire();
    await settle(700);
    assert.equal(started.length, 2);
    assert.equal(started[1].settings.trusted(), true);
    assert.doesNotMatch(String(state.statusItems[0].text), /analysis only/);
  });

  it('starts nothing and says what to pip install when trnlens is missing', async () => {
    const python = fakePython('3.11 0');
    state.settings.set('trnlens.interpreter', { globalValue: python });
    await activate();
    assert.equal(started.length, 0);
    assert.equal(state.shown[0].kind, 'error');
    assert.ok(state.shown[0].message.includes(`${python} -m pip install trnlens`), state.shown[0].message);
    assert.equal(state.statusItems[0].command, 'trnlens.showLog');
  });

  it('follows the Python extension’s interpreter and its changes', async () => {
    const changed = new FakeEventEmitter<unknown>();
    let active = fakePython('3.11 1');
    state.extensions.set('ms-python.python', {
      isActive: true,
      exports: {
        environments: {
          getActiveEnvironmentPath: () => ({ id: active, path: active }),
          resolveEnvironment: async () => undefined,
          onDidChangeActiveEnvironmentPath: changed.event,
        },
      },
      activate: async () => undefined,
    });
    state.settings.set('trnlens.interpreter', { globalValue: '/ignored/when/the/python/extension/is/there' });
    await activate();
    assert.equal(started[0].spec.command, active);
    active = fakePython('3.12 1');
    changed.fire({});
    await settle(700);
    assert.equal(started[1].spec.command, active);
  });
});
