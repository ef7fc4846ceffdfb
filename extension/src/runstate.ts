// The state of profile runs, read from the server's work-done progress.
//
// The server reports a run as: begin (title `Profile <qualname>` or `Compare <qualname>`, message `queued behind ...` or
// `starting on <target>`), reports whose message starts with the agent's phase (`measuring 5
// profiled steps`), and end (`<qualname>: <figures>`, `<qualname> raised: ...`, `failed: ...` or
// `cancelled`). LSP progress carries text only, so the state is read from those words; anything
// unrecognised is shown as it came rather than guessed at.

export const PHASES = [
  'importing',
  'building-inputs',
  'compiling',
  'warm-up',
  'measuring',
  'timing',
  'exporting',
] as const;

export type RunPhase = 'queued' | 'starting' | (typeof PHASES)[number] | 'running';
export type RunOutcome = 'done' | 'failed' | 'cancelled';

export interface RunState {
  token: string;
  qualname: string;
  /** A phase while the run goes, an outcome once it ended. */
  state: RunPhase | RunOutcome;
  /** The server's last message, for the tooltip. */
  message: string;
  ended: boolean;
}

export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string }
  | { kind: 'report'; message?: string }
  | { kind: 'end'; message?: string };

// `Profile f` for a profile, `Compare f` for a comparison of its variants (same phases).
const TITLE = /^(?:Profile|Compare) (.+)$/;

export class RunTracker {
  private readonly runs = new Map<string, RunState>();
  private lastEnded: RunState | undefined;
  private readonly listeners: Array<() => void> = [];
  private readonly ends: Array<(run: RunState) => void> = [];

  onDidChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Called once per run that ended (done, failed or cancelled), before onDidChange. */
  onDidEnd(listener: (run: RunState) => void): void {
    this.ends.push(listener);
  }

  /** Feeds one `$/progress` value. Progress that is not a profile run is ignored. */
  handle(token: string | number, value: ProgressValue): void {
    const key = String(token);
    if (value.kind === 'begin') {
      const title = TITLE.exec(value.title);
      if (title === null) {
        return;
      }
      const message = value.message ?? '';
      this.runs.set(key, {
        token: key,
        qualname: title[1],
        state: message.startsWith('queued') ? 'queued' : 'starting',
        message,
        ended: false,
      });
    } else {
      const run = this.runs.get(key);
      if (run === undefined) {
        return;
      }
      const message = value.message ?? '';
      run.message = message || run.message;
      if (value.kind === 'report') {
        run.state = phaseOf(message) ?? run.state;
      } else {
        run.state = outcomeOf(run.qualname, message);
        run.ended = true;
        this.runs.delete(key);
        this.lastEnded = run;
        this.ends.forEach((listener) => listener(run));
      }
    }
    this.listeners.forEach((listener) => listener());
  }

  /** What the status bar shows: the run that is measuring (else a queued one), else the last
   * run that ended; with the number of other runs still pending. */
  current(): { run: RunState | undefined; alsoPending: number } {
    const pending = [...this.runs.values()];
    const running = pending.filter((run) => run.state !== 'queued');
    const shown = running[running.length - 1] ?? pending[pending.length - 1] ?? this.lastEnded;
    const alsoPending = shown !== undefined && !shown.ended ? pending.length - 1 : pending.length;
    return { run: shown, alsoPending };
  }

  /** Forgets pending runs: their server is gone (restart or crash). */
  reset(): void {
    this.runs.clear();
    this.listeners.forEach((listener) => listener());
  }
}

function phaseOf(message: string): RunPhase | undefined {
  const word = message.split(/\s+/, 1)[0];
  if ((PHASES as readonly string[]).includes(word)) {
    return word as RunPhase;
  }
  if (message.startsWith('starting') || message === 'sent') {
    return 'starting';
  }
  return message ? 'running' : undefined;
}

function outcomeOf(qualname: string, message: string): RunOutcome {
  if (message.startsWith('cancelled')) {
    return 'cancelled';
  }
  if (message.startsWith('failed') || message.startsWith(`${qualname} raised`)) {
    return 'failed';
  }
  return 'done';
}
