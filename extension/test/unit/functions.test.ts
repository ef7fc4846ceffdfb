import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CANCEL, PROFILE, profilableAt, profilables, type WireCodeLens } from '../../src/functions';

const URI = 'file:///ws/model.py';

function lens(line: number, character: number, qualname: string, command = PROFILE, extra = {}): WireCodeLens {
  return {
    range: { start: { line, character } },
    command: { title: `▶ Profile ${qualname}`, command, arguments: [{ uri: URI, qualname, ...extra }] },
  };
}

// The shapes the server's lenses sit on: a decorated function, a class with a method whose
// signature wraps, module code after them.
const SOURCE = [
  'import torch', //                              0
  '', //                                          1
  '@torch.no_grad()', //                          2
  'def naive(x, w):', //                          3
  '    y = x.pow(2)', //                          4
  '', //                                          5
  '    # a comment at any indent', //             6
  '    return y * w', //                          7
  '', //                                          8
  'class Block(torch.nn.Module):', //             9
  '    def forward(', //                          10
  '        self, x', //                           11
  '    ):', //                                    12
  '        return x', //                          13
  '', //                                          14
  '    scale = 2', //                             15
  '', //                                          16
  'x = naive(1, 2)', //                           17
];
const LENSES = [lens(10, 4, 'Block.forward'), lens(3, 0, 'naive'), lens(9, 0, 'Block')];

describe('profilables', () => {
  it('reads qualnames and arguments from the server’s lenses, in line order', () => {
    const found = profilables([
      ...LENSES,
      { range: { start: { line: 0, character: 0 } }, command: { title: 'other', command: 'x.y' } },
      { range: { start: { line: 1, character: 0 } } },
      lens(20, 0, 'remote', PROFILE, { target: 'trn2' }),
    ]);
    assert.deepEqual(
      found.map((p) => [p.qualname, p.line, p.column]),
      [['naive', 3, 0], ['Block', 9, 0], ['Block.forward', 10, 4], ['remote', 20, 0]],
    );
    assert.deepEqual(found[3].arguments, { uri: URI, qualname: 'remote', target: 'trn2' });
  });

  it('marks a function with a pending job (its lens cancels)', () => {
    const [found] = profilables([lens(3, 0, 'naive', CANCEL)]);
    assert.equal(found.pending, true);
  });

  it('skips lenses without usable arguments and survives no lenses', () => {
    assert.deepEqual(profilables(null), []);
    assert.deepEqual(
      profilables([{ range: { start: { line: 0, character: 0 } }, command: { title: 't', command: PROFILE, arguments: ['x'] } }]),
      [],
    );
  });
});

describe('profilableAt', () => {
  const candidates = profilables(LENSES);
  const at = (line: number) => profilableAt(candidates, SOURCE, line)?.qualname;

  it('finds the function around the cursor, blank and comment lines included', () => {
    assert.equal(at(3), 'naive');
    assert.equal(at(4), 'naive');
    assert.equal(at(6), 'naive');
    assert.equal(at(7), 'naive');
  });

  it('counts decorator lines as part of the function', () => {
    assert.equal(at(2), 'naive');
  });

  it('prefers the innermost: a method over its class, across a wrapped signature', () => {
    assert.equal(at(10), 'Block.forward');
    assert.equal(at(12), 'Block.forward');
    assert.equal(at(13), 'Block.forward');
    assert.equal(at(15), 'Block');
    assert.equal(at(9), 'Block');
  });

  it('finds nothing in module code', () => {
    assert.equal(at(0), undefined);
    assert.equal(at(1), undefined);
    assert.equal(at(17), undefined);
  });
});
