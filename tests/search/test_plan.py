"""Planner behaviour: the paper's findings in its own space, constraints, diagnosis, objectives, determinism."""

from __future__ import annotations

import pytest

from planner.calibration.published import published_runs
from planner.calibration.report import VALIDATION_PROFILE
from planner.constraints.space import MAX_CANDIDATES, MAX_ROW_MODE_PAIRS, build_space
from planner.errors import InvalidSpecError
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.rules.frameworks import rule_set
from planner.search.compare import PAPER_SPACE, _in_space
from planner.search.constraints import parse_constraints
from planner.search.plan import plan
from planner.search.rank import Objective
from planner.specs import ModelSpec, Precision, RuntimeFeatures, TrainingSpec

A100 = load_profiles()[VALIDATION_PROFILE]
RUNTIME_2021 = RuntimeFeatures(flash_attention=False, overlap_grad_reduce=False, overlap_param_gather=False)


def test_fig13_paper_space_ranks_pp8_tp8_above_the_other_splits() -> None:
    model = ModelSpec(
        num_layers=32,
        hidden_size=20480,
        num_attention_heads=128,
        vocab_size=51200,
        seq_length=2048,
        tied_embeddings=True,
        linear_bias=True,
        learned_position_embeddings=True,
        num_query_groups=128,
        ffn_hidden_size=4 * 20480,
    )
    training = TrainingSpec(global_batch_size=128, precision=Precision.FP16, runtime=RUNTIME_2021)
    # The figure ran the default (non-interleaved) schedule at micro-batch 1.
    constraints = PAPER_SPACE | {"dp": [1], "micro_batch_size": [1], "vp": [1]}
    result = plan(model, ClusterSpec(profile=A100, num_gpus=64), training, constraints, top_k=100)
    # By predicted step time (ranks put simpler equivalent plans first, planner.search.plan.simplicity).
    fastest: dict[tuple[int, int], float] = {}
    for p in result.plans:
        key = (p.layout.pp, p.layout.tp)
        fastest[key] = min(fastest.get(key, float("inf")), p.estimate.step_time_s)
    splits = [(2, 32), (4, 16), (8, 8), (16, 4), (32, 2)]
    assert all(s in fastest for s in splits)
    assert min(splits, key=lambda s: fastest[s]) == (8, 8)


@pytest.mark.parametrize("run", [r for r in published_runs() if r.group == "Narayanan2021_Table1"], ids=lambda r: r.id)
def test_every_table1_layout_is_in_the_space_and_fits(run) -> None:
    from planner.estimate import estimate

    assert _in_space(run)
    assert estimate(run.model, ClusterSpec(profile=A100, num_gpus=run.num_gpus), run.training, run.layout).fits


GPT3 = get_preset("gpt3-175b").model


def test_constraints_are_respected_and_baseline_never_beats_best() -> None:
    cluster = ClusterSpec(profile=A100, num_gpus=64)
    result = plan(GPT3, cluster, TrainingSpec(global_batch_size=64), {"tp": 8, "recompute": ["full", "selective"]})
    assert result.plans
    for p in result.plans:
        assert p.layout.tp == 8
        assert p.layout.recompute.value in ("full", "selective")
    assert result.baseline.speedup_of_best is not None and result.baseline.speedup_of_best >= 1.0
    assert result.search.candidates >= result.search.feasible > 0


@pytest.mark.parametrize(
    ("constraints", "field"),
    [
        ({"tpp": 2}, "constraints.tpp"),
        ({"tp": 0}, "constraints.tp"),
        ({"recompute": "most"}, "constraints.recompute"),
        ({"zero_stage": 4}, "constraints.zero_stage"),
        ({"sequence_parallel": 1}, "constraints.sequence_parallel"),
        ({"pp": []}, "constraints.pp"),
    ],
)
def test_bad_constraints_name_the_field(constraints: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        plan(GPT3, ClusterSpec(profile=A100, num_gpus=64), TrainingSpec(global_batch_size=64), constraints)
    assert info.value.field == field


def test_nothing_fits_explains_the_shortfall() -> None:
    small = load_profiles()["dgx-a100-40gb"]
    result = plan(GPT3, ClusterSpec(profile=small, num_gpus=8), TrainingSpec(global_batch_size=8))
    assert result.plans == [] and result.baseline.plan is None and result.baseline.speedup_of_best is None
    d = result.diagnosis
    assert d is not None and d.least_memory_layout is not None and d.least_memory_gib is not None
    assert d.least_memory_gib > d.capacity_gib == 40 * 0.95  # usable: less the default 5% headroom
    assert d.more_gpus == 128 and d.relax == ["num_gpus"]  # 16x: 64 GPUs still do not hold 175B
    assert "use 128 GPUs (16 nodes)" in d.message


def test_nothing_fits_names_the_constraint_to_relax() -> None:
    cluster = ClusterSpec(profile=A100, num_gpus=64)
    result = plan(GPT3, cluster, TrainingSpec(global_batch_size=64), {"tp": 1, "pp": 1, "zero_stage": [0, 1]})
    assert result.plans == []
    assert result.diagnosis is not None
    assert set(result.diagnosis.relax) >= {"tp"}


def test_gpu_efficiency_may_use_fewer_gpus_and_reports_training_time() -> None:
    model = get_preset("llama3-8b").model
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=128)
    training = TrainingSpec(global_batch_size=256, train_tokens=1e12)
    result = plan(model, cluster, training, top_k=3, objective=Objective.GPU_EFFICIENCY)
    assert all(p.num_gpus <= 128 for p in result.plans)
    e = result.plans[0].estimate
    assert e.days_to_train is not None and e.gpu_hours is not None
    tokens_per_step = 256 * model.seq_length
    assert e.days_to_train == pytest.approx(1e12 / tokens_per_step * e.step_time_s / 86400)
    assert e.gpu_hours == pytest.approx(e.days_to_train * 24 * result.plans[0].num_gpus)
    per_gpu = [p.estimate.tokens_per_s / p.num_gpus for p in result.plans]
    assert per_gpu == sorted(per_gpu, reverse=True)


def test_same_request_same_plans() -> None:
    args = (GPT3, ClusterSpec(profile=A100, num_gpus=128), TrainingSpec(global_batch_size=128))
    first, second = plan(*args), plan(*args)
    assert [p.layout for p in first.plans] == [p.layout for p in second.plans]
    assert [p.estimate.step_time_s for p in first.plans] == [p.estimate.step_time_s for p in second.plans]


def test_uneven_layers_get_a_megatron_split() -> None:
    model = get_preset("llama3-405b").model
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=2048)
    result = plan(model, cluster, TrainingSpec(global_batch_size=1024), {"tp": 8, "pp": 16, "vp": 1}, top_k=3)
    for p in result.plans:
        stages = p.layout.layers_per_stage
        assert stages is not None and sum(stages) == 126 and len(stages) == 16
        assert len(set(stages[1:-1])) == 1
    assert isinstance(result.plans[0].layout, Layout)


def test_budget_returns_the_best_found_so_far_marked_incomplete() -> None:
    cluster = ClusterSpec(profile=A100, num_gpus=1024)
    training = TrainingSpec(global_batch_size=1536)
    nothing = plan(GPT3, cluster, training, max_evaluated=0)
    assert not nothing.search.complete and nothing.search.evaluated == 0 and nothing.plans == []
    assert nothing.search.truncated_by[0] == "candidates"
    assert nothing.diagnosis is not None and "budget" in nothing.diagnosis.message
    full = plan(GPT3, cluster, training, top_k=1)
    assert full.search.complete and full.search.evaluated == full.search.candidates


@pytest.mark.parametrize("recipe", ["PAPER", "MODERN"])
@pytest.mark.parametrize(
    ("preset", "profile", "gpus", "batch"),
    [("gpt3-175b", "dgx-a100-80gb", 1024, 1536), ("mixtral-8x7b", "dgx-h100", 64, 128)],
)
def test_baseline_from_the_search_equals_its_own_evaluation(
    preset: str, profile: str, gpus: int, batch: int, recipe: str
) -> None:
    from planner.constraints.space import build_space
    from planner.search import baseline as b
    from planner.search.baseline import baseline_candidates
    from planner.search.evaluate import evaluate

    model, training = get_preset(preset).model, TrainingSpec(global_batch_size=batch)
    hw = load_profiles()[profile].hardware(training.precision)
    searched = evaluate(model, training, build_space(model, training, gpus, {}), hw)
    alone, reused = (
        baseline_candidates(model, training, gpus, hw, recipe=getattr(b, recipe)),
        baseline_candidates(model, training, gpus, hw, searched, recipe=getattr(b, recipe)),
    )
    assert alone is not None and reused is not None
    assert alone[0].layout(alone[1], model.num_layers) == reused[0].layout(reused[1], model.num_layers)
    assert alone[0].step_time_s[alone[1]] == pytest.approx(reused[0].step_time_s[reused[1]], rel=1e-12)


def test_a_pinned_vp_that_the_stage_rule_refuses_is_blamed_on_the_rule() -> None:
    """GPT-3 175B (96 layers) at pp 8 cannot take vp 16: the diagnosis names stage_split first, not the pin."""
    model = get_preset("gpt3-175b").model
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=512)
    allowed = parse_constraints({"tp": 4, "pp": 8, "vp": 16})
    result = plan(model, cluster, TrainingSpec(global_batch_size=2048), allowed, top_k=1)
    assert result.plans == [] and result.diagnosis is not None
    assert result.diagnosis.message.split("most rejected by: ")[1].startswith("stage_split (")
    # vp 16, plain and with the embedding, the loss or both counted (96-98 layers, none divisible by 128),
    # for each of the 5 (tp 4, pp 8) outer layouts.
    assert result.diagnosis.rejected["stage_split"] == 4 * 5


def test_vp_goes_up_to_the_layers_per_stage() -> None:
    """96 layers at pp 8: every vp that divides the 12 layers per stage, one layer per chunk included."""
    model = get_preset("gpt3-175b").model
    allowed = parse_constraints({"tp": 8, "pp": 8, "cp": 1, "micro_batch_size": 1, "zero_stage": 1})
    space = build_space(model, TrainingSpec(global_batch_size=512), 512, allowed)
    assert sorted(set(space.rows.vp.tolist())) == [1, 2, 3, 4, 6, 12]


def test_the_candidate_bound_counts_what_the_rules_leave() -> None:
    """Qwen3-235B-A22B on 2,048 GPUs under Megatron-LM's rules (the service's default framework) has 2.3 million
    (row, mode) pairs but 1.1 million candidates once the pair rules (sequence parallelism needs tp > 1,
    Megatron-FSDP needs pp 1) have run: the bound is applied to what is searched, not to the pairs."""
    model = get_preset("qwen3-235b-a22b").model
    space = build_space(model, TrainingSpec(global_batch_size=2048), 2048, {}, rule_set("megatron"))
    count, pairs = int(space.pairs.sum()), len(space.rows) * len(space.modes)
    assert count == space.row_starts[-1] <= MAX_CANDIDATES
    assert (count, pairs) == (1_124_484, 2_277_168)  # the pair rules remove half: the bound counts after them


def test_a_space_past_the_candidate_bound_is_refused_naming_the_gpus() -> None:
    moe = {"num_experts": 256, "top_k": 8, "expert_ffn_hidden_size": 2048}
    model = ModelSpec.model_validate(
        {"num_layers": 96, "hidden_size": 8192, "num_attention_heads": 64, "ffn_hidden_size": 8192, "gated_mlp": True,
         "vocab_size": 131072, "seq_length": 8192, "moe": moe}
    )  # fmt: skip
    with pytest.raises(InvalidSpecError) as info:
        build_space(model, TrainingSpec(global_batch_size=1 << 16), 65536, {})
    assert info.value.field == "cluster.num_gpus"
    count = int(info.value.message.split("(")[1].split(")")[0])  # the candidates left after every rule
    assert MAX_CANDIDATES < count <= MAX_ROW_MODE_PAIRS
