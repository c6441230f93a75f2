// The quantize stage (quant.mode != "none"): static post-training INT8 quantization of the trained
// model with real INT8 kernels (engine/compress/quant/int8_model.h).
//
//   1. calibration set: quant.calib_samples training images, quant.outlier_fraction of them the
//      highest-loss ones; activation statistics collected ONCE (every tap, 2048-bin histograms);
//   2. ranges by quant.calibration (or, with quant.compare_calibrators, by all four methods from the
//      same statistics, each evaluated: quant/<method>/test_accuracy); asymmetric u8 activations,
//      symmetric s8 weights per channel or per tensor (quant.granularity);
//   3. the chosen INT8 model saved as model_int8.safetensors (s8 weights + scales): model/bytes is
//      its real size, model/f32_bytes the f32 file's; quant/bytes_ratio;
//   4. latency and throughput at batch 1 and 256 of f32 and INT8 side by side (latency/f32/*,
//      latency/int8/*, throughput/*), quant/speedup_b1 and quant/speedup_b256;
//   5. quant/test_accuracy, quant/f32_test_accuracy, quant/accuracy_drop (points), the event
//      quant/calibrator (the chosen method) and a quant event with the plan and CPU ISA.
// The stage logs at ctx.step + 1 (so its model/bytes follows the trained model's) and advances
// ctx.step by that one step. QAT and dynamic mode are refused at prepare time (not implemented).
#pragma once

#include "engine/run/pipeline.h"

namespace lathe {

/// Throws ConfigError before anything is written: a mode not implemented, a non-CPU backend, or a
/// model the INT8 executor does not cover (naming the node).
void prepare_quantize_stage(const ExperimentConfig& cfg, Model& model, Backend& backend);

/// Runs the stage when quant.mode != "none" (see the header).
void run_quantize_stage(StageContext& ctx);

}  // namespace lathe
