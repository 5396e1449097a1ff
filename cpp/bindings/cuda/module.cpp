// tilewise._cuda: the CUDA backend's host side (cpp/exec/cuda), its own extension module, built only
// when CMake finds nvcc and the cuBLAS/cuDNN/NCCL wheels, so that `import tilewise` never loads
// them. Errors are raised as _core's exception types (tw.CudaError, tw.ExecError, tw.OutOfMemory).
// Conversion only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/exec_errors.h"
#include "exec/arena.h"
#include "exec/cuda/device.h"
#include "exec/cuda/device_arena.h"
#include "exec/cuda/executor.h"
#include "exec/cuda/host_check.h"
#include "bindings/swap_schedule.h"
#include "exec/cuda/host_executor.h"
#include "exec/cuda/kernel_select.h"
#include "exec/cuda/launch_plan.h"
#include "exec/cuda/probes.h"
#include "exec/cuda/step_schedule.h"
#include "exec/cuda/stream_races.h"
#include "exec/errors.h"
#include "exec/lowering.h"
#include "partition/plan.h"
#include "sim/program_sim.h"
#include "swap/simulate.h"

namespace py = pybind11;
using namespace tilewise;
namespace cuda = tilewise::exec::cuda;

namespace {

// What both executables (on GPUs, and on the host) offer alike: full tensors in and out, a step, devices.
template <class Executable>
void bind_steps(py::class_<Executable>& cls) {
  cls.def("set_tensor",
          [](Executable& e, int tensor, const py::array& a) {
            py::array c = py::array::ensure(a, py::array::c_style);
            e.set_tensor(tensor, c.data());
          })
      .def("get_tensor",
           [](const Executable& e, int tensor, const std::vector<int64_t>& shape) {
             py::array_t<float> out(shape);
             e.read_tensor(tensor, out.mutable_data());
             return out;
           })
      .def("step", &Executable::step, py::arg("timed") = false, py::call_guard<py::gil_scoped_release>(),
           "One step; timed: every instruction's (start, end) seconds into instruction_seconds.")
      .def_property_readonly("instruction_seconds", &Executable::instruction_seconds,
                             "Per device, per instruction: (start, end) seconds after the last timed step began; "
                             "(0, 0) for instructions that put no work on a stream.")
      .def(
          "program", [](const Executable& e, int device) { return e.lowered().programs.at(static_cast<size_t>(device)); },
          py::arg("device"), "Device `device`'s program (a tilewise._core.Program): what the launch plans translate.")
      .def(
          "simulate",
          [](const Executable& e, const graph::Graph& g, const sim::Cluster& cluster, std::vector<double> op_seconds,
             std::vector<double> op_work) {
            if (op_seconds.size() != op_work.size())
              throw std::invalid_argument("op times: " + std::to_string(op_seconds.size()) + " seconds but " +
                                          std::to_string(op_work.size()) + " work figures");
            const sim::OpScales s{std::move(op_seconds), std::move(op_work), {}};
            return sim::simulate_programs(g, e.lowered(), cluster, s.seconds.empty() ? nullptr : &s, true);
          },
          py::arg("graph"), py::arg("cluster"), py::arg("op_seconds"), py::arg("op_work"),
          py::call_guard<py::gil_scoped_release>(),
          "One step of these programs simulated on the cluster (the one simulator of programs; swaps on its host "
          "link): a tilewise._core prediction.")
      .def_property_readonly("devices", &Executable::devices);
}

}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "The CUDA backend of tilewise (cpp/exec/cuda): versions, devices, device arenas, program translation, "
          "host checks of the translated kernels, the executor.";
  py::module_ core = py::module_::import("tilewise._core");
  static py::object exec_error = core.attr("ExecError");
  static py::object cuda_error = core.attr("CudaError");
  static py::object oom = core.attr("OutOfMemory");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cuda::Untranslatable& e) {
      py::object err = cuda_error(e.what());
      err.attr("call") = "translate";
      err.attr("name") = "Untranslatable";
      err.attr("ops") = e.ops;
      PyErr_SetObject(cuda_error.ptr(), err.ptr());
    } catch (const exec::CudaError& e) {
      py::object err = cuda_error(e.what());
      err.attr("call") = e.call;
      err.attr("name") = e.name;
      PyErr_SetObject(cuda_error.ptr(), err.ptr());
    } catch (const exec::OutOfMemory& e) {
      tilewise::bindings::raise_out_of_memory(oom, e);
    } catch (const exec::ExecError& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    }
  });

  m.def(
      "versions",
      [] {
        const cuda::Versions v = cuda::versions();
        py::dict d;
        d["cuda_runtime"] = v.runtime;
        d["cuda_driver"] = v.driver;
        d["cublas"] = v.cublas;
        d["cudnn"] = v.cudnn;
        d["nccl"] = v.nccl;
        return d;
      },
      "The linked libraries' versions as reported at run time (no device needed): cuda_runtime, "
      "cuda_driver ('' without a driver), cublas, cudnn, nccl.");
  m.def(
      "device_count",
      [] {
        const cuda::DeviceCount d = cuda::device_count();
        return py::make_tuple(d.count, d.error);
      },
      "(count, error): the CUDA devices visible; (0, 'cudaErrorInsufficientDriver: ...') without a driver.");

  m.def(
      "plan_block",
      [](const std::vector<std::tuple<int64_t, int64_t, int64_t>>& lives) {
        std::vector<exec::BufferLife> v;
        for (const auto& [bytes, born, dies] : lives) v.push_back({bytes, born, dies});
        const cuda::DevicePlan plan = cuda::plan_device_block(v);
        return py::make_tuple(plan.offsets, plan.block_bytes);
      },
      py::arg("lives"),
      "(offsets, block_bytes) of a device arena for buffers given as (bytes, born, dies): exec::plan_block, "
      "the CPU arena's planner.");

  py::class_<cuda::DeviceArena>(m, "DeviceArena",
                                "One GPU's block of a planned step (cudaMalloc, never managed memory).")
      .def(py::init([](int device, const std::vector<std::tuple<int64_t, int64_t, int64_t>>& lives,
                       int64_t capacity) {
             std::vector<exec::BufferLife> v;
             for (const auto& [bytes, born, dies] : lives) v.push_back({bytes, born, dies});
             return std::make_unique<cuda::DeviceArena>(device, cuda::plan_device_block(v), capacity);
           }),
           py::arg("device"), py::arg("lives"), py::arg("capacity") = 0)
      .def_property_readonly("device", &cuda::DeviceArena::device)
      .def_property_readonly("block_bytes", [](const cuda::DeviceArena& a) { return a.plan().block_bytes; })
      .def_property_readonly("offsets", [](const cuda::DeviceArena& a) { return a.plan().offsets; });

  m.def(
      "kernels", [] { return cuda::cuda_kernels(); },
      "(kernel, library) for every native kernel the CUDA backend translates: cublas, cudnn or kernel (its own).");
  m.def(
      "coverage",
      [](const graph::Graph& g, const partition::Plan& plan, const std::vector<int>& keep) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        py::list out;
        for (const auto& r : cuda::coverage(g, low))
          out.append(py::dict(py::arg("op") = r.name, py::arg("type") = r.type, py::arg("kernel") = r.kernel,
                              py::arg("library") = r.library, py::arg("why_not") = r.why_not));
        return out;
      },
      py::arg("graph"), py::arg("plan"), py::arg("keep") = std::vector<int>{},
      "Per op computed under the plan: its kernel, the CUDA library chosen ('' when none) and why not.");
  m.def(
      "host_check",
      [](const graph::Graph& g, const partition::Plan& plan, uint64_t seed, int64_t max_elements, bool nonfinite,
         bool coarse) {
        exec::Lowered low;
        std::vector<cuda::CheckRow> rows;
        {
          py::gil_scoped_release release;
          low = exec::lower(g, plan, {});
          rows = cuda::host_check(g, low, seed, max_elements, nonfinite, coarse);
        }
        py::list out;
        for (const auto& r : rows)
          out.append(py::dict(py::arg("op") = r.name, py::arg("device") = r.device, py::arg("kernel") = r.kernel,
                              py::arg("library") = r.library, py::arg("elements") = r.elements,
                              py::arg("max_error") = r.max_error, py::arg("checked") = r.checked,
                              py::arg("note") = r.note));
        return out;
      },
      py::arg("graph"), py::arg("plan"), py::arg("seed") = 0, py::arg("max_elements") = 1 << 20,
      py::arg("nonfinite") = false, py::arg("coarse") = false,
      "Per (op, device): the CUDA steps run on the host (cuBLAS/cuDNN semantics, the device functors) against "
      "the CPU kernel on seeded random inputs (nonfinite: about 1 in 16 of them NaN, +Inf or -Inf; coarse: drawn "
      "from {-1, -0.5, 0, 0.5, 1}, so ties occur); max_error "
      "relative to the block's largest finite value, inf where one has a NaN or infinity the other lacks.");
  m.def(
      "translate",
      [](const graph::Graph& g, const partition::Plan& plan, int device, const std::vector<int>& keep) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        const cuda::LaunchPlan p = cuda::translate(g, low, device);
        py::list launches;
        py::list gemms;
        py::list copies, reductions, rows;
        for (size_t i = 0; i < p.launches.size(); ++i) {
          const auto& l = p.launches[i];
          if (l.library == "copy")
            copies.append(py::dict(py::arg("op") = l.op >= 0 ? g.op(l.op).name : "", py::arg("kind") = exec::kind_name(l.kind),
                                   py::arg("element_bytes") = l.element_bytes, py::arg("elements") = l.copy.elements()));
          launches.append(py::make_tuple(exec::kind_name(l.kind), l.stream, l.op >= 0 ? g.op(l.op).name : "",
                                         l.library, l.steps.size()));
          for (const auto& s : l.steps)
            if (s.kind == cuda::Step::kReduce)
              reductions.append(py::dict(py::arg("op") = g.op(l.op).name, py::arg("outputs") = s.reduce.outputs,
                                         py::arg("folded") = s.reduce.folded, py::arg("split") = s.reduce.split));
            else if (s.kind == cuda::Step::kRow)
              rows.append(py::dict(py::arg("op") = g.op(l.op).name, py::arg("threads") = s.row.threads,
                                   py::arg("rows") = s.row.rows, py::arg("staged") = s.row.staged != 0));
          for (const auto& s : l.steps)
            if (s.kind == cuda::Step::kGemm) {
              const auto& c = s.gemm;
              gemms.append(py::dict(py::arg("op") = g.op(l.op).name, py::arg("transa") = c.transa,
                                    py::arg("transb") = c.transb, py::arg("m") = c.m, py::arg("n") = c.n,
                                    py::arg("k") = c.k, py::arg("lda") = c.lda, py::arg("ldb") = c.ldb,
                                    py::arg("ldc") = c.ldc, py::arg("batch") = c.batch, py::arg("beta") = c.beta));
            }
        }
        return py::dict(py::arg("block_bytes") = p.block_bytes, py::arg("resident_bytes") = p.resident_bytes,
                        py::arg("offsets") = p.offset, py::arg("events") = p.events, py::arg("launches") = launches,
                        py::arg("gemms") = gemms, py::arg("copies") = copies, py::arg("reductions") = reductions,
                        py::arg("rows") = rows);
      },
      py::arg("graph"), py::arg("plan"), py::arg("device") = 0, py::arg("keep") = std::vector<int>{},
      "The launch plan of one device's program (host only): arena offsets, per instruction (kind, stream, op, "
      "library, steps), the cuBLAS calls, the box copies (element size), the reductions (outputs, folded, split) and "
      "row ops (threads, rows, staged). tw.CudaError (name 'Untranslatable') naming ops without a CUDA kernel.");

  m.def(
      "host_link_seconds",
      [](int gpu, int64_t bytes, const std::string& direction, int repeats) {
        cuda::LinkDirection d;
        if (direction == "host_to_device") d = cuda::LinkDirection::kHostToDevice;
        else if (direction == "device_to_host") d = cuda::LinkDirection::kDeviceToHost;
        else if (direction == "both") d = cuda::LinkDirection::kBoth;
        else
          throw std::invalid_argument("direction must be 'host_to_device', 'device_to_host' or 'both', got '" +
                                      direction + "'");
        return cuda::host_link_seconds(gpu, bytes, d, repeats);
      },
      py::arg("gpu"), py::arg("bytes"), py::arg("direction"), py::arg("repeats") = 5,
      py::call_guard<py::gil_scoped_release>(),
      "Seconds to move `bytes` between pinned host memory and the GPU (median of `repeats`, CUDA events): one "
      "direction, or 'both' at once (one copy each way on two streams, until both end).");
  m.def("device_copy_seconds", &cuda::device_copy_seconds, py::arg("gpu"), py::arg("bytes"), py::arg("strided"),
        py::arg("combine"), py::arg("run") = 1024, py::arg("repeats") = 5, py::call_guard<py::gil_scoped_release>(),
        "Seconds of one launch of the backend's copy (or sum) kernel over `bytes` of float32 on the GPU: contiguous, "
        "or half the columns of rows of 2 * `run` floats.");
  m.def("peer_copy_seconds", &cuda::peer_copy_seconds, py::arg("src"), py::arg("dst"), py::arg("bytes"),
        py::arg("repeats") = 5, py::call_guard<py::gil_scoped_release>(),
        "Seconds of a cudaMemcpyPeerAsync of `bytes` from GPU `src` to GPU `dst`.");
  m.def(
      "device_info",
      [](int gpu) {
        const cuda::DeviceInfo i = cuda::device_info(gpu);
        return py::dict(py::arg("name") = i.name, py::arg("memory") = i.memory, py::arg("capability") = i.capability);
      },
      py::arg("gpu") = 0, "What GPU `gpu` is: name, memory (bytes), capability (major * 10 + minor).");
  m.def(
      "stream_races",
      [](const graph::Graph& g, const partition::Plan& plan, int device, const std::vector<int>& keep) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        const cuda::LaunchPlan lp = cuda::translate(g, low, device);
        std::vector<std::tuple<size_t, size_t, std::string>> out;
        size_t ordered = 0;
        for (const auto& r : cuda::stream_races(low, lp, device, 20, nullptr, &ordered))
          out.emplace_back(r.first, r.second, r.what);
        return std::make_pair(out, ordered);
      },
      py::arg("graph"), py::arg("plan"), py::arg("device") = 0, py::arg("keep") = std::vector<int>{},
      py::call_guard<py::gil_scoped_release>(),
      "Pairs of instructions on different streams of the device that touch the same bytes, one writing, with no "
      "event ordering them (host only): ([(first, second, what)], how many such pairs the events do order).");
  m.def(
      "swapped_stream_races",
      [](const graph::Graph& g, const swap::TimedPlan& plan, const std::vector<int>& buffer_of,
         const std::vector<int>& op_of, const std::vector<int>& keep, const std::vector<std::pair<int, int>>& in_place) {
        exec::Lowered low;
        cuda::LaunchPlan lp;
        const cuda::SwappedLaunch sl =
            cuda::prepare_swapped(g, bindings::schedule_of(plan.plan, buffer_of, op_of), keep, in_place, &low, &lp);
        std::vector<std::tuple<size_t, size_t, std::string>> out;
        size_t ordered = 0;
        for (const auto& r : cuda::stream_races(low, lp, 0, 20, &sl, &ordered)) out.emplace_back(r.first, r.second, r.what);
        return std::make_pair(out, ordered);
      },
      py::arg("graph"), py::arg("plan"), py::arg("buffer_of"), py::arg("op_of"), py::arg("keep"),
      py::arg("in_place") = std::vector<std::pair<int, int>>{},
      "stream_races for a swap plan's program (its pool offsets as each Alloc and SwapIn place the buffers).");
  m.def(
      "nccl_unique_id", [] { return py::bytes(cuda::nccl_unique_id()); },
      "A new NCCL unique id (ncclGetUniqueId, 128 bytes): rank 0 makes it, every rank connects with it.");
  m.def(
      "rank_calls",
      [](const graph::Graph& g, const partition::Plan& plan, const std::vector<int>& keep) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        std::vector<std::vector<std::tuple<int, std::string, int, int64_t>>> out;
        for (const auto& calls : cuda::rank_calls(low.programs)) {
          out.emplace_back();
          for (const auto& c : calls) out.back().emplace_back(c.wave, c.send ? "send" : "recv", c.peer, c.bytes);
        }
        return out;
      },
      py::arg("graph"), py::arg("plan"), py::arg("keep") = std::vector<int>{},
      "Per device, the NCCL calls its rank issues in a step, in order: (wave, 'send' or 'recv', peer, bytes). Host only.");

  py::class_<cuda::CudaExecutable> cuda_executable(m, "Executable", "A plan on GPUs (compiled; not run on a GPU yet).");
  cuda_executable
      .def(py::init([](const graph::Graph& g, const partition::Plan& plan, int64_t capacity,
                       const std::vector<int>& keep) {
             return std::make_unique<cuda::CudaExecutable>(g, plan, capacity, keep);
           }),
           py::arg("graph"), py::arg("plan"), py::arg("capacity") = 0, py::arg("keep") = std::vector<int>{},
           py::keep_alive<1, 2>())
      .def_static(
          "for_rank",
          [](const graph::Graph& g, const partition::Plan& plan, int rank, int gpu, int64_t capacity,
             const std::vector<int>& keep) {
            return std::make_unique<cuda::CudaExecutable>(g, plan, capacity, keep, cuda::RankSetup{rank, gpu});
          },
          py::arg("graph"), py::arg("plan"), py::arg("rank"), py::arg("gpu"), py::arg("capacity") = 0,
          py::arg("keep") = std::vector<int>{}, py::keep_alive<0, 1>(),
          "One rank of an MPI job: plan device `rank` on local GPU `gpu`; connect(nccl_id) before the first step.")
      .def(
          "connect", [](cuda::CudaExecutable& e, const py::bytes& id) { e.connect(std::string(id)); },
          py::arg("nccl_id"), py::call_guard<py::gil_scoped_release>(),
          "Joins the ranks' NCCL communicator (ncclCommInitRank; collective).")
      .def_property_readonly("rank", &cuda::CudaExecutable::rank, "The plan device driven here (-1: all).")
      .def(
          "local_tiles",
          [](const cuda::CudaExecutable& e, int tensor) {
            std::vector<std::pair<tdl::Box, std::vector<std::byte>>> tiles;
            {
              py::gil_scoped_release release;
              tiles = e.local_tiles(tensor);
            }
            py::list out;
            for (const auto& [box, data] : tiles) {
              py::list ranges;
              for (const auto& r : box.dims) ranges.append(py::make_tuple(r.lo, r.hi));
              out.append(py::make_tuple(ranges, py::bytes(reinterpret_cast<const char*>(data.data()), data.size())));
            }
            return out;
          },
          py::arg("tensor"),
          "This process's tiles of a tensor: [(box as [(lo, hi)] inclusive, row-major bytes)] (an MPI rank's part "
          "of a gather; not collective).")
      .def(
          "conv_algorithms",
          [](const cuda::CudaExecutable& e) {
            py::list out;
            for (const auto& a : e.conv_algorithms())
              out.append(py::dict(py::arg("device") = a.device, py::arg("op") = a.op, py::arg("mode") = a.mode,
                                  py::arg("algo") = a.algo, py::arg("workspace") = a.workspace));
            return out;
          },
          "cuDNN's algorithm per convolution step chosen so far (device, op, mode, algo: the "
          "cudnnConvolution*Algo_t value, workspace bytes).")
      .def_static(
          "swapped",
          [](const graph::Graph& g, const swap::TimedPlan& plan, const std::vector<int>& buffer_of,
             const std::vector<int>& op_of, int64_t capacity, const std::vector<int>& keep,
             const std::vector<std::pair<int, int>>& in_place) {
            return std::make_unique<cuda::CudaExecutable>(g, bindings::schedule_of(plan.plan, buffer_of, op_of), capacity,
                                                          keep, in_place);
          },
          py::arg("graph"), py::arg("plan"), py::arg("buffer_of"), py::arg("op_of"), py::arg("capacity"),
          py::arg("keep"), py::arg("in_place") = std::vector<std::pair<int, int>>{}, py::keep_alive<0, 1>(),
          "A swap plan on GPU 0: the pool as its memory, a pinned host store, swaps on the copy streams.");
  bind_steps(cuda_executable);

  py::class_<cuda::HostExecutable> host_executable(
      m, "HostExecutable",
      "A plan's CUDA launch plans run on the host (no GPU): the arena offsets, every step through the host "
      "reference of cuBLAS, cuDNN and the device functors, copies through their CopyPlans, Send/Recv through a "
      "mailbox. Compared with the CPU runtime, it checks the translation of whole steps.");
  host_executable
      .def(py::init([](const graph::Graph& g, const partition::Plan& plan, const std::vector<int>& keep) {
             return std::make_unique<cuda::HostExecutable>(g, plan, keep);
           }),
           py::arg("graph"), py::arg("plan"), py::arg("keep") = std::vector<int>{}, py::keep_alive<1, 2>())
      .def_static(
          "swapped",
          [](const graph::Graph& g, const swap::TimedPlan& plan, const std::vector<int>& buffer_of,
             const std::vector<int>& op_of, const std::vector<int>& keep, const std::vector<std::pair<int, int>>& in_place) {
            return std::make_unique<cuda::HostExecutable>(g, bindings::schedule_of(plan.plan, buffer_of, op_of), keep, in_place);
          },
          py::arg("graph"), py::arg("plan"), py::arg("buffer_of"), py::arg("op_of"), py::arg("keep"),
          py::arg("in_place") = std::vector<std::pair<int, int>>{}, py::keep_alive<0, 1>(),
          "A swap plan's program run on the host: its pool, a host store, SwapIn/SwapOut as copies (the index maps "
          "as tilewise.exec.swapped builds them).");
  bind_steps(host_executable);
}
