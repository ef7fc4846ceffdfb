import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { middleware, reportRunId, type MiddlewareDeps } from '../../src/middleware';
import { RunTracker } from '../../src/runstate';

function deps(trusted: boolean) {
  const record = { refused: 0, opened: [] as string[], reports: [] as object[], failures: [] as unknown[][] };
  const value: MiddlewareDeps = {
    isTrusted: () => trusted,
    section: (scopeUri) => ({ steps: 7, scope: scopeUri }),
    runs: new RunTracker(),
    openExternal: async (url) => (record.opened.push(url), true),
    refuseUntrusted: () => void record.refused++,
    showReport: async (argument) => (record.reports.push(argument), { path: '/r.html' }),
    reportFailure: (command, error) => void record.failures.push([command, error]),
  };
  return { value, record };
}

const lens = (command: string) => ({ range: {}, command: { command, title: command } });
const token = {} as never;
const document = {} as never;

describe('middleware', () => {
  it('opens the report lens and hover link in the webview; plain report requests pass', async () => {
    const { value, record } = deps(true);
    const sent: unknown[] = [];
    const next = async (command: string, args: unknown[]) => void sent.push([command, ...args]);
    const shown = { uri: 'file:///ws/m.py', qualname: 'f', runId: 'r1', show: true };
    assert.deepEqual(await middleware(value).executeCommand!('trnlens.server.report', [shown], next), { path: '/r.html' });
    await middleware(value).executeCommand!('trnlens.server.report', [{ runId: 'r1' }], next);
    assert.deepEqual(record.reports, [shown]);
    assert.deepEqual(sent, [['trnlens.server.report', { runId: 'r1' }]]);
  });

  it('hides the lenses that would run code in an untrusted workspace', async () => {
    // the last: a Profile lens with figures, sent without its command until codeLens/resolve
    const lenses = [lens('trnlens.server.profile'), lens('trnlens.server.cancel'), { range: {} },
      { range: {}, data: { kind: 'profile', uri: 'file:///ws/m.py', qualname: 'f' } }];
    const next = async () => lenses as never;
    const trusted = await middleware(deps(true).value).provideCodeLenses!(document, token, next);
    assert.equal((trusted as unknown[]).length, 4);
    const untrusted = await middleware(deps(false).value).provideCodeLenses!(document, token, next);
    assert.deepEqual(
      (untrusted as Array<{ command?: { command: string } }>).map((l) => l.command?.command),
      ['trnlens.server.cancel', undefined],
    );
  });

  it('refuses profile commands in an untrusted workspace before they reach the server', async () => {
    const { value, record } = deps(false);
    const sent: string[] = [];
    const next = async (command: string) => void sent.push(command);
    // Resolved, not rejected: the warning is the one notification (VS Code would add its own
    // error toast for a lens click or code action that rejects).
    assert.equal(await middleware(value).executeCommand!('trnlens.server.profile', [{}], next), undefined);
    assert.equal(record.refused, 1);
    await middleware(value).executeCommand!('trnlens.server.clearResults', [{}], next);
    assert.deepEqual(sent, ['trnlens.server.clearResults']);
    await middleware(deps(true).value).executeCommand!('trnlens.server.profile', [{}], next);
    assert.deepEqual(sent, ['trnlens.server.clearResults', 'trnlens.server.profile']);
    assert.deepEqual(record.failures, []);
  });

  it('reports a failed server command once and resolves, so VS Code adds no toast of its own', async () => {
    const { value, record } = deps(true);
    const refusal = Object.assign(new Error('the run report needs a run'), { code: -32000, data: { severity: 'warning' } });
    const next = async () => {
      throw refusal;
    };
    assert.equal(await middleware(value).executeCommand!('trnlens.server.measureFix', [{}], next), undefined);
    assert.deepEqual(record.failures, [['trnlens.server.measureFix', refusal]]);
  });

  it('gives a shortened lens its whole title as the tooltip', async () => {
    const resolve = middleware(deps(true).value).resolveCodeLens!;
    const full = '▶ Profile · 1.84 ms NEURON · 6 dispatches · MFU 31% · −42% vs previous · 2 min ago · on trn2';
    const shortened = { range: {}, command: { title: '▶ Profile · 1.84 ms NEURON · 6 dispatches', command: 'x' }, data: { tooltip: full } };
    const got = (await resolve(shortened as never, token, async (lens) => lens)) as { command: { tooltip?: string } };
    assert.equal(got.command.tooltip, full);
    const plain = { range: {}, command: { title: '▶ Profile', command: 'x' }, data: {} };
    const same = (await resolve(plain as never, token, async (lens) => lens)) as { command: { tooltip?: string } };
    assert.equal(same.command.tooltip, undefined);
  });

  it('answers the trnlens section itself and leaves other sections to VS Code', async () => {
    const configuration = middleware(deps(true).value).workspace!.configuration!;
    const asked: unknown[] = [];
    const next = async (params: { items: unknown[] }) => (asked.push(params), params.items.map(() => 'vscode'));
    const ours = await configuration({ items: [{ section: 'trnlens', scopeUri: 'file:///ws' }] }, token, next as never);
    assert.deepEqual(ours, [{ steps: 7, scope: 'file:///ws' }]);
    assert.equal(asked.length, 0);
    const mixed = await configuration({ items: [{ section: 'python' }, { section: 'trnlens' }] }, token, next as never);
    assert.deepEqual(mixed, ['vscode', { steps: 7, scope: undefined }]);
  });

  it('feeds work-done progress to the run tracker and still shows it', () => {
    const { value } = deps(true);
    const shown: unknown[] = [];
    middleware(value).handleWorkDoneProgress!(
      'tok',
      // the server's value carries the run's state beyond LSP's own fields (lsp/progress.py)
      { kind: 'begin', title: 'Profile f', message: 'starting on local', trnlens: { state: 'starting', kind: 'profile', qualname: 'f' } } as never,
      (_t, params) => void shown.push(params),
    );
    assert.equal(value.runs.current().run?.qualname, 'f');
    assert.equal(shown.length, 1);
  });

  it('opens external web URLs itself and leaves files to the client', async () => {
    const { value, record } = deps(true);
    const show = middleware(value).window!.showDocument!;
    const handled: string[] = [];
    const next = async (params: { uri: string }) => (handled.push(params.uri), { success: true });
    assert.deepEqual(await show({ uri: 'http://localhost:3001/', external: true }, next as never), { success: true });
    await show({ uri: 'file:///ws/.trnlens/report.html' }, next as never);
    assert.deepEqual(record.opened, ['http://localhost:3001/']);
    assert.deepEqual(handled, ['file:///ws/.trnlens/report.html']);
  });

  it("opens a run report the server shows (the comparison toast's button) in the webview", async () => {
    const { value, record } = deps(true);
    const show = middleware(value).window!.showDocument!;
    const handled: string[] = [];
    const next = async (params: { uri: string }) => (handled.push(params.uri), { success: true });
    const page = 'file:///ws/.trnlens/artifacts/20260101T000000-abcdef12/comparison.html';
    assert.deepEqual(await show({ uri: page, external: true }, next as never), { success: true });
    assert.deepEqual(record.reports, [{ runId: '20260101T000000-abcdef12', show: true }]);
    assert.deepEqual(handled, []);
    assert.equal(reportRunId('file:///ws/.trnlens/artifacts/r1/trace.json'), undefined);
  });
});
