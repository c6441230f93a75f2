// The quantize stage (quant.mode != "none"): INT8 quantization of the trained model with real INT8
// kernels (engine/compress/quant/int8_model.h).
//
//   1. calibration set: quant.calib_samples training images, quant.outlier_fraction of them the
//      highest-loss ones; activation statistics collected ONCE (every tap, 2048-bin histograms);
//   2. ranges by quant.calibration (or, with quant.compare_calibrators, by all four methods from the
//      same statistics, each evaluated: quant/<method>/test_accuracy); asymmetric u8 activations,
//      symmetric s8 weights per channel or per tensor (quant.granularity);
//   3. qat: fake quantization on every INT8 layer (compress/quant/qat.h) from those PTQ ranges,
//      quant.qat_epochs of fine-tuning (phase "qat"), then the real INT8 model of the fine-tuned
//      weights (quant/ptq_test_accuracy before, qat_fake_quant/test_accuracy simulated, and
//      quant/test_accuracy measured on the INT8 kernels);
//   4. quant.mixed_precision: the accuracy-driven search (mixed_precision_search.h) keeps the most
//      sensitive layers in f32 until quant.max_accuracy_drop holds; every point tried is logged
//      (quant/search/* at steps 0, 1, ...; a quant/search_point event each) and the best is kept,
//      goal met or not (quant/mixed/goal_met);
//   5. the chosen INT8 model saved as model_int8.safetensors (s8 weights + scales): model/bytes is
//      its real size, model/f32_bytes the f32 file's; quant/bytes_ratio;
//   6. latency and throughput at batch 1 and 256 of f32 and INT8 side by side (latency/f32/*,
//      latency/int8/*, throughput/*), quant/speedup_b1 and quant/speedup_b256;
//   7. quant/test_accuracy, quant/f32_test_accuracy, quant/accuracy_drop (points), the event
//      quant/calibrator (the chosen method) and a quant event with the plan and CPU ISA.
// The stage logs at ctx.step + 1 (so its model/bytes follows the trained model's) and advances
// ctx.step by that one step (QAT adds its phase's steps and one more). ptq-dynamic skips 1-3: each
// INT8 layer's input range comes from the batch at run time (Int8ModelOptions::dynamic_activations).
// On a CUDA backend the f32 figures and calibration use the GPU model; static PTQ then evaluates and
// times INT8 on the GPU (Int8Model on the cuda backend's INT8 ops, 8-bit weights), while
// ptq-dynamic, mixed precision, or a plan the GPU executor refuses run the INT8 part on the CPU
// from a host copy of the model (int8_host_model.h). A quant/device event names the device INT8
// ran on (and why the CPU, when it did); the latency event of int8 names it too. QAT is refused on
// a GPU backend (fake quantization runs on host tensors). On a data-parallel run, PTQ and dynamic
// quantization run on rank 0 alone; QAT runs on every rank (its fine-tuning is data-parallel, and
// each rank calibrates the same model on the same images, so the ranges agree). The QAT phase is
// checkpointed like the main training (QatResumeState): a run resumed inside it skips the f32
// evaluation and the calibration (the ranges come from the checkpoint) and continues the phase.
#pragma once

#include <map>
#include <string>

#include "engine/backend/formats/quant_params.h"
#include "engine/run/pipeline.h"

namespace lathe {

/// Throws ConfigError before anything is written: a mode not implemented, qat on a non-CPU backend,
/// or a model the INT8 executor does not cover (naming the node).
void prepare_quantize_stage(const ExperimentConfig& cfg, Model& model, Backend& backend);

/// What a checkpoint taken during QAT's fine-tuning holds for the stage (Stage::save_state), so a
/// resumed run continues the phase: the PTQ activation ranges the fake quantization uses (the
/// weights' scales follow the weights, so they need no saving) and the f32 reference accuracy.
struct QatResumeState {
  bool running = false;  ///< set from the start of the QAT phase to its end
  double f32_accuracy = 0;
  std::map<std::string, QuantParams> acts;
};

/// Runs the stage when quant.mode != "none" (see the header). `qat` (may be null) is the stage's
/// state: filled while QAT runs; when it is running and ctx.resume names this stage's phase, the
/// calibration is skipped and the phase continues from the checkpoint.
void run_quantize_stage(StageContext& ctx, QatResumeState* qat = nullptr);

}  // namespace lathe
