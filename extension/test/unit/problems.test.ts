import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { ACTIONS, reportServerProblem } from '../../src/problems';
import { recordingLog } from './helpers';

const missing = { kind: 'missing', version: '3.11' } as const;
const message = 'trnlens is not installed in /v/bin/python (Python 3.11). Install it with: /v/bin/python -m pip install trnlens';

function deps(pythonExtensionPresent = false) {
  const record = { restarts: 0 };
  return {
    record,
    value: { pythonExtensionPresent, restart: async () => void record.restarts++, log: recordingLog() },
  };
}

describe('reportServerProblem', () => {
  beforeEach(reset);

  it('shows the exact pip command with ways to act on it', async () => {
    await reportServerProblem('/v/bin/python', missing, message, deps().value);
    assert.equal(state.shown[0].kind, 'error');
    assert.match(state.shown[0].message, /\/v\/bin\/python -m pip install trnlens/);
    assert.deepEqual(state.shown[0].actions, [ACTIONS.install, ACTIONS.copy, ACTIONS.choose]);
  });

  it('copies the command', async () => {
    state.messageAnswers = [ACTIONS.copy];
    await reportServerProblem('/v/bin/python', missing, message, deps().value);
    assert.equal(state.clipboard, '/v/bin/python -m pip install trnlens');
  });

  it('runs pip in a terminal, then restarts when asked', async () => {
    const { value, record } = deps();
    state.messageAnswers = [ACTIONS.install, ACTIONS.restart];
    await reportServerProblem('/v/bin/python', missing, message, value);
    assert.deepEqual(state.terminals.map((t) => t.sent), [['/v/bin/python -m pip install trnlens']]);
    assert.equal(record.restarts, 1);
  });

  it('leads to the right interpreter picker', async () => {
    state.messageAnswers = [ACTIONS.choose, ACTIONS.choose];
    await reportServerProblem('python3', missing, message, deps(false).value);
    await reportServerProblem('python3', missing, message, deps(true).value);
    assert.deepEqual(state.executed, [
      { id: 'workbench.action.openSettings', args: ['trnlens.interpreter'] },
      { id: 'python.setInterpreter', args: [] },
    ]);
  });

  it('offers the log, not pip, when Python itself is the problem', async () => {
    const { value } = deps();
    state.messageAnswers = [ACTIONS.log];
    await reportServerProblem('py', { kind: 'no-python', detail: 'ENOENT' }, 'cannot run py', value);
    assert.deepEqual(state.shown[0].actions, [ACTIONS.choose, ACTIONS.log]);
    assert.equal(value.log.shown, 1);
  });
});
