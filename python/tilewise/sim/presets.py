"""The clusters of the papers' testbeds, by name: ``tw.Cluster.preset("tensoropt")``.

Each preset's ``source`` cites the paper's section and states every absolute number assumed. The
papers give the machines, a few bandwidths and some ratios; peak rates come from the GPUs' data
sheets; kernel efficiencies (tilewise.sim.cluster.DEFAULT_EFFICIENCY), launch overheads and link
latencies are assumptions, named as such. docs/CLUSTERS.md lists them all.
"""

from __future__ import annotations

from .cluster import Cluster, DeviceProfile, Link, register_preset

GiB = 2**30

#: What one kernel call costs on a GPU besides its work: launch plus a framework's dispatch (MXNet,
#: TensorFlow). Assumed; none of the papers measures it.
GPU_KERNEL_OVERHEAD = 10e-6

# NVIDIA Tesla K80 (data sheet): a board of two GK210 GPUs; EC2 p2.8xlarge exposes 8 GPUs (4 boards).
K80_MEMORY = 12 * GiB  # per GPU; Tofu §7.1: "8 K80 GPUs with 12GB memory each"
K80_PEAK_FLOPS = 4.37e12  # FP32 per GPU: 2,496 CUDA cores x 2 FLOP x 875 MHz boost (8.74 TFLOP/s a board)
K80_MEMORY_BANDWIDTH = 240e9  # GDDR5 per GPU (480 GB/s a board)

# NVIDIA Tesla V100 SXM2 16 GB (data sheet); EC2 p3 instances and NVLink servers use the SXM2 part.
V100_MEMORY = 16 * GiB  # TensorOpt §5 and SwapAdvisor §5.1: "16GB"
V100_PEAK_FLOPS = 15.7e12  # FP32: 5,120 CUDA cores x 2 FLOP x 1,530 MHz boost (the papers train in FP32)
V100_MEMORY_BANDWIDTH = 900e9  # HBM2

# TensorOpt §5: NVLink inside a machine, "RDMA on 100 Gbps EDR Infiniband" between.
NVLINK_PAIR = 50e9  # bytes/s one way between two V100s: two NVLink 2.0 links of 25 GB/s each (assumed)
EDR_LINE_RATE = 100e9 / 8  # 12.5 GB/s
RDMA_EFFICIENCY = 0.9  # of the line rate that RDMA transfers reach (assumed): 11.25 GB/s
# §5.1, Fig. 7: "the bandwidth of PCIe is approximately 1/20 of NVLink according to our measurement",
# and without RDMA "the bandwidth becomes approximately 0.5 times of RDMA".
PCIE_OVER_NVLINK = 1 / 20
NO_RDMA_OVER_RDMA = 0.5
NVLINK_LATENCY = 5e-6  # assumed, per transfer (copy launch and synchronisation)
IB_LATENCY = 10e-6  # assumed, per transfer across machines

# PCIe 3.0 x16 between a V100 and its host, as SwapAdvisor §5.1 measured it on EC2 p3.2xlarge.
V100_HOST_ONE_WAY = 12e9
V100_HOST_BOTH_WAYS = 20e9
PCIE_LATENCY = 10e-6  # assumed, per transfer


def _v100(concurrent_streams: bool = True) -> DeviceProfile:
    return DeviceProfile.roofline("NVIDIA Tesla V100 SXM2 16 GB", V100_MEMORY, V100_PEAK_FLOPS, V100_MEMORY_BANDWIDTH,
                                  overhead=GPU_KERNEL_OVERHEAD, concurrent_streams=concurrent_streams)


_GPU_NUMBERS = ("kernel rates: roofline at the default efficiencies (gemm 0.7, conv 0.5, interpreter 0.01 of peak "
                "FP32 FLOP/s; elementwise 0.7, reduction 0.6, norm 0.5, layout 0.5, embedding 0.3, copy 0.8, "
                "combine 0.7 of the memory bandwidth), 10 us per kernel call (assumed).")
_V100_NUMBERS = ("V100 SXM2 data sheet: 16 GiB, 15.7 TFLOP/s FP32, 900 GB/s HBM2; " + _GPU_NUMBERS)


@register_preset("tofu")
def tofu() -> Cluster:
    """Tofu §7.1's testbed: EC2 p2.8xlarge, 8 K80 GPUs (12 GB each) on one PCIe tree.

    Tofu §7.1 gives "21GB/s peer-to-peer bandwidth" on the PCIe bus and "CPU-GPU bandwidth 10GB/s".
    One direction of a PCIe 3.0 x16 link carries at most 15.75 GB/s, so 21 GB/s is read as both
    directions together: 10.5 GB/s one way, 21 GB/s both ways. The GPUs share the PCIe switches and
    the host bridge, so both links are shared (§7.2: "all 8 GPUs share the same bandwidth to
    communicate with the CPU").
    """
    device = DeviceProfile.roofline("NVIDIA Tesla K80 (one GK210 GPU, 12 GB)", K80_MEMORY, K80_PEAK_FLOPS,
                                    K80_MEMORY_BANDWIDTH, overhead=GPU_KERNEL_OVERHEAD, concurrent_streams=True)
    intra = Link("PCIe 3.0 peer-to-peer", 21e9 / 2, latency=PCIE_LATENCY, duplex=True, duplex_bandwidth=21e9,
                 shared=True)
    host = Link("PCIe 3.0 host link", 10e9, latency=PCIE_LATENCY, shared=True)
    return Cluster("tofu", 8, 8, device=device, intra=intra, host=host, source=(
        "Tofu (EuroSys'19) §7.1: EC2 p2.8xlarge, 8 K80 GPUs with 12 GB each; PCIe peer-to-peer 21 GB/s, read as "
        "both directions together (10.5 GB/s one way; one PCIe 3.0 x16 direction carries at most 15.75 GB/s); "
        "CPU-GPU 10 GB/s; both links shared by the 8 GPUs (§7.2). K80 data sheet per GPU: 12 GiB, 4.37 TFLOP/s "
        "FP32 at boost, 240 GB/s GDDR5; " + _GPU_NUMBERS + " Latencies 10 us per transfer (assumed)."))


def _tensoropt(name: str, intra: Link, inter: Link, note: str) -> Cluster:
    host = Link("PCIe 3.0 x16 host link", V100_HOST_ONE_WAY, latency=PCIE_LATENCY, duplex=True,
                duplex_bandwidth=V100_HOST_BOTH_WAYS)
    return Cluster(name, 16, 8, device=_v100(), intra=intra, inter=inter, host=host, source=(
        "TensorOpt (2020) §5: 2 machines x 8 V100 16 GB, NVLink inside, RDMA on 100 Gb/s EDR InfiniBand between. "
        "Assumed: NVLink 50 GB/s one way per pair of GPUs (two NVLink 2.0 links), not shared; RDMA at 90 % of the "
        "12.5 GB/s line rate = 11.25 GB/s, one NIC per machine shared by its 8 GPUs; latencies 5 us (NVLink) and "
        "10 us (InfiniBand). Host link as SwapAdvisor §5.1 measured a V100's PCIe 3.0: 12 GB/s one way, 20 GB/s "
        f"both. {note}{_V100_NUMBERS}"))


def _nvlink() -> Link:
    return Link("NVLink 2.0 (2 links per pair)", NVLINK_PAIR, latency=NVLINK_LATENCY)


def _rdma(factor: float = 1.0, name: str = "EDR InfiniBand 100 Gb/s, RDMA") -> Link:
    return Link(name, EDR_LINE_RATE * RDMA_EFFICIENCY * factor, latency=IB_LATENCY, shared=True)


@register_preset("tensoropt")
def tensoropt() -> Cluster:
    """TensorOpt §5's testbed: 2 machines x 8 V100 16 GB, NVLink inside, EDR InfiniBand (RDMA) between."""
    return _tensoropt("tensoropt", _nvlink(), _rdma(), "")


@register_preset("tensoropt-pcie")
def tensoropt_pcie() -> Cluster:
    """TensorOpt §5.1 Fig. 7(c): the testbed with PCIe instead of NVLink inside machines, at 1/20 of
    NVLink's bandwidth as the paper measured. The ratio is measured under the contention of 8 GPUs,
    so the link is not marked shared (that would count the contention twice)."""
    intra = Link("PCIe 3.0 (NVLink / 20, TensorOpt §5.1)", NVLINK_PAIR * PCIE_OVER_NVLINK, latency=NVLINK_LATENCY)
    return _tensoropt("tensoropt-pcie", intra, _rdma(), "Variant, §5.1 Fig. 7(c): PCIe inside machines at 1/20 of "
                      "NVLink (paper's measurement) = 2.5 GB/s, contention included, so not marked shared. ")


@register_preset("tensoropt-no-rdma")
def tensoropt_no_rdma() -> Cluster:
    """TensorOpt §5.1 Fig. 7(b) "no RDMA": InfiniBand without RDMA, about 0.5x the RDMA bandwidth."""
    inter = _rdma(NO_RDMA_OVER_RDMA, "EDR InfiniBand 100 Gb/s, no RDMA (0.5x RDMA)")
    return _tensoropt("tensoropt-no-rdma", _nvlink(), inter, "Variant, §5.1 Fig. 7(b) no RDMA: 0.5x the RDMA "
                      "bandwidth = 5.625 GB/s (latency kept: the paper gives none). ")


@register_preset("tensoropt-4x-rdma")
def tensoropt_4x_rdma() -> Cluster:
    """TensorOpt §5.1 Fig. 7(b) "4x RDMA": 4 InfiniBand cards per machine, as an NVIDIA DGX has."""
    inter = _rdma(4.0, "4 x EDR InfiniBand 100 Gb/s, RDMA")
    return _tensoropt("tensoropt-4x-rdma", _nvlink(), inter, "Variant, §5.1 Fig. 7(b) 4x RDMA (NVIDIA DGX, 4 NICs): "
                      "45 GB/s between machines. ")


@register_preset("swapadvisor")
def swapadvisor() -> Cluster:
    """SwapAdvisor §5.1's testbed: EC2 p3.2xlarge, one V100 16 GB; its PCIe host link carries 12 GB/s
    one way and 20 GB/s both ways together (10 GB/s each way when both directions run)."""
    host = Link("PCIe 3.0 x16 host link", V100_HOST_ONE_WAY, latency=PCIE_LATENCY, duplex=True,
                duplex_bandwidth=V100_HOST_BOTH_WAYS)
    return Cluster("swapadvisor", 1, device=_v100(), host=host, source=(
        "SwapAdvisor (thesis ch. 4-5) §5.1: EC2 p3.2xlarge, one V100 16 GB; PCIe between CPU and GPU 12 GB/s "
        "unidirectional, 20 GB/s bidirectional; latency 10 us per transfer (assumed). " + _V100_NUMBERS))
