// The run report in a webview beside the code. The server writes the page (one self-contained
// HTML file, see server/trnlens/report/) and answers its path; this module shows it and turns the
// page's messages into editor actions: `reveal` opens the file at the line (only inside the
// report's project), `open` hands a file next to the report (chrome trace, NEFF/NTFF) to the OS.
import { isAbsolute, relative, resolve, dirname } from 'node:path';
import { readFile } from 'node:fs/promises';
import { REPORT } from './functions';
import * as api from './vscodeapi';

export const SERVER_REPORT = REPORT;

/** What `trnlens.server.report` answers. */
export interface ReportAnswer {
  path: string;
  uri: string;
  root: string;
  runIds: string[];
  reused: boolean;
  /** The tab's title (`Report f`, `Compare f (3 variants)`); older servers send none. */
  title?: string;
}

export interface ReportDeps {
  execute(argument: object): Promise<ReportAnswer>;
  log: api.Log;
  read?(path: string): Promise<string>;
}

export class ReportView {
  private panel: api.ReportPanel | undefined;
  private shown: ReportAnswer | undefined;

  constructor(private readonly deps: ReportDeps) {}

  /** Builds (server) and shows the report of `argument` ({uri?, qualname?, runId?}). */
  async show(argument: object): Promise<ReportAnswer> {
    // `show: false`: the server must not also open it in a browser.
    const answer = await this.deps.execute({ ...argument, show: false });
    const html = await (this.deps.read ?? ((path) => readFile(path, 'utf8')))(answer.path);
    const title =
      answer.title ??
      `Report ${answer.runIds.length > 1 ? `(${answer.runIds.length} variants)` : answer.runIds[0]}`;
    if (this.panel === undefined) {
      const panel = api.createReportPanel(title);
      panel.onMessage((message) => void this.handle(message));
      panel.onDidDispose(() => {
        this.panel = undefined;
        this.shown = undefined;
      });
      this.panel = panel;
    }
    this.shown = answer;
    this.panel.setHtml(html, title);
    this.panel.reveal();
    this.deps.log.info(`report ${answer.path}${answer.reused ? ' (reused)' : ''}`);
    return answer;
  }

  /** A message posted by the page. */
  async handle(message: unknown): Promise<void> {
    const shown = this.shown;
    if (shown === undefined || typeof message !== 'object' || message === null) {
      return;
    }
    const { type, path, line, href } = message as { type?: unknown; path?: unknown; line?: unknown; href?: unknown };
    if (type === 'reveal' && typeof path === 'string' && typeof line === 'number') {
      // a library line (a row of the library lines, a module's block) opens the installed file
      const file = inside(shown.root, path) ?? libraryFile(path);
      if (file === undefined || !Number.isInteger(line) || line < 1) {
        this.deps.log.warn(`report: refused to reveal ${String(path)}:${String(line)} (outside the project)`);
        return;
      }
      await api.revealLine(file, line);
    } else if (type === 'open' && typeof href === 'string') {
      const file = inside(shown.root, resolve(dirname(shown.path), href));
      if (file !== undefined) {
        await api.openExternal(api.fileUri(file));
      }
    }
  }
}

/** An installed library's Python file (absolute, `.py`, under site-packages, dist-packages or
 * a Python's lib/pythonX.Y): what a report may open outside its project; undefined otherwise. */
export function libraryFile(path: string): string | undefined {
  if (!isAbsolute(path) || !path.endsWith('.py') || path.split(/[\\/]/).includes('..')) {
    return undefined;
  }
  return /[\\/](site-packages|dist-packages|lib[\\/]python\d+(\.\d+)?)[\\/]/.test(path) ? path : undefined;
}

/** `path` (relative to `root`, or absolute) when it lies inside `root`; undefined otherwise. */
export function inside(root: string, path: string): string | undefined {
  const full = resolve(root, path);
  const rel = relative(root, full);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    return undefined;
  }
  return full;
}
