// run_provenance: the model_source event becomes the "from" row (file, sha256, opset), a zoo run
// says the run initialised it, model files become "to" rows in recording order with their sha256
// (a missing file says so), checkpoints are left out.
#include <gtest/gtest.h>

#include "engine/store/provenance.h"

namespace lathe {
namespace {

EventRecord event(const std::string& kind, nlohmann::json fields) {
  EventRecord e;
  e.kind = kind;
  e.fields = std::move(fields);
  return e;
}

ArtifactRecord artifact(const std::string& kind, const std::string& path, int64_t bytes, const std::string& sha) {
  ArtifactRecord a;
  a.kind = kind;
  a.path = path;
  a.bytes = bytes;
  a.sha256 = sha;
  return a;
}

TEST(Provenance, OnnxSourceThenTheModelFilesInOrder) {
  const std::vector<EventRecord> events{
      event("started", {{"backend", "cpu"}}),
      event("model_source", {{"format", "onnx"}, {"file", "/d/resnet.onnx"}, {"sha256", "abc"}, {"opset", 17}})};
  const std::vector<ArtifactRecord> artifacts{
      artifact("model", "/r/model.safetensors", 10, "s1"), artifact("checkpoint", "/r/ckpt", 10, "s2"),
      artifact("onnx", "/r/model.onnx", 20, "s3"), artifact("onnx-int8", "/r/model_int8.onnx", -1, "")};
  const std::vector<ProvenanceRow> rows = run_provenance(events, artifacts, {{"model.zoo", "onnx"}});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[0].incoming);
  EXPECT_EQ(rows[0].what, "ONNX model (opset 17)");
  EXPECT_EQ(rows[0].file, "/d/resnet.onnx");
  EXPECT_EQ(rows[0].sha256, "abc");
  EXPECT_FALSE(rows[1].incoming);
  EXPECT_EQ(rows[1].what, "weights (model)");
  EXPECT_EQ(rows[2].what, "ONNX f32");
  EXPECT_EQ(rows[2].sha256, "s3");
  EXPECT_EQ(rows[3].what, "ONNX INT8 (QDQ)");
  EXPECT_EQ(rows[3].sha256, "missing");
}

TEST(Provenance, ZooRunWasInitialisedByTheRun) {
  const std::vector<ProvenanceRow> rows = run_provenance({}, {}, {{"model.zoo", "cnn"}, {"seed", "1"}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].incoming);
  EXPECT_EQ(rows[0].what, "zoo model cnn (initialised by the run)");
  EXPECT_TRUE(rows[0].file.empty());
}

}  // namespace
}  // namespace lathe
