"""The rule registry: each rule on hand cases (pass, fail, exact message), vectorised = scalar, framework sets."""

from __future__ import annotations

import numpy as np
import pytest

from planner.constraints.check import partition_problems
from planner.constraints.costs import StageCosts
from planner.constraints.space import build_space
from planner.costmodel.candidates import RECOMPUTE_CODE
from planner.launch.pipeline_layout import pipeline_layout
from planner.layout import Layout
from planner.presets import get_preset
from planner.rules import (
    CORE,
    LAYOUT_AXES,
    RULE_SETS,
    STAGE_SPLIT,
    Job,
    Rule,
    interleave_breaks,
    interleave_problem,
    rule_set,
)
from planner.rules.core import chunks_uneven, rank_chunks
from planner.specs import (
    AdamMoments,
    Fp8Recipe,
    GradientLayout,
    MLASpec,
    ModelSpec,
    MoESpec,
    Precision,
    Recompute,
    RuntimeFeatures,
    TrainingSpec,
)
from planner.validate import layout_violations

BASE = {"num_layers": 8, "hidden_size": 64, "num_attention_heads": 8, "num_query_groups": 4, "ffn_hidden_size": 256}
DENSE = ModelSpec(**BASE, vocab_size=1000, seq_length=16)
MOE = ModelSpec(**BASE, vocab_size=1000, seq_length=16, moe=MoESpec(num_experts=6, top_k=2, expert_ffn_hidden_size=100))
# DeepSeek-V3's shape: the launch modules map it to TorchTitan's deepseek_v3 671B flavor (flex attention).
DSV3 = ModelSpec(
    num_layers=61,
    hidden_size=7168,
    num_attention_heads=128,
    num_query_groups=128,
    ffn_hidden_size=18432,
    vocab_size=129280,
    seq_length=4096,
    moe=MoESpec(num_experts=256, top_k=8, expert_ffn_hidden_size=2048),
    mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128),
)


def job(
    model: ModelSpec = DENSE, gbs: int = 16, gpus: int = 8, precision: Precision = Precision.BF16, offload: int = 0
) -> Job:
    return Job(model, TrainingSpec(global_batch_size=gbs, precision=precision, activation_offload_layers=offload), gpus)


def moe_job(**runtime: object) -> Job:
    """MOE on 8 GPUs with these `RuntimeFeatures`."""
    return Job(MOE, TrainingSpec(global_batch_size=16, runtime=RuntimeFeatures(**runtime)), 8)


# (rule, job, a layout it keeps, a layout it removes, the removed layout's messages)
CASES = [
    ("positive_sizes", job(), Layout(tp=2, pp=2, dp=2), Layout(tp=2, pp=2, dp=2, vp=0), ["vp(0) must be >= 1"]),
    (
        "world_size",
        job(),
        Layout(tp=2, pp=2, dp=2),
        Layout(tp=2, pp=2, dp=1),
        ["tp(2) * pp(2) * dp(1) * cp(1) = 4 != num_gpus(8)"],
    ),
    (
        "tensor_split",
        job(ModelSpec(**(BASE | {"ffn_hidden_size": 100}), vocab_size=1000, seq_length=16)),
        Layout(tp=4, pp=1, dp=2),
        Layout(tp=8, pp=1, dp=1),
        ["ffn_hidden_size(100) % tp(8) = 4, must be 0"],
    ),
    (
        "batch_divisible",
        job(gbs=12),
        Layout(tp=1, pp=2, dp=4, micro_batch_size=3),
        Layout(tp=1, pp=2, dp=4, micro_batch_size=2),
        ["global_batch_size(12) % (micro_batch_size(2) * dp(4)) = 4, must be 0"],
    ),
    (
        "context_split",
        job(gpus=3),
        Layout(tp=1, pp=1, dp=1, cp=1),
        Layout(tp=1, pp=1, dp=1, cp=3),
        ["seq_length(16) % (2 * cp(3)) = 4, must be 0"],
    ),
    (
        "expert_split",
        job(MOE),
        Layout(tp=1, pp=1, dp=8, ep=2),
        Layout(tp=1, pp=1, dp=8, ep=3),
        ["(tp(1) * cp(1) * dp(8)) % (etp(1) * ep(3)) = 2, must be 0"],
    ),
    (
        # MoE parallel folding: ep may take tp ranks once etp leaves them (Megatron-Core: world % (etp ep pp)).
        "expert_split",
        job(MOE),
        Layout(tp=2, pp=4, dp=1, ep=2, etp=1),
        Layout(tp=2, pp=1, dp=4, ep=3, etp=4),
        ["(tp(2) * cp(1) * dp(4)) % (etp(4) * ep(3)) = 8, must be 0"],
    ),
    (
        "stage_split",
        job(),
        Layout(tp=1, pp=2, dp=4, vp=2),
        Layout(tp=1, pp=2, dp=4, vp=3),
        ["num_layers(8) % (pp(2) * vp(3)) = 2, must be 0 to interleave"],
    ),
    (
        "interleave_microbatches",
        job(gbs=12),
        Layout(tp=2, pp=2, dp=2, vp=2, micro_batch_size=3),
        Layout(tp=2, pp=2, dp=2, vp=2, micro_batch_size=2),
        ["interleaving needs num_microbatches(3) % pp(2) = 0, got 1 (Megatron-LM schedule)"],
    ),
    (
        "sequence_parallel_needs_tp",
        job(),
        Layout(tp=2, pp=2, dp=2, sequence_parallel=True),
        Layout(tp=1, pp=4, dp=2, sequence_parallel=True),
        ["sequence_parallel needs tp > 1"],
    ),
]


@pytest.mark.parametrize(("name", "j", "kept", "removed", "messages"), CASES, ids=[c[0] for c in CASES])
def test_core_rule_keeps_one_and_removes_one(
    name: str, j: Job, kept: Layout, removed: Layout, messages: list[str]
) -> None:
    rule = CORE[name]
    assert rule.explain(kept, j) == [] and rule.holds(kept, j)
    assert rule.explain(removed, j) == messages
    # Only this rule fires on the removed layout, with the same message, through validate.
    violations = layout_violations(removed, j.model, j.training, j.num_gpus)
    assert [(v.rule, v.message) for v in violations] == [(name, m) for m in messages]


def test_core_set_is_todays_rules_in_order() -> None:
    assert CORE.names == (
        "positive_sizes",
        "world_size",
        "tensor_split",
        "mamba_split",
        "batch_divisible",
        "context_split",
        "hybrid_context_parallel",
        "expert_split",
        "stage_split",
        "interleave_microbatches",
        "sequence_parallel_needs_tp",
        "activation_offload",
        "recompute_modules",
        "moe_a2a_overlap",
        "mamba_fp8_width",
        "bf16_end_layers",
    )


def test_every_rule_is_named_once_and_cites_a_source() -> None:
    rules = {rule.name: rule for s in RULE_SETS.values() for rule in s.rules}
    for s in RULE_SETS.values():
        assert len(set(s.names)) == len(s.names)
    for rule in rules.values():
        assert len(rule.source) > 40 and set(rule.axes) <= set(LAYOUT_AXES), rule.name
    assert len({id(r) for r in rules.values()}) == len(rules)


_SPLIT_FLAGS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


_BY_CODE = {code: mode for mode, code in RECOMPUTE_CODE.items()}


def _random_layouts(rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
    return {
        "tp": rng.choice([1, 2, 3, 4, 8], count),
        "pp": rng.choice([1, 2, 3, 4, 8, 16], count),
        "dp": rng.choice([1, 2, 3, 4, 6, 8], count),
        "cp": rng.choice([1, 2, 3, 4], count),
        "ep": rng.choice([1, 2, 3, 4], count),
        "etp": rng.choice([1, 2, 3, 4, 8], count),
        "vp": rng.choice([1, 2, 3, 4], count),
        "micro_batch_size": rng.choice([1, 2, 3, 4], count),
        "recompute": rng.integers(0, 3, count),
        "sequence_parallel": rng.integers(0, 2, count),
        "zero_stage": rng.integers(0, 4, count),
        "account_for_embedding_in_pipeline_split": rng.integers(0, 2, count),
        "account_for_loss_in_pipeline_split": rng.integers(0, 2, count),
    }


@pytest.mark.parametrize("framework", sorted(RULE_SETS))
@pytest.mark.parametrize("model", [DENSE, MOE, DSV3], ids=["dense", "moe", "dsv3"])
def test_vectorised_test_equals_the_scalar_one(framework: str, model: ModelSpec) -> None:
    rng = np.random.default_rng(7)
    columns = _random_layouts(rng, 300)
    for precision, offload in ((Precision.BF16, 0), (Precision.FP16, 0), (Precision.BF16, 3)):
        j = job(model, gbs=48, gpus=32, precision=precision, offload=offload)
        for rule in rule_set(framework).rules:
            ok = rule.ok(columns, j)
            for i in range(300):
                flags = ("sequence_parallel", *_SPLIT_FLAGS)
                x = Layout(
                    **{a: int(v[i]) for a, v in columns.items() if a not in (*flags, "recompute")},
                    **{a: bool(columns[a][i]) for a in flags},
                    recompute=_BY_CODE[int(columns["recompute"][i])],
                )
                assert bool(ok[i]) == rule.holds(x, j), (rule.name, x)


def test_interleave_breaks_is_the_rules_arithmetic() -> None:
    assert interleave_breaks(np.arange(1, 9), 4, 2).tolist() == [True, True, True, False] * 2
    assert not interleave_breaks(3, 1, 2) and not interleave_breaks(3, 2, 1)


def test_stage_checker_reports_the_stage_split_rules() -> None:
    costs = StageCosts(
        layer_time_s=1.0,
        last_extra_s=0.0,
        memory_per_layer_bytes=(1.0, 1.0, 1.0),
        memory_intercept_bytes=(0.0, 0.0, 0.0),
        capacity_bytes=1e12,
    )
    assert partition_problems((2, 3, 3), 8, 3, 1, costs) == []
    assert (
        partition_problems((2, 2, 3, 1), 8, 4, 2, costs)
        == STAGE_SPLIT.stage_problems((2, 2, 3, 1), 8, 4, 2)
        == [
            "middle stages must hold equal layer counts (Megatron sets only first and last); got [2, 2, 3, 1]",
            "every middle stage's layer count must be a multiple of vp(2); got [2, 2, 3, 1]",
        ]
    )


@pytest.mark.parametrize(
    ("stages", "vp", "chunks"),
    [
        # NVIDIA's DeepSeek-V3 recipes: H100 "Et|(tt|)*30mL", GB200 "Et*4|(t*4|)*14tL", H100 vp 2 "Et*4|(t*4|)*14tmL".
        ((7, 8, 8, 8, 8, 8, 8, 6), 4, [[1, 2, 2, 2]] + [[2, 2, 2, 2]] * 6 + [[2, 2, 2, 0]]),
        ((16, 16, 16, 13), 4, [[4, 4, 4, 4]] * 3 + [[4, 4, 4, 1]]),
        ((8, 8, 8, 8, 8, 8, 8, 5), 2, [[4, 4]] * 7 + [[4, 1]]),
        ((12, 8, 8, 4), 4, [[3, 3, 3, 3], [2, 2, 2, 2], [2, 2, 2, 2], [1, 1, 1, 1]]),  # every count a multiple of vp
    ],
)
def test_rank_chunks_leave_one_short_chunk_beside_the_embedding_or_the_loss(
    stages: tuple[int, ...], vp: int, chunks: list[list[int]]
) -> None:
    assert rank_chunks(stages, vp) == chunks
    assert [sum(c) for c in chunks] == list(stages)
    assert chunks_uneven(stages, vp) is any(n % vp for n in stages)
    assert STAGE_SPLIT.stage_problems(stages, sum(stages), len(stages), vp) == []


@pytest.mark.parametrize(
    ("stages", "vp", "chunks"),
    [
        ((26, 26), 27, [[0] + [1] * 26, [1] * 26 + [0]]),  # 52 layers, the embedding and the loss: 54 chunks of one
        ((3, 3), 2, [[1, 2], [2, 1]]),  # 6 layers + 2: chunks of two slots, one beside the embedding, one the loss
    ],
)
def test_rank_chunks_without_middle_ranks_count_the_embedding_and_the_loss(
    stages: tuple[int, int], vp: int, chunks: list[list[int]]
) -> None:
    """pp 2 with the embedding and the loss in the split: each end rank holds vp chunks of its rounded-up size, the
    short one beside the embedding (first rank) or the loss (last). Until 2026-12-06 the chunk size was read from
    the other end rank, which gave [26, 0, ..., 0] here and a layout string of 52 empty stages."""
    assert rank_chunks(stages, vp) == chunks
    layout = Layout(
        tp=1, pp=2, dp=1, vp=vp, account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True
    )
    model = ModelSpec(num_layers=sum(stages), hidden_size=64, num_attention_heads=4, vocab_size=128, seq_length=32)
    expected = "|".join(
        ("E" if (v, r) == (0, 0) else "")
        + {0: "", 1: "t"}.get(chunks[r][v], f"t*{chunks[r][v]}")
        + ("L" if (v, r) == (vp - 1, 1) else "")
        for v in range(vp)
        for r in range(2)
    )
    assert pipeline_layout(model, layout) == expected


def test_stage_split_refuses_chunks_it_cannot_read() -> None:
    """A middle count vp does not divide, an end rank longer than a middle one or short by more than a chunk,
    and any count vp does not divide without middle ranks (pp <= 2): no `rank_chunks` reading."""
    assert STAGE_SPLIT.stage_problems((8, 6, 8, 8), 30, 4, 4) == [
        "middle stages must hold equal layer counts (Megatron sets only first and last); got [8, 6, 8, 8]",
        "every middle stage's layer count must be a multiple of vp(4); got [8, 6, 8, 8]",
    ]
    assert STAGE_SPLIT.stage_problems((5, 8, 8, 9), 30, 4, 4) == [
        "stage 0's 5 layers are neither a multiple of vp(4) nor vp - 1 chunks of the middle stages' 2 and one"
        " short chunk (6 to 8 layers); got [5, 8, 8, 9]"
    ]
    assert STAGE_SPLIT.stage_problems((8, 8, 8, 9), 33, 4, 4) == [
        "stage 3's 9 layers are neither a multiple of vp(4) nor vp - 1 chunks of the middle stages' 2 and one"
        " short chunk (6 to 8 layers); got [8, 8, 8, 9]"
    ]
    assert STAGE_SPLIT.stage_problems((7, 6), 13, 2, 4) == [
        "every stage's layer count must be a multiple of vp(4); got [7, 6]"
    ]


def test_default_split_interleaves_with_one_short_end_chunk() -> None:
    """Llama 3's 126 layers over pp 16: the default split [7, 8 x 14, 7] interleaves at vp 2, 4 and 8 (one short
    chunk on each end rank); over pp 6 ([21] x 6) no vp > 1 divides a middle rank; over pp 2 ([63, 63]) only
    vp dividing 63 would. The message names the default split."""
    llama = job(get_preset("llama3-405b").model, gbs=2048, gpus=2048)
    for vp in (2, 4, 8):
        assert STAGE_SPLIT.explain(Layout(tp=8, pp=16, dp=16, vp=vp), llama) == []
    assert STAGE_SPLIT.explain(Layout(tp=8, pp=6, dp=16, vp=2), job(get_preset("llama3-405b").model, 2048, 768)) == [
        "every middle stage's layer count must be a multiple of vp(2); got [21, 21, 21, 21, 21, 21]"
    ]
    assert STAGE_SPLIT.explain(Layout(tp=8, pp=2, dp=16, vp=2), job(get_preset("llama3-405b").model, 2048, 256)) == [
        "num_layers(126) % (pp(2) * vp(2)) = 2, must be 0 to interleave"
    ]


# Framework rules: (framework[@release], rule, job, kept, removed, message)
NO_HYBRIDEP = (
    "training.runtime.moe_dispatcher hybridep with ep(2) > 1 needs a Megatron-Core with moe_flex_dispatcher_backend"
    " (core_v0.16 on); this release's flex dispatcher runs DeepEP only"
)
FRAMEWORK_CASES = [
    (
        "megatron@core_v0.15.0",
        "megatron_15_no_hybridep",
        moe_job(moe_dispatcher="hybridep"),
        Layout(tp=1, pp=1, dp=8, ep=1),
        Layout(tp=1, pp=1, dp=8, ep=2),
        NO_HYBRIDEP,
    ),
    (
        "nemo@2.5.0rc0+8cfedd7",
        "megatron_15_no_hybridep",
        moe_job(moe_dispatcher="hybridep"),
        Layout(tp=1, pp=1, dp=8, ep=1),
        Layout(tp=1, pp=1, dp=8, ep=2),
        NO_HYBRIDEP,
    ),
    (
        "torchtitan",
        "torchtitan_moe_dispatch",
        moe_job(moe_dispatcher="deepep"),
        Layout(tp=1, pp=1, dp=8, ep=1),
        Layout(tp=1, pp=1, dp=8, ep=2),
        "training.runtime.moe_dispatcher deepep with ep(2) > 1: the TorchTitan launch runs its all-to-all dispatch"
        " (moe_dispatcher alltoall)",
    ),
    (
        "megatron",
        "megatron_fsdp_needs_pp_1",
        job(),
        Layout(tp=2, pp=1, dp=4, zero_stage=3),
        Layout(tp=2, pp=2, dp=2, zero_stage=2),
        "zero_stage(2) runs Megatron-FSDP, which needs pp = 1; got pp(2)",
    ),
    (
        "megatron@core_v0.15.0",
        "query_groups_split",
        job(),
        Layout(tp=4, pp=1, dp=2),
        Layout(tp=8, pp=1, dp=1),
        "num_query_groups(4) % tp(8) = 4, must be 0",
    ),
    (
        "megatron@core_v0.15.0",
        "fp16_no_expert_parallel",
        job(MOE, precision=Precision.FP16),
        Layout(tp=1, pp=1, dp=8, ep=1),
        Layout(tp=1, pp=1, dp=8, ep=2),
        "ep(2) > 1 is refused in fp16 training; use ep = 1 or bf16",
    ),
    (
        "torchtitan@0.2.2",
        "ddp_one_dimensional",
        job(),
        Layout(tp=1, pp=1, dp=8),
        Layout(tp=2, pp=1, dp=4),
        "zero_stage(0) runs plain DDP, which has no > 1-D parallelism: tp(2) * pp(1) = 2, must be 1",
    ),
    (
        "torchtitan@0.2.2",
        "flex_attention_no_cp",
        job(DSV3, gbs=64, gpus=16),
        Layout(tp=8, pp=1, dp=2, zero_stage=1),
        Layout(tp=8, pp=1, dp=1, cp=2, zero_stage=1),
        "cp(2) > 1 needs SDPA attention; TorchTitan's DeepSeek-V3 uses flex attention",
    ),
    (
        "torchtitan@0.2.2",
        "torchtitan_split_by_transformer_layers",
        job(),
        Layout(tp=1, pp=2, dp=4, zero_stage=1),
        Layout(
            tp=1,
            pp=2,
            dp=4,
            zero_stage=1,
            account_for_embedding_in_pipeline_split=True,
            account_for_loss_in_pipeline_split=True,
        ),
        "the embedding or the loss counted as a pipeline layer is Megatron-Core's split;"
        " the TorchTitan launch assigns whole transformer layers to stages, so it is not offered",
    ),
    (
        "torchtitan@0.2.2",
        "torchtitan_seq_len_divisible",
        job(gpus=16),
        Layout(tp=4, pp=1, dp=2, cp=2, zero_stage=1),
        Layout(tp=8, pp=1, dp=1, cp=2, zero_stage=1),
        "seq_length(16) % (tp * 2 * cp) = 16, must be 0 (tp(8), cp(2))",
    ),
    (
        "torchtitan",
        "torchtitan_seq_len_divisible",
        job(gpus=16),
        Layout(tp=8, pp=1, dp=1, cp=2, zero_stage=1),
        Layout(tp=8, pp=1, dp=1, cp=2, sequence_parallel=True, zero_stage=1),
        "seq_length(16) % ((tp if sequence parallel) * (2 * cp if cp > 1)) = 16, must be 0 (tp(8), cp(2))",
    ),
    (
        "torchtitan",
        "torchtitan_no_expert_tensor_parallel",
        job(MOE),
        Layout(tp=2, pp=1, dp=4, ep=2, etp=1, zero_stage=1),
        Layout(tp=2, pp=1, dp=4, ep=2, zero_stage=1),
        "etp(2) must be 1 with ep(2) > 1: TorchTitan v0.3.0 has no expert tensor parallelism, so each expert is"
        " whole on its rank",
    ),
    (
        "torchtitan",
        "torchtitan_no_expert_tensor_parallel",
        job(MOE),
        Layout(tp=2, pp=1, dp=4, zero_stage=1),
        Layout(tp=2, pp=1, dp=4, etp=1, zero_stage=1),
        "etp(1) != tp(2) with ep(1): without expert parallelism TorchTitan splits the experts over tp like the rest"
        " of the layer",
    ),
    (
        "torchtitan@0.2.2",
        "torchtitan_expert_tensor_parallel",
        job(MOE),
        Layout(tp=4, pp=1, dp=2, ep=2, etp=4, zero_stage=1),
        Layout(tp=4, pp=1, dp=2, ep=2, etp=2, zero_stage=1),
        "etp(2) must be 1 or tp(4) with ep(2) > 1 in TorchTitan v0.2.2",
    ),
]


@pytest.mark.parametrize(
    ("framework", "name", "j", "kept", "removed", "message"),
    FRAMEWORK_CASES,
    ids=[f"{c[0]}-{c[1]}" for c in FRAMEWORK_CASES],
)
def test_framework_rule(framework: str, name: str, j: Job, kept: Layout, removed: Layout, message: str) -> None:
    framework, _, release = framework.partition("@")
    rules = rule_set(framework, release or None)
    assert name in rules.names and name not in CORE.names
    assert layout_violations(kept, j.model, j.training, j.num_gpus, rules) == []
    assert [(v.rule, v.message) for v in layout_violations(removed, j.model, j.training, j.num_gpus, rules)] == [
        (name, message)
    ]
    assert layout_violations(removed, j.model, j.training, j.num_gpus) == []  # the core set keeps it


@pytest.mark.parametrize("release", ["0.3.0", "0.2.2"])
def test_torchtitan_refuses_the_moe_overlap(release: str) -> None:
    """The overlap needs ep > 1 (core rule moe_a2a_overlap), where TorchTitan refuses it."""
    j, layout = moe_job(moe_a2a_overlap=True), Layout(tp=1, pp=1, dp=8, ep=2)
    assert layout_violations(layout, j.model, j.training, j.num_gpus) == []
    got = layout_violations(layout, j.model, j.training, j.num_gpus, rule_set("torchtitan", release))
    assert [(v.rule, v.message) for v in got] == [
        (
            "torchtitan_moe_dispatch",
            "training.runtime.moe_a2a_overlap with ep(2) > 1: TorchTitan has no all-to-all overlap across"
            " micro-batches",
        )
    ]


def test_framework_sets_are_core_plus_their_rules() -> None:
    assert rule_set("megatron").version == "core_v0.19.2"  # the newest targeted is the default
    mamba_stack = ("hybrid_no_interleaving", "hybrid_no_full_recompute")
    assert rule_set("megatron").names[len(CORE.names) :] == (
        "megatron_fsdp_needs_pp_1",
        "megatron_gradient_layout",
        "fp8_param_gather_needs_distributed_optimizer",
        "precision_aware_optimizer_needs_distributed_optimizer",
        "megatron_hybrid_features",
    )
    assert rule_set("megatron", "core_v0.16.1").names[len(CORE.names) :] == (
        "megatron_fsdp_needs_pp_1",
        "megatron_gradient_layout",
        "fp8_param_gather_needs_distributed_optimizer",
        "precision_aware_optimizer_needs_distributed_optimizer",
        *mamba_stack,
        "megatron_hybrid_features",
    )
    assert rule_set("megatron", "core_v0.15.0").names[len(CORE.names) :] == (
        "megatron_fsdp_needs_pp_1",
        "megatron_15_no_hybridep",
        "query_groups_split",
        "fp16_no_expert_parallel",
        "megatron_gradient_layout",
        "fp8_param_gather_needs_distributed_optimizer",
        "megatron_no_activation_offload",
        "precision_aware_optimizer_needs_distributed_optimizer",
        *mamba_stack,
        "hybrid_even_stages",
        "megatron_hybrid_features",
    )
    assert rule_set("nemo").version == "2.7.3"
    assert rule_set("nemo").names[len(CORE.names) :] == (
        "megatron_fsdp_needs_pp_1",
        "megatron_gradient_layout",
        "precision_aware_optimizer_needs_distributed_optimizer",
        *mamba_stack,
        "megatron_hybrid_features",
    )
    assert rule_set("nemo", "2.5.0rc0+8cfedd7").names[len(CORE.names) :] == (
        "megatron_fsdp_needs_pp_1",
        "megatron_15_no_hybridep",
        "nemo_no_window_pattern",
        "query_groups_split",
        "megatron_gradient_layout",
        "precision_aware_optimizer_needs_distributed_optimizer",
        *mamba_stack,
        "hybrid_even_stages",
        "megatron_hybrid_features",
    )
    assert rule_set("torchtitan").version == "0.3.0"
    assert rule_set("torchtitan").names[len(CORE.names) :] == (
        "torchtitan_no_expert_tensor_parallel",
        "torchtitan_seq_len_divisible",
        "torchtitan_gradient_layout",
        "torchtitan_fp8",
        "torchtitan_no_activation_offload",
        "torchtitan_no_block_recompute",
        "torchtitan_no_recompute_modules",
        "torchtitan_adam_moments",
        "torchtitan_moe_dispatch",
        "torchtitan_no_hybrid",
    )
    assert rule_set("torchtitan", "0.2.2").names[len(CORE.names) :] == (
        "ddp_one_dimensional",
        "flex_attention_no_cp",
        "torchtitan_split_by_transformer_layers",
        "torchtitan_seq_len_divisible",
        "torchtitan_gradient_layout",
        "torchtitan_fp8",
        "torchtitan_no_activation_offload",
        "torchtitan_no_block_recompute",
        "torchtitan_no_recompute_modules",
        "torchtitan_adam_moments",
        "torchtitan_expert_tensor_parallel",
        "torchtitan_moe_dispatch",
        "torchtitan_no_hybrid",
    )
    assert rule_set().rules == CORE.rules
    with pytest.raises(ValueError, match="unknown framework 'jax'"):
        rule_set("jax")
    with pytest.raises(ValueError, match="accepted: core_v0.19.2, core_v0.16.1, core_v0.15.0"):
        rule_set("megatron", "core_v0.14.0")


def test_torchtitan_releases_differ_where_their_source_does() -> None:
    """0.3.0 has no plain DDP, runs CP on flex attention and writes Megatron's embedding-in-split; 0.2.2 refuses
    all three. 0.3.0 refuses experts with tp > 1 (no expert tensor parallelism), which 0.2.2 accepts."""
    embedding = Layout(
        tp=1,
        pp=2,
        dp=4,
        zero_stage=1,
        account_for_embedding_in_pipeline_split=True,
        account_for_loss_in_pipeline_split=True,
    )
    cases = [
        (job(), Layout(tp=2, pp=1, dp=4), True),
        (job(DSV3, gbs=64, gpus=16), Layout(tp=8, pp=1, dp=1, cp=2, zero_stage=1), True),
        (job(), embedding, True),
        (job(MOE), Layout(tp=2, pp=1, dp=4, ep=2, zero_stage=1), False),
    ]
    for j, layout, newer_accepts in cases:
        older = layout_violations(layout, j.model, j.training, j.num_gpus, rule_set("torchtitan", "0.2.2"))
        newer = layout_violations(layout, j.model, j.training, j.num_gpus, rule_set("torchtitan", "0.3.0"))
        assert (not newer, not older) == (newer_accepts, not newer_accepts), layout


def test_nemo_releases_differ_where_their_megatron_core_does() -> None:
    """The 2.5.0rc0 commit's Megatron-LM b615e731080e refuses tp 8 over 4 query groups; 2.7.3's megatron-core 0.16.1
    accepts it. Both refuse Megatron-FSDP (ZeRO 2) with pp > 1; neither runs validate_args' fp16 ep check."""
    gqa, moe16 = job(), job(MOE, precision=Precision.FP16)
    fsdp_pp = Layout(tp=1, pp=2, dp=4, zero_stage=2)
    for release, refused in (("2.5.0rc0+8cfedd7", True), ("2.7.3", False)):
        rules = rule_set("nemo", release)
        gqa_tp8 = layout_violations(Layout(tp=8, pp=1, dp=1), gqa.model, gqa.training, 8, rules)
        assert [v.rule for v in gqa_tp8] == (["query_groups_split"] if refused else [])
        ep2 = layout_violations(Layout(tp=1, pp=1, dp=8, ep=2), moe16.model, moe16.training, 8, rules)
        assert ep2 == []
        fsdp = layout_violations(fsdp_pp, gqa.model, gqa.training, 8, rules)
        assert [v.rule for v in fsdp] == ["megatron_fsdp_needs_pp_1"]


def test_megatron_releases_differ_where_their_source_does() -> None:
    """core_v0.15.0 refuses tp 8 over 4 query groups and fp16 with ep > 1; core_v0.16.1 and later accept both."""
    gqa, moe16 = job(), job(MOE, precision=Precision.FP16)
    for release, refused in (("core_v0.15.0", True), ("core_v0.16.1", False), ("core_v0.19.2", False)):
        rules = rule_set("megatron", release)
        assert bool(layout_violations(Layout(tp=8, pp=1, dp=1), gqa.model, gqa.training, 8, rules)) == refused
        ep2 = layout_violations(Layout(tp=1, pp=1, dp=8, ep=2), moe16.model, moe16.training, 8, rules)
        assert bool(ep2) == refused


@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan"])
def test_framework_space_is_core_space_minus_the_rules(framework: str) -> None:
    model, training, gpus = MOE, TrainingSpec(global_batch_size=48, precision=Precision.FP16), 24
    core = build_space(model, training, gpus, {})
    narrowed = build_space(model, training, gpus, {}, rule_set(framework))
    extra: list[Rule] = [r for r in rule_set(framework).rules if r.name not in CORE.names]
    c = core.candidates
    columns = {a: np.asarray(getattr(c, a), dtype=np.int64) for a in LAYOUT_AXES}
    keep = np.ones(len(core), dtype=np.bool_)
    j = Job(model, training, gpus)
    for rule in extra:
        keep &= rule.ok(columns, j)
    n = narrowed.candidates
    assert len(narrowed) == int(keep.sum()) < len(core)
    assert np.array_equal(n.tp, c.tp[keep]) and np.array_equal(n.zero_stage, c.zero_stage[keep])
    assert sum(narrowed.rejected[r.name] for r in extra) > 0
    assert narrowed.rejected["tensor_split"] == core.rejected["tensor_split"]  # core rules first at a level


@pytest.mark.parametrize(
    ("m", "pp", "vp", "broken"),
    [(8, 4, 2, False), (4, 4, 2, False), (2, 4, 2, True), (6, 4, 2, True), (6, 4, 1, False), (3, 1, 1, False)],
)
def test_interleave_rule_is_megatron_cores_default_group(m: int, pp: int, vp: int, broken: bool) -> None:
    """schedules.py forward_backward_pipelining_with_interleaving with group = pp: m >= pp and m % pp == 0."""
    assert bool(interleave_breaks(m, pp, vp)) is broken
    assert (interleave_problem(m, pp, vp) is not None) is broken


# (grad_reduce_in_fp32, gradient_layout, the rule of each framework that refuses the job, or None)
GRADIENT_JOBS = [
    (None, GradientLayout.MEGATRON, {}),
    (True, GradientLayout.PYTORCH_FSDP, {"megatron": "megatron_gradient_layout", "nemo": "megatron_gradient_layout"}),
    (False, GradientLayout.PYTORCH_FSDP, {"megatron": "megatron_gradient_layout", "nemo": "megatron_gradient_layout"}),
    (False, GradientLayout.MEGATRON, {"torchtitan": "torchtitan_gradient_layout"}),
]


@pytest.mark.parametrize(("fp32", "gradients", "refused_by"), GRADIENT_JOBS, ids=["default", "fsdp-fp32", "fsdp", "mc"])
@pytest.mark.parametrize(
    "framework",
    ["megatron@core_v0.19.2", "megatron@core_v0.15.0", "nemo@2.7.3", "torchtitan@0.3.0", "torchtitan@0.2.2"],
)
def test_gradient_layout_is_the_frameworks_own(
    framework: str, fp32: bool | None, gradients: GradientLayout, refused_by: dict[str, str]
) -> None:
    # The gradient layout is the job's, so the rule refuses every layout or none, at every ZeRO stage.
    name, _, release = framework.partition("@")
    rules = rule_set(name, release)
    training = TrainingSpec(global_batch_size=16, grad_reduce_in_fp32=fp32, gradient_layout=gradients)
    for zero in range(4):
        layout = Layout(tp=1, pp=1, dp=8, zero_stage=zero)
        found = {v.rule for v in layout_violations(layout, DENSE, training, 8, rules)}
        assert found == ({refused_by[name]} if name in refused_by else set()), (framework, zero)
        assert layout_violations(layout, DENSE, training, 8) == []  # the core set prices either layout


def test_gradient_layout_messages_name_the_field() -> None:
    fsdp = TrainingSpec(global_batch_size=16, grad_reduce_in_fp32=False, gradient_layout=GradientLayout.PYTORCH_FSDP)
    megatron = TrainingSpec(global_batch_size=16, grad_reduce_in_fp32=False)
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=3)
    assert [v.message for v in layout_violations(layout, DENSE, fsdp, 8, rule_set("megatron"))] == [
        "training.gradient_layout('pytorch_fsdp') is PyTorch FSDP's; Megatron-Core runs zero_stage(3) with"
        " Megatron-FSDP's gradients: use gradient_layout 'megatron'"
    ]
    assert [v.message for v in layout_violations(layout, DENSE, megatron, 8, rule_set("torchtitan"))] == [
        "training.gradient_layout('megatron') with grad_reduce_in_fp32(false) prices 16-bit gradients plus an fp32"
        " copy; TorchTitan's FSDP2 reduces in training.mixed_precision_reduce and holds the fp32 sharded gradient:"
        " use gradient_layout 'pytorch_fsdp'"
    ]
    columns = _random_layouts(np.random.default_rng(3), 50)
    for rule in (
        rule_set("megatron")["megatron_gradient_layout"],
        rule_set("torchtitan")["torchtitan_gradient_layout"],
    ):
        for training in (fsdp, megatron):
            j = Job(DENSE, training, 8)
            assert rule.broken(columns, j).shape == (50,)
            assert len(set(rule.broken(columns, j).tolist())) == 1


# (fp8_recipe, fp8_param_gather) -> the frameworks that refuse the job at zero_stage 0 and at 1-3
FP8_JOBS = [
    (None, False, set(), set()),
    (Fp8Recipe.TENSORWISE, False, set(), set()),
    (Fp8Recipe.DELAYED, False, {"torchtitan"}, {"torchtitan"}),
    (Fp8Recipe.TENSORWISE, True, {"megatron", "torchtitan"}, {"torchtitan"}),
    (Fp8Recipe.MXFP8, True, {"megatron", "torchtitan"}, {"torchtitan"}),
]


@pytest.mark.parametrize(("recipe", "gather", "at_zero_0", "at_zero_1_3"), FP8_JOBS)
def test_fp8_weight_storage_is_the_frameworks_own(
    recipe: Fp8Recipe | None, gather: bool, at_zero_0: set[str], at_zero_1_3: set[str]
) -> None:
    # Megatron-LM's validate_args needs the distributed optimizer for --fp8-param-gather; TorchTitan's launch runs
    # float8 tensorwise over fp32 sharded weights. The core set prices them all.
    training = TrainingSpec(global_batch_size=16, precision=Precision.FP8, fp8_recipe=recipe, fp8_param_gather=gather)
    for zero in range(4):
        layout = Layout(tp=1, pp=1, dp=8, zero_stage=zero)
        refused = {
            name.partition("@")[0]
            for name in ("megatron@core_v0.19.2", "megatron@core_v0.15.0", "torchtitan@0.3.0", "torchtitan@0.2.2")
            if layout_violations(layout, DENSE, training, 8, rule_set(*name.split("@")))
        }
        assert refused == (at_zero_0 if zero == 0 else at_zero_1_3), zero
        assert layout_violations(layout, DENSE, training, 8) == []
    if gather:
        layout = Layout(tp=1, pp=1, dp=8, zero_stage=0)
        assert [v.message for v in layout_violations(layout, DENSE, training, 8, rule_set("megatron"))] == [
            "training.fp8_param_gather(true) needs the distributed optimizer or Megatron-FSDP; zero_stage(0) has"
            " neither: use zero_stage >= 1"
        ]


def test_nvfp4_is_refused_by_torchtitan_alone() -> None:
    # Megatron-LM (every pinned release) and NeMo run NVFP4 (--fp4-format e2m1); TorchTitan's launch has no NVFP4.
    training = TrainingSpec(global_batch_size=16, precision=Precision.NVFP4)
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=1)
    for name in ("megatron@core_v0.19.2", "megatron@core_v0.16.1", "megatron@core_v0.15.0", "nemo@2.7.3"):
        assert layout_violations(layout, DENSE, training, 8, rule_set(*name.split("@"))) == [], name
    for release in ("0.3.0", "0.2.2"):
        messages = [v.message for v in layout_violations(layout, DENSE, training, 8, rule_set("torchtitan", release))]
        assert messages == [
            "training.precision(nvfp4): the planner's TorchTitan launch quantizes with its float8 converter only"
            " (quantize.linear.float8); use Megatron-LM or NeMo for NVFP4"
        ]


@pytest.mark.parametrize(
    ("framework", "refused_by"),
    [
        ("core@planner", None),
        ("megatron@core_v0.19.2", None),
        ("megatron@core_v0.16.1", None),
        ("megatron@core_v0.15.0", "megatron_no_activation_offload"),
        ("nemo@2.7.3", None),
        ("torchtitan@0.3.0", "torchtitan_no_activation_offload"),
        ("torchtitan@0.2.2", "torchtitan_no_activation_offload"),
    ],
)
def test_activation_offload_is_the_frameworks_own(framework: str, refused_by: str | None) -> None:
    """Megatron-Core from core_v0.16 has --cpu-offloading-num-layers (NeMo sets the TransformerConfig fields);
    core_v0.15.0 has no flag, TorchTitan no activation offloading. Off, nobody refuses anything."""
    rules = rule_set(*framework.split("@"))
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=1)
    offload = TrainingSpec(global_batch_size=16, activation_offload_layers=3)
    found = [v.rule for v in layout_violations(layout, DENSE, offload, 8, rules)]
    assert found == ([] if refused_by is None else [refused_by])
    assert layout_violations(layout, DENSE, TrainingSpec(global_batch_size=16), 8, rules) == []


@pytest.mark.parametrize(
    ("framework", "refused_by"),
    [
        ("core@planner", None),
        ("megatron@core_v0.15.0", None),
        ("nemo@2.7.3", None),
        ("torchtitan@0.3.0", "torchtitan_no_block_recompute"),
        ("torchtitan@0.2.2", "torchtitan_no_block_recompute"),
    ],
)
def test_block_recompute_is_megatrons(framework: str, refused_by: str | None) -> None:
    """Megatron's block method (recompute_num_layers under full recompute) passes with and without interleaving
    (the first layers of each model chunk); TorchTitan has no block method. Other recompute modes ignore the count."""
    rules = rule_set(*framework.split("@"))
    block = TrainingSpec(global_batch_size=16, recompute_num_layers=2)
    for vp in (1, 2):
        full = Layout(tp=1, pp=2, dp=4, vp=vp, recompute=Recompute.FULL, zero_stage=1)
        found = [v.rule for v in layout_violations(full, DENSE, block, 8, rules)]
        assert found == ([] if refused_by is None else [refused_by])
    for mode in (Recompute.NONE, Recompute.SELECTIVE):
        other = Layout(tp=1, pp=2, dp=4, vp=2, recompute=mode, zero_stage=1)
        assert layout_violations(other, DENSE, block, 8, rules) == []


@pytest.mark.parametrize(
    ("framework", "zero", "expected"),
    [
        ("megatron", 0, ["precision_aware_optimizer_needs_distributed_optimizer"]),
        ("megatron", 1, []),
        ("nemo", 0, ["precision_aware_optimizer_needs_distributed_optimizer"]),
        ("torchtitan", 1, ["torchtitan_adam_moments"]),
    ],
)
def test_bf16_adam_moments_need_the_distributed_optimizer(framework: str, zero: int, expected: list[str]) -> None:
    model = get_preset("llama3-8b").model
    training = TrainingSpec(global_batch_size=64, adam_moments=AdamMoments.BF16)
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=zero)
    broken = [v.rule for v in layout_violations(layout, model, training, 8, rule_set(framework))]
    named = {"precision_aware_optimizer_needs_distributed_optimizer", "torchtitan_adam_moments"}
    assert [r for r in broken if r in named] == expected
    fp32 = TrainingSpec(global_batch_size=64)
    assert not {v.rule for v in layout_violations(layout, model, fp32, 8, rule_set(framework))} & set(expected)


@pytest.mark.parametrize(
    ("framework", "refused_by"),
    [
        ("megatron@core_v0.19.2", None),
        ("megatron@core_v0.15.0", None),
        ("nemo@2.7.3", None),
        ("nemo@2.5.0rc0+8cfedd7", "nemo_no_window_pattern"),
        ("torchtitan@0.3.0", None),
    ],
)
def test_a_window_pattern_needs_a_megatron_core_that_reads_it(framework: str, refused_by: str | None) -> None:
    """GPT-OSS's alternating windowed and full layers: Megatron-Core from core_v0.15.0 reads window_attn_skip_freq;
    the Megatron-LM commit NeMo main 8cfedd7 pins does not, so only its pattern-free windowed models run there."""
    rules = rule_set(*framework.split("@"))
    model = get_preset("gpt-oss-120b").model
    j, layout = job(model, 512, 64), Layout(tp=1, pp=4, dp=16, ep=8, zero_stage=1)
    got = [v.rule for v in layout_violations(layout, j.model, j.training, j.num_gpus, rules)]
    assert got == ([] if refused_by is None else [refused_by])
    everywhere = model.model_copy(update={"sliding_window_pattern": None})
    assert layout_violations(layout, everywhere, j.training, j.num_gpus, rules) == []
    if refused_by is not None:
        (violation,) = layout_violations(layout, j.model, j.training, j.num_gpus, rules)
        assert violation.message.startswith("model.sliding_window_pattern(2): this NeMo's Megatron-Core has")


@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan"])
def test_bf16_end_layers_per_framework(framework: str) -> None:
    """Megatron-LM and NeMo keep layers in BF16 (`--first-last-layers-bf16`, MegatronMixedPrecision); TorchTitan's
    float8 launch converts every layer and refuses them."""
    model = get_preset("llama3-8b").model
    training = TrainingSpec(
        global_batch_size=64, precision=Precision.FP8, fp8_recipe=Fp8Recipe.TENSORWISE, bf16_layers_at_start=1
    )
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=1)
    found = [(v.rule, v.message) for v in layout_violations(layout, model, training, 8, rule_set(framework))]
    expected = (
        [
            (
                "torchtitan_fp8",
                "training.bf16_layers_at_start(1) / bf16_layers_at_end(0): the planner's TorchTitan launch converts"
                " every transformer layer's linears to float8; use Megatron-LM or NeMo to keep layers in BF16",
            )
        ]
        if framework == "torchtitan"
        else []
    )
    assert found == expected
