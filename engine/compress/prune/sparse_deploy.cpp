// Swapping sparse executors in and out of a Model.
#include "engine/compress/prune/sparse_deploy.h"

#include <cstdio>
#include <sstream>

namespace lathe {

SparseDeployment::SparseDeployment(Model& model, const SparseDeploymentOptions& options) : m_model(model) {
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    auto* lin = dynamic_cast<Linear*>(&l);
    auto* conv = dynamic_cast<Conv2d*>(&l);
    if (!lin && !conv)
      continue;
    for (Param* p : l.params())
      LATHE_CHECK(p->value.device().is_cpu(), "sparse deployment: layer '", model.node_name(i), "' is on ",
                  p->value.device().str(), "; the sparse kernels run on the CPU only");
    std::unique_ptr<SparseExecutor> exec;
    if (lin)
      exec = std::make_unique<SparseLinear>(*lin);
    else
      exec = std::make_unique<SparseConv2d>(*conv);
    if (exec->density() > options.max_density)
      continue;
    exec->set_mode(options.mode);
    SparseExecutor* raw = exec.get();
    std::unique_ptr<Layer> dense = model.replace_layer(i, std::move(exec));
    m_swapped.push_back({i, model.node_name(i), raw, std::move(dense)});
  }
}

SparseDeployment::~SparseDeployment() {
  try {
    restore();
  } catch (...) {  // destructors never throw; replace_layer only fails on a mismatch we created ourselves
  }
}

void SparseDeployment::restore() {
  for (Swapped& s : m_swapped)
    if (s.dense)
      m_model.replace_layer(s.node, std::move(s.dense));
  m_swapped.clear();
}

std::string SparseDeployment::describe_choices() const {
  std::ostringstream os;
  for (const Swapped& s : m_swapped) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s: density %.3f", s.name.c_str(), s.executor->density());
    os << buf;
    for (const auto& [batch, c] : s.executor->choices()) {
      std::snprintf(buf, sizeof buf, "; b%lld dense %.3f ms sparse %.3f ms -> %s", static_cast<long long>(batch),
                    c.dense_ms, c.sparse_ms, c.sparse ? "sparse" : "dense");
      os << buf;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace lathe
