// Attaching and removing QAT fake quantization (see qat.h).
#include "engine/compress/quant/qat.h"

#include "engine/compress/quant/fake_quant.h"

namespace lathe {

int attach_fake_quant(Model& model, const Int8Model& plan) {
  int n = 0;
  for (const Int8LayerQuantization& q : plan.layer_quantization()) {
    const int i = model.find(q.node);
    LATHE_CHECK(i >= 0, "QAT: the INT8 plan names node '", q.node, "', which the model does not have");
    auto t = std::make_shared<FakeQuantOperands>(q.input, q.weight_bits, q.per_channel_weights);
    LATHE_CHECK(model.layer(i).set_operand_transform(std::move(t)), "QAT: node '", q.node, "' (", model.layer(i).kind(),
                ") cannot be fake-quantized");
    ++n;
  }
  return n;
}

void detach_fake_quant(Model& model) {
  for (size_t i = 0; i < model.size(); ++i)
    model.layer(i).set_operand_transform(nullptr);
}

}  // namespace lathe
