// One notification per failure, in words a user reads: a server command's error answer (a lens
// click, a code action, a palette command) is shown once, by us, with its own message and never
// an exception's class name, as a warning when it is something the user can fix (the server
// says so in the error's data) and as an error otherwise; every failure also goes to the log.
import * as api from './vscodeapi';

export const SHOW_LOG = 'Show Log';

/** What the server's CommandError carries (see server/trnlens/lsp/commands.py). */
interface ServerError {
  code?: unknown;
  message?: unknown;
  data?: { severity?: unknown } | null;
}

/** A JSON-RPC error answer (vscode-languageclient's ResponseError), not a local failure. */
export function isResponseError(error: unknown): boolean {
  return typeof (error as ServerError | undefined)?.code === 'number';
}

/** Whether the failure is one the user can fix (a refusal): shown as a warning. */
export function isRefusal(error: unknown): boolean {
  return (error as ServerError | undefined)?.data?.severity === 'warning';
}

/** The message as a user should read it: no `Error:` prefix, no Python class path. */
export function readable(error: unknown): string {
  const raw = error instanceof Error ? error.message : String((error as ServerError)?.message ?? error);
  // A server older than the CommandError fix prefixes its exceptions' module path and class.
  return raw.replace(/^(?:[A-Za-z_][\w]*\.)+[A-Za-z_]\w*(?:Error|Exception|Refused): /, '');
}

/** Logs the failure and shows it once; resolves when shown (not when dismissed). */
export function reportFailure(log: api.Log, what: string, error: unknown): void {
  const message = readable(error);
  const refusal = isRefusal(error);
  (refusal ? log.warn : log.error).call(log, `${what}: ${message}`);
  const text = message.startsWith('trnlens') ? message : `trnlens: ${message}`;
  const shown = refusal ? api.showWarningMessage(text, SHOW_LOG) : api.showErrorMessage(text, SHOW_LOG);
  void shown.then((choice) => {
    if (choice === SHOW_LOG) {
      log.show();
    }
  });
}
