"""agent/xla/irtext.py on IR texts in the format torch-xla 2.8 prints with XLA_IR_DEBUG=1 (the
texts below are copied from real runs; tests/xla/ runs the real torch-xla)."""

from __future__ import annotations

from trnlens.agent.xla import irtext

BEFORE = """IR {
  %0 = f32[] xla::device_data(), location=step@step.py:12, xla_shape=f32[]
  %1 = f32[4,8]{1,0} xla::device_data(), location=make@step.py:4, xla_shape=f32[4,8]{1,0}
  %2 = f32[4,5]{1,0} xla::select(%1), location=step@step.py:12, xla_shape=f32[4,5]{1,0}
  %3 = f32[4,5]{1,0} aten::mul(%2, %0), scope=aten::mul.1, location=step@step.py:12, xla_shape=f32[4,5]{1,0}
  %4 = f32[4]{0} aten::sum(%3), location=step@step.py:13, xla_shape=f32[4]{0}, ROOT=0
}
"""  # noqa: E501


class Sources(irtext.Sources):
    def __init__(self, names):
        super().__init__(lambda f: True, lambda f: f)
        self._by_name = names


SOURCES = Sources({"step.py": "pkg/step.py"})


def test_nodes_are_read_with_their_shape_without_layout_and_their_line():
    nodes = irtext.parse(BEFORE)
    assert [n.op for n in nodes] == ["xla::device_data"] * 2 + ["xla::select", "aten::mul",
                                                                 "aten::sum"]  # fmt: skip
    assert nodes[3] == irtext.Node("aten::mul", "f32[4,5]", "step.py", 12, "step")


def test_a_changed_shape_is_the_cause_at_the_line_that_made_it():
    after = BEFORE.replace("f32[4,5]", "f32[4,6]")
    found = irtext.cause(irtext.parse(BEFORE), irtext.parse(after), SOURCES)
    assert found["kind"] == "shape" and (found["path"], found["line"]) == ("pkg/step.py", 12)
    assert found["detail"] == "xla::select changed shape: f32[4,5] -> f32[4,6]"


def test_an_input_of_another_shape_and_identical_texts_are_told_apart():
    after = BEFORE.replace("f32[4,8]{1,0} xla::device_data", "f32[2,8]{1,0} xla::device_data")
    found = irtext.cause(irtext.parse(BEFORE), irtext.parse(after), SOURCES)
    assert found["kind"] == "input" and found["line"] == 4
    same = irtext.cause(irtext.parse(BEFORE), irtext.parse(BEFORE), SOURCES)
    assert same["kind"] == "constant" and same["line"] is None


def test_nodes_per_line_leave_out_device_data_and_count_library_nodes_apart():
    library = BEFORE.replace("location=step@step.py:13", "location=forward@linear.py:125")
    counts, elsewhere = irtext.nodes_per_line(irtext.parse(library), SOURCES)
    assert counts == {("pkg/step.py", 12): 2}
    assert elsewhere == 1


def test_a_graph_with_a_node_added_is_compared_as_sets_not_position_by_position():
    """An optimizer's state appearing after its first step adds nodes: comparing position k
    with position k reported a shape change between two unrelated nodes (issue 40)."""
    lines = BEFORE.splitlines()
    added = "  %9 = f32[4,5]{1,0} aten::add(%3, %3), location=step@step.py:13, xla_shape=f32[4,5]"
    after = "\n".join([*lines[:3], added, *lines[3:]])
    found = irtext.cause(irtext.parse(BEFORE), irtext.parse(after), SOURCES)
    assert found["kind"] == "graph" and (found["path"], found["line"]) == ("pkg/step.py", 13)
    assert found["detail"].startswith("the graph changed: 1 node(s) added, 0 gone (5 -> 6 nodes)")
