import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommandNotOffered, ServerManager, ServerNotRunning, type ClientLike, type ServerDeps, type ServerSpec } from '../../src/client';
import type { Probe } from '../../src/installcheck';
import { UntrustedError } from '../../src/trust';
import { recordingLog, settle } from './helpers';

class FakeClient implements ClientLike {
  started = 0;
  stopped = 0;
  requests: Array<{ method: string; params: unknown }> = [];
  notifications: Array<{ method: string; params: unknown }> = [];
  initializeResult = { capabilities: { executeCommandProvider: { commands: ['trnlens.server.profile', 'trnlens.server.selectTarget'] } } };
  private listeners: Array<(event: { oldState: number; newState: number }) => void> = [];
  constructor(readonly spec: ServerSpec, private readonly failStart = false) {}
  async start() {
    this.started++;
    // vscode-languageclient reports RUNNING before its start() resolves
    this.listeners.forEach((listener) => listener({ oldState: 3, newState: 2 }));
    await settle(5);
    if (this.failStart) {
      throw new Error('Pending response rejected since connection got disposed');
    }
  }
  async stop() {
    this.stopped++;
  }
  async sendRequest<R>(method: string, params: unknown): Promise<R> {
    this.requests.push({ method, params });
    return { ok: true } as R;
  }
  async sendNotification(method: string, params: unknown) {
    this.notifications.push({ method, params });
  }
  onDidChangeState(listener: (event: { oldState: number; newState: number }) => void) {
    this.listeners.push(listener);
    return { dispose: () => undefined };
  }
  crash() {
    this.listeners.forEach((listener) => listener({ oldState: 2, newState: 1 }));
  }
  recover() {
    this.listeners.forEach((listener) => listener({ oldState: 3, newState: 2 }));
  }
}

function setup(options: { probe?: Probe; trusted?: boolean; failStart?: boolean } = {}) {
  const clients: FakeClient[] = [];
  const states: string[] = [];
  const problems: string[] = [];
  let gone = 0;
  const deps: ServerDeps = {
    interpreter: async () => ({ command: '/v/bin/python', source: 'setting' }),
    probe: async () => options.probe ?? { kind: 'ok', version: '3.11' },
    createClient: (spec) => {
      const client = new FakeClient(spec, options.failStart);
      clients.push(client);
      return client;
    },
    isTrusted: () => options.trusted ?? true,
    logLevel: () => 'INFO',
    log: recordingLog(),
    onState: (state) => void states.push(state),
    reportProblem: (_python, _found, message) => void problems.push(message),
    onServerGone: () => void gone++,
  };
  const manager = new ServerManager(deps, 20);
  return { manager, clients, states, problems, gone: () => gone, log: deps.log as ReturnType<typeof recordingLog> };
}

describe('ServerManager', () => {
  it('logs a first start as a start, never as the server "running again"', async () => {
    const { manager, log, clients } = setup();
    await manager.start();
    assert.ok(log.lines.includes('info the server is running'), log.lines.join('\n'));
    assert.ok(!log.lines.some((line) => line.includes('running again')));
    clients[0].crash();
    clients[0].recover(); // a real comeback after a crash still says so
    assert.ok(log.lines.some((line) => line.includes('running again')));
  });

  it('starts `python -m trnlens serve` with the chosen interpreter', async () => {
    const { manager, clients, states } = setup();
    await manager.start();
    assert.equal(clients.length, 1);
    assert.deepEqual(clients[0].spec, { command: '/v/bin/python', args: ['-m', 'trnlens', 'serve', '--log-level', 'INFO'] });
    assert.deepEqual(states, ['starting', 'running']);
    assert.ok(manager.running);
  });

  it('does not start a server without trnlens, and says what to pip install', async () => {
    const { manager, clients, states, problems } = setup({ probe: { kind: 'missing', version: '3.11' } });
    await manager.start();
    assert.equal(clients.length, 0);
    assert.deepEqual(states, ['starting', 'unavailable']);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /\/v\/bin\/python -m pip install trnlens/);
    await assert.rejects(manager.executeCommand('trnlens.server.selectTarget', {}), (error: Error) => {
      assert.ok(error instanceof ServerNotRunning);
      assert.match(error.message, /pip install trnlens/);
      return true;
    });
  });

  it('reports a server that fails to start', async () => {
    const { manager, states } = setup({ failStart: true });
    await manager.start();
    assert.deepEqual(states, ['starting', 'unavailable']);
    assert.ok(!manager.running);
  });

  it('takes back a server that vscode-languageclient brought up after a failed start', async () => {
    const { manager, clients, states } = setup({ failStart: true });
    await manager.start();
    assert.ok(!manager.running);
    clients[0].recover();
    assert.ok(manager.running);
    assert.equal(states[states.length - 1], 'running');
    await manager.executeCommand('trnlens.server.selectTarget', {});
    assert.equal(clients[0].requests.length, 1);
    await manager.restart();
    assert.equal(clients[0].stopped, 1, 'the adopted client is the one stopped');
  });

  it('stops a client whose start failed, so that it does not come back beside a new one', async () => {
    const { manager, clients } = setup({ failStart: true });
    await manager.start();
    await manager.restart();
    assert.equal(clients[0].stopped, 1);
    clients[0].recover();
    assert.equal(clients.length, 2);
    assert.ok(!manager.running, 'the old client is not adopted');
  });

  it('sends server commands with their one object argument', async () => {
    const { manager, clients } = setup();
    await manager.start();
    await manager.executeCommand('trnlens.server.profile', { uri: 'file:///a.py', qualname: 'f' });
    assert.deepEqual(clients[0].requests, [
      { method: 'workspace/executeCommand', params: { command: 'trnlens.server.profile', arguments: [{ uri: 'file:///a.py', qualname: 'f' }] } },
    ]);
  });

  it('refuses a command the server does not offer, naming it', async () => {
    const { manager, clients } = setup();
    await manager.start();
    await assert.rejects(manager.executeCommand('trnlens.server.compare', {}), CommandNotOffered);
    assert.equal(clients[0].requests.length, 0);
    assert.ok(manager.supports('trnlens.server.profile'));
    assert.ok(!manager.supports('trnlens.server.compare'));
  });

  it('never sends a profile from an untrusted workspace', async () => {
    const { manager, clients } = setup({ trusted: false });
    await manager.start();
    await assert.rejects(manager.executeCommand('trnlens.server.profile', {}), UntrustedError);
    assert.equal(clients[0].requests.length, 0);
    await manager.executeCommand('trnlens.server.selectTarget', {});
    assert.equal(clients[0].requests.length, 1);
  });

  it('debounces restarts: a burst of changes gives one new server', async () => {
    const { manager, clients } = setup();
    await manager.start();
    manager.scheduleRestart('a');
    manager.scheduleRestart('b');
    manager.scheduleRestart('c');
    await settle(80);
    assert.equal(clients.length, 2);
    assert.equal(clients[0].stopped, 1);
    assert.equal(clients[1].started, 1);
  });

  it('runs start, restart and stop one at a time', async () => {
    const { manager, clients } = setup();
    const first = manager.start();
    const second = manager.start();
    const restart = manager.restart();
    await Promise.all([first, second, restart]);
    assert.equal(clients.length, 2, 'start twice gives one server, restart one more');
    assert.equal(clients[0].stopped, 1);
    await manager.stop();
    assert.equal(clients[1].stopped, 1);
    assert.ok(!manager.running);
  });

  it('notices a server that stopped by itself', async () => {
    const { manager, clients, states, gone } = setup();
    await manager.start();
    clients[0].crash();
    assert.equal(states[states.length - 1], 'stopped');
    assert.equal(gone(), 1);
    assert.ok(!manager.running);
    await manager.start();
    assert.equal(clients.length, 2);
  });

  it('asks the running server to pull its settings again', async () => {
    const { manager, clients } = setup();
    await manager.configurationChanged();
    await manager.start();
    await manager.configurationChanged();
    assert.deepEqual(clients[0].notifications, [{ method: 'workspace/didChangeConfiguration', params: { settings: null } }]);
  });
});
