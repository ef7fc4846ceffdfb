import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { CommandNotOffered } from '../../src/client';
import { COMMANDS, registerCommands, type CommandDeps } from '../../src/commands';
import { UntrustedError } from '../../src/trust';
import type { ExplorerOpened } from '../../src/urls';
import { PACKAGE_JSON, recordingLog, settle } from './helpers';

const URI = 'file:///ws/samples/rmsnorm.py';
const TEXT = [
  'import torch', //                                            0
  '', //                                                        1
  'def rmsnorm_naive(x, weight, eps=1e-6):', //                 2
  '    return x * torch.rsqrt(x.pow(2).mean(-1) + eps) * weight', // 3
  '', //                                                        4
  'def rmsnorm_fused(x, weight, eps=1e-6):', //                 5
  '    return torch.rms_norm(x, (x.shape[-1],), weight, eps)', // 6
  '', //                                                        7
  'y = 1', //                                                   8
].join('\n');

const lens = (line: number, qualname: string, title = '▶ Profile') => ({
  range: { start: { line, character: 0 }, end: { line, character: 0 } },
  command: { title, command: 'trnlens.server.profile', arguments: [{ uri: URI, qualname }] },
});

// A lens with figures as the server sends it: no command until `codeLens/resolve`.
const unresolved = (line: number, qualname: string) => ({
  range: { start: { line, character: 0 }, end: { line, character: 0 } },
  data: { uri: URI, qualname, kind: 'profile', target: 'local' },
});

class FakeServer {
  executed: Array<{ command: string; argument: object }> = [];
  lenses: unknown[] = [unresolved(2, 'rmsnorm_naive'), lens(5, 'rmsnorm_fused')];
  resolved = 0;
  answers = new Map<string, unknown>([
    ['trnlens.server.profile', { token: 't', state: 'queued', position: 0, target: 'local', alreadyPending: false }],
  ]);
  failure: Error | undefined;
  restarts = 0;
  async executeCommand<T>(command: string, argument: object): Promise<T> {
    if (this.failure) {
      throw this.failure;
    }
    this.executed.push({ command, argument });
    return this.answers.get(command) as T;
  }
  async request<T>(method: string, params: unknown): Promise<T> {
    if (method === 'codeLens/resolve') {
      this.resolved++;
      const { range, data } = params as { range: unknown; data: { qualname: string } };
      return { ...lens(0, data.qualname, '▶ Profile · 13.5 ms CPU'), range } as T;
    }
    assert.equal(method, 'textDocument/codeLens');
    assert.deepEqual(params, { textDocument: { uri: URI } });
    return this.lenses as T;
  }
  supports() {
    return true;
  }
  async restart() {
    this.restarts++;
  }
}

function setup() {
  const server = new FakeServer();
  const targets: string[] = [];
  const explorerRequests: unknown[] = [];
  const reports: object[] = [];
  let explorerAnswer: ExplorerOpened | undefined = { opened: 'http://localhost:3001/', problems: [] };
  const log = recordingLog();
  const deps: CommandDeps = {
    server: server as unknown as CommandDeps['server'],
    log,
    setTarget: (target) => void targets.push(target),
    openExplorer: async (request) => {
      explorerRequests.push(await request());
      return explorerAnswer;
    },
    showReport: async (argument) => void reports.push(argument),
  };
  registerCommands(deps);
  const run = async (id: string) => {
    const handler = state.commands.get(id);
    assert.ok(handler, `${id} is registered`);
    await handler();
    await settle();
  };
  return {
    server,
    targets,
    log,
    run,
    explorerRequests,
    reports,
    setExplorerAnswer: (answer: ExplorerOpened | undefined) => (explorerAnswer = answer),
  };
}

const editorAt = (line: number, languageId = 'python') => {
  state.editor = { uri: URI, languageId, text: TEXT, line };
};

describe('commands', () => {
  beforeEach(reset);

  it('registers exactly the commands package.json contributes', () => {
    setup();
    const contributed = PACKAGE_JSON.contributes.commands.map((c) => c.command).sort();
    assert.deepEqual([...state.commands.keys()].sort(), contributed);
    assert.deepEqual(Object.values(COMMANDS).sort(), contributed);
  });

  it('Profile This Function profiles the function around the cursor with its lens’s arguments', async () => {
    const { server, run } = setup();
    editorAt(6);
    await run(COMMANDS.profileFunction);
    assert.deepEqual(server.executed, [
      { command: 'trnlens.server.profile', argument: { uri: URI, qualname: 'rmsnorm_fused' } },
    ]);
    assert.deepEqual(state.quickPicks, []);
  });

  it('Profile This Function asks which one when the cursor is in none', async () => {
    const { server, run } = setup();
    editorAt(8);
    state.quickPick = (items) => items[1];
    await run(COMMANDS.profileFunction);
    assert.deepEqual(state.quickPicks[0].labels, ['rmsnorm_naive', 'rmsnorm_fused']);
    assert.deepEqual(server.executed.map((e) => (e.argument as { qualname: string }).qualname), ['rmsnorm_fused']);
  });

  it('Profile… picks from the file’s functions; dismissing runs nothing', async () => {
    const { server, run } = setup();
    editorAt(3);
    state.quickPick = () => undefined;
    await run(COMMANDS.profile);
    assert.equal(state.quickPicks.length, 1);
    assert.equal(server.executed.length, 0);
    state.quickPick = (items) => items[0];
    await run(COMMANDS.profile);
    assert.deepEqual(server.executed.map((e) => (e.argument as { qualname: string }).qualname), ['rmsnorm_naive']);
  });

  it('says what to do outside Python files and in files with nothing to profile', async () => {
    const { server, run } = setup();
    await run(COMMANDS.profileFunction);
    editorAt(0, 'markdown');
    await run(COMMANDS.profileFunction);
    editorAt(0);
    server.lenses = [];
    await run(COMMANDS.profileFunction);
    assert.deepEqual(server.executed, []);
    assert.equal(state.shown.length, 3);
    assert.match(state.shown[0].message, /open a Python file/);
    assert.match(state.shown[2].message, /files that import torch/);
  });

  it('says when the function is already queued', async () => {
    const { server, run } = setup();
    server.answers.set('trnlens.server.profile', { token: 't', state: 'running', position: 0, target: 'local', alreadyPending: true });
    editorAt(3);
    await run(COMMANDS.profileFunction);
    assert.match(state.shown[0].message, /rmsnorm_naive is already running on local/);
  });

  it('warns instead of profiling in an untrusted workspace', async () => {
    const { server, run } = setup();
    server.failure = new UntrustedError();
    editorAt(3);
    await run(COMMANDS.profileFunction);
    assert.equal(state.shown[0].kind, 'warning');
    assert.match(state.shown[0].message, /untrusted workspace/);
  });

  it('shows a server refusal once, as a warning in its own words; other failures as errors', async () => {
    const { server, run, log } = setup();
    editorAt(3);
    server.failure = Object.assign(new Error("unknown target 'gpu': known are local"), {
      code: -32000,
      data: { severity: 'warning' },
    });
    await run(COMMANDS.profileFunction);
    assert.deepEqual(state.shown.map((s) => [s.kind, s.message]), [
      ['warning', "trnlens: unknown target 'gpu': known are local"],
    ]);
    assert.ok(log.lines.some((line) => line.includes('unknown target')));
    server.failure = new CommandNotOffered('trnlens.server.compare');
    await run(COMMANDS.compare);
    assert.equal(state.shown[1].kind, 'error');
    assert.match(state.shown[1].message, /does not offer trnlens\.server\.compare/);
    // An older server's message with its Python class path: the class never reaches the user.
    server.failure = Object.assign(new Error('trnlens.lsp.commands.CommandError: no run of f'), { code: -32603 });
    await run(COMMANDS.compare);
    assert.equal(state.shown[2].message, 'trnlens: no run of f');
    assert.equal(state.shown.length, 3);
  });

  it('Compare Variants sends the function at the cursor', async () => {
    const { server, run } = setup();
    editorAt(3);
    await run(COMMANDS.compare);
    assert.deepEqual(server.executed, [{ command: 'trnlens.server.compare', argument: { uri: URI, qualname: 'rmsnorm_naive' } }]);
  });

  it('Select Target is a Quick Pick of the server’s targets; the pick goes back to it', async () => {
    const { server, run, targets } = setup();
    server.answers.set('trnlens.server.selectTarget', { target: 'local', targets: ['local', 'trn2'] });
    state.quickPick = (items) => items[1];
    await run(COMMANDS.selectTarget);
    assert.deepEqual(state.quickPicks, [{ labels: ['local', 'trn2'], placeHolder: 'Profile on which target? (now: local)' }]);
    assert.deepEqual(server.executed, [
      { command: 'trnlens.server.selectTarget', argument: { ask: false } },
      { command: 'trnlens.server.selectTarget', argument: { target: 'trn2' } },
    ]);
    assert.deepEqual(targets, ['local']); // the fake server answers `local` whatever was picked
    state.quickPick = () => undefined; // dismissed: nothing changes
    await run(COMMANDS.selectTarget);
    assert.equal(server.executed.length, 3);
  });

  it('Clear Results clears this file or all files', async () => {
    const { server, run } = setup();
    server.answers.set('trnlens.server.clearResults', { cleared: 3 });
    editorAt(3);
    await run(COMMANDS.clearResults);
    state.quickPick = (items) => items[1];
    await run(COMMANDS.clearResults);
    assert.deepEqual(server.executed.map((e) => e.argument), [{ uri: URI }, {}]);
    assert.match(state.shown[0].message, /cleared 3 stored run/);
    // no Python editor in focus (a report, a notebook): asked all the same, never cleared
    // silently; dismissed, nothing is cleared (issue 42)
    state.editor = undefined;
    state.quickPick = () => undefined;
    await run(COMMANDS.clearResults);
    assert.deepEqual(state.quickPicks.at(-1)?.labels, ['All files']);
    assert.equal(server.executed.length, 2);
  });

  it('Open in Neuron Explorer names the function and relays port problems', async () => {
    const { run, explorerRequests, server, setExplorerAnswer } = setup();
    editorAt(3);
    setExplorerAnswer({ opened: 'x', problems: ['API port 3002 moved'] });
    await run(COMMANDS.openExplorer);
    assert.deepEqual(server.executed, [{ command: 'trnlens.server.openExplorer', argument: { uri: URI, qualname: 'rmsnorm_naive' } }]);
    assert.equal(server.resolved, 1); // its lens had figures: found through codeLens/resolve
    assert.equal(explorerRequests.length, 1);
    assert.deepEqual(state.shown.map((s) => [s.kind, s.message]), [['warning', 'API port 3002 moved']]);
    setExplorerAnswer(undefined);
    await run(COMMANDS.openExplorer);
    assert.match(state.shown[1].message, /named no Neuron Explorer page/);
  });

  it('Show Run Report names the function at the cursor, else the file, else nothing', async () => {
    const { run, reports } = setup();
    editorAt(3);
    await run(COMMANDS.showReport);
    editorAt(8);
    await run(COMMANDS.showReport);
    state.editor = undefined;
    await run(COMMANDS.showReport);
    assert.deepEqual(reports, [{ uri: URI, qualname: 'rmsnorm_naive' }, { uri: URI }, {}]);
  });

  it('Restart Server restarts', async () => {
    const { server, run } = setup();
    await run(COMMANDS.restartServer);
    assert.equal(server.restarts, 1);
  });
});
