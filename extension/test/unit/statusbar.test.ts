import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { render, StatusBar, type StatusView } from '../../src/statusbar';
import { createStatusItem } from '../../src/vscodeapi';

const view: StatusView = { target: 'local', server: 'running', trusted: true, alsoPending: 0 };
const run = (state: string, message = '') =>
  ({ token: 't', qualname: 'rmsnorm_naive', state, message, ended: false }) as StatusView['run'];

describe('render', () => {
  it('names the target and switches it on click', () => {
    const shown = render(view);
    assert.equal(shown.text, '$(pulse) trnlens: local');
    assert.equal(shown.command, 'trnlens.selectTarget');
    assert.equal(shown.error, false);
  });

  it('shows the state of the last run', () => {
    assert.equal(render({ ...view, run: run('measuring') }).text, '$(sync~spin) trnlens: local · rmsnorm_naive measuring');
    assert.equal(render({ ...view, run: run('queued') }).text, '$(clock) trnlens: local · rmsnorm_naive queued');
    assert.equal(render({ ...view, target: 'trn2', run: run('done', 'rmsnorm_naive: 1 ms') }).text, '$(check) trnlens: trn2 · rmsnorm_naive done');
    const failed = render({ ...view, run: run('failed', 'failed: boom') });
    assert.equal(failed.text, '$(error) trnlens: local · rmsnorm_naive failed');
    assert.ok(failed.error);
    assert.match(failed.tooltip, /failed: boom/);
    // the function named once in the tooltip: the end message names it already (issue 42)
    const done = render({ ...view, run: run('done', 'rmsnorm_naive: 24.2 ms unprofiled') });
    assert.match(done.tooltip, /\nrmsnorm_naive: 24\.2 ms unprofiled$/);
    const raised = render({ ...view, run: run('failed', 'rmsnorm_naive raised: ValueError') });
    assert.match(raised.tooltip, /\nrmsnorm_naive raised: ValueError$/);
    assert.match(render({ ...view, run: run('done', 'compared rmsnorm_naive: fixed 1.4×') }).tooltip, /\ncompared rmsnorm_naive: fixed 1\.4×$/);
    assert.match(render({ ...view, run: run('warm-up', 'warm-up 2 of 3') }).tooltip, /\nrmsnorm_naive: warm-up 2 of 3$/);
    assert.match(render({ ...view, run: run('measuring'), alsoPending: 2 }).text, /· \+2 queued$/);
    // where the run is, from its state: the pass's step of steps, the variant of a comparison
    const measuring = { ...run('measuring'), step: 3, steps: 5, variant: 1, variants: 3 } as StatusView['run'];
    assert.equal(render({ ...view, run: measuring }).text, '$(sync~spin) trnlens: local · rmsnorm_naive measuring 3/5 (variant 2 of 3)');
    const ended = { ...run('done'), step: 3, steps: 5, ended: true } as StatusView['run'];
    assert.equal(render({ ...view, run: ended }).text, '$(check) trnlens: local · rmsnorm_naive done');
  });

  it('says when the server is missing, and leads to the log', () => {
    const shown = render({ ...view, server: 'unavailable', serverProblem: 'trnlens is not installed in python3' });
    assert.equal(shown.command, 'trnlens.showLog');
    assert.ok(shown.error);
    assert.match(shown.tooltip, /not installed in python3/);
  });

  it('says analysis only in an untrusted workspace', () => {
    assert.equal(render({ ...view, trusted: false }).text, '$(shield) trnlens: analysis only');
  });

  it('shows the server starting and stopped', () => {
    assert.match(render({ ...view, server: 'starting' }).text, /starting$/);
    assert.match(render({ ...view, server: 'stopped' }).text, /stopped$/);
  });
});

describe('StatusBar', () => {
  beforeEach(reset);

  it('paints a real status bar item through vscodeapi', () => {
    const bar = new StatusBar(createStatusItem('trnlens.status', 'trnlens', 100), view);
    const [item] = state.statusItems;
    assert.equal(item.visible, true);
    assert.equal(item.text, '$(pulse) trnlens: local');
    assert.equal(item.command, 'trnlens.selectTarget');
    bar.update({ run: run('failed') });
    assert.equal((item.backgroundColor as { id: string }).id, 'statusBarItem.errorBackground');
    bar.update({ run: run('done') });
    assert.equal(item.backgroundColor, undefined);
    bar.update({ target: 'trn2' });
    assert.equal(bar.state.target, 'trn2');
    assert.match(item.text as string, /trnlens: trn2/);
  });
});
