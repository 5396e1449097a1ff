"""tw.Cluster (tilewise/sim/cluster.py, presets.py): the presets reproduce their papers' figures and
ratios, profiles interpolate as TensorOpt §3.2 says, JSON round-trips exactly and every corrupted
field is a ValueError naming its path, and wrong values name the field and what would be valid."""

import json
import math
import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewise as tw
from tilewise import _core
from tilewise.sim import cluster as cluster_module

GiB = 2**30
GPU_PRESETS = ["tofu", "tensoropt", "tensoropt-pcie", "tensoropt-no-rdma", "tensoropt-4x-rdma", "swapadvisor"]


def small_cluster(**changes):
    device = tw.DeviceProfile("dev", 2**30, {"gemm": 1e12, "copy": ({1024: 1e9, 4096: 3e9}, 1e-6)})
    args = dict(device=device, intra=tw.Link("fast", 50e9, latency=1e-6),
                inter=tw.Link("slow", {1024: 1e9, 2**20: 10e9}, latency=1e-5, shared=True))
    args.update(changes)
    return tw.Cluster("small", 6, 4, **args)


# ----- presets: the papers' numbers and ratios ------------------------------------------------------


def test_presets_are_listed_and_cite_their_sources():
    assert set(GPU_PRESETS) | {"this-machine", "this-machine-mpi", "this-gpu"} == set(tw.Cluster.presets())
    for name in GPU_PRESETS:
        c = tw.Cluster.preset(name)
        assert c.name == name
        assert "§" in c.source, name
        assert c.device.concurrent_streams, name  # GPUs overlap compute and copies
        assert set(c.device.kernels) == set(tw.DeviceProfile.KINDS), name


def test_tensoropt_pcie_is_nvlink_over_20():
    """TensorOpt §5.1: "the bandwidth of PCIe is approximately 1/20 of NVLink"."""
    nvlink, pcie = tw.Cluster.preset("tensoropt").intra, tw.Cluster.preset("tensoropt-pcie").intra
    for size in (2**10, 2**20, 2**30):
        assert nvlink.bandwidth_at(size) / pcie.bandwidth_at(size) == pytest.approx(20)
    assert nvlink.bandwidth == 50e9


def test_tensoropt_no_rdma_is_half_of_rdma_and_4x_is_four_times():
    """TensorOpt §5.1 Fig. 7(b): without RDMA about 0.5x; "4x RDMA" four InfiniBand cards."""
    rdma = tw.Cluster.preset("tensoropt").inter
    assert rdma.bandwidth == pytest.approx(0.9 * 100e9 / 8)  # 90 % of EDR's 12.5 GB/s line rate
    assert rdma.bandwidth / tw.Cluster.preset("tensoropt-no-rdma").inter.bandwidth == pytest.approx(2)
    assert tw.Cluster.preset("tensoropt-4x-rdma").inter.bandwidth / rdma.bandwidth == pytest.approx(4)
    assert rdma.shared  # one NIC per machine


def test_tensoropt_testbed_shape():
    """TensorOpt §5: 2 machines x 8 V100 16 GB; only the link levels differ among the variants."""
    base = tw.Cluster.preset("tensoropt")
    assert (base.devices, base.devices_per_machine, base.machines) == (16, 8, 2)
    assert base.device.memory == 16 * GiB
    assert base.link(0, 7) == base.intra and base.link(7, 8) == base.inter
    for variant in ("tensoropt-pcie", "tensoropt-no-rdma", "tensoropt-4x-rdma"):
        v = tw.Cluster.preset(variant)
        assert v.replace(name="tensoropt", source=base.source, intra=base.intra, inter=base.inter) == base


def test_swapadvisor_host_link_one_way_and_both_ways():
    """SwapAdvisor §5.1: 12 GB/s unidirectional, 20 GB/s bidirectional: 10 GB/s each way when both run."""
    c = tw.Cluster.preset("swapadvisor")
    assert (c.devices, c.machines, c.intra, c.inter) == (1, 1, None, None)
    assert c.device.memory == 16 * GiB
    assert c.host.bandwidth_at(2**30) == 12e9
    assert c.host.duplex and c.host.duplex_bandwidth / 2 == 10e9
    assert c.host.transfer_seconds(12e9) == pytest.approx(1 + c.host.latency)


def test_tofu_testbed():
    """Tofu §7.1: 8 K80 GPUs with 12 GB each, PCIe 21 GB/s peer-to-peer, CPU-GPU 10 GB/s, shared."""
    c = tw.Cluster.preset("tofu")
    assert (c.devices, c.machines, c.inter) == (8, 1, None)
    assert c.device.memory == 12 * GiB
    assert c.intra.shared and c.host.shared
    assert c.intra.duplex_bandwidth == 21e9 and c.intra.bandwidth == 10.5e9
    assert c.host.bandwidth == 10e9
    assert c.device.rate_at("gemm", 1e9) == pytest.approx(0.7 * 4.37e12)  # K80 GPU's FP32 peak at gemm efficiency
    assert c.device.rate_at("copy", 1e9) == pytest.approx(0.8 * 240e9)  # its GDDR5 at copy efficiency


def test_preset_with_devices_and_unknown_names():
    assert tw.Cluster.preset("tensoropt", devices=32).machines == 4
    assert tw.Cluster.preset("tofu", devices=4).devices == 4
    with pytest.raises(ValueError, match=r"no cluster preset 'tensorop' \(did you mean 'tensoropt'.*presets: .*tofu"):
        tw.Cluster.preset("tensorop")
    with pytest.raises(TypeError, match="preset name"):
        tw.Cluster.preset(3)


def test_this_machine_is_registered_by_a_hook(monkeypatch):
    monkeypatch.setattr(cluster_module, "_measured", {})
    with pytest.raises(RuntimeError, match="'this-machine' preset needs the calibration"):
        tw.Cluster.preset("this-machine")
    asked = []

    def calibrate(devices):
        asked.append(devices)
        return small_cluster()

    tw.sim.register_this_machine(calibrate)
    assert tw.Cluster.preset("this-machine", devices=3) == small_cluster()
    tw.Cluster.preset("this-machine")
    assert asked == [3, None]
    tw.sim.register_this_machine(lambda devices: "not a cluster")
    with pytest.raises(TypeError, match="returned str, not a tw.Cluster"):
        tw.Cluster.preset("this-machine")
    with pytest.raises(TypeError, match="fn\\(devices\\)"):
        tw.sim.register_this_machine(42)
    with pytest.raises(ValueError, match="registers one of"):
        tw.sim.register_this_machine(calibrate, "elsewhere")


# ----- profiles: TensorOpt §3.2 interpolation -----------------------------------------------------


def test_profile_interpolates_linearly_in_log2_between_points():
    link = tw.Link("l", {1024: 1e9, 4096: 3e9, 2**20: 4e9}, latency=2e-6)
    assert link.bandwidth_at(1024) == 1e9 and link.bandwidth_at(4096) == 3e9
    assert link.bandwidth_at(2048) == pytest.approx(2e9)  # halfway in log2
    assert link.bandwidth_at(3072) == pytest.approx(1e9 + (math.log2(3072) - 10) / 2 * 2e9)
    assert link.bandwidth_at(2**14) == pytest.approx(3e9 + 0.25e9)  # (14 - 12) / (20 - 12) of the way
    assert link.bandwidth_at(1) == 1e9 and link.bandwidth_at(2**40) == 4e9  # end points hold outside
    assert link.transfer_seconds(2048) == pytest.approx(2e-6 + 2048 / 2e9)
    assert link.transfer_seconds(0) == 0


def test_kernel_seconds_is_overhead_plus_work_over_rate():
    c = small_cluster()
    assert c.kernel_seconds("gemm", 2e12) == 2
    assert c.kernel_seconds("copy", 2048) == pytest.approx(1e-6 + 2048 / 2e9)
    assert c.kernel_seconds("copy", 0) == 1e-6
    with pytest.raises(ValueError, match="has no rate for 'conv'; it has gemm, copy"):
        c.kernel_seconds("conv", 1)
    with pytest.raises(ValueError, match="'gem' is not a kernel kind \\(did you mean 'gemm'"):
        c.kernel_seconds("gem", 1)
    with pytest.raises(ValueError, match="non-negative finite"):
        c.kernel_seconds("gemm", -1)


def test_core_profile_binding():
    p = _core.Profile([1024, 4096], [1e9, 3e9])
    assert p.at(2048) == pytest.approx(2e9)
    with pytest.raises(ValueError, match="NaN"):
        p.at(float("nan"))
    with pytest.raises(ValueError, match="not strictly ascending"):
        _core.Profile([4, 2], [1, 1]).validate("p")


def test_roofline_prices_every_kind_at_stated_efficiencies():
    d = tw.DeviceProfile.roofline("gpu", 8 * GiB, 10e12, 500e9, efficiency={"gemm": 0.9}, overhead=5e-6)
    assert d.rate_at("gemm", 1) == pytest.approx(9e12)
    assert d.rate_at("conv", 1) == pytest.approx(10e12 * cluster_module.DEFAULT_EFFICIENCY["conv"])
    assert d.rate_at("elementwise", 1) == pytest.approx(500e9 * cluster_module.DEFAULT_EFFICIENCY["elementwise"])
    assert d.kernel_seconds("interpreter", 1e9) == pytest.approx(5e-6 + 1e9 / (0.01 * 10e12))
    with pytest.raises(ValueError, match=r"efficiency\['gemm'\]: is 1.5; expected a fraction of peak in \(0, 1\]"):
        tw.DeviceProfile.roofline("gpu", 0, 1e12, 1e11, efficiency={"gemm": 1.5})
    with pytest.raises(ValueError, match="'gemmm' is not a kernel kind"):
        tw.DeviceProfile.roofline("gpu", 0, 1e12, 1e11, efficiency={"gemmm": 0.5})


# ----- shape: machines, links, with_devices, the C++ cluster ----------------------------------------


def test_machines_links_and_with_devices():
    c = small_cluster()
    assert c.machines == 2 and [c.machine_of(d) for d in range(6)] == [0, 0, 0, 0, 1, 1]
    assert c.link(0, 3) == c.intra and c.link(3, 4) == c.inter and c.link(5, 4) == c.intra
    assert c.transfer_seconds(0, 5, 1024) == pytest.approx(1e-5 + 1024 / 1e9)
    big = c.with_devices(13)
    assert (big.devices, big.devices_per_machine, big.machines, big.machine_of(12)) == (13, 4, 4, 3)
    assert c.devices == 6  # a copy
    one = c.with_devices(3)
    assert one.machines == 1
    with pytest.raises(ValueError, match="a and b are both device 2; a device needs no link to itself"):
        c.link(2, 2)
    with pytest.raises(ValueError, match=r"device: is 6; expected a device id \(from 0 to 5\)"):
        c.machine_of(6)
    with pytest.raises(TypeError, match="b: is of type bool"):
        c.link(0, True)


def test_with_devices_needs_the_links_of_its_shape():
    single = tw.Cluster.preset("swapadvisor")
    with pytest.raises(ValueError, match="inter: is missing .None., but 2 devices at 1 per machine span 2 machines"):
        single.with_devices(2)
    with pytest.raises(ValueError, match="intra: is missing .None., but machines hold 4 devices"):
        small_cluster().replace(intra=None)


def test_assignment_validates_and_rebuilds_the_core():
    c = small_cluster()
    assert isinstance(c._core, _core.Cluster) and c._core.devices == 6
    assert [c._core.intra.name, c._core.inter.name, c._core.host.name] == ["intra", "inter", "host"]  # levels
    assert c._core.host.bandwidth.empty() and c.intra.name == "fast"
    c.devices = 8
    assert c._core.devices == 8 and c._core.machines() == 2
    c.inter = c.inter.replace(bandwidth=5e9)
    assert c._core.inter.transfer_seconds(5e9) == pytest.approx(1 + 1e-5)
    c.device = c.device.replace(memory=0)
    assert c._core.device.memory == 0
    with pytest.raises(ValueError, match="devices: is 0; expected a device count"):
        c.devices = 0
    with pytest.raises(ValueError, match="inter: is missing"):
        c.inter = None
    assert c.devices == 8 and c.inter is not None and c._core.devices == 8  # failed assignments change nothing
    with pytest.raises(TypeError, match="intra: is of type str .*; expected a tw.Link or None"):
        c.intra = "nvlink"
    with pytest.raises(TypeError, match="no field 'devcies' \\(did you mean 'devices'"):
        c.replace(devcies=4)


# ----- validation names the field and what is valid ------------------------------------------------


@pytest.mark.parametrize("kwargs, error, message", [
    ({"bandwidth": -1}, ValueError, r"tw.Link 'l' bandwidth: is -1; expected a positive finite number of bytes"),
    ({"bandwidth": True}, TypeError, r"bandwidth: is of type bool \(True\)"),
    ({"bandwidth": float("inf")}, ValueError, r"bandwidth: is inf"),
    ({"bandwidth": 10**400}, ValueError, r"bandwidth: is 1000"),
    ({"bandwidth": {}}, ValueError, r"bandwidth: is an empty profile"),
    ({"bandwidth": {1024: -1.0}}, ValueError, r"bandwidth\[1024\]: is -1.0"),
    ({"bandwidth": {0: 1e9}}, ValueError, r"bandwidth\[0\]: the size 0 is out of range"),
    ({"bandwidth": {1.5: 1e9}}, TypeError, r"bandwidth\[1.5\]: the size 1.5 is of type float; expected an int"),
    ({"bandwidth": "fast"}, TypeError, r"bandwidth: is of type str"),
    ({"latency": -1e-6}, ValueError, r"latency: is -1e-06; expected seconds per transfer, >= 0"),
    ({"duplex": 1}, TypeError, r"duplex: is of type int \(1\); expected true or false"),
    ({"duplex": False, "duplex_bandwidth": 2e9}, ValueError, r"duplex_bandwidth: is 2e\+09, but the link is not duplex"),
    ({"duplex_bandwidth": 0.5e9}, ValueError, r"below the 1e\+09 one direction carries alone"),
    ({"shared": None}, TypeError, r"shared: is of type NoneType"),
])
def test_link_validation_names_the_field(kwargs, error, message):
    args = {"bandwidth": 1e9, **kwargs}
    with pytest.raises(error, match=message):
        tw.Link("l", **args)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"memory": 16e9}, TypeError, r"tw.DeviceProfile 'd' memory: is of type float \(16000000000.0\); expected an int"),
    ({"memory": -1}, ValueError, r"memory: is -1; expected an int number of bytes"),
    ({"kernels": {"gem": 1e12}}, ValueError, r"kernels.gem: 'gem' is not a kernel kind \(did you mean 'gemm'"),
    ({"kernels": {"gemm": (1e12, -1)}}, ValueError, r"kernels.gemm.overhead: is -1; expected seconds per call"),
    ({"kernels": {"gemm": (1e12,)}}, TypeError, r"kernels.gemm: is a sequence of 1; expected \(rate, overhead"),
    ({"kernels": {"gemm": {1: 0}}}, ValueError, r"kernels.gemm\[1\]: is 0; expected a positive finite rate"),
    ({"kernels": [("gemm", 1e12)]}, TypeError, r"kernels: is of type list .*; expected a dict \{kind: rate\}"),
    ({"concurrent_streams": "yes"}, TypeError, r"concurrent_streams: is of type str"),
])
def test_device_validation_names_the_field(kwargs, error, message):
    args = {"memory": 0, "kernels": {}, **kwargs}
    with pytest.raises(error, match=message):
        tw.DeviceProfile("d", **args)


def test_cluster_validation_names_the_field():
    device = tw.DeviceProfile("d", 0, {})
    with pytest.raises(ValueError, match=r"tw.Cluster 'c' devices: is 0; expected a device count \(from 1 to 1048576\)"):
        tw.Cluster("c", 0, device=device)
    with pytest.raises(TypeError, match=r"devices_per_machine: is of type float \(2.0\)"):
        tw.Cluster("c", 4, 2.0, device=device, intra=tw.Link("l", 1e9), inter=tw.Link("l", 1e9))
    with pytest.raises(TypeError, match="device: is of type dict .*; expected a tw.DeviceProfile"):
        tw.Cluster("c", 1, device={})
    with pytest.raises(ValueError, match="name: is empty"):
        tw.Cluster("", 1, device=device)
    with pytest.raises(ValueError, match="name: is '\\\\ud800', not valid Unicode"):
        tw.Cluster("\ud800", 1, device=device)
    with pytest.raises(ValueError, match="concurrent_devices: is -1; expected a device count .0: all."):
        tw.Cluster("c", 1, device=device, concurrent_devices=-1)


# ----- the table ----------------------------------------------------------------------------------


def test_table_shows_the_numbers():
    c = tw.Cluster.preset("tensoropt")
    text = str(c)
    assert text == c.table()
    assert text.startswith("Cluster 'tensoropt': 16 devices on 2 machines x 8")
    for figure in ("16 GiB", "50 GB/s", "11.2 GB/s", "12 GB/s", "20 GB/s both", "5 us", "10 us",
                   "11 TFLOP/s", "630 GB/s", "157 GFLOP/s", "source: TensorOpt"):
        assert figure in text, figure
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert rows["inter"].rstrip().endswith("yes") and rows["intra"].rstrip().endswith("no")  # shared column
    profiled = str(small_cluster())
    assert "1 GB/s" in profiled and "10 GB/s" in profiled  # the inter profile at 2^10 and from 2^20 on
    html = c._repr_html_()
    assert html.count("<table>") == 3 and "11.2 GB/s" in html and "&#x27;tensoropt&#x27;" in html
    assert "16 x NVIDIA Tesla V100" in repr(c)


# ----- JSON ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_presets_round_trip_through_json(name, tmp_path):
    c = tw.Cluster.preset(name)
    text = c.to_json()
    back = tw.Cluster.from_json(text)
    assert back == c and back.to_json() == text
    path = tmp_path / "c.json"
    assert c.to_json(path) == text
    assert tw.Cluster.from_json(path) == c and tw.Cluster.from_json(str(path)) == c
    data = json.loads(text)
    assert (data["format"], data["version"]) == ("tilewise-cluster", 2)


def test_json_shape():
    data = small_cluster().to_dict()
    assert list(data) == ["format", "version", "name", "source", "devices", "devices_per_machine",
                          "concurrent_devices", "memory_concurrency", "cache_bytes", "device", "links"]
    assert data["links"]["inter"]["bandwidth"] == {"1024": 1e9, "1048576": 10e9}
    assert data["links"]["host"] is None
    assert data["device"]["kernels"] == {"gemm": {"rate": 1e12, "overhead": 0.0},
                                         "copy": {"rate": {"1024": 1e9, "4096": 3e9}, "overhead": 1e-6}}


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["links"]["inter"]["bandwidth"].update({"abc": 1.0}),
     r'cluster JSON links.inter.bandwidth\["abc"\]: "abc" is not a size'),
    (lambda d: d["links"]["inter"]["bandwidth"].update({"1024": "fast"}),
     r'links.inter.bandwidth\["1024"\]: is a string'),
    (lambda d: d.update(color="red"), r"cluster JSON color: is not a field of a cluster"),
    (lambda d: d["device"].pop("memory"), r"device.memory: missing"),
    (lambda d: d["links"]["intra"].update(latncy=1), r"links.intra.latncy: is not a field of a link \(did you mean 'latency'"),
    (lambda d: d["device"]["kernels"].update(gemm=1e12), r"device.kernels.gemm: is a number .*expected an object"),
    (lambda d: d.update(version=3), r"version: is 3; this tilewise reads versions 1 and 2"),
    (lambda d: d.pop("cache_bytes"), r"cache_bytes: missing"),
    (lambda d: d.update(version=1), r"cache_bytes: is not a field of a cluster"),
    (lambda d: d.update(cache_bytes=-1), r"cache_bytes: is -1"),
    (lambda d: d.update(format="tilewise.graph/1"), r"not a tilewise cluster \(format 'tilewise.graph/1'"),
    (lambda d: d["links"].update(inter=None), r"links.inter: is missing \(None\), but 6 devices"),
    (lambda d: d.update(devices=True), r"devices: is a boolean"),
    (lambda d: d["links"]["intra"].update(latency=float("nan")), r"links.intra.latency: is nan; expected seconds"),
])
def test_json_errors_name_the_path(edit, message):
    data = small_cluster().to_dict()
    edit(data)
    with pytest.raises(ValueError, match=message):
        tw.Cluster.from_dict(data)


def test_version_1_files_load_without_the_cache():
    data = small_cluster().replace(cache_bytes=2**25).to_dict()
    assert data["version"] == 2 and data["cache_bytes"] == 2**25
    del data["cache_bytes"]
    data["version"] = 1
    old = tw.Cluster.from_dict(data)
    assert old.cache_bytes == 0 and old == small_cluster()


def test_the_documented_example_loads():
    """docs/CLUSTERS.md's JSON example is a valid cluster file."""
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "CLUSTERS.md"
    if not doc.exists():
        pytest.skip("needs the source tree (docs/CLUSTERS.md)")
    example = re.search(r"```json\n(.*?)```", doc.read_text(), re.S).group(1)
    c = tw.Cluster.from_json(example)
    assert (c.devices, c.machines, c.host) == (16, 2, None)
    assert c.device.rate_at("copy", 2**10) == 20e9


def test_json_text_and_files_are_checked(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="not a tilewise cluster: invalid JSON"):
        tw.Cluster.from_json("{not json")
    with pytest.raises(ValueError, match=r"not a tilewise cluster \(format \[1, 2\]"):
        tw.Cluster.from_dict([1, 2])
    with pytest.raises(ValueError, match="not UTF-8"):
        tw.Cluster.from_json(b"{\xff}")
    with pytest.raises(TypeError, match="takes a path or JSON text, not int"):
        tw.Cluster.from_json(3)
    path = tmp_path / "big.json"
    path.write_text(small_cluster().to_json())
    monkeypatch.setattr(cluster_module, "MAX_FILE_BYTES", 100)
    with pytest.raises(ValueError, match="is larger than 100 bytes"):
        tw.Cluster.from_json(path)
    with pytest.raises(ValueError, match="more than 100"):
        tw.Cluster.from_json(path.read_text())


# ----- properties: random clusters round-trip, every corruption is a ValueError ----------------------

_sizes = st.integers(1, 2**53)
_positive = st.one_of(st.floats(1e-3, 1e15), st.integers(1, 10**12))
_nonneg = st.one_of(st.just(0.0), st.floats(1e-9, 1.0))
_profiles = st.one_of(_positive, st.dictionaries(_sizes, _positive, min_size=1, max_size=4))
_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def _links(draw):
    bandwidth = draw(_profiles)
    duplex = draw(st.booleans())
    fastest = max(bandwidth.values()) if isinstance(bandwidth, dict) else bandwidth
    both = draw(st.sampled_from([0.0, float(fastest), 1.5 * fastest])) if duplex else 0.0
    return tw.Link(draw(_names), bandwidth, draw(_nonneg), duplex, both, draw(st.booleans()))


@st.composite
def _clusters(draw):
    kinds = draw(st.lists(st.sampled_from(tw.DeviceProfile.KINDS), unique=True, max_size=4))
    rates = {k: draw(st.one_of(_profiles, st.tuples(_profiles, _nonneg))) for k in kinds}
    device = tw.DeviceProfile(draw(_names), draw(st.integers(0, 2**63 - 1)), rates, draw(st.booleans()))
    devices, per = draw(st.integers(1, 64)), draw(st.integers(1, 16))
    optional = st.one_of(st.none(), _links())
    intra = draw(_links() if min(devices, per) > 1 else optional)
    inter = draw(_links() if devices > per else optional)
    return tw.Cluster(draw(_names), devices, per, device=device, intra=intra, inter=inter, host=draw(optional),
                      concurrent_devices=draw(st.integers(0, 64)), cache_bytes=draw(st.sampled_from([0, 2**25])),
                      source=draw(st.text(max_size=20)))


@settings(max_examples=60, deadline=None)
@given(_clusters())
def test_random_clusters_round_trip(c):
    back = tw.Cluster.from_json(c.to_json())
    assert back == c and back.to_json() == c.to_json()
    assert tw.Cluster.from_dict(c.to_dict()) == c


def _at(path: str, key: str) -> str:
    """The path of ``key`` inside the object at ``path``, written as the loader's messages write it."""
    if path.endswith(("bandwidth", "rate")):  # a profile: sizes as JSON strings
        return f'{path}["{key}"]'
    return f"{path}.{key}" if path else key


def _objects(doc: dict, path: str = ""):
    """(object, its path) for the document and every object inside it."""
    yield doc, path
    for key, value in doc.items():
        if isinstance(value, dict):
            yield from _objects(value, _at(path, key))


@settings(max_examples=150, deadline=None)
@given(_clusters(), st.data())
def test_corrupting_any_field_is_a_value_error_naming_it(c, data):
    """One change anywhere: a key deleted from a record, a key added to any object (a bad size in a
    profile, an unknown kind or field elsewhere), a value of the wrong type, a negative value."""
    doc = c.to_dict()
    obj, path = data.draw(st.sampled_from(list(_objects(doc))))
    keyed_by_data = path.endswith(("kernels", "bandwidth", "rate"))  # any of these keys may be left out
    how = data.draw(st.sampled_from(["add"] if not obj else ["add", "wrong type", "negative"] if keyed_by_data
                                    else ["add", "delete", "wrong type", "negative"]))
    if how == "add":
        key = "0" if path.endswith(("bandwidth", "rate")) else "bogus"
        obj[key] = 1.0
    else:
        key = data.draw(st.sampled_from(sorted(obj)))
        if how == "delete":
            del obj[key]
        else:
            obj[key] = -1 if how == "negative" else 5 if isinstance(obj[key], str) else "corrupt"
    with pytest.raises(ValueError) as info:
        tw.Cluster.from_dict(doc)
    assert _at(path, key) in str(info.value), (how, _at(path, key), str(info.value))


def _corruptions(doc: dict):
    """Every single change the property test draws from, on one document: (how, index of the object in
    _objects order, key, the path an error must name)."""
    for index, (obj, path) in enumerate(list(_objects(doc))):
        keyed_by_data = path.endswith(("kernels", "bandwidth", "rate"))
        key = "0" if path.endswith(("bandwidth", "rate")) else "bogus"
        yield "add", index, key, _at(path, key)
        for key in sorted(obj):
            for how in ("wrong type", "negative") if keyed_by_data else ("delete", "wrong type", "negative"):
                yield how, index, key, _at(path, key)


@pytest.mark.parametrize("name", ["tofu", "tensoropt"])
def test_every_corruption_of_a_preset_is_a_value_error_naming_it(name):
    original = tw.Cluster.preset(name).to_dict()
    cases = list(_corruptions(original))
    assert len(cases) > 100
    for how, index, key, at in cases:
        doc = json.loads(json.dumps(original))
        obj, _ = list(_objects(doc))[index]
        if how == "add":
            obj[key] = 1.0
        elif how == "delete":
            del obj[key]
        else:
            obj[key] = -1 if how == "negative" else 5 if isinstance(obj[key], str) else "corrupt"
        with pytest.raises(ValueError) as info:
            tw.Cluster.from_dict(doc)
        assert at in str(info.value), (how, at, str(info.value))
