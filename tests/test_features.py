"""Task features (kernelskill/patterns.py): small real modules, traced on the meta device as
``Task.summary()`` does, show what an expert sees; and the ranking uses them."""
from __future__ import annotations

import textwrap

import pytest

from kernelskill.skills import SkillBook, parse_skill
from kernelskill.skills.predicates import task_facts
from kernelskill.task import Task
from kernelskill.errors import UserError

from helpers import skill_toml

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _task(tmp_path, body: str, inputs: str, init: str = "[]"):
    src = HEAD + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n" \
        f"def get_init_inputs():\n    return {init}\n"
    path = tmp_path / "t.py"
    path.write_text(src)
    return Task.load(path).summary()


def _model(forward: str, init: str = "") -> str:
    return ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + textwrap.indent(textwrap.dedent(init), "        ") + "\n"
            + "    def forward(self, *xs):\n" + textwrap.indent(textwrap.dedent(forward), "        "))


CASES = [
    ("lstm", "return self.m(xs[0])[0]", "self.m = nn.LSTM(16, 32, batch_first=True)",
     "[torch.randn(2, 8, 16)]", {"recurrent-layer", "lstm"}, {"recurrent"}),
    ("gru", "return self.m(xs[0])[0]", "self.m = nn.GRU(16, 32)", "[torch.randn(8, 2, 16)]",
     {"recurrent-layer", "gru"}, {"recurrent"}),
    ("rnn-loop", "h = torch.zeros(4, 8)\nfor t in range(6):\n    h = torch.tanh(self.a(xs[0][:, t]) + self.b(h))\nreturn h",
     "self.a = nn.Linear(8, 8)\nself.b = nn.Linear(8, 8)", "[torch.randn(4, 6, 8)]", {"rnn-step-loop"}, {"recurrent"}),
    ("sdpa", "return F.scaled_dot_product_attention(*xs)", "", "[torch.randn(1, 2, 64, 16)] * 3",
     {"sdpa"}, {"attention"}),
    ("sdpa-causal", "return F.scaled_dot_product_attention(*xs, is_causal=True)", "",
     "[torch.randn(1, 2, 64, 16)] * 3", {"sdpa", "causal-mask"}, {"attention"}),
    ("mha", "return self.m(xs[0], xs[0], xs[0], need_weights=False)[0]", "self.m = nn.MultiheadAttention(32, 4)",
     "[torch.randn(10, 2, 32)]", {"multi-head-attention"}, {"attention"}),
    ("chain-causal", "s = xs[0] @ xs[1].transpose(-2, -1)\nm = torch.ones(64, 64, dtype=torch.bool).tril()\n"
     "s = s.masked_fill(~m, float('-inf'))\nreturn torch.softmax(s, -1) @ xs[2]", "",
     "[torch.randn(2, 64, 16)] * 3", {"attention-chain", "causal-mask"}, {"attention"}),
    ("conv3d", "return self.c(xs[0])", "self.c = nn.Conv3d(4, 8, 3)", "[torch.randn(1, 4, 8, 8, 8)]",
     {"conv-3d"}, {"conv"}),
    ("conv1d", "return self.c(xs[0])", "self.c = nn.Conv1d(4, 8, 3)", "[torch.randn(1, 4, 32)]", {"conv-1d"}, {"conv"}),
    ("transposed", "return self.c(xs[0])", "self.c = nn.ConvTranspose2d(4, 8, 4, stride=2)",
     "[torch.randn(1, 4, 8, 8)]", {"conv-2d", "conv-transposed"}, {"conv"}),
    ("depthwise", "return self.c(xs[0])", "self.c = nn.Conv2d(8, 8, 3, groups=8)", "[torch.randn(1, 8, 8, 8)]",
     {"conv-depthwise"}, {"conv"}),
    ("grouped", "return self.c(xs[0])", "self.c = nn.Conv2d(8, 16, 3, groups=2)", "[torch.randn(1, 8, 8, 8)]",
     {"conv-grouped"}, {"conv"}),
    ("pointwise", "return self.c(xs[0])", "self.c = nn.Conv2d(8, 16, 1)", "[torch.randn(1, 8, 8, 8)]",
     {"conv-pointwise"}, {"conv"}),
    ("conv-bn-eval", "return F.batch_norm(self.c(xs[0]), self.m, self.v, training=False)",
     "self.c = nn.Conv2d(4, 8, 3)\nself.register_buffer('m', torch.zeros(8))\nself.register_buffer('v', torch.ones(8))",
     "[torch.randn(1, 4, 8, 8)]", {"conv-bn-eval", "norm-batch"}, {"conv", "norm"}),
    ("global-avg", "return self.p(xs[0])", "self.p = nn.AdaptiveAvgPool2d(1)", "[torch.randn(2, 8, 7, 7)]",
     {"pool-avg", "pool-global-avg"}, {"pooling"}),
    ("maxpool", "return F.max_pool2d(xs[0], 2)", "", "[torch.randn(2, 8, 8, 8)]", {"pool-max"}, {"pooling"}),
    ("batchnorm-train", "return self.n(xs[0])", "self.n = nn.BatchNorm2d(8)", "[torch.randn(2, 8, 4, 4)]",
     {"norm-batch", "norm-batch-train"}, {"norm"}),
    ("groupnorm", "return self.n(xs[0])", "self.n = nn.GroupNorm(2, 8)", "[torch.randn(2, 8, 4, 4)]",
     {"norm-group"}, {"norm"}),
    ("instancenorm", "return self.n(xs[0])", "self.n = nn.InstanceNorm2d(8)", "[torch.randn(2, 8, 4, 4)]",
     {"norm-instance"}, {"norm"}),
    ("layernorm", "return self.n(xs[0])", "self.n = nn.LayerNorm(16)", "[torch.randn(4, 16)]", {"norm-layer"}, {"norm"}),
    ("rms-by-hand", "return xs[0] * torch.rsqrt(xs[0].pow(2).mean(-1, keepdim=True) + 1e-6)", "",
     "[torch.randn(4, 64)]", {"norm-rms"}, {"norm"}),
    ("residual-rms", "h = xs[0] + xs[1]\nreturn h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-6)", "",
     "[torch.randn(4, 64)] * 2", {"norm-rms", "residual-norm"}, {"norm"}),
    ("scan-reverse", "return torch.cumsum(xs[0].flip(1), 1).flip(1)", "", "[torch.randn(4, 64)]",
     {"scan-reverse", "flip"}, {"scan"}),
    ("masked-scan", "return torch.cumsum(xs[0] * xs[1], 1)", "", "[torch.randn(4, 64)] * 2", {"scan-producer"}, {"scan"}),
    ("mse-module", "return self.l(xs[0], xs[1])", "self.l = nn.MSELoss()", "[torch.randn(4, 64)] * 2",
     {"loss-mse"}, {"loss"}),
    ("mse-by-hand", "return torch.mean((xs[0] - xs[1]) ** 2)", "", "[torch.randn(4, 64)] * 2",
     {"loss-mse", "reduction-global"}, {"loss"}),
    ("kl", "return F.kl_div(torch.log(xs[0]), xs[1], reduction='batchmean')", "",
     "[torch.rand(4, 64) + 0.1] * 2", {"loss-kl"}, {"loss"}),
    ("hinge-by-hand", "return torch.mean(torch.clamp(1 - xs[0] * xs[1], min=0))", "", "[torch.randn(4, 64)] * 2",
     {"loss-hinge"}, {"loss"}),
    ("triplet", "return self.l(*xs)", "self.l = nn.TripletMarginLoss()", "[torch.randn(4, 64)] * 3",
     {"loss-triplet"}, {"loss"}),
    ("cross-entropy", "return F.cross_entropy(xs[0], xs[1])", "", "[torch.randn(8, 10), torch.randint(0, 10, (8,))]",
     {"loss-cross-entropy"}, {"loss"}),
    ("bmm", "return torch.bmm(*xs)", "", "[torch.randn(4, 32, 16), torch.randn(4, 16, 32)]", {"gemm-batched"}, {"matmul"}),
    ("gemv", "return xs[0] @ xs[1]", "", "[torch.randn(256, 512), torch.randn(512)]", {"gemv"}, {"matmul"}),
    ("long-k", "return xs[0].t() @ xs[0]", "", "[torch.randn(8192, 16)]", {"gemm-long-k"}, {"matmul"}),
    ("tall-skinny", "return xs[0] @ xs[1]", "", "[torch.randn(2048, 16), torch.randn(16, 1024)]",
     {"gemm-tall-skinny", "gemm-short-k"}, {"matmul"}),
    ("diagonal", "return xs[0] @ torch.diag(xs[1])", "", "[torch.randn(64, 64), torch.randn(64)]",
     {"diagonal"}, {"matmul"}),
    ("triangular", "return torch.triu(xs[0]) @ torch.triu(xs[1])", "", "[torch.randn(64, 64)] * 2",
     {"triangular"}, {"matmul"}),
    ("reductions", "return xs[0].sum(-1).sum(-1) + xs[0].mean(1).sum(-1)", "", "[torch.randn(4, 64, 32)]",
     {"reduction-last-axis", "reduction-strided"}, {"reduction"}),
    ("half", "return xs[0] * 2 + 1", "", "[torch.randn(64, 64, dtype=torch.float16)]",
     {"dtype-float16", "low-precision-ok"}, {"elementwise"}),
]


@pytest.mark.parametrize("name,forward,init,inputs,features,classes", CASES, ids=[c[0] for c in CASES])
def test_feature(tmp_path, name, forward, init, inputs, features, classes):
    info = _task(tmp_path, _model(forward, init), inputs)
    assert features <= set(info["features"]), info["features"]
    assert classes <= set(info["op_classes"]), info["op_classes"]


def test_plain_matmul_has_no_structure(tmp_path):
    info = _task(tmp_path, _model("return xs[0] @ xs[1]"), "[torch.randn(512, 512)] * 2")
    assert "gemm-large" in info["features"]
    assert not {"diagonal", "triangular", "causal-mask", "gemv"} & set(info["features"])
    assert info["structure"]["gemms"] == [{"op": "mm", "batch": 1, "m": 512, "n": 512, "k": 512}]


def test_structure_names_reduction_axes_and_convolutions(tmp_path):
    info = _task(tmp_path, _model("return self.c(xs[0]).mean(1)", "self.c = nn.Conv2d(8, 8, 3, groups=8)"),
                 "[torch.randn(2, 8, 10, 10)]")
    (conv,) = info["structure"]["convolutions"]
    assert (conv["dims"], conv["groups"], conv["kernel"], conv["transposed"]) == (2, 8, [3, 3], False)
    assert {"op": "mean", "shape": [2, 8, 8, 8], "dims": [1], "size": 8, "last_axis": False,
            "all": False} in info["structure"]["reductions"]


@pytest.mark.parametrize("init, forward, inputs, where", [
    # A size read from a tensor in __init__ (level3/29_SwinMLP: Tensor.item() on meta tensors).
    ("n = int(torch.tensor([3.0]).sum().item())\nself.l = nn.Linear(8, 8 * n)", "return self.l(xs[0]).relu()",
     "[torch.randn(4, 8)]", "building the model or its inputs"),
    # A shape that depends on the data: boolean-mask indexing (nonzero has no meta kernel).
    ("", "return xs[0][xs[0] > 0].sum(0, keepdim=True)", "[torch.randn(64, 32)]", "the forward"),
    # get_inputs() itself reads a value out of a tensor.
    ("", "return xs[0].softmax(-1)", "[torch.randn(4, int(torch.tensor(8.0).item()))]",
     "building the model or its inputs"),
])
def test_a_reference_the_meta_device_cannot_run_is_traced_on_the_cpu_and_says_so(tmp_path, init, forward,
                                                                                 inputs, where):
    info = _task(tmp_path, _model(forward, init), inputs)
    assert info["traced_on"] == "cpu", info
    assert info["meta_failure"].startswith(where + " failed on the meta device"), info["meta_failure"]
    assert info["op_classes"] and info["outputs"] and info["bytes"] > 0
    plain = _task(tmp_path, _model("return xs[0].relu()"), "[torch.randn(4, 8)]")
    assert plain["traced_on"] == "meta" and "meta_failure" not in plain


def test_task_show_names_where_the_facts_came_from(tmp_path, capsys):
    from kernelskill.cli import main
    _task(tmp_path, _model("return self.l(xs[0])", "n = int(torch.tensor([2.0]).item())\nself.l = nn.Linear(8, n)"),
          "[torch.randn(4, 8)]")
    assert main(["task", "show", str(tmp_path / "t.py")]) == 0
    out = capsys.readouterr().out
    assert "traced on the CPU" in out and "meta device" in out, out


def test_task_show_prints_features(tmp_path, capsys):
    from kernelskill.cli import main
    _task(tmp_path, _model("return self.m(xs[0])[0]", "self.m = nn.LSTM(16, 32)"), "[torch.randn(8, 2, 16)]")
    assert main(["task", "show", str(tmp_path / "t.py")]) == 0
    out = capsys.readouterr().out
    assert "features: " in out and "lstm" in out and "modules: " in out and "LSTM" in out


# ---------------------------------------------------------------- ranking

def _top(tmp_path, body, inputs, backend="cuda", k=5, init="[]"):
    info = _task(tmp_path, body, inputs, init)
    book = SkillBook.load([__import__("kernelskill.skills", fromlist=["x"]).shipped_dir()],
                          stats_path=tmp_path / "stats.toml")
    # As the product looks skills up (skills search --task, MCP lookup_skills, the agents): with the
    # task's facts, which decide the skills' preconditions.
    ids = [s.id for s in book.find(info["op_classes"] + info["features"], backend=backend, facts=task_facts(info))]
    return ids[:k], ids


def test_diagonal_shortcut_only_for_a_diagonal_matmul(tmp_path):
    _, plain = _top(tmp_path, _model("return xs[0] @ xs[1]"), "[torch.randn(512, 512)] * 2")
    assert "diagonal-matrix-shortcut" not in plain and "triangular-loop-bounds" not in plain
    top, _ = _top(tmp_path, _model("return xs[0] @ torch.diag(xs[1])"), "[torch.randn(512, 512), torch.randn(512)]")
    assert top[0] == "diagonal-matrix-shortcut"


def test_generic_skills_rank_below_matching_specific_ones(tmp_path):
    top, ranking = _top(tmp_path, _model("return xs[0] @ xs[1]"), "[torch.randn(512, 512)] * 2")
    assert {"shared-memory-tiling", "register-tiling"} <= set(top)
    assert ranking.index("algebraic-simplification") > 5


def test_implicit_gemm_conv_for_conv3d(tmp_path):
    top, _ = _top(tmp_path, _model("return self.c(xs[0])", "self.c = nn.Conv3d(4, 8, 3)"), "[torch.randn(1, 4, 8, 8, 8)]")
    assert "implicit-gemm-conv" in top


def test_flash_attention_for_sdpa_on_cuda(tmp_path):
    top, _ = _top(tmp_path, _model("return F.scaled_dot_product_attention(*xs)"), "[torch.randn(1, 2, 64, 16)] * 3")
    assert "flash-attention-tiling" in top


def test_rnn_hoist_for_lstm(tmp_path):
    for backend in ("cuda", "cpp"):
        top, _ = _top(tmp_path, _model("return self.m(xs[0])[0]", "self.m = nn.LSTM(16, 32)"),
                      "[torch.randn(8, 2, 16)]", backend)
        assert "rnn-hoist-input-projection" in top


def test_welford_for_groupnorm_and_scan_for_masked_cumsum(tmp_path):
    top, _ = _top(tmp_path, _model("return self.n(xs[0])", "self.n = nn.GroupNorm(2, 8)"), "[torch.randn(2, 8, 4, 4)]")
    assert "welford-variance" in top
    top, _ = _top(tmp_path, _model("return torch.cumsum(xs[0] * xs[1], 1)"), "[torch.randn(4, 64)] * 2")
    assert "warp-scan-prefix-sum" in top


SKILL = skill_toml("x", '["matmul"]', '"*"')


def test_requires_and_features_are_validated():
    skill = parse_skill(SKILL + 'requires = ["diagonal"]\nfeatures = ["gemm-large"]\n')
    assert (skill.requires, skill.features) == (["diagonal"], ["gemm-large"])
    with pytest.raises(UserError, match="key 'requires': 'diagonl' is not one of"):
        parse_skill(SKILL + 'requires = ["diagonl"]\n', "x.toml")
    with pytest.raises(UserError, match="key 'features'"):
        parse_skill(SKILL + 'features = "gemm-large"\n', "x.toml")
    with pytest.raises(UserError, match="already in 'requires'"):
        parse_skill(SKILL + 'requires = ["gemv"]\nfeatures = ["gemv"]\n', "x.toml")


def test_validate_command_checks_the_new_keys(tmp_path, capsys):
    from kernelskill.cli import main
    (tmp_path / "x.toml").write_text(SKILL + 'requires = ["no-such-feature"]\n')
    assert main(["skills", "validate", str(tmp_path)]) == 1
    assert "requires" in capsys.readouterr().err


def test_requires_gates_only_when_the_structure_is_known():
    book = SkillBook([parse_skill(SKILL + 'requires = ["diagonal"]\n')])
    assert [s.id for s in book.gate(["matmul"])] == ["x"]              # op classes only: structure unknown
    assert book.gate(["matmul", "gemm-large"]) == []
    assert [s.id for s in book.gate(["matmul", "diagonal"])] == ["x"]


def test_consumers_are_indexed_once_not_scanned_per_op(tmp_path):
    """A recurrent network unrolls to tens of thousands of ops on meta tensors (KernelBench's
    level3/35_LSTM: 46,105); consumers() scanned every later op per call, so pattern detection
    was quadratic (225 s of 252 s for that task, and the bench's reference job never finished).
    Checked by counting: the readers of every op take one pass over the graph, and they are the
    same as the scan's."""
    from kernelskill.features import trace
    src = HEAD + textwrap.dedent(_model("return self.m(xs[0])[0]", "self.m = nn.LSTM(8, 8, num_layers=2)")) \
        + "\n\ndef get_inputs():\n    return [torch.randn(40, 2, 8)]\n\ndef get_init_inputs():\n    return []\n"
    (tmp_path / "t.py").write_text(src)
    graph_holder = {}
    import kernelskill.patterns as patterns
    detect = patterns.detect
    try:
        patterns.detect = lambda g, tol: graph_holder.setdefault("g", g) and detect(g, tol)
        trace(Task.load(tmp_path / "t.py"), fallback=False)
    finally:
        patterns.detect = detect
    g = graph_holder["g"]
    n = len(g.ops)
    assert n > 1000                                   # unrolled: 40 steps × 2 layers
    calls = {"inputs_of": 0}
    inputs_of = g.inputs_of

    def counted(i):
        calls["inputs_of"] += 1
        return inputs_of(i)
    g.inputs_of = counted
    g._readers_of = -1
    readers = [g.consumers(i) for i in range(n)]
    assert calls["inputs_of"] == n                    # one pass, not one per op (n * n / 2 before)
    g.inputs_of = inputs_of
    for i in range(0, n, 97):
        assert readers[i] == [j for j in range(i + 1, n) if i in g.inputs_of(j)]
    assert any(readers)
