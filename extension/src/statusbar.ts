// The status bar item: the target runs go to, the server's state, and the last run's state.
// Clicking it switches the target.
import type { RunState } from './runstate';
import type { StatusItem } from './vscodeapi';

export type ServerState = 'starting' | 'running' | 'stopped' | 'unavailable';

export interface StatusView {
  target: string;
  server: ServerState;
  /** Why the server is unavailable (no trnlens in the interpreter, ...). */
  serverProblem?: string;
  trusted: boolean;
  run?: RunState;
  alsoPending: number;
}

export const SELECT_TARGET_COMMAND = 'trnlens.selectTarget';
export const SHOW_LOG_COMMAND = 'trnlens.showLog';

const RUN_ICONS: Record<string, string> = {
  queued: '$(clock)',
  done: '$(check)',
  failed: '$(error)',
  cancelled: '$(circle-slash)',
};

export function render(view: StatusView): {
  text: string;
  tooltip: string;
  command: string;
  error: boolean;
} {
  if (view.server === 'unavailable') {
    return {
      text: '$(error) trnlens',
      tooltip: `${view.serverProblem ?? 'the trnlens server is not running'} (click for the log)`,
      command: SHOW_LOG_COMMAND,
      error: true,
    };
  }
  if (!view.trusted) {
    return {
      text: '$(shield) trnlens: analysis only',
      tooltip:
        'This workspace is not trusted: trnlens analyses the code but never runs it. ' +
        'Trust the workspace to profile.',
      command: SELECT_TARGET_COMMAND,
      error: false,
    };
  }
  const parts = [`trnlens: ${view.target}`];
  const tooltip = [`Profiles run on ${view.target} (click to switch target)`];
  let icon = '$(pulse)';
  if (view.server === 'starting') {
    icon = '$(sync~spin)';
    parts.push('starting');
  } else if (view.server === 'stopped') {
    icon = '$(debug-stop)';
    parts.push('stopped');
  } else if (view.run !== undefined) {
    icon = RUN_ICONS[view.run.state] ?? '$(sync~spin)';
    parts.push(`${view.run.qualname} ${view.run.state}${where(view.run)}`);
    if (view.run.message) {
      tooltip.push(named(view.run.qualname, view.run.message));
    }
  }
  if (view.alsoPending > 0) {
    parts.push(`+${view.alsoPending} queued`);
  }
  return {
    text: `${icon} ${parts.join(' · ')}`,
    tooltip: tooltip.join('\n'),
    command: SELECT_TARGET_COMMAND,
    error: view.run?.state === 'failed',
  };
}

/** The run's last message, named once: the server's end message names the function already
 * (`logits: 24.2 ms ...`, `logits raised: ...`, `compared logits: ...`), its phase reports do
 * not (`warm-up 2 of 3`). */
function named(qualname: string, message: string): string {
  const already = [`${qualname}: `, `${qualname} `, `compared ${qualname}: `];
  return already.some((start) => message.startsWith(start)) ? message : `${qualname}: ${message}`;
}

/** Where a pending run is, from its state (never its words): ` 3/5` for the pass's step of
 * steps, ` (variant 2 of 3)` in a comparison. */
function where(run: RunState): string {
  if (run.ended) {
    return '';
  }
  let text = '';
  if (run.step !== undefined && run.steps !== undefined && run.step > 0) {
    text += ` ${run.step}/${run.steps}`;
  }
  if (run.variants !== undefined && run.variants > 1) {
    text += ` (variant ${run.variant + 1} of ${run.variants})`;
  }
  return text;
}

export class StatusBar {
  private view: StatusView;

  constructor(
    private readonly item: StatusItem,
    initial: StatusView,
  ) {
    this.view = initial;
    this.paint();
    item.show();
  }

  update(change: Partial<StatusView>): void {
    this.view = { ...this.view, ...change };
    this.paint();
  }

  get state(): Readonly<StatusView> {
    return this.view;
  }

  private paint(): void {
    const shown = render(this.view);
    this.item.text = shown.text;
    this.item.tooltip = shown.tooltip;
    this.item.command = shown.command;
    this.item.setError(shown.error);
  }

  dispose(): void {
    this.item.dispose();
  }
}
