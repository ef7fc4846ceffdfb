import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { chooseInterpreter, expand, PYTHON_EXTENSION_ID, type PythonEnvironments } from '../../src/python';
import { extensionExports } from '../../src/vscodeapi';

/** A stand-in for the Python extension's `environments` API (it cannot be installed offline). */
function pythonApi(active: { path: string; id?: string } | undefined, executable?: string) {
  const asked: unknown[] = [];
  const environments = {
    getActiveEnvironmentPath(resource?: unknown) {
      asked.push(resource);
      return active as { path: string; id: string };
    },
    async resolveEnvironment(env: unknown) {
      assert.equal(env, active);
      return executable === undefined
        ? undefined
        : ({ executable: { uri: { fsPath: executable } } } as never);
    },
    onDidChangeActiveEnvironmentPath: () => ({ dispose: () => undefined }),
  } as unknown as PythonEnvironments;
  return { environments, asked };
}

const base = { trusted: true, setting: undefined, workspaceFolder: '/ws', resource: undefined };

describe('chooseInterpreter', () => {
  beforeEach(reset);

  it('takes the Python extension’s resolved executable first', async () => {
    const { environments, asked } = pythonApi({ path: '/ws/.venv', id: 'x' }, '/ws/.venv/bin/python');
    const folder = { name: 'ws' } as never;
    const chosen = await chooseInterpreter({ ...base, environments, setting: '/usr/bin/python3.11', resource: folder });
    assert.deepEqual(chosen, { command: '/ws/.venv/bin/python', source: 'python-extension' });
    assert.deepEqual(asked, [folder]);
  });

  it('uses the active path when the environment does not resolve', async () => {
    const { environments } = pythonApi({ path: '/opt/py/bin/python', id: 'x' });
    const chosen = await chooseInterpreter({ ...base, environments });
    assert.deepEqual(chosen, { command: '/opt/py/bin/python', source: 'python-extension' });
  });

  it('falls back to the setting when the Python extension has no active environment', async () => {
    const { environments } = pythonApi(undefined);
    const chosen = await chooseInterpreter({ ...base, environments, setting: ' /usr/bin/python3.12 ' });
    assert.deepEqual(chosen, { command: '/usr/bin/python3.12', source: 'setting' });
  });

  it('ignores the Python extension in an untrusted workspace (it may pick the repo’s venv)', async () => {
    const { environments, asked } = pythonApi({ path: '/ws/.venv/bin/python', id: 'x' });
    const chosen = await chooseInterpreter({ ...base, trusted: false, environments, setting: '/usr/bin/python3' });
    assert.deepEqual(chosen, { command: '/usr/bin/python3', source: 'setting' });
    assert.deepEqual(asked, []);
  });

  it('uses the setting without the Python extension, expanding ${workspaceFolder}', async () => {
    const chosen = await chooseInterpreter({ ...base, environments: undefined, setting: '${workspaceFolder}/.venv/bin/python' });
    assert.deepEqual(chosen, { command: '/ws/.venv/bin/python', source: 'setting' });
  });

  it('defaults to python3', async () => {
    assert.deepEqual(await chooseInterpreter({ ...base, environments: undefined, setting: '' }), {
      command: 'python3',
      source: 'default',
    });
    assert.deepEqual(await chooseInterpreter({ ...base, environments: undefined, trusted: false }), {
      command: 'python3',
      source: 'default',
    });
  });

  it('expands a leading ~ only', () => {
    const home = process.env.HOME;
    process.env.HOME = '/home/me';
    try {
      assert.equal(expand('~/venv/bin/python', undefined), '/home/me/venv/bin/python');
      assert.equal(expand('/a/~b', undefined), '/a/~b');
      assert.equal(expand('${workspaceFolder}/x', undefined), '${workspaceFolder}/x');
    } finally {
      process.env.HOME = home;
    }
  });
});

describe('the Python extension through vscodeapi', () => {
  beforeEach(reset);

  it('is absent when not installed', async () => {
    assert.equal(await extensionExports(PYTHON_EXTENSION_ID), undefined);
  });

  it('is activated before its API is used', async () => {
    const { environments } = pythonApi({ path: '/p/bin/python', id: 'x' });
    let activated = 0;
    state.extensions.set(PYTHON_EXTENSION_ID, {
      isActive: false,
      exports: undefined,
      activate: async () => {
        activated++;
        return { environments };
      },
    });
    const exports = await extensionExports<{ environments: PythonEnvironments }>(PYTHON_EXTENSION_ID);
    assert.equal(activated, 1);
    const chosen = await chooseInterpreter({ ...base, environments: exports?.environments });
    assert.equal(chosen.command, '/p/bin/python');
  });
});
