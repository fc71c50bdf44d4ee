"""Request and response models of the HTTP API (the contract in docs/api.md).

Kept apart from `planner`'s specs: requests accept the three model forms and
the cluster forms, responses carry units in their names. Converting between
them is `api/convert.py`'s job; no math here.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from planner.launch import LaunchInputs
from planner.profiles import (
    DEFAULT_MEMORY_HEADROOM,
    PROFILE_ID_PATTERN,
    Calibration,
    EfficiencySection,
    GpuSection,
    LatencySection,
    NetworkSection,
    NodeSection,
)
from planner.rules import VERSIONS, Framework
from planner.search.rank import Objective
from planner.specs import MAX_GLOBAL_BATCH, MAX_LAYERS, ModelSpec, Recompute, RecomputeModule, TrainingSpec

__all__ = [
    "ClusterIn",
    "EstimateOut",
    "EstimateRequest",
    "EstimateResponse",
    "LayoutIn",
    "LayoutOut",
    "ModelIn",
    "ModelOut",
    "PlanRequest",
    "PlanResponse",
]

_STRICT = ConfigDict(extra="forbid", strict=True)
"""As planner.specs: unknown keys and coerced values (`"8"`, `8.0`, `true` for an integer) are refused."""
MAX_JSON_DEPTH = 32
"""Deepest nesting accepted in the free-form objects (hf_config, overrides); a real config.json nests 3 or 4."""


def _bounded_depth(value: dict[str, Any]) -> dict[str, Any]:
    # Deeper objects validate but then overflow JSON serialisation (the cache key): refuse them here, as a 422.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_bounded_depth)]


def _unencodable(value: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where in a decoded JSON body a string (a key or a value) cannot be encoded as UTF-8, or None.

    JSON may escape a lone UTF-16 surrogate (`"\\ud800"`); Python decodes it to a `str` that no UTF-8
    writer accepts, so hashing, logging or returning it would fail later, far from the input.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, (*where, str(key).encode("utf-8", "replace").decode())))
                stack.append((child, (*where, str(key).encode("utf-8", "replace").decode())))
        elif isinstance(item, list):
            stack.extend((child, (*where, i)) for i, child in enumerate(item))
    return None


_VERSION_DESCRIPTION = "The framework release the plan is for (its rules and flags); default: the newest targeted. " + (
    "; ".join(f"{name}: {', '.join(releases)}" for name, releases in VERSIONS.items())
)
_VERSION_EXAMPLES: dict[str, Any] = {"examples": [next(iter(VERSIONS["megatron"]))]}
_LAUNCH_DESCRIPTION = (
    "The data and tokenizer the launches train on; without them each launch is a smoke test on mock data."
)


def _known_version(version: str | None, info: ValidationInfo) -> str | None:
    """A release of the request's framework (planner.rules.VERSIONS), else a 422 naming framework_version."""
    framework = info.data.get("framework")
    if version is None or framework is None:
        return version
    accepted = VERSIONS[framework]
    if version not in accepted:
        raise ValueError(f"{framework} version {version!r} is not targeted; accepted: {', '.join(accepted)}")
    return version


class _Request(BaseModel):
    """A request body: every string in it must be valid text, checked once before any field."""

    @model_validator(mode="before")
    @classmethod
    def _text_is_encodable(cls, data: Any) -> Any:
        if (loc := _unencodable(data)) is not None:
            error = PydanticCustomError("unencodable_text", "a lone UTF-16 surrogate is not valid text")
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(type=error, loc=loc, input="")])
        return data


class PresetModel(BaseModel):
    model_config = _STRICT | ConfigDict(json_schema_extra={"examples": [{"preset": "gpt3-175b"}]})

    preset: str = Field(
        max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Built-in model id (GET /v1/models)."
    )
    seq_length: int | None = Field(
        default=None, ge=1, le=4_194_304, description="Override the preset's sequence length."
    )


class HfConfigModel(BaseModel):
    model_config = _STRICT

    hf_config: JsonObject = Field(
        description="A Hugging Face config.json (Llama, Mistral/Mixtral, Qwen, DeepSeek-V3, GPT-2, GPT-NeoX keys).",
        json_schema_extra={
            "examples": [
                {
                    "model_type": "llama",
                    "num_hidden_layers": 32,
                    "hidden_size": 4096,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "intermediate_size": 14336,
                    "vocab_size": 128256,
                    "max_position_embeddings": 8192,
                }
            ]
        },
    )
    seq_length: int | None = Field(default=None, ge=1, le=4_194_304, description="Training sequence length.")


MODEL_FORMS = ("preset_form", "hf_config_form", "shape_form")
"""The tags of the three model forms, names no field uses; `api.errors` drops them from error locations."""


def _model_form(value: Any) -> str | None:
    """Which form a `model` object is: it has `preset`, or `hf_config`, or else it is an explicit shape.

    Choosing the form from its keys means a broken explicit shape is reported against the shape's own
    fields (`model.vocab_size: Field required`), not as three failed alternatives."""
    if isinstance(value, dict):
        return "preset_form" if "preset" in value else "hf_config_form" if "hf_config" in value else "shape_form"
    if isinstance(value, PresetModel):
        return "preset_form"
    if isinstance(value, HfConfigModel):
        return "hf_config_form"
    return "shape_form" if isinstance(value, ModelSpec) else None


ModelIn = Annotated[
    Annotated[PresetModel, Tag("preset_form")]
    | Annotated[HfConfigModel, Tag("hf_config_form")]
    | Annotated[ModelSpec, Tag("shape_form")],
    Discriminator(
        _model_form,
        custom_error_type="model_form",
        custom_error_message="model must be an object: a preset, an hf_config or an explicit shape",
    ),
]
"""A preset, a Hugging Face config, or an explicit shape, told apart by their keys."""


class ClusterIn(BaseModel):
    """A built-in profile (optionally with partial overrides), or an inline profile; plus the GPU count."""

    model_config = _STRICT | ConfigDict(
        json_schema_extra={"examples": [{"profile": "dgx-a100-80gb", "num_gpus": 1024}]},
    )

    num_gpus: int = Field(ge=1, le=1_048_576, description="GPUs in the job (an upper bound for gpu_efficiency).")
    memory_headroom: float = Field(
        default=DEFAULT_MEMORY_HEADROOM,
        ge=0,
        le=0.5,
        description="Fraction of each GPU's memory no plan may fill (default 0.05); every fit test applies it.",
    )
    profile: str | None = Field(
        default=None,
        max_length=129,
        pattern=PROFILE_ID_PATTERN,
        description="Profile id: built-in (GET /v1/hardware-profiles) or a site calibration `base@site`.",
    )
    overrides: JsonObject | None = Field(
        default=None,
        description="Partial profile deep-merged over the built-in one, e.g. {network: {nics_per_node: 4}}.",
    )
    id: str | None = Field(default=None, max_length=64, description="Inline profile: its id.")
    name: str | None = Field(default=None, max_length=200, description="Inline profile: its name.")
    gpu: GpuSection | None = Field(default=None, description="Inline profile: the GPU.")
    node: NodeSection | None = Field(default=None, description="Inline profile: the server.")
    network: NetworkSection | None = Field(default=None, description="Inline profile: the NICs.")
    latency: LatencySection | None = None
    efficiency: EfficiencySection | None = None
    calibration: Calibration | None = None
    sources: dict[str, str] | None = None


class PlanRequest(_Request):
    model_config = _STRICT | ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": {"preset": "gpt3-175b"},
                    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
                    "training": {"global_batch_size": 1536, "precision": "bf16"},
                    "constraints": {"tp": 8, "recompute": ["selective", "full"]},
                    "top_k": 10,
                }
            ]
        },
    )

    model: ModelIn = Field(description="A preset, a Hugging Face config, or an explicit shape.")
    cluster: ClusterIn
    training: TrainingSpec
    constraints: dict[str, int | bool | str | list[int | bool | str]] | None = Field(
        default=None, description="Pin a dimension with a value or restrict it with a list; omitted keys are searched."
    )
    top_k: int = Field(default=10, ge=1, le=100, description="Plans to return.")
    objective: Objective = Field(default=Objective.STEP_TIME, strict=False, description="step_time or gpu_efficiency.")
    max_step_time_s: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        description="Drop plans whose step takes longer (seconds); bounds gpu_efficiency's trade of time for GPUs.",
    )
    framework: Framework = Field(
        default=Framework.MEGATRON,
        strict=False,
        description="The framework the plan is for: only layouts it accepts are searched (core: common rules only).",
    )
    framework_version: str | None = Field(
        default=None, max_length=64, description=_VERSION_DESCRIPTION, json_schema_extra=_VERSION_EXAMPLES
    )
    launch: LaunchInputs | None = Field(default=None, description=_LAUNCH_DESCRIPTION)

    @field_validator("framework_version")
    @classmethod
    def _version_of_framework(cls, version: str | None, info: ValidationInfo) -> str | None:
        return _known_version(version, info)


class LayoutIn(BaseModel):
    model_config = _STRICT

    tp: int = Field(ge=1, le=1_048_576, description="Tensor-parallel size.")
    pp: int = Field(ge=1, le=1_048_576, description="Pipeline-parallel size.")
    dp: int = Field(ge=1, le=1_048_576, description="Data-parallel size.")
    cp: int = Field(default=1, ge=1, le=1_048_576, description="Context-parallel size.")
    ep: int = Field(
        default=1,
        ge=1,
        le=1_048_576,
        description="Expert-parallel size (carved out of each stage's tp x cp x dp ranks).",
    )
    etp: int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="Expert tensor-parallel size: the ranks each routed expert is split over (Megatron-Core's "
        "expert_tensor_parallel_size); null (default): the same as tp. (tp x cp x dp) % (etp x ep) must be 0.",
    )
    vp: int = Field(default=1, ge=1, le=1024, description="Model chunks per pipeline rank; 1 = no interleaving.")
    micro_batch_size: int = Field(default=1, ge=1, le=65536, description="Sequences per micro-batch.")
    num_microbatches: int | None = Field(
        default=None, ge=1, le=MAX_GLOBAL_BATCH, description="Optional; must equal B / (b x dp)."
    )
    recompute: Recompute = Field(default=Recompute.NONE, strict=False)
    sequence_parallel: bool = False
    zero_stage: int = Field(default=0, ge=0, le=3, description="0 none, 1 optimizer states, 2 + grads, 3 + weights.")
    layers_per_stage: list[Annotated[int, Field(ge=1, le=MAX_LAYERS)]] | None = Field(
        default=None,
        max_length=MAX_LAYERS,
        description="Layers per pipeline stage, each 1 to 1024. With vp > 1 the middle stages' counts are multiples"
        " of vp; a first or last stage vp does not divide holds vp - 1 chunks of a middle stage's size and one"
        " short chunk beside the embedding or the loss (launched as a Megatron-Core pipeline layout).",
    )
    account_for_embedding_in_pipeline_split: bool = Field(
        default=False,
        description="Count the input embedding as one pipeline layer on the first stage (Megatron-Core flag).",
    )
    account_for_loss_in_pipeline_split: bool = Field(
        default=False,
        description="Count the output layer and loss as one pipeline layer on the last stage (Megatron-Core flag).",
    )
    recompute_modules: list[Annotated[RecomputeModule, Field(strict=False)]] | None = Field(
        default=None,
        min_length=1,
        max_length=len(RecomputeModule),
        description="What recompute selective reruns in this layout (`RecomputeModule`, Megatron-Core"
        " `--recompute-modules`), each module at most once; only with recompute selective. null (default): the"
        " training's (training.runtime.recompute_modules, or its default). A plan's layout states the set it runs.",
    )

    @model_validator(mode="after")
    def _modules_with_selective_recompute(self) -> Self:
        modules = self.recompute_modules
        if modules is None:
            return self
        repeated = sorted({m.value for m in modules if modules.count(m) > 1})
        if repeated:
            raise ValueError(f"recompute_modules names {', '.join(repeated)} more than once; name each module once")
        if self.recompute is not Recompute.SELECTIVE:
            raise ValueError(
                f"recompute_modules applies to recompute selective only; got recompute({self.recompute.value})"
            )
        return self

    @model_validator(mode="after")
    def _at_most_the_largest_cluster(self) -> Self:
        # The cost model places every rank (arrays of tp*pp*dp*cp entries): bound the product, not only each factor.
        gpus = self.tp * self.pp * self.dp * self.cp
        if gpus > 1_048_576:
            raise ValueError(f"tp * pp * dp * cp = {gpus} GPUs exceeds the largest cluster accepted (1048576)")
        return self


class EstimateRequest(_Request):
    model_config = _STRICT

    model: ModelIn
    cluster: ClusterIn
    training: TrainingSpec
    layout: LayoutIn
    framework: Framework = Field(
        default=Framework.MEGATRON, strict=False, description="The framework whose rules the layout is checked against."
    )
    framework_version: str | None = Field(
        default=None, max_length=64, description=_VERSION_DESCRIPTION, json_schema_extra=_VERSION_EXAMPLES
    )

    @field_validator("framework_version")
    @classmethod
    def _version_of_framework(cls, version: str | None, info: ValidationInfo) -> str | None:
        return _known_version(version, info)


class LayoutOut(BaseModel):
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    etp: int = Field(
        description="Expert tensor-parallel size (equal to tp unless the layout splits experts otherwise)."
    )
    vp: int
    micro_batch_size: int
    num_microbatches: int
    recompute: Recompute
    sequence_parallel: bool
    zero_stage: int
    layers_per_stage: list[int] | None
    account_for_embedding_in_pipeline_split: bool
    account_for_loss_in_pipeline_split: bool
    recompute_modules: list[RecomputeModule] | None = Field(
        default=None,
        description="The modules selective recompute reruns in this layout, the search's choice where the request"
        " names none (training.runtime.recompute_modules null: the request's default set and the module sets"
        " NVIDIA's performance recipes run are all searched); null unless recompute is selective.",
    )


class MemoryOut(BaseModel):
    peak_gib: float
    capacity_gib: float = Field(description="The GPU's memory (datasheet).")
    usable_gib: float = Field(description="What a plan may fill: capacity_gib less the cluster's memory_headroom.")
    breakdown_gib: dict[str, float]


class NetworkOut(BaseModel):
    tp_groups_over_network: int
    cp_groups_over_network: int
    ep_groups_over_network: int
    dp_groups_over_network: int
    dp_groups: int
    pp_hops_over_network: int
    pp_hops: int


class EstimateOut(BaseModel):
    step_time_s: float
    tokens_per_s: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    bubble_fraction: float
    time_breakdown_s: dict[str, float]
    memory: MemoryOut
    network: NetworkOut
    microbatch_forward_s: float = Field(description="One micro-batch's forward on the slowest stage.")
    microbatch_backward_s: float = Field(description="One micro-batch's backward (with recompute) there.")
    days_to_train: float | None = None
    gpu_hours: float | None = None


class FrameworkLaunchOut(BaseModel):
    framework_version: str
    args: list[str]
    command: str
    config: dict[str, Any]
    notes: list[str]
    script: str | None = None


class PlanOut(BaseModel):
    rank: int
    num_gpus: int
    equivalent: bool = Field(
        default=False,
        description="Within equivalent_within of the fastest plan: as good under the model's uncertainty; these"
        " come first, simplest first.",
    )
    layout: LayoutOut
    estimate: EstimateOut
    launch: dict[str, FrameworkLaunchOut]


class BaselineOut(BaseModel):
    rule: str = Field(description="The recipe the baseline follows.")
    plan: PlanOut | None = Field(description="Its layout and estimate; null when nothing the rule allows fits.")
    speedup_of_best: float | None = Field(
        description="The baseline's objective over the best plan's; below 1 only when the request's constraints"
        " exclude the baseline's layout. Null without a plan on either side."
    )


class SearchOut(BaseModel):
    candidates: int = Field(description="Legal layouts in the space.")
    evaluated: int = Field(description="Layouts the cost model evaluated (all of them unless the work budget ran out).")
    feasible: int = Field(description="Evaluated layouts that fit in memory.")
    elapsed_ms: float
    complete: bool = Field(
        description="False when a work limit cut the search short (the same on any machine): plans are the best"
        " of what was evaluated."
    )
    truncated_by: list[str] = Field(
        description="The work limits hit, in order: candidates, stage_split, diagnosis; empty when complete."
    )
    rejected: dict[str, int] = Field(description="Partial layouts removed, by rule.")
    framework: str = Field(description="The rule set every layout passed: core, megatron, nemo or torchtitan.")
    framework_version: str = Field(description="The framework release whose rules those are.")


class DiagnosisOut(BaseModel):
    message: str
    least_memory_layout: LayoutOut | None
    least_memory_gib: float | None
    capacity_gib: float = Field(description="Usable memory per GPU (capacity less memory_headroom).")
    relax: list[str] = Field(
        description="What to change: constraint keys whose removal lets a layout fit, then num_gpus (a larger"
        " count fits: more_gpus) and memory_headroom (the least-memory layout fits the whole HBM)."
    )
    legal_values: dict[str, list[int | bool | str]] = Field(
        default_factory=dict, description="Per constraint key: the values some legal layout takes with it lifted."
    )
    more_gpus: int | None = Field(
        default=None, description="The smallest whole-node GPU count tried (2x, 4x, ... 64x the request) that fits."
    )
    min_gpu_memory_gib: float | None = Field(
        default=None, description="GPU memory on which the least-memory layout would fit, same headroom."
    )


class ModelOut(BaseModel):
    """The model the request resolved to: what was planned, and where each value came from."""

    shape: ModelSpec
    total_params: int = Field(description="Parameters, embeddings and output layer included.")
    active_params: int = Field(description="Parameters one token passes through (MoE: routed top-k and shared).")
    sources: dict[str, str] = Field(
        description="Per field (dotted under moe): preset (with its citation), request, default, or the"
        " hf_config key it was read from."
    )


class AccuracyOut(BaseModel):
    """How far the cost model was from published runs like this request (`planner validate`'s accuracy bands)."""

    gpu_kind: str = Field(description="The GPU kind of the request's profile (A100, H100, B200, GB200, ...).")
    workload: str = Field(
        description="dense (on Megatron-Core, sequences up to 8,192 tokens), dense_long (the same, longer sequences),"
        " dense_fsdp (under PyTorch FSDP), moe (mixture of experts with CUDA graphs), moe_eager (mixture of experts"
        " without CUDA graphs) or hybrid (Mamba-2 mixers among the layers)."
    )
    rows: int = Field(description="Published runs of this GPU kind and workload the model was checked on.")
    sources: list[str] = Field(description="The published sources those runs come from (`planner validate`).")
    mean_error: float = Field(
        description="Mean of measured step / predicted step - 1 over those runs, each predicted with constants"
        " fitted on no run of its source: above 0, the runs took longer than predicted."
    )
    mean_abs_error: float
    p90_abs_error: float = Field(description="Nine runs in ten were at most this far off.")
    min_error: float
    max_error: float
    text: str = Field(description="The same in one sentence.")


_ACCURACY_DESCRIPTION = (
    "How far the model was from published runs of this GPU kind and workload; null where it was checked on none"
    " (e.g. H200, MI300X)."
)
"""The `accuracy` field of the plan and estimate responses."""


class PlanResponse(BaseModel):
    plans: list[PlanOut]
    baseline: BaselineOut = Field(
        description="The paper's 2021 recipe (Narayanan 2021): tp = GPUs per server, the smallest pp that fits,"
        " the rest dp, on full recompute, no sequence parallelism, ZeRO 0, no expert parallelism."
    )
    modern_baseline: BaselineOut = Field(
        description="The same rule of thumb on today's runtime: sequence parallelism, the distributed optimizer"
        " (ZeRO 1), and the best recompute, expert-parallel degree and micro-batch."
    )
    search: SearchOut
    diagnosis: DiagnosisOut | None = None
    idle_gpus: int = Field(
        default=0,
        description="GPUs of the request the best plan leaves unused: the request's count factors badly (the"
        " search also tried whole-node counts below it) or the objective is gpu_efficiency; 0 when all are used.",
    )
    idle_reason: str | None = Field(default=None, description="Why idle_gpus are idle, in words; null when none are.")
    memory_headroom: float = Field(description="The memory headroom every fit test applied (the request's cluster).")
    equivalent_within: float = Field(
        description="Relative gap to the fastest plan under which plans are marked equivalent (the model's stated"
        " uncertainty: 0.03, the mean step-time error on Narayanan 2021 Table 2 in `planner validate`)."
    )
    accuracy: AccuracyOut | None = Field(default=None, description=_ACCURACY_DESCRIPTION)
    model: ModelOut
    cached: bool = False


class ViolationOut(BaseModel):
    rule: str
    message: str


class EstimateResponse(BaseModel):
    layout: LayoutOut
    estimate: EstimateOut
    fits: bool
    violations: list[ViolationOut]
    memory_headroom: float = Field(description="The memory headroom the fit test applied (the request's cluster).")
    accuracy: AccuracyOut | None = Field(default=None, description=_ACCURACY_DESCRIPTION)
    model: ModelOut
    cached: bool = False
