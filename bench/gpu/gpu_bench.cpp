// gpu_bench: times the CUDA backend's heavy ops on the device it finds: a large SGEMM (the f32 and
// TF32 ceilings), the linear layers of the mlp and cnn reference models at batch 128 (forward,
// backward-data, backward-weights), the cnn's two convolutions (NCHW and NHWC, cuDNN heuristics and
// cudnnFind), and a device-to-device copy (the bandwidth ceiling). Prints one table of median
// milliseconds and achieved TFLOP/s (GB/s for the copy) with the device name. Exits 0 with
// "no CUDA device: skipped" where there is none. Options: --reps N, --csv FILE; --versions prints
// the CUDA runtime, driver, cuDNN and NCCL versions (and the device, if any) and exits, device or not.
// Each arithmetic row also says its share of the device's datasheet peak for the row's data type
// (resources/device_peaks.json, the table training runs take their MFU peak from; a "datasheet: ..."
// line names the entry, or says the device is not in it). The last line, "peak: ...", is the highest
// arithmetic rate measured and its share of that datasheet peak (scripts/gpu-check.sh records both).
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/cuda/cublas_ops.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/core/rng.h"
#include "engine/run/device_peaks.h"

namespace {

using lathe::Tensor;
using lathe::cuda::CudaBackend;

struct Row {
  std::string name, shape, mode;
  double ms = 0, rate = 0;  // TFLOP/s, or GB/s for copies
  std::string unit;
};

Tensor random_device(CudaBackend& be, const lathe::Shape& shape, uint64_t seed,
                     lathe::MemoryFormat format = lathe::MemoryFormat::contiguous) {
  Tensor host = Tensor::empty(shape, lathe::DType::f32, lathe::Device::cpu(), format);
  lathe::Rng rng(seed);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i)
    p[i] = static_cast<float>(rng.normal());
  Tensor dev = be.empty(shape, lathe::DType::f32, format);
  be.copy(host, dev);
  return dev;
}

/// Median of `reps` timings (device events around each call) after `warmup` untimed calls.
double median_ms(CudaBackend& be, const std::function<void()>& op, int reps, int warmup = 5) {
  for (int i = 0; i < warmup; ++i)
    op();
  cudaEvent_t start, stop;
  LATHE_CUDA_CHECK(cudaEventCreate(&start));
  LATHE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    LATHE_CUDA_CHECK(cudaEventRecord(start, be.stream()));
    op();
    LATHE_CUDA_CHECK(cudaEventRecord(stop, be.stream()));
    LATHE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LATHE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d)
    s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

void bench_gemms(CudaBackend& be, int reps, std::vector<Row>& rows) {
  // The ceiling: one large square product, f32 FMA and TF32 tensor cores.
  {
    const int64_t n = 4096;
    Tensor a = random_device(be, {n, n}, 1), b = random_device(be, {n, n}, 2), c = be.empty({n, n}, lathe::DType::f32);
    for (bool tf32 : {false, true}) {
      be.set_allow_tf32(tf32);
      const double ms = median_ms(
          be, [&] { lathe::cuda::sgemm(be.context(), a, false, b, false, c); }, reps);
      rows.push_back({"sgemm", dims({n, n, n}), tf32 ? "tf32" : "fp32", ms, 2.0 * n * n * n / (ms * 1e9), "TFLOP/s"});
    }
    be.set_allow_tf32(false);
  }
  // The reference models' linear layers at batch 128: (in, out).
  struct Layer {
    const char* model;
    int64_t in, out;
  };
  const Layer layers[] = {{"mlp", 784, 512}, {"mlp", 512, 256}, {"mlp", 256, 10}, {"cnn", 3136, 128}, {"cnn", 128, 10}};
  const int64_t N = 128;
  for (const Layer& l : layers) {
    Tensor x = random_device(be, {N, l.in}, 3), w = random_device(be, {l.out, l.in}, 4);
    Tensor bias = random_device(be, {l.out}, 5), y = be.empty({N, l.out}, lathe::DType::f32);
    Tensor dy = random_device(be, {N, l.out}, 6), dx = be.empty({N, l.in}, lathe::DType::f32);
    Tensor dw = be.empty({l.out, l.in}, lathe::DType::f32), db = be.empty({l.out}, lathe::DType::f32);
    const double flops = 2.0 * N * l.in * l.out;
    const std::string shape = std::string(l.model) + " " + dims({N, l.in, l.out});
    double ms = median_ms(
        be, [&] { be.linear_forward(x, w, &bias, y, lathe::PostOp::relu); }, reps);
    rows.push_back({"linear fwd+bias+relu", shape, "fp32", ms, flops / (ms * 1e9), "TFLOP/s"});
    ms = median_ms(
        be, [&] { be.linear_backward_data(dy, w, dx); }, reps);
    rows.push_back({"linear bwd data", shape, "fp32", ms, flops / (ms * 1e9), "TFLOP/s"});
    ms = median_ms(
        be, [&] { be.linear_backward_weights(x, dy, dw, &db); }, reps);
    rows.push_back({"linear bwd weights+bias", shape, "fp32", ms, flops / (ms * 1e9), "TFLOP/s"});
  }
}

void bench_convs(CudaBackend& be, int reps, std::vector<Row>& rows) {
  struct Conv {
    const char* name;
    int64_t c, h, o;
  };
  const Conv convs[] = {{"cnn conv1", 1, 28, 32}, {"cnn conv2", 32, 14, 64}};
  const int64_t N = 128, K = 3;
  const lathe::ConvParams p{1, 1, 1, 1};
  for (bool find : {false, true}) {
    be.set_benchmark_conv_algos(find);
    for (const Conv& cv : convs)
      for (auto format : {lathe::MemoryFormat::contiguous, lathe::MemoryFormat::channels_last}) {
        const bool nhwc = format == lathe::MemoryFormat::channels_last;
        Tensor x = random_device(be, {N, cv.c, cv.h, cv.h}, 7, format);
        Tensor w = random_device(be, {cv.o, cv.c, K, K}, 8, format), b = random_device(be, {cv.o}, 9);
        Tensor y = be.empty({N, cv.o, cv.h, cv.h}, lathe::DType::f32, format);
        Tensor dy = random_device(be, {N, cv.o, cv.h, cv.h}, 10, format);
        Tensor dx = be.empty(x.shape(), lathe::DType::f32, format), dw = be.empty(w.shape(), lathe::DType::f32, format);
        Tensor db = be.empty({cv.o}, lathe::DType::f32);
        const double flops = 2.0 * N * cv.o * cv.h * cv.h * cv.c * K * K;
        const std::string shape =
            std::string(cv.name) + " " + dims({N, cv.c, cv.h, cv.h}) + "->" + std::to_string(cv.o);
        const std::string mode = std::string(nhwc ? "fp32 nhwc" : "fp32 nchw") + (find ? " find" : " v7");
        double ms = median_ms(
            be, [&] { be.conv2d_forward(p, x, w, &b, y, lathe::PostOp::relu); }, reps);
        rows.push_back({"conv fwd+bias+relu", shape, mode, ms, flops / (ms * 1e9), "TFLOP/s"});
        if (find)
          continue;  // backward rows once, with the heuristics training uses
        ms = median_ms(
            be, [&] { be.conv2d_backward_data(p, dy, w, dx); }, reps);
        rows.push_back({"conv bwd data", shape, mode, ms, flops / (ms * 1e9), "TFLOP/s"});
        ms = median_ms(
            be, [&] { be.conv2d_backward_weights(p, x, dy, dw, &db); }, reps);
        rows.push_back({"conv bwd weights+bias", shape, mode, ms, flops / (ms * 1e9), "TFLOP/s"});
      }
  }
  be.set_benchmark_conv_algos(false);
}

void bench_copy(CudaBackend& be, int reps, std::vector<Row>& rows) {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of f32
  Tensor a = be.empty({n}, lathe::DType::f32), b = be.empty({n}, lathe::DType::f32);
  be.fill_zero(a);
  const double ms = median_ms(
      be, [&] { be.copy(a, b); }, reps);
  rows.push_back({"copy d2d", "1 GiB", "-", ms, 2.0 * n * 4 / (ms * 1e6), "GB/s"});
}

/// The datasheet key of a TFLOP/s row: "tf32" for the TF32 SGEMM, else "fp32" (every other row is f32).
std::string row_key(const Row& r) { return r.mode == "tf32" ? "tf32" : "fp32"; }

/// "  41.2%" of the datasheet peak for the row's type, or "      -" where there is none.
std::string share_of(const std::optional<lathe::DevicePeaks>& sheet, const Row& r) {
  const double peak = sheet && r.unit == "TFLOP/s" ? sheet->peak(row_key(r)) : 0;
  char buf[32];
  if (peak > 0)
    std::snprintf(buf, sizeof buf, "%6.1f%%", 100.0 * r.rate * 1e12 / peak);
  else
    std::snprintf(buf, sizeof buf, "%7s", "-");
  return buf;
}

/// "13.0" from 13000 (CUDA's encoding: 1000 * major + 10 * minor).
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

/// One line that gpu-check.sh parses: versions: cuda_runtime=.. cuda_driver=.. cudnn=.. nccl=..
void print_versions() {
  int runtime = 0, driver = 0, nccl = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess)
    driver = 0;
  (void)cudaGetLastError();
  const size_t cudnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  if (ncclGetVersion(&nccl) != ncclSuccess)
    nccl = 0;
  std::printf("versions: cuda_runtime=%s cuda_driver=%s cudnn=%zu.%zu.%zu nccl=%d.%d.%d\n",
              cuda_version(runtime).c_str(), driver ? cuda_version(driver).c_str() : "none", cudnn / 10000,
              cudnn % 10000 / 100, cudnn % 100, nccl / 10000, nccl % 10000 / 100, nccl % 100);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  bool versions_only = false;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csv = argv[++i];
    } else if (!std::strcmp(argv[i], "--versions")) {
      versions_only = true;
    } else {
      std::fprintf(stderr, "usage: gpu_bench [--reps N] [--csv FILE] [--versions]\n");
      return 2;
    }
  }
  lathe::cuda::register_backend();
  print_versions();
  if (versions_only) {
    if (lathe::cuda_device_count() > 0) {
      cudaDeviceProp props{};
      if (cudaGetDeviceProperties(&props, 0) == cudaSuccess)
        std::printf("device: %s (sm_%d%d, %d SMs)\n", props.name, props.major, props.minor, props.multiProcessorCount);
    } else {
      std::printf("device: none (%s)\n", lathe::cuda::device_unavailable_reason().c_str());
    }
    return 0;
  }
  if (lathe::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipped (%s)\n", lathe::cuda::device_unavailable_reason().c_str());
    return 0;
  }
  try {
    CudaBackend be(0);
    const auto& props = be.context().properties();
    std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", be.device_name().c_str(), props.major, props.minor,
                props.multiProcessorCount, props.totalGlobalMem / double(1 << 30));
    // The datasheet the rows are read against (the table MFU uses); the bench runs without it.
    // A MIG slice's is its board's x the slice's SMs / the board's.
    std::optional<lathe::DevicePeakTable> table;
    std::optional<lathe::DevicePeaks> sheet;
    std::string no_sheet;
    try {
      table.emplace(lathe::DevicePeakTable::load(lathe::DevicePeakTable::default_path()));
      sheet = lathe::device_peaks(*table, be.device_name(), props.multiProcessorCount, &no_sheet);
    } catch (const std::exception& e) {
      std::printf("datasheet: unavailable (%s)\n", e.what());
    }
    if (sheet) {
      std::string peaks;
      for (const auto& [key, per_s] : sheet->peak_per_s) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s %g", peaks.empty() ? "" : ", ", key.c_str(), per_s / 1e12);
        peaks += buf;
      }
      std::printf("datasheet: %s, dense TFLOP/s: %s (%s)\n", sheet->model.c_str(), peaks.c_str(),
                  sheet->source.c_str());
    } else if (table) {
      std::printf("datasheet: none: %s (no share of peak)\n", no_sheet.c_str());
    }
    std::vector<Row> rows;
    bench_copy(be, reps, rows);
    bench_gemms(be, reps, rows);
    bench_convs(be, reps, rows);
    std::printf("%-24s %-32s %-16s %10s %10s %-8s %s\n", "op", "shape", "mode", "ms", "rate", "", "of datasheet");
    for (const Row& r : rows)
      std::printf("%-24s %-32s %-16s %10.4f %10.2f %-8s %s\n", r.name.c_str(), r.shape.c_str(), r.mode.c_str(), r.ms,
                  r.rate, r.unit.c_str(), share_of(sheet, r).c_str());
    const Row* peak = nullptr;
    for (const Row& r : rows)
      if (r.unit == "TFLOP/s" && (!peak || r.rate > peak->rate))
        peak = &r;
    if (peak) {
      std::string versus = "no datasheet peak for this device";
      if (sheet && sheet->peak(row_key(*peak)) > 0) {
        const std::string key = row_key(*peak);
        const double dpeak = sheet->peak(key);
        char buf[128];
        std::snprintf(buf, sizeof buf, "%.1f%% of the datasheet %s peak %g TFLOP/s", 100.0 * peak->rate * 1e12 / dpeak,
                      key.c_str(), dpeak / 1e12);
        versus = buf;
      }
      std::printf("peak: %.2f TFLOP/s (%s %s %s; %s)\n", peak->rate, peak->name.c_str(), peak->shape.c_str(),
                  peak->mode.c_str(), versus.c_str());
    }
    if (!csv.empty()) {
      FILE* f = std::fopen(csv.c_str(), "w");
      if (!f)
        throw lathe::Error("gpu_bench: cannot write " + csv);
      std::fprintf(f, "device,op,shape,mode,ms,rate,unit,datasheet_peak_tflops\n");
      for (const Row& r : rows) {
        const double dpeak = sheet && r.unit == "TFLOP/s" ? sheet->peak(row_key(r)) / 1e12 : 0;
        std::fprintf(f, "\"%s\",%s,%s,%s,%.6f,%.4f,%s,%g\n", be.device_name().c_str(), r.name.c_str(), r.shape.c_str(),
                     r.mode.c_str(), r.ms, r.rate, r.unit.c_str(), dpeak);
      }
      std::fclose(f);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
