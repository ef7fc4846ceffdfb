import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RunTracker, type ProgressValue } from '../../src/runstate';

// The values below have the shape trnlens's server sends (server/trnlens/lsp/progress.py): the
// English message for people, the state for machines under `trnlens`.
const begin = (qualname: string, message = 'starting on local', kind: 'profile' | 'compare' = 'profile'): ProgressValue => ({
  kind: 'begin',
  title: `${kind === 'profile' ? 'Profile' : 'Compare'} ${qualname}`,
  message,
  trnlens: { state: message.startsWith('queued') ? 'queued' : 'starting', kind, qualname },
});
const report = (state: string, message: string, extra: object = {}): ProgressValue => ({
  kind: 'report',
  message,
  trnlens: { state, variant: 0, variants: 1, step: null, steps: null, ...extra },
});
const end = (outcome: 'succeeded' | 'raised' | 'failed' | 'cancelled', message: string): ProgressValue => ({
  kind: 'end',
  message,
  trnlens: { state: 'ended', outcome },
});

describe('RunTracker', () => {
  it('stops saying failed when an Undo brings back a good run of that function', () => {
    const runs = new RunTracker();
    runs.handle('t1', begin('logits'));
    runs.handle('t1', end('raised', 'logits raised: IndexError'));
    assert.equal(runs.current().run?.state, 'failed');
    runs.shown({ uri: 'file:///m.py', qualname: 'other', runId: 'r0', failed: false });
    assert.equal(runs.current().run?.state, 'failed'); // another function's run: no change
    runs.shown({ uri: 'file:///m.py', qualname: 'logits', runId: 'r1', failed: false });
    assert.equal(runs.current().run?.state, 'done');
  });

  it('follows a run through its phases to done', () => {
    const runs = new RunTracker();
    let changes = 0;
    runs.onDidChange(() => changes++);
    runs.handle('t1', begin('rmsnorm_naive'));
    assert.equal(runs.current().run?.state, 'starting');
    runs.handle('t1', report('starting', 'starting the agent on local'));
    runs.handle('t1', report('importing', 'importing torch'));
    assert.equal(runs.current().run?.state, 'importing');
    runs.handle('t1', report('compiling', 'compiling torch.compile'));
    assert.equal(runs.current().run?.state, 'compiling');
    runs.handle('t1', report('measuring', 'measuring 5 profiled steps', { step: 0, steps: 5 }));
    assert.equal(runs.current().run?.state, 'measuring');
    assert.deepEqual([runs.current().run?.step, runs.current().run?.steps], [0, 5]);
    runs.handle('t1', end('succeeded', 'rmsnorm_naive: 13.5 ms CPU (ops) · 6 dispatches'));
    const { run, alsoPending } = runs.current();
    assert.equal(run?.state, 'done');
    assert.equal(run?.outcome, 'succeeded');
    assert.equal(run?.qualname, 'rmsnorm_naive');
    assert.equal(run?.message, 'rmsnorm_naive: 13.5 ms CPU (ops) · 6 dispatches');
    assert.equal(alsoPending, 0);
    assert.equal(changes, 6);
  });

  it('tells each ended run once to onDidEnd (the Output channel logs it)', () => {
    const runs = new RunTracker();
    const ended: string[] = [];
    runs.onDidEnd((run) => void ended.push(`${run.qualname} ${run.state}: ${run.message}`));
    runs.handle('t1', begin('f'));
    runs.handle('t1', report('measuring', 'measuring 5 profiled steps'));
    assert.deepEqual(ended, []);
    runs.handle('t1', end('failed', 'failed: f(x) needs arguments'));
    runs.handle('t1', end('failed', 'late duplicate')); // unknown by now: ignored
    runs.handle('t2', begin('g', 'starting on local', 'compare'));
    runs.handle('t2', end('cancelled', 'cancelled'));
    assert.deepEqual(ended, ['f failed: failed: f(x) needs arguments', 'g cancelled: cancelled']);
  });

  it('reads the outcome from the state, never from the words', () => {
    const runs = new RunTracker();
    const outcome = (value: ProgressValue) => {
      runs.handle('t', begin('f'));
      runs.handle('t', value);
      return [runs.current().run?.state, runs.current().run?.outcome];
    };
    assert.deepEqual(outcome(end('failed', 'timed out after 600 s')), ['failed', 'failed']);
    assert.deepEqual(outcome(end('raised', 'f raised: ZeroDivisionError')), ['failed', 'raised']);
    assert.deepEqual(outcome(end('cancelled', 'cancelled before it started')), ['cancelled', 'cancelled']);
    // a function named `cancelled` that succeeded, and a headline that reads like a failure
    assert.deepEqual(outcome(end('succeeded', 'cancelled: 1.2 ms device')), ['done', 'succeeded']);
    assert.deepEqual(outcome(end('succeeded', 'failed: 3 dispatches')), ['done', 'succeeded']);
    // an end without a known outcome is not taken for a success
    assert.deepEqual(outcome({ kind: 'end', message: 'f: 1 ms' }), ['failed', undefined]);
  });

  it('keeps the phase when a report carries no state, whatever its words', () => {
    const runs = new RunTracker();
    runs.handle('t', begin('f'));
    runs.handle('t', report('timing', 'timing up to 20 synchronised calls', { steps: 20 }));
    runs.handle('t', { kind: 'report', message: 'measuring again' });
    assert.equal(runs.current().run?.state, 'timing');
    assert.equal(runs.current().run?.message, 'measuring again');
  });

  it('shows the running run over a queued one, and counts the rest', () => {
    const runs = new RunTracker();
    runs.handle(1, begin('a'));
    runs.handle(1, report('measuring', 'measuring 5 profiled steps'));
    runs.handle(2, begin('b', 'queued behind a on local (1 ahead)'));
    assert.deepEqual([runs.current().run?.qualname, runs.current().alsoPending], ['a', 1]);
    runs.handle(1, end('succeeded', 'a: 1 ms CPU'));
    assert.deepEqual([runs.current().run?.qualname, runs.current().run?.state], ['b', 'queued']);
    assert.equal(runs.current().alsoPending, 0);
  });

  it('follows a comparison like a profile, with the variant measuring', () => {
    const runs = new RunTracker();
    runs.handle('c', begin('rmsnorm_naive', 'starting on local', 'compare'));
    runs.handle('c', report('measuring', 'measuring 5 profiled steps', { variant: 1, variants: 3 }));
    assert.deepEqual([runs.current().run?.variant, runs.current().run?.variants], [1, 3]);
    runs.handle('c', report('timing', 'timing up to 20 interleaved rounds'));
    assert.deepEqual([runs.current().run?.qualname, runs.current().run?.state], ['rmsnorm_naive', 'timing']);
    runs.handle('c', end('succeeded', 'compared rmsnorm_naive: original 6 dispatches; fixed TRN001 1 dispatch, 2.50×'));
    assert.equal(runs.current().run?.state, 'done');
  });

  it('ignores progress that is not a trnlens run, and forgets runs of a gone server', () => {
    const runs = new RunTracker();
    runs.handle('x', { kind: 'begin', title: 'Profile looking', message: '' }); // no state: not ours
    runs.handle('x', { kind: 'report', message: 'measuring' });
    assert.equal(runs.current().run, undefined);
    runs.handle('t', begin('f'));
    runs.reset();
    assert.equal(runs.current().run, undefined);
  });
});
