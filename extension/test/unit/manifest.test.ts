// package.json is part of the product: commands, menus, trust and settings are checked here.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PACKAGE_JSON } from './helpers';

const { contributes, capabilities } = PACKAGE_JSON;
const commandIds = new Set(contributes.commands.map((c) => c.command));
const properties = contributes.configuration.properties;

describe('package.json', () => {
  it('uses plain trnlens. IDs, never the server’s trnlens.server. ones', () => {
    for (const command of contributes.commands) {
      assert.match(command.command, /^trnlens\.[a-zA-Z]+$/);
      assert.equal(command.category, 'trnlens');
    }
    for (const title of ['Profile This Function', 'Profile…', 'Compare Variants', 'Select Target', 'Open in Neuron Explorer', 'Clear Results', 'Restart Server']) {
      assert.ok(contributes.commands.some((c) => c.title === title), title);
    }
  });

  it('binds a key to Profile This Function in Python editors', () => {
    const binding = contributes.keybindings.find((k) => k.command === 'trnlens.profileFunction');
    assert.ok(binding?.when?.includes('editorLangId == python'));
  });

  it('puts profile entries in the editor title and context menus of Python files only', () => {
    for (const menu of ['editor/title', 'editor/context']) {
      const entries = contributes.menus[menu];
      assert.ok(entries.some((e) => e.command === 'trnlens.profileFunction'), menu);
      for (const entry of entries) {
        assert.ok(commandIds.has(entry.command), entry.command);
        assert.match(entry.when ?? '', /resourceLangId == python/);
      }
    }
  });

  it('disables the commands that run code in untrusted workspaces', () => {
    for (const id of ['trnlens.profileFunction', 'trnlens.profile', 'trnlens.compare']) {
      const command = contributes.commands.find((c) => c.command === id);
      assert.equal(command?.enablement, 'isWorkspaceTrusted', id);
    }
    assert.equal(capabilities.untrustedWorkspaces.supported, 'limited');
    for (const key of capabilities.untrustedWorkspaces.restrictedConfigurations) {
      assert.ok(key in properties, key);
    }
    for (const key of ['trnlens.interpreter', 'trnlens.target', 'trnlens.targets']) {
      assert.ok(capabilities.untrustedWorkspaces.restrictedConfigurations.includes(key), key);
    }
  });

  it('describes every setting', () => {
    for (const [key, schema] of Object.entries(properties)) {
      assert.match(key, /^trnlens\./);
      assert.ok(schema.description || schema.markdownDescription, key);
      assert.ok('default' in schema, key);
    }
  });

  it('starts from the bundle on Python files and Jupyter notebooks', () => {
    assert.equal(PACKAGE_JSON.main, './dist/extension.js');
    assert.deepEqual(PACKAGE_JSON.activationEvents, ['onLanguage:python', 'onNotebook:jupyter-notebook']);
  });
});
