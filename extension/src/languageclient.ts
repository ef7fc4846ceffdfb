// The one place that constructs vscode-languageclient's LanguageClient (it loads `vscode`, so
// the unit tests, which drive client.ts through ClientLike, never import this module).
import {
  LanguageClient,
  RevealOutputChannelOn,
  type LanguageClientOptions,
  type Middleware,
} from 'vscode-languageclient/node';
import type { ClientLike, ServerSpec } from './client';
import { quietNormalExit } from './logfilter';
import { DOCUMENT_SELECTOR } from './selector';
import type { LogOutputChannel } from 'vscode';

export interface ClientSettings {
  middleware: Middleware;
  log: LogOutputChannel;
  trusted(): boolean;
  cwd: string | undefined;
  /** The server's own notifications (`trnlens/...`) by method. */
  notifications?: Record<string, (params: unknown) => void>;
}

export function createLanguageClient(spec: ServerSpec, settings: ClientSettings): ClientLike {
  const options: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR, // Python files and notebooks' Python cells
    // Read when the client starts, so a restart after the trust grant says `trusted: true`.
    initializationOptions: () => ({ trusted: settings.trusted() }),
    middleware: settings.middleware,
    // The server's stderr (its log) and the protocol trace go to the trnlens log channel.
    outputChannel: quietNormalExit(settings.log),
    traceOutputChannel: settings.log,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // Hovers link to the run report (a command link); no other command runs from Markdown.
    markdown: { isTrusted: { enabledCommands: ['trnlens.server.report'] } },
  };
  const client = new LanguageClient(
    'trnlens',
    'trnlens',
    {
      command: spec.command,
      args: spec.args,
      // No `transport`: TransportKind.stdio would append `--stdio`, which `trnlens serve`
      // does not take (stdio is its default).
      options: { cwd: settings.cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    },
    options,
  );
  for (const [method, handler] of Object.entries(settings.notifications ?? {})) {
    client.onNotification(method, handler);
  }
  return {
    start: () => client.start(),
    stop: (timeout?: number) => client.stop(timeout),
    sendRequest: <R>(method: string, params: unknown) => client.sendRequest<R>(method, params),
    sendNotification: (method: string, params: unknown) => client.sendNotification(method, params),
    get initializeResult() {
      return client.initializeResult;
    },
    onDidChangeState: (listener) => client.onDidChangeState(listener),
  };
}
