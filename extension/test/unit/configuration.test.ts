import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  affectsServer,
  contributedSettings,
  needsRestart,
  serverSection,
  type Inspect,
} from '../../src/configuration';
import { PACKAGE_JSON } from './helpers';

const settings = contributedSettings(PACKAGE_JSON);

function inspecting(values: Record<string, Record<string, unknown>>): Inspect {
  return (key) => ({ defaultValue: 'default-of-' + key, ...(values[key] ?? {}) });
}

describe('contributed settings', () => {
  it('sends the server its own keys, not the extension’s', () => {
    assert.ok(settings.serverKeys.includes('target'));
    assert.ok(settings.serverKeys.includes('hints.enabled'));
    assert.ok(settings.serverKeys.includes('rules.ignore'));
    for (const own of ['interpreter', 'serverLogLevel', 'trace.server']) {
      assert.ok(!settings.serverKeys.includes(own), own);
    }
  });

  it('reads the restricted keys from package.json', () => {
    assert.deepEqual([...settings.restricted].sort(), ['interpreter', 'target', 'targets']);
  });
});

describe('serverSection', () => {
  it('holds only what the user set, never the defaults', () => {
    assert.deepEqual(serverSection(settings, inspecting({}), true), {});
  });

  it('nests dotted keys and lets the narrowest scope win', () => {
    const section = serverSection(
      settings,
      inspecting({
        'hints.enabled': { globalValue: false },
        'rules.select': { workspaceValue: ['TRN0'] },
        steps: { globalValue: 3, workspaceValue: 7, workspaceFolderValue: 9 },
      }),
      true,
    );
    assert.deepEqual(section, { hints: { enabled: false }, rules: { select: ['TRN0'] }, steps: 9 });
  });

  it('takes only the user’s own value of a restricted key in an untrusted workspace', () => {
    const values = {
      target: { globalValue: 'mine', workspaceValue: 'theirs' },
      targets: { workspaceValue: { evil: { host: 'attacker' } } },
      warmup: { workspaceValue: 1 },
    };
    assert.deepEqual(serverSection(settings, inspecting(values), false), {
      target: 'mine',
      warmup: 1,
    });
    assert.deepEqual(serverSection(settings, inspecting(values), true), {
      target: 'theirs',
      targets: { evil: { host: 'attacker' } },
      warmup: 1,
    });
  });

  it('passes the scope through', () => {
    const scopes: Array<string | undefined> = [];
    serverSection(settings, (_key, scope) => (scopes.push(scope), {}), true, 'file:///ws/a');
    assert.ok(scopes.length > 0 && scopes.every((scope) => scope === 'file:///ws/a'));
  });
});

describe('which changes restart the server', () => {
  const affecting = (...changed: string[]) => (section: string) =>
    changed.some((key) => key === section || key.startsWith(section + '.'));

  it('restarts for the interpreter and the log level only', () => {
    assert.ok(needsRestart(affecting('trnlens.interpreter')));
    assert.ok(needsRestart(affecting('trnlens.serverLogLevel')));
    assert.ok(!needsRestart(affecting('trnlens.steps')));
    assert.ok(!needsRestart(affecting('editor.fontSize')));
  });

  it('tells the running server about its own settings', () => {
    assert.ok(affectsServer(settings, affecting('trnlens.hints.enabled')));
    assert.ok(affectsServer(settings, affecting('trnlens.target')));
    assert.ok(!affectsServer(settings, affecting('trnlens.interpreter')));
    assert.ok(!affectsServer(settings, affecting('python.defaultInterpreterPath')));
  });
});
