"""Hardware profiles: datasheet numbers with sources, plus fitted constants.

A profile file uses human units in its keys (`memory_gib`, `nvlink_gb_per_s`,
`peak_tflops`); `Hardware` holds the same numbers in SI units, converted once
here. Profiles are data: `load_profiles(dir)` reads them when asked, never at
import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.errors import InvalidSpecError, UnknownHardwareError
from planner.specs import QUANTIZED_PRECISIONS, AttentionKernel, Fp8Recipe, Precision, TrainingSpec
from planner.units import BITS_PER_BYTE, GB, GIB, MICRO, TERA

__all__ = [
    "DEFAULT_PROFILES_DIR",
    "PROFILE_ID_PATTERN",
    "Calibration",
    "ClusterSpec",
    "Hardware",
    "HardwareProfile",
    "load_profiles",
]

PROFILE_ID_PATTERN = r"^[a-z0-9][a-z0-9.-]{0,63}(@[a-z0-9][a-z0-9.-]{0,63})?$"
"""A profile id: a built-in id, optionally `@` and a site name (a calibrated version of that profile)."""

DEFAULT_PROFILES_DIR = Path(__file__).resolve().parent.parent / "hardware_profiles"

_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True)  # as planner.specs: no "8" for 8


class PeakTflops(BaseModel):
    model_config = _FROZEN

    fp16: float | None = Field(default=None, gt=0, le=1e5, description="Dense fp16 tensor-core TFLOP/s.")
    bf16: float | None = Field(default=None, gt=0, le=1e5, description="Dense bf16 tensor-core TFLOP/s.")
    fp8: float | None = Field(default=None, gt=0, le=1e5, description="Dense fp8 TFLOP/s; null if unsupported.")
    nvfp4: float | None = Field(
        default=None,
        gt=0,
        le=1e5,
        description="Dense FP4 (NVFP4 block-scaled) tensor-core TFLOP/s; null where the GPU has no FP4 tensor cores.",
    )


class FusedAttentionTflops(BaseModel):
    model_config = _FROZEN

    forward: float = Field(gt=0, le=1e5, description="Fused (flash) attention forward, bf16, TFLOP/s achieved.")
    backward: float = Field(gt=0, le=1e5, description="Fused (flash) attention backward, bf16, TFLOP/s achieved.")


class GpuSection(BaseModel):
    model_config = _FROZEN

    name: str = Field(max_length=100)
    memory_gib: float = Field(gt=0, le=4096, description="Usable HBM per GPU, GiB.")
    hbm_bandwidth_gb_per_s: float = Field(gt=0, le=1e5, description="Peak HBM bandwidth, GB/s.")
    peak_tflops: PeakTflops
    sm_count: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Streaming multiprocessors (AMD: compute units); sets GEMM wave quantisation. "
        "null: no wave quantisation (only tile quantisation).",
    )
    gemm_tile_m: int = Field(default=256, ge=1, le=4096, description="GEMM output tile rows (tokens) per SM.")
    gemm_tile_n: int = Field(default=128, ge=1, le=4096, description="GEMM output tile columns per SM.")
    fused_attention_tflops: FusedAttentionTflops | None = Field(
        default=None,
        description="Published throughput of the fused attention kernel the frameworks run on this GPU "
        "(long sequence, head dim 128, 16-bit); null: the attention core runs at the GEMM efficiency.",
    )
    flash2_attention_tflops: FusedAttentionTflops | None = Field(
        default=None,
        description="Published throughput of FlashAttention-2 on this GPU (long sequence, head dim 128, 16-bit),"
        " for runs with training.runtime.attention_kernel = flash2; null: such runs price the attention core"
        " at the GEMM efficiency.",
    )
    flash1_attention_tflops: FusedAttentionTflops | None = Field(
        default=None,
        description="Published throughput of FlashAttention v1 on this GPU (long sequence, 16-bit), for runs with"
        " training.runtime.attention_kernel = flash1; null: such runs price the attention core at the GEMM"
        " efficiency.",
    )
    fp8_gemm_non_tn: bool = Field(
        default=False,
        description="FP8 GEMMs take operands in any layout (Blackwell): Transformer Engine keeps one FP8 copy of a"
        " weight for forward and backward. false: TN-only FP8 GEMMs (Hopper), so TE also keeps its transpose.",
    )
    mxfp8: bool = Field(default=False, description="MXFP8 (block-scaled FP8) tensor cores (Blackwell).")
    fp8_block_scaling: bool = Field(
        default=False,
        description="FP8 block-scaled GEMMs for the blockwise recipe (Transformer Engine Float8BlockScaling: compute"
        " capability 9.0 or higher with CUDA 12.9; Hopper natively, Blackwell emulating it with MXFP8).",
    )
    fp8_gemm_speedup: float | None = Field(
        default=None,
        gt=0,
        le=16,
        description="Measured speed-up of large FP8 GEMMs over bf16 ones on this GPU (a vendor benchmark, kernels"
        " only). FP8 GEMMs then run at this ratio of the bf16 ones' efficiency instead of the datasheet's peak"
        " ratio (`Hardware.fp8_gemm_rate`); null: at the peak ratio.",
    )


class NodeSection(BaseModel):
    model_config = _FROZEN

    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs per server (or compute tray).")
    nvlink_domain_gpus: int = Field(ge=1, le=65536, description="GPUs sharing one NVLink/XGMI fabric.")
    nvlink_gb_per_s: float = Field(gt=0, le=1e5, description="Per GPU, per direction, GB/s.")
    nvls_efficiency: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="NVLink SHARP (NVLS): NCCL's efficiency factor for all-reduce reduced in the NVSwitch "
        "(src/graph/tuning.cc nvlsEfficiency: Hopper 0.85, Blackwell 0.74); null: the NVLink domain has no "
        "switch that reduces (A100, MI300X), so every all-reduce runs as a ring.",
    )
    host_link_gb_per_s: float | None = Field(
        default=None,
        gt=0,
        le=1e5,
        description="Per GPU, per direction, GB/s between its HBM and pinned host memory with every GPU of the "
        "node copying at once: the GPU's host link (PCIe, NVLink-C2C), or its share of the host memory's "
        "bandwidth where that is lower. What activation offloading copies over "
        "(`training.activation_offload_layers`); null: unknown, and offloading is refused.",
    )

    @model_validator(mode="after")
    def _domain_holds_nodes(self) -> Self:
        if self.nvlink_domain_gpus % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain_gpus({self.nvlink_domain_gpus}) % gpus_per_node({self.gpus_per_node}) != 0"
            )
        return self


class NetworkSection(BaseModel):
    model_config = _FROZEN

    nics_per_node: int = Field(ge=1, le=64, description="Compute NICs per node.")
    nic_gbit_per_s: float = Field(gt=0, le=1e5, description="Per NIC, per direction, Gbit/s.")


class LatencySection(BaseModel):
    model_config = _FROZEN

    nvlink_us: float = Field(default=5.0, ge=0, le=1e4, description="Per-step latency of an NVLink collective, us.")
    network_us: float = Field(default=10.0, ge=0, le=1e4, description="Per-step latency across the network, us.")
    collective_base_us: float = Field(
        default=8.4,
        ge=0,
        le=1e4,
        description="Fixed latency of one ring collective on top of its steps, us (NCCL baseLatencies, Ring/Simple).",
    )
    net_overhead_us: float = Field(
        default=1.0,
        ge=0,
        le=1e4,
        description="Host cost of posting one network send, us (NCCL getNetOverhead: 1 Intel x86, 2 AMD x86).",
    )


class EfficiencySection(BaseModel):
    """Achieved fractions of datasheet rates. Stated assumptions, the same for every GPU; not fitted."""

    model_config = _FROZEN

    hbm: float = Field(default=0.85, gt=0, le=1, description="Fraction of HBM bandwidth memory-bound kernels reach.")
    nvlink: float = Field(default=0.80, gt=0, le=1, description="NCCL bus bandwidth over NVLink / datasheet rate.")
    network: float = Field(default=0.90, gt=0, le=1, description="NCCL bus bandwidth over the NICs / line rate.")


class Calibration(BaseModel):
    """The two fitted constants of a GPU kind (DESIGN.md: at most two), and the rows they came from."""

    model_config = _FROZEN

    gemm_peak_efficiency: float = Field(gt=0, le=1, description="Fraction of peak a large GEMM reaches.")
    gemm_overhead_us: float = Field(
        ge=0, le=1e4, description="Fixed GPU time per GEMM kernel (prologue, pipeline fill and drain), microseconds."
    )
    fitted_on: list[str] = Field(default_factory=list, description="Published-run ids used by the fit.")
    fitted_by: str = Field(default="", description="Command that produced these numbers.")
    transferred_from: str | None = Field(
        default=None, description="GPU kind whose fit is reused when this kind has no published rows."
    )


DEFAULT_CALIBRATION = Calibration(
    gemm_peak_efficiency=0.75,
    gemm_overhead_us=20.0,
    fitted_by="none: a stated guess for inline profiles that carry no calibration",
)


NVFP4_GEMM_SPEEDUP = 6.812 / 3.764
"""Throughput of NVFP4 GEMM kernels against per-tensor-scaled FP8 ones on the same GPU: the same measurement as
`MXFP8_GEMM_RATE` (TE's GEMM profiling guide, NVIDIA B300, the twelve GEMMs of a hidden-4096 layer at 15,872
tokens, inputs quantized beforehand): 6.812 ms per layer under FP8 current scaling, 3.764 ms under NVFP4, 1.81x.
Applied as measured to every GPU with FP4 tensor cores, never above the ratio of the FP4 and FP8 peaks
(`HardwareProfile._quantized_gemm_rate`); the quantization passes are priced apart (`costmodel.compute`)."""

MXFP8_GEMM_RATE = 6.812 / 7.161
"""Throughput of MXFP8 GEMM kernels against per-tensor-scaled FP8 ones on the same tensor cores: Transformer
Engine's GEMM profiling guide (`docs/examples/gemm_profiling/gemm_profiling.rst` at TE d0067d0, "Autocast vs
Pre-quantized"), NVIDIA B300, the twelve GEMMs of a hidden-4096 layer at 15,872 tokens with the inputs
quantized beforehand (kernels only): 6.812 ms per layer under FP8 current scaling, 7.161 ms under MXFP8.
The block scales (one per 32 elements of each operand) ride through the GEMM's main loop. Measured on one
Blackwell part and shape set; applied to every GPU with MXFP8 tensor cores."""


class HardwareProfile(BaseModel):
    """One system. `sources` maps each dotted key (e.g. `gpu.peak_tflops`) to where its number comes from."""

    model_config = _FROZEN

    id: str = Field(
        pattern=PROFILE_ID_PATTERN,
        description="Profile id; a site calibration of a built-in profile is `base@site` (`dgx-h100@my-cluster`).",
    )
    name: str = Field(default="", max_length=200)
    gpu: GpuSection
    node: NodeSection
    network: NetworkSection
    latency: LatencySection = Field(default_factory=LatencySection)
    efficiency: EfficiencySection = Field(default_factory=EfficiencySection)
    calibration: Calibration | None = None
    sources: dict[str, str] = Field(default_factory=dict)

    def training_hardware(self, training: TrainingSpec) -> Hardware:
        """`hardware` at the training's precision and FP8 recipe (no memory headroom: `memory.usable_hardware`)."""
        return self.hardware(training.precision, training.fp8_recipe)

    def hardware(self, precision: Precision, fp8_recipe: Fp8Recipe | None = None) -> Hardware:
        """The profile in SI units for one precision; raises if the GPU lacks that precision or FP8 recipe."""
        peak = getattr(self.gpu.peak_tflops, precision.value)
        if peak is None:
            raise InvalidSpecError("training.precision", f"{self.gpu.name} has no {precision.value} tensor cores")
        quantized = precision in QUANTIZED_PRECISIONS
        if precision is Precision.FP8 and fp8_recipe is Fp8Recipe.MXFP8 and not self.gpu.mxfp8:
            raise InvalidSpecError(
                "training.fp8_recipe", f"mxfp8 needs MXFP8 tensor cores; {self.gpu.name} has none (gpu.mxfp8 false)"
            )
        if precision is Precision.FP8 and fp8_recipe is Fp8Recipe.BLOCKWISE and not self.gpu.fp8_block_scaling:
            raise InvalidSpecError(
                "training.fp8_recipe",
                f"blockwise needs FP8 block-scaled GEMMs (compute capability 9.0 or higher with CUDA 12.9);"
                f" {self.gpu.name} has none (gpu.fp8_block_scaling false)",
            )
        cal = self.calibration
        return Hardware(
            peak_flop_per_s=peak * TERA,
            bf16_peak_flop_per_s=self._bf16_peak_tflops(precision) * TERA if quantized else None,
            hbm_bytes=self.gpu.memory_gib * GIB,
            hbm_bandwidth_bytes_per_s=self.gpu.hbm_bandwidth_gb_per_s * GB * self.efficiency.hbm,
            gpus_per_node=self.node.gpus_per_node,
            nvlink_domain_gpus=self.node.nvlink_domain_gpus,
            nvlink_bytes_per_s=self.node.nvlink_gb_per_s * GB * self.efficiency.nvlink,
            nvls_efficiency=self.node.nvls_efficiency or 0.0,
            nic_bytes_per_s_per_gpu=(
                self.network.nics_per_node
                * self.network.nic_gbit_per_s
                * GB
                / BITS_PER_BYTE
                / self.node.gpus_per_node
                * self.efficiency.network
            ),
            nvlink_latency_s=self.latency.nvlink_us * MICRO,
            network_latency_s=self.latency.network_us * MICRO,
            collective_base_latency_s=self.latency.collective_base_us * MICRO,
            net_overhead_s=self.latency.net_overhead_us * MICRO,
            gemm_peak_efficiency=cal.gemm_peak_efficiency if cal else DEFAULT_CALIBRATION.gemm_peak_efficiency,
            gemm_overhead_s=(cal.gemm_overhead_us if cal else DEFAULT_CALIBRATION.gemm_overhead_us) * MICRO,
            fused_attention_flop_per_s=(
                (fa.forward * TERA, fa.backward * TERA) if (fa := self.gpu.fused_attention_tflops) else None
            ),
            flash2_attention_flop_per_s=(
                (f2.forward * TERA, f2.backward * TERA) if (f2 := self.gpu.flash2_attention_tflops) else None
            ),
            flash1_attention_flop_per_s=(
                (f1.forward * TERA, f1.backward * TERA) if (f1 := self.gpu.flash1_attention_tflops) else None
            ),
            fp8_gemm_non_tn=self.gpu.fp8_gemm_non_tn,
            fp8_gemm_rate=self._quantized_gemm_rate(precision, fp8_recipe),
            nvfp4=precision is Precision.NVFP4,
            host_link_bytes_per_s=None if (link := self.node.host_link_gb_per_s) is None else link * GB,
            sm_count=self.gpu.sm_count or 1,
            gemm_tile_m=self.gpu.gemm_tile_m,
            gemm_tile_n=self.gpu.gemm_tile_n,
        )

    def _quantized_gemm_rate(self, precision: Precision, fp8_recipe: Fp8Recipe | None) -> float:
        """A quantized run's GEMM throughput against its datasheet peak (fp8 or nvfp4) at the bf16 GEMMs'
        efficiency; 1 for other precisions.

        FP8: the measured FP8 over bf16 speed-up (`gpu.fp8_gemm_speedup`) over the peaks' ratio (1 where the
        profile states no speed-up), times `MXFP8_GEMM_RATE` under MXFP8 and under the blockwise recipe on
        MXFP8 tensor cores, which Transformer Engine runs as MXFP8 ("Blackwell and later (SM >= 10.0) - the
        recipe is emulated with MXFP8", TE docs `features/low_precision_training/fp8_blockwise_scaling`,
        "Supported devices"). Blockwise on Hopper runs cuBLAS's block-scaled FP8 kernels, the ones
        `gpu.fp8_gemm_speedup`'s source (cuBLAS 12.9 blog) measured.
        NVFP4: the per-tensor FP8 rate times `NVFP4_GEMM_SPEEDUP`, at most the FP4 / FP8 peak ratio, over that
        ratio (a rate against the FP4 peak)."""
        if precision not in QUANTIZED_PRECISIONS:
            return 1.0
        peaks = self.gpu.peak_tflops
        rate = 1.0
        if self.gpu.fp8_gemm_speedup is not None and peaks.fp8 is not None:
            rate = self.gpu.fp8_gemm_speedup * self._bf16_peak_tflops(precision) / peaks.fp8
        if precision is Precision.NVFP4:
            if peaks.fp8 is None or peaks.nvfp4 is None:
                raise InvalidSpecError(
                    "training.precision",
                    f"nvfp4 is priced from the GPU's fp8 and nvfp4 peaks; {self.gpu.name} lacks one"
                    " (gpu.peak_tflops.fp8, gpu.peak_tflops.nvfp4)",
                )
            peak_ratio = peaks.nvfp4 / peaks.fp8
            return rate * min(NVFP4_GEMM_SPEEDUP, peak_ratio) / peak_ratio
        as_mxfp8 = fp8_recipe is Fp8Recipe.MXFP8 or (fp8_recipe is Fp8Recipe.BLOCKWISE and self.gpu.mxfp8)
        return rate * MXFP8_GEMM_RATE if as_mxfp8 else rate

    def _bf16_peak_tflops(self, precision: Precision) -> float:
        """The bf16 peak a quantized run computes its other GEMMs at (attention core, output layer, router)."""
        if self.gpu.peak_tflops.bf16 is None:
            raise InvalidSpecError(
                "training.precision",
                f"{precision.value} runs attention and the output layer in bf16; {self.gpu.name} has no bf16",
            )
        return self.gpu.peak_tflops.bf16


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware:
    """A profile resolved to SI units and achieved (not datasheet) rates; what the cost model reads."""

    peak_flop_per_s: float
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    gpus_per_node: int
    nvlink_domain_gpus: int
    nvlink_bytes_per_s: float
    nic_bytes_per_s_per_gpu: float
    nvlink_latency_s: float
    network_latency_s: float
    collective_base_latency_s: float
    net_overhead_s: float
    gemm_peak_efficiency: float
    gemm_overhead_s: float
    bf16_peak_flop_per_s: float | None = None
    """Set for a quantized run only (fp8, nvfp4): the bf16 peak of the GEMMs Transformer Engine keeps in bf16
    (the attention core, the output layer, the router); `peak_flop_per_s` is then the fp8 or nvfp4 peak of the
    transformer layers' linear GEMMs."""
    nvfp4: bool = False
    """The quantized run is NVFP4 (its cast kernels' bytes, `costmodel.compute.quantize_s`)."""

    @property
    def quantized(self) -> bool:
        """Whether the run's linear GEMMs are quantized (fp8 or nvfp4: at that peak, behind cast kernels)."""
        return self.bf16_peak_flop_per_s is not None

    def unquantized(self) -> Hardware:
        """The same GPU with nothing quantized, every GEMM at the 16-bit peak: what a quantized run's BF16 layers
        run on (`TrainingSpec.bf16_layers_at_start` / `bf16_layers_at_end`); itself when the run is not quantized."""
        if self.bf16_peak_flop_per_s is None:
            return self
        return replace(
            self, peak_flop_per_s=self.bf16_peak_flop_per_s, bf16_peak_flop_per_s=None, fp8_gemm_rate=1.0, nvfp4=False
        )

    def gemm_peak_flop_per_s(self, fp8_gemm: bool) -> float:
        """The peak one GEMM runs at: the training precision's for a GEMM Transformer Engine quantizes
        (`gemms.Gemm.fp8`; under fp8 / nvfp4 times `fp8_gemm_rate`, the recipe's kernels), else the 16-bit
        peak (bf16 under a quantized run; the same peak under bf16/fp16)."""
        if self.bf16_peak_flop_per_s is None:
            return self.peak_flop_per_s
        return self.peak_flop_per_s * self.fp8_gemm_rate if fp8_gemm else self.bf16_peak_flop_per_s

    fused_attention_flop_per_s: tuple[float, float] | None = None
    """(forward, backward) flop/s of the fused attention kernel as published (`GpuSection.fused_attention_tflops`);
    None: priced like a GEMM (`compute.tensor_core_time_s`)."""
    flash2_attention_flop_per_s: tuple[float, float] | None = None
    """(forward, backward) flop/s of FlashAttention-2 as published (`GpuSection.flash2_attention_tflops`); None:
    priced like a GEMM."""
    flash1_attention_flop_per_s: tuple[float, float] | None = None
    """(forward, backward) flop/s of FlashAttention v1 as published (`GpuSection.flash1_attention_tflops`); None:
    priced like a GEMM."""

    fp8_gemm_non_tn: bool = False
    """FP8 GEMMs take any operand layout (`GpuSection.fp8_gemm_non_tn`): no transposed FP8 weight copy."""
    fp8_gemm_rate: float = 1.0
    """Quantized GEMM kernels against their peak at the bf16 GEMMs' efficiency
    (`HardwareProfile._quantized_gemm_rate`): under FP8 the GPU's measured FP8 speed-up over the peaks' ratio,
    times `MXFP8_GEMM_RATE` under MXFP8; under NVFP4 that per-tensor rate times `NVFP4_GEMM_SPEEDUP` over the
    FP4 / FP8 peak ratio; 1 otherwise."""
    nvls_efficiency: float = 0.0
    """NCCL's NVLink SHARP efficiency (`NodeSection.nvls_efficiency`); 0: no NVLS in the NVLink domain."""
    host_link_bytes_per_s: float | None = None
    """One GPU's copy rate to and from pinned host memory, per direction (`NodeSection.host_link_gb_per_s`, a
    datasheet peak); None: not in the profile."""
    sm_count: int = 1
    """SMs that run GEMM tiles side by side (one wave); 1 when the profile does not say (no wave quantisation)."""
    gemm_tile_m: int = 256
    gemm_tile_n: int = 128

    def attention_flop_per_s(self, kernel: AttentionKernel) -> tuple[float, float] | None:
        """(forward, backward) flop/s of the fused attention `kernel` on this GPU; None: priced like a GEMM."""
        return {
            AttentionKernel.CUDNN: self.fused_attention_flop_per_s,
            AttentionKernel.FLASH2: self.flash2_attention_flop_per_s,
            AttentionKernel.FLASH1: self.flash1_attention_flop_per_s,
        }[kernel]


DEFAULT_MEMORY_HEADROOM = 0.05
"""Fraction of each GPU's memory no plan may fill (`planner.costmodel.memory.usable_hardware`).

5%: 4 GiB of an 80 GiB GPU, 7 GiB of an H200's 141 GiB. A stated allowance, not a fit: on top of the
memory model's own 2 GiB runtime allowance and 5% activation fragmentation it covers what the model
does not count (NCCL buffers, allocator blocks reserved but not handed out) and its error, so that a
plan predicted at 79 of 80 GiB is not offered as fitting. Set 0 to use the whole HBM."""


class ClusterSpec(BaseModel):
    """A hardware profile and how many of its GPUs the job may use."""

    model_config = _FROZEN

    profile: HardwareProfile
    num_gpus: int = Field(ge=1, le=1_048_576, description="GPUs in the job.")
    memory_headroom: float = Field(
        default=DEFAULT_MEMORY_HEADROOM, ge=0, le=0.5, description="Fraction of GPU memory no plan may fill."
    )


def load_profiles(directory: Path = DEFAULT_PROFILES_DIR) -> Mapping[str, HardwareProfile]:
    """Read and validate every `*.json` profile in `directory`, keyed by id."""
    profiles: dict[str, HardwareProfile] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            profile = HardwareProfile.model_validate(json.loads(path.read_text()))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise InvalidSpecError(f"hardware_profiles/{path.name}", str(exc)) from exc
        if profile.id in profiles:
            raise InvalidSpecError(f"hardware_profiles/{path.name}", f"duplicate id {profile.id!r}")
        profiles[profile.id] = profile
    return profiles


def get_profile(profiles: Mapping[str, HardwareProfile], profile_id: str) -> HardwareProfile:
    try:
        return profiles[profile_id]
    except KeyError:
        raise UnknownHardwareError(profile_id, sorted(profiles)) from None
