"""Tasks: KernelBench files unchanged, task dirs with presets, overrides, clear errors, op features."""
from __future__ import annotations

import textwrap

import pytest

from kernelskill.errors import TaskError
from kernelskill.task import Task, parse_value

from helpers import DATA, RELU_TASK, SCALE_TASK, kernelbench_file

BAD = DATA / "bad"


def test_kernelbench_file_loads_unchanged():
    t = Task.load(RELU_TASK)
    mod = t.module()
    x, = t.inputs(mod)
    assert x.shape == (64, 1000) and t.name == "relu_task"
    assert t.tolerance == (1e-4, 1e-4)


def test_overrides_apply_before_get_inputs_and_derived_constants_follow():
    t = Task.load(RELU_TASK, overrides={"batch_size": 3, "dim": parse_value("7")})
    mod = t.module()
    assert t.inputs(mod)[0].shape == (3, 7)
    assert mod.numel == 21          # numel = batch_size * dim is recomputed


def test_expression_override():
    t = Task.load(RELU_TASK, overrides={"dim": parse_value("2 * 5")})
    assert t.inputs(t.module())[0].shape == (64, 10)


def test_a_chained_constant_is_overridden_alone(tmp_path):
    """KernelBench writes ``height = width = 128`` (level2/16 and others): each name is a constant
    --set can change by itself; the other keeps the file's value, and a bad value names the line."""
    path = tmp_path / "chain.py"
    path.write_text(textwrap.dedent("""\
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return x * 2

        batch = 2
        height = width = 5

        def get_inputs():
            return [torch.rand(batch, height, width)]

        def get_init_inputs():
            return []
        """))
    assert Task.load(path).constants == {"batch": 2, "height": 5, "width": 5}
    t = Task.load(path, overrides={"height": 3})
    assert t.inputs(t.module())[0].shape == (2, 3, 5)
    both = Task.load(path, overrides={"height": 3, "width": 4})
    assert both.inputs(both.module())[0].shape == (2, 3, 4)
    bad = Task.load(path, overrides={"width": parse_value("undefined_name")})
    with pytest.raises(TaskError, match=r"chain\.py:9"):
        bad.module()


def test_unknown_override_names_the_constants():
    with pytest.raises(TaskError, match=r"no top-level constant named 'bogus'.*batch_size"):
        Task.load(RELU_TASK, overrides={"bogus": 1})


def _taskdir(tmp_path, toml: str):
    (tmp_path / "reference.py").write_text(RELU_TASK.read_text())
    (tmp_path / "task.toml").write_text(textwrap.dedent(toml))
    return tmp_path


def test_task_dir_with_presets_and_tolerance(tmp_path):
    d = _taskdir(tmp_path, """
        name = "relu2"
        level = 1
        dtype = "float32"
        [tolerance]
        atol = 1e-3
        [presets.small]
        batch_size = 2
        dim = 5
    """)
    t = Task.load(d, preset="small", overrides={"dim": 6})
    assert (t.name, t.level, t.preset) == ("relu2", 1, "small")
    assert t.inputs(t.module())[0].shape == (2, 6)       # --set wins over the preset
    assert t.tolerance == (1e-3, 1e-4)
    with pytest.raises(TaskError, match="unknown preset 'huge'.*small"):
        Task.load(d, preset="huge")


def test_task_toml_errors_name_the_key(tmp_path):
    with pytest.raises(TaskError, match=r"task.toml: unknown key\(s\) colour"):
        Task.load(_taskdir(tmp_path, 'colour = "red"\n'))
    with pytest.raises(TaskError, match="task.toml: invalid TOML"):
        Task.load(_taskdir(tmp_path, 'name = \n'))


@pytest.mark.parametrize("name, pattern", [
    ("syntax.py", r"syntax.py:3:\d+: syntax error"),
    ("no_model.py", r"no_model.py: no `Model` defined"),
    ("raises.py", r"raises.py:7: get_inputs\(\) raised RuntimeError"),
    ("nontensor.py", r"nontensor.py:6: get_inputs\(\) item 1 is a str"),
    ("badinit.py", r"badinit.py:4: Model\(1\) does not fit its constructor"),
])
def test_bad_task_files_name_file_and_line(name, pattern):
    t = None
    with pytest.raises(TaskError, match=pattern):
        t = Task.load(BAD / name)
        mod = t.module()
        t.build_model(mod)
        t.inputs(mod)


def test_a_task_importing_a_missing_package_says_which_and_how_to_get_it(tmp_path):
    # KernelBench's level3 48/49 (Mamba2) import einops at the top of the file.
    f = tmp_path / "48_needs_a_package.py"
    f.write_text("import torch\nimport kernelskill_no_such_package.sub as q\n" + (DATA / "relu_task.py").read_text())
    with pytest.raises(TaskError, match=r"48_needs_a_package.py:2: running the module raised ModuleNotFoundError.*"
                                        r"imports `kernelskill_no_such_package`.*pip install kernelskill_no_such_package"):
        Task.load(f).module()


def test_missing_path():
    with pytest.raises(TaskError, match="no such task"):
        Task.load(DATA / "nope.py")


def _features(tmp_path, forward: str, init: str = "", inputs: str = "[torch.randn(8, 16)]") -> list[str]:
    src = textwrap.dedent(f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init or 'pass'}
            def forward(self, x):
                return {forward}
        def get_inputs():
            return {inputs}
        def get_init_inputs():
            return []
    """)
    p = tmp_path / "t.py"
    p.write_text(src)
    return Task.load(p).summary()["op_classes"]


@pytest.mark.parametrize("forward, init, inputs, expected", [
    ("torch.softmax(x, dim=-1)", "", None, {"softmax"}),
    ("self.lin(x).relu()", "self.lin = nn.Linear(16, 4)", None, {"matmul", "elementwise"}),
    ("x.sum(dim=1)", "", None, {"reduction"}),
    ("F.layer_norm(x, (16,))", "", None, {"norm"}),
    ("torch.cumsum(x, 1)", "", None, {"scan"}),
    ("F.max_pool2d(x, 2)", "", "[torch.randn(2, 3, 8, 8)]", {"pooling"}),
    ("self.conv(x)", "self.conv = nn.Conv2d(3, 4, 3)", "[torch.randn(2, 3, 8, 8)]", {"conv"}),
    ("F.mse_loss(x, x * 0.5)", "", None, {"loss", "elementwise"}),
    ("torch.softmax(x @ x.T, -1) @ x", "", None, {"matmul", "softmax", "attention"}),
])
def test_op_classes(tmp_path, forward, init, inputs, expected):
    got = set(_features(tmp_path, forward, init, inputs or "[torch.randn(8, 16)]"))
    assert expected <= got, got
    if "matmul" not in expected:
        assert "matmul" not in got


def test_summary_of_big_task_is_cheap_on_meta():
    # Default sizes would be 4096×4096 on a real device; the trace runs on meta tensors.
    t = Task.load(RELU_TASK, overrides={"batch_size": 1 << 16, "dim": 1 << 16})
    info = t.summary()
    assert info["inputs"][0]["shape"] == [65536, 65536]
    assert info["bytes"] == 2 * 4 * (1 << 32)


@pytest.mark.parametrize("folder,level", [("level1", 1), ("level2", 2), ("level3", 3), ("level_2", 2),
                                          ("tasks", None)])
def test_level_from_kernelbench_folder(tmp_path, folder, level):
    assert Task.load(kernelbench_file(tmp_path, folder)).level == level


def test_level_of_a_task_dir_from_its_folder_and_task_toml_wins(tmp_path):
    d = tmp_path / "level3" / "scale"
    d.mkdir(parents=True)
    (d / "reference.py").write_text(SCALE_TASK)
    assert Task.load(d).level == 3
    assert Task.load(d / "reference.py").level == 3
    (d / "task.toml").write_text("level = 1\n")
    assert Task.load(d).level == 1


def test_summary_lists_buffers_apart_from_parameters(tmp_path):
    info = Task.load(kernelbench_file(tmp_path)).summary()
    assert info["level"] == 2
    assert info["parameters"] == [{"name": "weight", "shape": [8], "dtype": "float32"}]
    assert info["buffers"] == [{"name": "scale", "shape": [8], "dtype": "float32"}]
