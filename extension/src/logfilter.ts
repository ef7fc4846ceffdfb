// vscode-languageclient writes "[Error - 10:02:03] Server process exited with code 0." into the
// log at every stop or restart the user asked for: an exit with 0 is the server doing as told,
// so it is logged as what it is (info) and the log's errors stay the real ones.
const NORMAL_EXIT = /^\[Error\s*-[^\]]*\] Server process exited with code 0\.?$/;

interface Channel {
  appendLine(value: string): void;
  info(message: string): void;
}

export function isNormalExit(line: string): boolean {
  return NORMAL_EXIT.test(line.trim());
}

/** The channel, with the client's "exited with code 0" error turned into an info line. */
export function quietNormalExit<T extends Channel>(channel: T): T {
  return new Proxy(channel, {
    get(target, property) {
      if (property === 'appendLine') {
        return (line: string) =>
          isNormalExit(line)
            ? target.info('the server process exited normally (code 0)')
            : target.appendLine(line);
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
