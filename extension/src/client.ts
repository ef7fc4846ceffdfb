// The language server's lifecycle: choose the interpreter, check it has trnlens, start
// `python -m trnlens serve` over stdio, restart on request (debounced), and send it commands.
//
// Starts, stops and restarts run one at a time, in order: a setting change arriving while the
// server starts must not start a second one beside it.
import type { Interpreter } from './python';
import { problem, type Probe } from './installcheck';
import type { ServerState } from './statusbar';
import { runsCode, UntrustedError } from './trust';
import type { Log } from './vscodeapi';

/** vscode-languageclient's State values. */
const STOPPED = 1;
const RUNNING = 2;

export interface ServerSpec {
  command: string;
  args: string[];
}

/** The part of vscode-languageclient's LanguageClient this module drives. */
export interface ClientLike {
  start(): Promise<void>;
  stop(timeout?: number): Promise<void>;
  sendRequest<R>(method: string, params: unknown): Promise<R>;
  sendNotification(method: string, params: unknown): Promise<void>;
  readonly initializeResult:
    | { capabilities: { executeCommandProvider?: { commands: string[] } } }
    | undefined;
  onDidChangeState(listener: (event: { oldState: number; newState: number }) => void): {
    dispose(): unknown;
  };
}

export interface ServerDeps {
  interpreter(): Promise<Interpreter>;
  probe(python: string): Promise<Probe>;
  createClient(spec: ServerSpec): ClientLike;
  isTrusted(): boolean;
  logLevel(): string;
  log: Log;
  /** The server's state, for the status bar. */
  onState(state: ServerState, problem?: string): void;
  /** Tells the user the interpreter cannot run the server, and what to do. */
  reportProblem(python: string, found: Probe, message: string): void;
  /** Pending runs died with the server. */
  onServerGone(): void;
}

export class ServerNotRunning extends Error {
  constructor(why: string) {
    super(why);
    this.name = 'ServerNotRunning';
  }
}

export class CommandNotOffered extends Error {
  constructor(readonly command: string) {
    super(
      `the trnlens server in use does not offer ${command}: update trnlens in the interpreter ` +
        'that runs it',
    );
    this.name = 'CommandNotOffered';
  }
}

export function serverSpec(python: string, logLevel: string): ServerSpec {
  return { command: python, args: ['-m', 'trnlens', 'serve', '--log-level', logLevel] };
}

export class ServerManager {
  private client: ClientLike | undefined;
  /** The client started last: vscode-languageclient may bring it up after its start() failed. */
  private latest: ClientLike | undefined;
  private problem: string | undefined = 'the trnlens server has not started yet';
  private stopping = false;
  /** The client whose start() is being awaited: its first RUNNING is not a comeback. */
  private starting: ClientLike | undefined;
  private queue: Promise<void> = Promise.resolve();
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly deps: ServerDeps,
    private readonly debounceMs = 500,
  ) {}

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    clearTimeout(this.restartTimer);
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    clearTimeout(this.restartTimer);
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Restarts once the changes stop coming: a settings edit or an interpreter switch often
   * fires several events in a row. */
  scheduleRestart(reason: string): void {
    this.deps.log.info(`restart requested: ${reason}`);
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.restart(), this.debounceMs);
  }

  get running(): boolean {
    return this.client !== undefined;
  }

  /** Whether the running server offers this `workspace/executeCommand` command. */
  supports(command: string): boolean {
    const offered = this.client?.initializeResult?.capabilities.executeCommandProvider?.commands;
    return offered?.includes(command) ?? false;
  }

  /** Runs a server command with its one object argument. */
  async executeCommand<T>(command: string, argument: object): Promise<T> {
    if (runsCode(command) && !this.deps.isTrusted()) {
      throw new UntrustedError();
    }
    const client = this.requireClient();
    if (!this.supports(command)) {
      throw new CommandNotOffered(command);
    }
    return client.sendRequest<T>('workspace/executeCommand', { command, arguments: [argument] });
  }

  async request<T>(method: string, params: unknown): Promise<T> {
    return this.requireClient().sendRequest<T>(method, params);
  }

  /** Tells the running server that settings changed; it then asks for them (pull model), and
   * gets only what the user set (see configuration.ts). */
  async configurationChanged(): Promise<void> {
    await this.client?.sendNotification('workspace/didChangeConfiguration', { settings: null });
  }

  private requireClient(): ClientLike {
    if (this.client === undefined) {
      throw new ServerNotRunning(this.problem ?? 'the trnlens server is not running');
    }
    return this.client;
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step, step);
    // A failed step is logged where it fails; the queue itself must keep going.
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async doStart(): Promise<void> {
    if (this.client !== undefined) {
      return;
    }
    this.deps.onState('starting');
    const interpreter = await this.deps.interpreter();
    this.deps.log.info(`interpreter: ${interpreter.command} (from ${interpreter.source})`);
    const found = await this.deps.probe(interpreter.command);
    const message = problem(interpreter.command, found);
    if (message !== undefined) {
      this.problem = message;
      this.deps.log.error(message);
      this.deps.onState('unavailable', message);
      this.deps.reportProblem(interpreter.command, found, message);
      return;
    }
    const spec = serverSpec(interpreter.command, this.deps.logLevel());
    this.deps.log.info(`starting: ${spec.command} ${spec.args.join(' ')}`);
    const client = this.deps.createClient(spec);
    this.latest = client;
    client.onDidChangeState((event) => this.clientStateChanged(client, event.newState));
    this.starting = client;
    try {
      await client.start();
    } catch (error) {
      this.problem = `the trnlens server failed to start: ${describe(error)}`;
      this.deps.log.error(this.problem);
      this.deps.onState('unavailable', this.problem);
      return;
    } finally {
      this.starting = undefined;
    }
    this.client = client;
    this.problem = undefined;
    this.deps.log.info('the server is running');
    this.deps.onState('running');
  }

  private clientStateChanged(client: ClientLike, state: number): void {
    if (client !== this.latest || this.stopping) {
      return;
    }
    if (state === RUNNING && this.client === undefined && this.starting !== client) {
      // vscode-languageclient restarts a server that dies, also one whose first start failed
      // (seen when the package was being reinstalled): take it back.
      this.client = client;
      this.problem = undefined;
      this.deps.log.info('the server is running again');
      this.deps.onState('running');
    } else if (state === STOPPED && this.client === client) {
      // It gives up after a few crashes: only a stop we did not ask for means gone for good.
      this.client = undefined;
      this.problem = 'the trnlens server stopped (see the trnlens log)';
      this.deps.onServerGone();
      this.deps.onState('stopped', this.problem);
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client ?? this.latest;
    this.latest = undefined;
    if (client === undefined) {
      return;
    }
    this.stopping = true;
    this.client = undefined;
    try {
      await client.stop(5000);
    } catch (error) {
      this.deps.log.warn(`stopping the server: ${describe(error)}`);
    } finally {
      this.stopping = false;
      this.deps.onServerGone();
      this.deps.onState('stopped');
    }
  }
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
