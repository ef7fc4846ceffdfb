// Opening URLs the server hands over (reports, Neuron Explorer) in the user's browser.
//
// The server runs where the code is (the remote machine under Remote-SSH), so a URL such as
// http://127.0.0.1:3001/ names that machine. `asExternalUri` forwards the port and gives the URL
// the browser can reach; `openExternal` opens it.
//
// Neuron Explorer is two servers: the UI (3001) and the API it calls (3002), and the UI's page
// calls the API on the same port number. Both are forwarded, and when a forward lands on another
// port number the user is told so, since the page would then not find its API.

export interface UrlApi {
  asExternalUri(url: string): Promise<string>;
  openExternal(url: string): Promise<boolean>;
}

/** Neuron Explorer's API port, used when the server names only the UI's URL. */
export const EXPLORER_API_PORT = 3002;

export async function openUrl(url: string, api: UrlApi): Promise<string> {
  const external = await api.asExternalUri(url);
  await api.openExternal(external);
  return external;
}

export interface ExplorerOpened {
  opened: string;
  /** Sentences for the user when a port did not keep its number. */
  problems: string[];
}

export async function openExplorer(
  uiUrl: string,
  apiUrl: string | undefined,
  api: UrlApi,
): Promise<ExplorerOpened> {
  const ui = new URL(uiUrl);
  const apiTarget = apiUrl ?? withPort(ui, EXPLORER_API_PORT);
  // The API first: the UI's page calls it as soon as it loads.
  const apiExternal = await api.asExternalUri(apiTarget);
  const uiExternal = await api.asExternalUri(uiUrl);
  const problems = [
    portProblem('UI', uiUrl, uiExternal),
    portProblem('API', apiTarget, apiExternal),
  ].filter((problem): problem is string => problem !== undefined);
  await api.openExternal(uiExternal);
  return { opened: uiExternal, problems };
}

function withPort(url: URL, port: number): string {
  const copy = new URL(url.toString());
  copy.port = String(port);
  copy.pathname = '/';
  copy.search = '';
  copy.hash = '';
  return copy.toString();
}

/** The port of a URL, with the scheme's default when none is written. */
export function portOf(url: URL): number {
  if (url.port !== '') {
    return Number(url.port);
  }
  return url.protocol === 'https:' ? 443 : 80;
}

function portProblem(what: string, original: string, mapped: string): string | undefined {
  const before = new URL(original);
  const after = new URL(mapped);
  if (portOf(before) === portOf(after) && after.pathname === before.pathname) {
    return undefined;
  }
  return (
    `Neuron Explorer's ${what} port ${portOf(before)} reaches your browser as ${after.origin}${after.pathname}, ` +
    `not on port ${portOf(before)}: forward port ${portOf(before)} to the same local port by hand ` +
    '(Ports view, or ssh -L) so that the UI finds its API.'
  );
}

/**
 * Opens the URLs the server sends with `window/showDocument`, except during a Neuron Explorer
 * request: the server sends the UI's URL before its command returns, and opening it then would
 * beat the forwarding of the API port. Such a URL is kept and opened by `explorer` instead.
 */
export class UrlOpener {
  private explorerRequests = 0;
  private held: string | undefined;

  constructor(private readonly api: UrlApi) {}

  async showDocument(url: string): Promise<boolean> {
    if (this.explorerRequests > 0) {
      this.held = url;
      return true;
    }
    await openUrl(url, this.api);
    return true;
  }

  /** Runs the server's openExplorer request and opens the page it names (in its result as
   * `{url, apiUrl?}`, or sent with showDocument meanwhile); undefined when it named none. */
  async explorer(request: () => Promise<unknown>): Promise<ExplorerOpened | undefined> {
    this.explorerRequests++;
    let answer: unknown;
    try {
      answer = await request();
    } finally {
      this.explorerRequests--;
    }
    const held = this.held;
    this.held = undefined;
    const named = answer as { url?: unknown; apiUrl?: unknown } | null | undefined;
    const url = typeof named?.url === 'string' ? named.url : held;
    if (url === undefined) {
      return undefined;
    }
    const apiUrl = typeof named?.apiUrl === 'string' ? named.apiUrl : undefined;
    return openExplorer(url, apiUrl, this.api);
  }
}
