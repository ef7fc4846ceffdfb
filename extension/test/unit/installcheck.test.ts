import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { installCommand, pipCommand, probe, problem } from '../../src/installcheck';

const answering = (output: string) => async () => output;

describe('probe', () => {
  it('reads version and presence of trnlens', async () => {
    assert.deepEqual(await probe('py', answering('3.11 1\n')), { kind: 'ok', version: '3.11' });
    assert.deepEqual(await probe('py', answering('3.12 0\n')), { kind: 'missing', version: '3.12' });
    assert.deepEqual(await probe('py', answering('3.11 0 0\n')), { kind: 'missing', version: '3.11' });
    assert.deepEqual(await probe('/usr/bin/python3', answering('3.11 0 1\n')), { kind: 'missing', version: '3.11', managed: true });
  });

  it('advises a virtual environment, not pip, for a system Python that pip refuses', () => {
    const found = { kind: 'missing', version: '3.11', managed: true } as const;
    assert.equal(installCommand('/usr/bin/python3', found, 'linux'), '/usr/bin/python3 -m venv .venv && .venv/bin/python -m pip install trnlens');
    assert.equal(installCommand('/v/bin/python', { kind: 'missing', version: '3.11' }, 'linux'), '/v/bin/python -m pip install trnlens');
    const message = problem('/usr/bin/python3', found) ?? '';
    assert.match(message, /-m venv \.venv/);
    assert.doesNotMatch(message, /python3 -m pip install/);
  });

  it('refuses Pythons older than 3.10 even with trnlens', async () => {
    assert.deepEqual(await probe('py', answering('3.9 1')), { kind: 'old-python', version: '3.9' });
    assert.deepEqual(await probe('py', answering('2.7 0')), { kind: 'old-python', version: '2.7' });
  });

  it('reports an interpreter that cannot run or answers nonsense', async () => {
    const failing = async () => {
      throw new Error('spawn nope ENOENT');
    };
    assert.deepEqual(await probe('nope', failing), { kind: 'no-python', detail: 'spawn nope ENOENT' });
    const odd = await probe('py', answering('Hello'));
    assert.equal(odd.kind, 'no-python');
  });

  it('runs a real interpreter', async () => {
    const found = await probe('python3');
    assert.ok(found.kind === 'ok' || found.kind === 'missing', JSON.stringify(found));
    assert.match(found.kind === 'ok' || found.kind === 'missing' ? found.version : '', /^3\.\d+$/);
    const absent = await probe('/nonexistent/python');
    assert.equal(absent.kind, 'no-python');
  });
});

describe('pip command and messages', () => {
  it('gives the exact pip command, quoted when needed', () => {
    assert.equal(pipCommand('/ws/.venv/bin/python', 'linux'), '/ws/.venv/bin/python -m pip install trnlens');
    assert.equal(pipCommand('/my envs/py', 'linux'), "'/my envs/py' -m pip install trnlens");
    assert.equal(pipCommand("/it's/py", 'linux'), `'/it'"'"'s/py' -m pip install trnlens`);
    assert.equal(
      pipCommand('C:\\Program Files\\Python\\python.exe', 'win32'),
      '& "C:\\Program Files\\Python\\python.exe" -m pip install trnlens',
    );
  });

  it('says what to run', () => {
    assert.equal(problem('python3', { kind: 'ok', version: '3.11' }), undefined);
    const missing = problem('/v/bin/python', { kind: 'missing', version: '3.11' });
    assert.ok(missing?.includes('/v/bin/python -m pip install trnlens'), missing);
    assert.match(problem('py', { kind: 'old-python', version: '3.8' }) ?? '', /needs Python 3\.10/);
    assert.match(problem('py', { kind: 'no-python', detail: 'ENOENT' }) ?? '', /trnlens\.interpreter/);
  });
});
