// Where the extension steps between VS Code and the server (vscode-languageclient middleware):
// trust on lenses and commands, settings as the server should see them, run progress for the
// status bar, and external URLs through asExternalUri.
import type { Middleware } from 'vscode-languageclient/node';
import type { ProgressValue, RunTracker } from './runstate';
import { runsCode, visibleLenses } from './trust';
import { SECTION } from './configuration';
import { REPORT as SERVER_REPORT } from './functions';

export interface MiddlewareDeps {
  isTrusted(): boolean;
  /** The `trnlens` section for the server (see configuration.serverSection). */
  section(scopeUri?: string): Record<string, unknown>;
  runs: RunTracker;
  /** Opens an external URL from `window/showDocument`; true when it was opened. */
  openExternal(url: string): Promise<boolean>;
  /** Tells the user a command was refused because the workspace is untrusted. */
  refuseUntrusted(): void;
  /** Shows the run report in a webview (a lens or hover link asking the server to show it). */
  showReport(argument: object): Promise<unknown>;
  /** Logs a failed server command and tells the user, once (see failures.reportFailure). */
  reportFailure(command: string, error: unknown): void;
}

// A run report the server asks to show (the comparison toast's "Open report" button): its run id
// from the page's place beside the run's artifacts.
const REPORT_PAGE = /\/\.trnlens\/artifacts\/([^/]+)\/(?:report|comparison)\.html$/;

/** The run id of a run report's file URI, else undefined. */
export function reportRunId(uri: string): string | undefined {
  if (!/^file:/i.test(uri)) {
    return undefined;
  }
  return REPORT_PAGE.exec(decodeURIComponent(uri))?.[1];
}

const NEVER_CANCELLED = {
  isCancellationRequested: false,
  onCancellationRequested: () => ({ dispose: () => undefined }),
};

export function middleware(deps: MiddlewareDeps): Middleware {
  return {
    async provideCodeLenses(document, token, next) {
      const lenses = await next(document, token);
      return visibleLenses(lenses ?? undefined, deps.isTrusted());
    },

    async resolveCodeLens(lens, token, next) {
      // The server shortens a long lens title to fit above the code and sends the whole of it
      // as the command's tooltip (LSP 3.18), which vscode-languageclient drops: put it back.
      const resolved = await next(lens, token);
      // vscode-languageclient's ProtocolCodeLens keeps the server's `data`
      const full = (resolved as { data?: { tooltip?: unknown } } | null | undefined)?.data?.tooltip;
      if (resolved?.command !== undefined && typeof full === 'string') {
        resolved.command.tooltip = full;
      }
      return resolved;
    },

    async executeCommand(command, args, next) {
      // A lens click, a code action or any executeCommand of a server command lands here.
      // A failure is told here, once, and the command then resolves: rejecting would make
      // VS Code show a second notification of its own (lens clicks and code actions do).
      if (runsCode(command) && !deps.isTrusted()) {
        deps.refuseUntrusted();
        return undefined;
      }
      try {
        // The report lens and hover link ask the server to show the page (a browser, for any
        // LSP editor); in VS Code it opens in a webview beside the code instead.
        const argument = args[0] as { show?: unknown } | undefined;
        if (command === SERVER_REPORT && argument?.show === true) {
          return await deps.showReport(argument);
        }
        return await next(command, args);
      } catch (error) {
        deps.reportFailure(command, error);
        return undefined;
      }
    },

    handleWorkDoneProgress(token, params, next) {
      deps.runs.handle(token, params as ProgressValue);
      next(token, params);
    },

    workspace: {
      async configuration(params, token, next) {
        const ours = params.items.map((item) => item.section === SECTION);
        // Other sections (if the server ever asks) keep VS Code's own answer.
        const theirs = ours.every(Boolean) ? [] : await next(params, token);
        if (theirs instanceof Error) {
          return theirs;
        }
        return params.items.map((item, index) =>
          ours[index] ? deps.section(item.scopeUri) : (theirs as unknown[])[index],
        );
      },
    },

    window: {
      async showDocument(params, next) {
        const runId = reportRunId(params.uri);
        if (runId !== undefined) {
          // in the webview beside the code, as the Report lens opens it (not a browser)
          await deps.showReport({ runId, show: true });
          return { success: true };
        }
        if (params.external && /^https?:/i.test(params.uri)) {
          return { success: await deps.openExternal(params.uri) };
        }
        // vscode-languageclient's own handler (it opens files in an editor) takes no token.
        const result = await next(params, NEVER_CANCELLED);
        return result instanceof Error ? { success: false } : result;
      },
    },
  };
}
