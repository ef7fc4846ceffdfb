import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isNormalExit, quietNormalExit } from '../../src/logfilter';

describe('logfilter', () => {
  it('logs the client’s "exited with code 0" as info and passes every other line', () => {
    const seen: string[] = [];
    const channel = {
      name: 'trnlens',
      appendLine: (line: string) => void seen.push(`line ${line}`),
      info: (line: string) => void seen.push(`info ${line}`),
    };
    const quiet = quietNormalExit(channel);
    quiet.appendLine('[Error - 10:02:03] Server process exited with code 0.');
    quiet.appendLine('[Error - 10:02:04] Server process exited with code 1.');
    quiet.appendLine('WARNING trnlens.lsp: something');
    assert.equal(quiet.name, 'trnlens');
    assert.deepEqual(seen, [
      'info the server process exited normally (code 0)',
      'line [Error - 10:02:04] Server process exited with code 1.',
      'line WARNING trnlens.lsp: something',
    ]);
    assert.ok(!isNormalExit('[Error - 1:00:00 PM] Server process exited with signal SIGTERM.'));
  });
});
