// lowrank.* fields and their parsing (see lowrank_config.h).
#include "engine/compress/lowrank/lowrank_config.h"

namespace lathe {

std::vector<FieldSpec> lowrank_schema_fields() {
  using namespace schema;
  // Nothing runs with method none (LowRankStage::enabled). factorize.cpp's rank choice: a fixed rank
  // when lowrank.rank > 0, else by energy when lowrank.energy > 0, else by target_bytes_ratio; the
  // scope only shapes the last two.
  const auto svd = [](FieldSpec spec) { return only_when(std::move(spec), "lowrank.method", {"svd"}); };
  const auto chosen = [&](FieldSpec spec) { return only_when(svd(std::move(spec)), {one_of("lowrank.rank", {0})}); };
  return {
      enumeration("lowrank.method", {"none", "svd"},
                  "Low-rank factorisation after training (and pruning): svd = truncated SVD of every Linear and "
                  "Conv2d weight, each factored layer run as two smaller layers"),
      svd(integer("lowrank.rank", 0, 0, kInf,
                  "Rank kept in every factored layer; 0 = chosen by energy or bytes target")),
      chosen(number("lowrank.energy", 0, 0, 1,
                    "Kept fraction of sum sigma^2 that chooses the rank (with rank 0); 0 = use target_bytes_ratio")),
      only_when(chosen(number("lowrank.target_bytes_ratio", 0.5, 0, 1,
                              "With rank 0 and energy 0: the largest rank whose two factors take at most this "
                              "fraction of the dense weights' bytes",
                              true, true)),
                {one_of("lowrank.energy", {0})}),
      chosen(enumeration("lowrank.scope", {"layer", "global"},
                         "layer: each layer meets the energy / bytes target; global: one threshold / budget over all "
                         "layers")),
      svd(string("lowrank.exclude", "", "Comma-separated Linear/Conv2d node names kept dense")),
      svd(integer("lowrank.finetune_epochs", 1, 0, kInf, "Fine-tuning epochs of the factored model")),
      svd(number("lowrank.finetune_lr_scale", 0.25, 0, 10,
                 "Fine-tuning learning rate = train.optimizer.lr x this (a fresh optimizer)", true, false)),
  };
}

namespace {

std::vector<std::string> split_exclude(const std::string& text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(" \t") == std::string::npos)
    return out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t a = part.find_first_not_of(" \t"), b = part.find_last_not_of(" \t");
    if (a == std::string::npos)
      throw ConfigError("lowrank.exclude: \"" + text + "\" has an empty name; allowed: node names separated by commas");
    out.push_back(part.substr(a, b - a + 1));
    if (comma == std::string::npos)
      return out;
    start = comma + 1;
  }
}

}  // namespace

LowRankConfig parse_lowrank_config(const nlohmann::json& validated) {
  LowRankConfig c;
  if (!validated.contains("lowrank"))
    return c;
  const nlohmann::json& s = validated.at("lowrank");
  auto get = [&](const char* key, auto fallback) {
    return s.contains(key) ? s.at(key).get<decltype(fallback)>() : fallback;
  };
  const std::string method = get("method", std::string("none"));
  if (method == "svd")
    c.method = LowRankMethod::svd;
  else if (method != "none")
    throw ConfigError("lowrank.method: \"" + method + "\" is not a method; allowed: none, svd");
  const std::string scope = get("scope", std::string("layer"));
  if (scope == "global")
    c.options.scope = LowRankScope::global;
  else if (scope != "layer")
    throw ConfigError("lowrank.scope: \"" + scope + "\" is not a scope; allowed: layer, global");
  c.options.rank = get("rank", int64_t{0});
  c.options.energy = get("energy", 0.0);
  c.options.target_bytes_ratio = get("target_bytes_ratio", 0.5);
  c.options.exclude = split_exclude(get("exclude", std::string()));
  c.finetune_epochs = get("finetune_epochs", int64_t{1});
  c.finetune_lr_scale = get("finetune_lr_scale", 0.25);
  validate_lowrank_options(c.options);
  if (c.options.rank > 0 && c.options.energy > 0)
    throw ConfigError("lowrank.energy: " + std::to_string(c.options.energy) + " is set together with lowrank.rank " +
                      std::to_string(c.options.rank) + "; allowed: one of them (the other 0)");
  if (c.finetune_epochs < 0)
    throw ConfigError("lowrank.finetune_epochs: " + std::to_string(c.finetune_epochs) + " is negative");
  return c;
}

}  // namespace lathe
