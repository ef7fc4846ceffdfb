"""The engine: broken input never crashes it, chunked re-analysis equals a fresh one, no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

from trnlens.analysis import analyse_path, analyse_source

RMS = "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)\n"


def test_syntax_error_is_reported_and_the_rest_still_analysed() -> None:
    source = "import torch\n\ndef broken(:\n    pass\n\ndef f(x):\n" + RMS
    found = analyse_source(source, "m.py")
    codes = [(f.code, f.location.row) for f in found]
    assert ("TRN000", 3) in codes
    assert ("TRN001", 7) in codes
    error = next(f for f in found if f.code == "TRN000")
    assert error.severity == "error" and "syntax error" in error.message


def test_syntax_error_inside_a_class_keeps_other_classes() -> None:
    source = "import torch\n\nclass A:\n    def f(self, x)\n        return x\n\nclass B:\n"
    source += "    def g(self, x):\n    " + RMS
    found = analyse_source(source, "m.py")
    assert [f.code for f in found] == ["TRN000", "TRN001"]
    assert found[1].qualname == "B.g"


def test_column_zero_lines_in_a_docstring_do_not_break_chunking() -> None:
    source = 'import torch\n\ndef f(x):\n    """Doc.\n\nUsage: f(x)\nreturn 1\n"""\n' + RMS
    found = analyse_source(source, "m.py")
    assert [(f.code, f.location.row) for f in found] == [("TRN001", 9)]


def test_long_class_split_into_members_gives_the_same_findings(monkeypatch) -> None:
    methods = "".join(f"    def m{i}(self, x):\n        return x + {i}\n\n" for i in range(30))
    source = (
        "import torch\n\nclass Big:\n"
        + methods
        + "    def norm(self, x):\n    "
        + RMS
        + methods.replace("def m", "def n")
    )
    found = analyse_source(source, "m.py")
    assert [(f.qualname, f.location.row) for f in found] == [("Big.norm", 95)]
    assert found[0].variant_source is not None
    assert found[0].variant_source.startswith("def norm(self, x):\n    return torch.rms_norm(")
    from trnlens.analysis import engine

    monkeypatch.setattr(engine, "CLASS_SPLIT_LINES", 10**9)
    monkeypatch.setattr(engine, "_ANALYSED", engine._LRU(10))
    unsplit = analyse_source(source, "m.py")
    assert [f.to_json() for f in unsplit] == [f.to_json() for f in found]


def test_reanalysis_after_edits_matches_a_fresh_analysis(monkeypatch) -> None:
    base = "import torch\n\n" + "".join(
        f"def f{i}(x):\n    y = x + {i}\n" + RMS.replace("x", "y") + "\n" for i in range(20)
    )
    first = analyse_source(base, "m.py")
    edited = base.replace("y = x + 3\n", "y = x + 3\n    z = 1\n\n\n")
    again = analyse_source(edited, "m.py")
    assert len(first) == len(again) == 20
    shifted = [f.location.row for f in again]
    assert shifted[:3] == [f.location.row for f in first][:3]
    assert shifted[3:] == [f.location.row + 3 for f in first][3:]
    from trnlens.analysis import engine

    for cache in ("_ANALYSED", "_PARSED", "_PARSES", "_FACTS"):  # cold caches: same answer
        monkeypatch.setattr(engine, cache, engine._LRU(10))
    fresh = analyse_source(edited, "m.py")
    assert [f.to_json() for f in fresh] == [f.to_json() for f in again]


def test_a_chunk_seen_before_is_not_parsed_again(monkeypatch) -> None:
    """What is known of a chunk (it parses, its findings) outlives its AST: after an edit only
    the edited function and the imports (read for the module's facts) are parsed again."""
    from trnlens.analysis import engine

    for cache in ("_ANALYSED", "_PARSED", "_PARSES", "_FACTS"):
        monkeypatch.setattr(engine, cache, engine._LRU(1000))
    base = "import torch\n\n" + "".join(
        f"def f{i}(x):\n    y = x + {i}\n" + RMS.replace("x", "y") + "\n" for i in range(20)
    )
    analyse_source(base, "m.py")
    monkeypatch.setattr(engine, "_PARSED", engine._LRU(1000))  # every AST forgotten
    parsed: list[str] = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda text: parsed.append(text) or real_parse(text))
    edited = base.replace("y = x + 3\n", "y = x + 33\n")
    again = analyse_source(edited, "m.py")
    edited_function = "def f3(x):\n    y = x + 33\n" + RMS.replace("x", "y") + "\n"
    assert sorted(parsed) == [edited_function, "import torch\n\n"]
    for cache in ("_ANALYSED", "_PARSED", "_PARSES", "_FACTS"):
        monkeypatch.setattr(engine, cache, engine._LRU(10))
    assert [f.to_json() for f in analyse_source(edited, "m.py")] == [f.to_json() for f in again]


def test_the_engine_keeps_at_most_about_a_thousand_chunks_asts(monkeypatch) -> None:
    """A long-running language server must not hold the AST of every file it has read: Python's
    full collections walk all of them while requests wait (engine._PARSED). After 3,000 files,
    the AST nodes still alive are those of at most about a thousand chunks."""
    import ast
    import gc

    from trnlens.analysis import engine

    for cache in ("_ANALYSED", "_PARSES", "_FACTS"):
        monkeypatch.setattr(engine, cache, engine._LRU(65536))
    monkeypatch.setattr(engine, "_PARSED", engine._LRU(engine._PARSED._size))
    source = "import torch\n\n\ndef f(x):\n    y = x + {i}\n" + RMS.replace("x", "y")
    per_chunk = sum(1 for _ in ast.walk(ast.parse(source.format(i=0)))) - 1  # less the Module
    before = sum(1 for o in gc.get_objects() if issubclass(type(o), ast.AST))
    for i in range(3000):
        analyse_source(source.format(i=i), f"m{i}.py")
    kept = sum(1 for o in gc.get_objects() if issubclass(type(o), ast.AST)) - before
    assert kept <= 1100 * per_chunk


def test_a_batch_keeps_no_ast_past_its_file(monkeypatch) -> None:
    """``trnlens check`` frees each file's ASTs with the file (engine.asts_freed_per_file), and
    the language server's cache size is back afterwards."""
    import gc

    from trnlens.analysis import engine

    for cache in ("_ANALYSED", "_PARSES", "_FACTS"):
        monkeypatch.setattr(engine, cache, engine._LRU(65536))
    monkeypatch.setattr(engine, "_PARSED", engine._LRU(1024))
    source = "import torch\n\n\ndef f(x):\n    y = x + {i}\n" + RMS.replace("x", "y")
    before = sum(1 for o in gc.get_objects() if issubclass(type(o), ast.AST))
    with engine.asts_freed_per_file():
        for i in range(50):
            assert [f.code for f in analyse_source(source.format(i=i), f"m{i}.py")] == ["TRN001"]
        kept = sum(1 for o in gc.get_objects() if issubclass(type(o), ast.AST)) - before
    assert kept <= 0
    assert engine._PARSED._size == 1024
    analyse_source(source.format(i=50), "m50.py")  # kept again, as the language server wants
    assert sum(1 for o in gc.get_objects() if issubclass(type(o), ast.AST)) > before


def test_the_word_test_skips_only_functions_no_rule_would_run_on() -> None:
    """``_may_trigger`` looks at text, rules at names: the text test must never say no where a
    rule's triggers are among the function's names and the function is in the rule's scope (a
    loop in a module importing torch, a compiled function; it may say yes more often), except
    for the rules that give narrower text triggers (``.any(``): there it must never say no where
    the rule would find something. The same holds of the test on a whole chunk of definitions."""
    from pathlib import Path

    from trnlens.analysis import engine
    from trnlens.analysis.compile_decorators import is_compiled
    from trnlens.analysis.rules import ALL_RULES
    from trnlens.analysis.rules.base import COMPILED_SCOPE, LOOP_SCOPE, XLA_SCOPE

    def in_scope(rule: object, ctx: engine.Context) -> bool:
        scope = getattr(rule, "scope", None)
        if scope == LOOP_SCOPE:
            loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp)
            has_loop = any(isinstance(n, (*loops, ast.GeneratorExp)) for n in ctx.nodes)
            return ctx.info.imports_torch and has_loop
        if scope == COMPILED_SCOPE:
            return ctx.func is not None and is_compiled(ctx.func)
        if scope == XLA_SCOPE:
            return ctx.info.imports_xla
        return True

    crafted = textwrap.dedent('''
        import torch


        def moves(x, d):
            """Moves to the device; the mean of it."""
            return x.to(d)


        def prose_only(x):
            """Moves x to the device and takes the mean, the exp, the softmax."""
            return x + 1


        def one_line(x, d): "doc"; return x.mean(d)


        def into(x):
            into_ = x.tolistish()
            return into_


        def log_prose(x):
            # on a log scale
            return x + 1


        def tensor_any(model, xs):
            for x in xs:
                if model(x).any():
                    return x


        def moves_in_a_loop(xs, d):
            return [x.to(d) for x in xs]


        @torch.compile
        def compiled_prints(x):
            print(x)
            return x
    ''')
    # The XLA rules' words ("item", "where") are everywhere; their scope is a module that
    # imports torch-xla: the same function is walked there and not in ``crafted``.
    reads = "\n\ndef reads_on_host(x):\n    return x.item()\n"
    crafted += reads
    on_xla = "import torch\nimport torch_xla.core.xla_model as xm\n" + reads.replace("host", "xla")
    sources = [crafted, on_xla] + [p.read_text() for p in Path("samples").glob("*.py")]
    said: dict[str, bool] = {}
    for text in sources:
        chunks, _ = engine._chunks(text)
        info, _ = engine._module_facts(chunks)
        for chunk in chunks:
            src = engine.SourceText(chunk.text)
            chunk_may = not engine._only_definitions(chunk.body) or engine._text_may_trigger(
                chunk.text, info, compiled=None
            )
            for ctx in engine._contexts(src, info, chunk.body):
                may = engine._may_trigger(ctx)
                by_name = [r for r in ALL_RULES if not getattr(r, "text_triggers", None)]
                triggered = any(
                    not rule.triggers.isdisjoint(ctx.names) and in_scope(rule, ctx)
                    for rule in by_name
                )
                assert may or not triggered, (ctx.qualname, sorted(ctx.names))
                assert chunk_may or not triggered, (ctx.qualname, sorted(ctx.names))
                if not (may and chunk_may):
                    found = [m for rule in ALL_RULES for m in rule.check(ctx)]
                    assert not found, (ctx.qualname, [m.code for m in found])
                said[ctx.qualname or ""] = may
    assert said["one_line"] and said["tensor_any"]
    assert said["moves_in_a_loop"] and said["compiled_prints"] and said["reads_on_xla"]
    assert not said["reads_on_host"]  # no loop, not compiled, no torch-xla
    # "to" and "mean" are sync and fused-op words, but no loop is there for a sync rule.
    assert not said["moves"]
    assert not said["prose_only"] and not said["into"] and not said["log_prose"]


def test_non_utf8_bytes_are_reported_and_analysed(tmp_path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"import torch\n# caf\xe9\ndef f(x):\n" + RMS.encode())
    found = analyse_path(path)
    assert [f.code for f in found] == ["TRN000", "TRN001"]
    assert "invalid utf-8 byte 0xe9 on line 2" in found[0].message


def test_declared_encoding_is_honoured(tmp_path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\ndef f(x):\n" + RMS.encode()
    )
    assert [f.code for f in analyse_path(path)] == ["TRN001"]


def test_null_bytes_deep_nesting_and_missing_files_do_not_crash(tmp_path) -> None:
    assert analyse_source("x = 1\x00\n", "m.py")[0].code == "TRN000"
    deep = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"
    assert analyse_source(deep, "m.py")[0].code == "TRN000"
    long_chain = "def f(x):\n    return " + " + ".join(["x"] * 20000) + "\n"
    assert [f.code for f in analyse_source(long_chain, "m.py")] in ([], ["TRN000"])
    assert analyse_path(tmp_path / "missing.py")[0].code == "TRN000"


def test_huge_file_is_reported_not_parsed(monkeypatch) -> None:
    from trnlens.analysis import engine

    monkeypatch.setattr(engine, "MAX_CHARS", 1000)
    (finding,) = analyse_source("x = 1\n" * 500, "m.py")
    assert finding.code == "TRN000" and "too large" in finding.message


def test_importing_and_analysing_never_loads_torch(tmp_path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import torch\n\ndef f(x):\n" + RMS)
    script = textwrap.dedent(
        f"""
        import sys
        from trnlens.analysis import analyse_path, analyse_source
        found = analyse_path({str(path)!r})
        assert [f.code for f in found] == ["TRN001"], found
        import trnlens.cli.check
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_nested_functions_get_python_qualnames() -> None:
    source = (
        "import torch\n\nclass A:\n    def outer(self):\n        def inner(x):\n    "
        + RMS.replace("    return", "        return")
    )
    (finding,) = analyse_source(source, "m.py")
    assert finding.qualname == "A.outer.<locals>.inner"


def test_compiled_functions_are_not_flagged_as_unfused():
    from trnlens.analysis import analyse_source

    text = (
        "import torch\n\n\n"
        "@torch.compile\n"
        "def compiled(x, w, eps=1e-6):\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w\n\n\n"
        "@torch.compile(mode='max-autotune')\n"
        "def tuned(x, w, eps=1e-6):\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w\n\n\n"
        "def eager(x, w, eps=1e-6):\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w\n"
    )
    found = [(f.code, f.qualname) for f in analyse_source(text, "m.py")]
    assert found == [("TRN001", "eager")]
