"""The shipped data: hardware profiles (with sources and calibration) and model presets."""

import json

import pytest

from planner.calibration.fit import FIT_SETS
from planner.calibration.write import gpu_kind
from planner.costmodel.params import active_params, total_params
from planner.presets import PRESETS_FILE, get_preset, load_presets
from planner.profiles import DEFAULT_PROFILES_DIR, HardwareProfile, load_profiles
from planner.specs import ModelSpec

PROFILE_IDS = ["dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "mi300x"]
# Every numeric datasheet key, dotted as in `sources`.
SOURCED_KEYS = [
    "gpu.memory_gib",
    "gpu.hbm_bandwidth_gb_per_s",
    "gpu.peak_tflops",
    "gpu.sm_count",
    "gpu.gemm_tile_m",
    "gpu.gemm_tile_n",
    "node.gpus_per_node",
    "node.nvlink_domain_gpus",
    "node.nvlink_gb_per_s",
    "node.host_link_gb_per_s",
    "network.nics_per_node",
    "network.nic_gbit_per_s",
]
# Numeric keys a profile may carry (each then needs a source too).
OPTIONAL_SOURCED_KEYS = [
    "node.nvls_efficiency",
    "gpu.fused_attention_tflops",
    "gpu.flash2_attention_tflops",
    "gpu.flash1_attention_tflops",
    "gpu.fp8_gemm_speedup",
]


def test_profiles_load_with_required_ids() -> None:
    profiles = load_profiles()
    assert set(PROFILE_IDS) <= set(profiles)
    assert len(profiles) == len(list(DEFAULT_PROFILES_DIR.glob("*.json")))


def _profile(profile_id: str) -> HardwareProfile:
    return load_profiles()[profile_id]


@pytest.mark.parametrize("profile_id", PROFILE_IDS, ids=PROFILE_IDS)
def test_every_numeric_key_has_a_source(profile_id: str) -> None:
    profile = _profile(profile_id)
    raw = json.loads((DEFAULT_PROFILES_DIR / f"{profile_id}.json").read_text())
    numeric = {
        f"{section}.{key}"
        for section in ("gpu", "node", "network")
        for key, value in raw[section].items()
        if isinstance(value, int | float | dict) and not isinstance(value, bool)
    }
    assert set(SOURCED_KEYS) <= numeric <= set(SOURCED_KEYS + OPTIONAL_SOURCED_KEYS)
    assert all(profile.sources.get(key, "").strip() for key in numeric)


@pytest.mark.parametrize("profile_id", PROFILE_IDS, ids=PROFILE_IDS)
def test_calibration_provenance(profile_id: str) -> None:
    profile = _profile(profile_id)
    cal = profile.calibration
    assert cal is not None
    if gpu_kind(profile) in FIT_SETS:
        assert len(cal.fitted_on) > 0 and cal.transferred_from is None
    else:
        assert cal.fitted_on == [] and cal.transferred_from


REQUIRED_PRESETS = [
    "gpt3-175b",
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "mixtral-8x7b",
    "deepseek-v3",
    "nemotron4-15b",
    "nemotron4-340b",
    "gpt-neox-20b",
    "bloom-176b",
    "megatron-1.7b",
    "megatron-3.6b",
    "megatron-7.5b",
    "megatron-18.4b",
    "megatron-39.1b",
    "megatron-76.1b",
    "megatron-145.6b",
    "megatron-310.1b",
    "megatron-529.6b",
    "megatron-1t",
]
RAW_PRESETS = json.loads(PRESETS_FILE.read_text())


def test_required_presets_exist() -> None:
    assert set(REQUIRED_PRESETS) <= set(load_presets())
    assert set(load_presets()) == set(RAW_PRESETS)


@pytest.mark.parametrize("preset_id", sorted(RAW_PRESETS), ids=sorted(RAW_PRESETS))
def test_preset_validates_and_has_source(preset_id: str) -> None:
    entry = RAW_PRESETS[preset_id]
    assert ModelSpec.model_validate(entry["model"]) == get_preset(preset_id).model
    assert entry["source"].strip()


PUBLISHED_SIZES = [
    # (preset, total params, active params, one unit of the published figure's last digit): Llama 3 model
    # cards; Mixtral paper (46.7B total, 12.9B active). The tolerance is 1% or one unit of the last digit,
    # whichever is larger: cards round or truncate (Qwen3-30B-A3B has 3.353B active parameters by a count
    # of its weights and its card says "3.3B").
    ("llama3-8b", 8.03e9, 8.03e9, 0.01e9),
    ("llama3-70b", 70.6e9, 70.6e9, 0.1e9),
    ("llama3-405b", 405.9e9, 405.9e9, 0.1e9),
    ("mixtral-8x7b", 46.7e9, 12.9e9, 0.1e9),
    ("mixtral-8x22b", 141e9, 39e9, 1e9),  # Mistral AI's announcement: 141B total, 39B active
    # Qwen3 Technical Report (arXiv 2505.09388) Table 2 / model cards: 30.5B total 3.3B active, 235B / 22B.
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.1e9),
    ("qwen3-235b-a22b", 235e9, 22e9, 1e9),
    # Meta's Llama 4 model card: Maverick 17B active, 400B total (Scout's 109B counts its vision encoder).
    ("llama4-maverick", 400e9, 17e9, 1e9),
]


@pytest.mark.parametrize(
    ("preset_id", "total", "active", "rounding"), PUBLISHED_SIZES, ids=[r[0] for r in PUBLISHED_SIZES]
)
def test_preset_sizes_match_published(preset_id: str, total: float, active: float, rounding: float) -> None:
    model = get_preset(preset_id).model
    assert total_params(model) == pytest.approx(total, rel=0.01, abs=rounding)
    assert active_params(model) == pytest.approx(active, rel=0.01, abs=rounding)


def test_gpt_oss_120b_matches_openais_model_card() -> None:
    """OpenAI's gpt-oss model card (2025-08-05): 116.83B parameters in all and 5.13B active per token, an active
    count that leaves the input embedding (201,088 x 2,880) out and the unembedding in. The preset leaves out the
    projection biases and attention sinks (about 40M)."""
    model = get_preset("gpt-oss-120b").model
    assert total_params(model) == pytest.approx(116.83e9, abs=0.05e9)
    assert active_params(model) - model.vocab_size * model.hidden_size == pytest.approx(5.13e9, abs=0.01e9)
