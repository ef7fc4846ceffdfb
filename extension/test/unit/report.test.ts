import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { inside, libraryFile, ReportView, type ReportAnswer } from '../../src/report';
import { recordingLog, settle } from './helpers';

const ANSWER: ReportAnswer = {
  path: '/ws/.trnlens/artifacts/r1/report.html',
  uri: 'file:///ws/.trnlens/artifacts/r1/report.html',
  root: '/ws',
  runIds: ['r1'],
  reused: false,
};

function setup(answer: ReportAnswer = ANSWER) {
  const asked: object[] = [];
  const log = recordingLog();
  const view = new ReportView({
    execute: async (argument) => (asked.push(argument), answer),
    log,
    read: async (path) => `<html>${path}</html>`,
  });
  return { view, asked, log };
}

describe('report webview', () => {
  beforeEach(reset);

  it('asks the server for the page (never to show it itself) and shows it beside the code', async () => {
    const { view, asked } = setup();
    await view.show({ uri: 'file:///ws/m.py', qualname: 'f', show: true });
    assert.deepEqual(asked, [{ uri: 'file:///ws/m.py', qualname: 'f', show: false }]);
    assert.equal(state.panels.length, 1);
    const panel = state.panels[0];
    assert.equal(panel.html, `<html>${ANSWER.path}</html>`);
    assert.equal(panel.title, 'Report r1');
    assert.equal(panel.column && (panel.column as { viewColumn: number }).viewColumn, -2);
    assert.deepEqual(panel.options.localResourceRoots, []);
    assert.equal(panel.options.enableScripts, true);
    // A second report reuses the panel.
    await view.show({ runId: 'r2' });
    assert.equal(state.panels.length, 1);
    assert.equal(panel.revealed, 2);
  });

  it('reveals the clicked file:line inside the project, and nothing outside it', async () => {
    const { view, log } = setup();
    await view.show({});
    const panel = state.panels[0];
    panel.messages.fire({ type: 'reveal', path: 'samples/rmsnorm.py', line: 17 });
    panel.messages.fire({ type: 'reveal', path: '../etc/passwd', line: 1 });
    panel.messages.fire({ type: 'reveal', path: '/etc/passwd', line: 1 });
    panel.messages.fire({ type: 'reveal', path: 'samples/rmsnorm.py', line: 0 });
    panel.messages.fire('nonsense');
    await settle();
    assert.deepEqual(state.revealed, [{ path: '/ws/samples/rmsnorm.py', line: 16, column: 1 }]);
    assert.equal(log.lines.filter((l) => l.includes('refused')).length, 3);
  });

  it('opens files next to the report (the chrome trace) and forgets the panel once closed', async () => {
    const { view } = setup();
    await view.show({});
    state.panels[0].messages.fire({ type: 'open', href: 'trace.json' });
    state.panels[0].messages.fire({ type: 'open', href: '../../../../outside.json' });
    await settle();
    assert.deepEqual(state.opened, ['file:///ws/.trnlens/artifacts/r1/trace.json']);
    state.panels[0].dispose();
    await view.show({});
    assert.equal(state.panels.length, 2);
  });

  it('the tab is titled as the server says (by function), not by run id', async () => {
    const { view } = setup({ ...ANSWER, title: 'Report rmsnorm_naive' });
    await view.show({});
    assert.equal(state.panels[0].title, 'Report rmsnorm_naive');
  });

  it('a comparison is titled by its variants', async () => {
    const { view } = setup({ ...ANSWER, runIds: ['a', 'b', 'c'] });
    await view.show({});
    assert.equal(state.panels[0].title, 'Report (3 variants)');
  });

  it('opens a library line the report lists (an installed .py file), nothing else outside', async () => {
    const { view, log } = setup();
    await view.show({});
    const panel = state.panels[0];
    const library = '/venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py';
    panel.messages.fire({ type: 'reveal', path: library, line: 66 });
    panel.messages.fire({ type: 'reveal', path: '/home/u/.ssh/config.py', line: 1 });
    await settle();
    assert.deepEqual(state.revealed, [{ path: library, line: 65, column: 1 }]);
    assert.equal(log.lines.filter((l) => l.includes('refused')).length, 1);
    assert.equal(libraryFile('/usr/lib/python3.12/json/decoder.py'), '/usr/lib/python3.12/json/decoder.py');
    assert.equal(libraryFile('/x/site-packages/../../etc/passwd.py'), undefined);
    assert.equal(libraryFile('/x/site-packages/pkg/data.json'), undefined);
  });

  it('inside() keeps paths under the root', () => {
    assert.equal(inside('/ws', 'a/b.py'), '/ws/a/b.py');
    assert.equal(inside('/ws', '/ws/a.py'), '/ws/a.py');
    assert.equal(inside('/ws', '../x'), undefined);
    assert.equal(inside('/ws', '/elsewhere/x'), undefined);
    assert.equal(inside('/ws', '/ws'), undefined);
  });
});
