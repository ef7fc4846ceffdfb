import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RunTracker } from '../../src/runstate';

// The messages below are the ones trnlens's server sends (server/trnlens/lsp/runs.py and the
// agent's phases in server/trnlens/agent/protocol.py).
describe('RunTracker', () => {
  it('follows a run through its phases to done', () => {
    const runs = new RunTracker();
    let changes = 0;
    runs.onDidChange(() => changes++);
    runs.handle('t1', { kind: 'begin', title: 'Profile rmsnorm_naive', message: 'starting on local' });
    assert.equal(runs.current().run?.state, 'starting');
    runs.handle('t1', { kind: 'report', message: 'starting the agent on local' });
    runs.handle('t1', { kind: 'report', message: 'importing torch' });
    assert.equal(runs.current().run?.state, 'importing');
    runs.handle('t1', { kind: 'report', message: 'compiling torch.compile' });
    assert.equal(runs.current().run?.state, 'compiling');
    runs.handle('t1', { kind: 'report', message: 'measuring 5 profiled steps' });
    assert.equal(runs.current().run?.state, 'measuring');
    runs.handle('t1', { kind: 'end', message: 'rmsnorm_naive: 13.5 ms CPU (ops) · 6 dispatches' });
    const { run, alsoPending } = runs.current();
    assert.equal(run?.state, 'done');
    assert.equal(run?.qualname, 'rmsnorm_naive');
    assert.equal(run?.message, 'rmsnorm_naive: 13.5 ms CPU (ops) · 6 dispatches');
    assert.equal(alsoPending, 0);
    assert.equal(changes, 6);
  });

  it('tells each ended run once to onDidEnd (the Output channel logs it)', () => {
    const runs = new RunTracker();
    const ended: string[] = [];
    runs.onDidEnd((run) => void ended.push(`${run.qualname} ${run.state}: ${run.message}`));
    runs.handle('t1', { kind: 'begin', title: 'Profile f', message: 'starting on local' });
    runs.handle('t1', { kind: 'report', message: 'measuring 5 profiled steps' });
    assert.deepEqual(ended, []);
    runs.handle('t1', { kind: 'end', message: 'failed: f(x) needs arguments' });
    runs.handle('t1', { kind: 'end', message: 'late duplicate' }); // unknown by now: ignored
    runs.handle('t2', { kind: 'begin', title: 'Compare g', message: 'starting on local' });
    runs.handle('t2', { kind: 'end', message: 'cancelled' });
    assert.deepEqual(ended, ['f failed: failed: f(x) needs arguments', 'g cancelled: cancelled']);
  });

  it('tells failures, raised errors and cancellations apart', () => {
    const runs = new RunTracker();
    const outcome = (message: string) => {
      runs.handle('t', { kind: 'begin', title: 'Profile f', message: 'starting on local' });
      runs.handle('t', { kind: 'end', message });
      return runs.current().run?.state;
    };
    assert.equal(outcome('failed: timed out after 600 s (trnlens.timeoutSeconds)'), 'failed');
    assert.equal(outcome('f raised: ZeroDivisionError: division by zero'), 'failed');
    assert.equal(outcome('cancelled'), 'cancelled');
    assert.equal(outcome('cancelled before it started'), 'cancelled');
    assert.equal(outcome('f: 1.2 ms device'), 'done');
  });

  it('shows the running run over a queued one, and counts the rest', () => {
    const runs = new RunTracker();
    runs.handle(1, { kind: 'begin', title: 'Profile a', message: 'starting on local' });
    runs.handle(1, { kind: 'report', message: 'measuring 5 profiled steps' });
    runs.handle(2, { kind: 'begin', title: 'Profile b', message: 'queued behind a on local (1 ahead)' });
    assert.deepEqual([runs.current().run?.qualname, runs.current().alsoPending], ['a', 1]);
    runs.handle(1, { kind: 'end', message: 'a: 1 ms CPU' });
    assert.deepEqual([runs.current().run?.qualname, runs.current().run?.state], ['b', 'queued']);
    assert.equal(runs.current().alsoPending, 0);
  });

  it('follows a comparison like a profile', () => {
    const runs = new RunTracker();
    runs.handle('c', { kind: 'begin', title: 'Compare rmsnorm_naive', message: 'starting on local' });
    runs.handle('c', { kind: 'report', message: 'timing up to 20 synchronised calls' });
    assert.deepEqual([runs.current().run?.qualname, runs.current().run?.state], ['rmsnorm_naive', 'timing']);
    runs.handle('c', { kind: 'end', message: 'compared rmsnorm_naive: original 6 dispatches, 100 ms CPU (ops)/step; fixed TRN001 1 dispatch, 2.50×' });
    assert.equal(runs.current().run?.state, 'done');
  });

  it('ignores progress that is not a profile run, and forgets runs of a gone server', () => {
    const runs = new RunTracker();
    runs.handle('x', { kind: 'begin', title: 'Indexing', message: '' });
    runs.handle('x', { kind: 'report', message: 'measuring' });
    assert.equal(runs.current().run, undefined);
    runs.handle('t', { kind: 'begin', title: 'Profile f', message: 'starting on local' });
    runs.reset();
    assert.equal(runs.current().run, undefined);
  });
});
