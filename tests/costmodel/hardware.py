"""A round-number `Hardware` for cost-model tests that read only the fabric: 100 GB/s NVLink, 10 GB/s of NIC per
GPU, no latency, 1 PFLOP/s at eta 0.5. Only the NVLink domain and the GPUs per node vary."""

from planner.profiles import Hardware


def fabric_hardware(nvlink_domain_gpus: int, gpus_per_node: int) -> Hardware:
    return Hardware(
        peak_flop_per_s=1e15,
        hbm_bytes=80e9,
        hbm_bandwidth_bytes_per_s=1e12,
        gpus_per_node=gpus_per_node,
        nvlink_domain_gpus=nvlink_domain_gpus,
        nvlink_bytes_per_s=100e9,
        nic_bytes_per_s_per_gpu=10e9,
        nvlink_latency_s=0.0,
        network_latency_s=0.0,
        collective_base_latency_s=0.0,
        net_overhead_s=0.0,
        gemm_peak_efficiency=0.5,
        gemm_overhead_s=0.0,
    )
