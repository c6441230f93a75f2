// run_provenance: the model_source event becomes the "from" row (file, sha256, opset), a zoo run
// says the run initialised it, model files become "to" rows in recording order with their sha256
// (a missing file says so), checkpoints are left out, a file rewritten by a resumed run is one row
// with its last write, and a distillation teacher is a source.
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

// A run interrupted and resumed twice saves model.safetensors three times: the file holds the last
// write, so the report names that sha256 once, not three different files at one path.
TEST(Provenance, AFileWrittenSeveralTimesIsOneRowWithItsLastWrite) {
  const std::vector<ArtifactRecord> artifacts{
      artifact("model", "/r/model.safetensors", 10, "first"), artifact("checkpoint", "/r/ckpt/a", 10, "c1"),
      artifact("model", "/r/model.safetensors", 10, "second"), artifact("onnx", "/r/model.onnx", 20, "o"),
      artifact("model", "/r/model.safetensors", 10, "last")};
  const std::vector<ProvenanceRow> rows = run_provenance({}, artifacts, {{"model.zoo", "mlp"}});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].file, "/r/model.safetensors");
  EXPECT_EQ(rows[1].sha256, "last");
  EXPECT_EQ(rows[1].what, "weights (model), the last of 3 writes");
  EXPECT_EQ(rows[2].what, "ONNX f32");
}

TEST(Provenance, ADistillationTeacherIsASource) {
  const std::vector<EventRecord> events{
      event("distill", {{"teacher", "zoo:teacher"}, {"teacher_origin", "zoo model trained first in this run"}})};
  const std::vector<ProvenanceRow> rows = run_provenance(events, {}, {{"model.zoo", "student"}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].what, "zoo model student (initialised by the run)");
  EXPECT_TRUE(rows[1].incoming);
  EXPECT_EQ(rows[1].what, "distillation teacher: zoo model trained first in this run");
  EXPECT_EQ(rows[1].file, "zoo:teacher");
}

}  // namespace
}  // namespace lathe
