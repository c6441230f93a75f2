// The report's Provenance section: where a run's model came from (the imported ONNX file and the
// sha256 recorded when it was read) and where it went (its ONNX exports and weight files, each with
// the sha256 the store computed from the bytes on disk; the digests below are hashlib's of the same
// bytes), in a single-run report and in a comparison; a zoo run says it was initialised by the run.
#include "engine/store/run_writer.h"
#include "report_test_util.h"
#include "widgets/report/report.h"

namespace lathe::report {
namespace {

using test::read_file;

constexpr const char* kOnnxSha = "c1650a9961b22b18b7919016db749eb46e2f14ad9da48dd02aa586fe8a335978";  // "onnx bytes"
constexpr const char* kQdqSha = "d4e4d7396fb33d9a8957dffcfb49bd3f9afb88355464a5fa7a830ef232b60ff1";   // "qdq bytes"
constexpr const char* kSourceSha = "feb7ea2480ab2004a737475392fee1f941bb51fbbc1e81d483e8deac41475eda";

class ReportProvenance : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ensure_qapp();
    RunWriter w(db());
    RunInfo info;
    info.id = "20260202-120000-prov01";
    info.name = "resnet-int8";
    info.config = {{"name", "resnet-int8"}, {"model", {{"zoo", "onnx"}, {"onnx", "/data/resnet.onnx"}}}};
    m_onnx_run = w.begin_run(info);
    w.event("model_source", {{"format", "onnx"}, {"file", "/data/resnet.onnx"}, {"sha256", kSourceSha}, {"opset", 17}});
    std::ofstream(m_dir.file("model.onnx")) << "onnx bytes";
    std::ofstream(m_dir.file("model_int8.onnx")) << "qdq bytes";
    w.event("artifact", {{"kind", "onnx"}, {"path", m_dir.file("model.onnx")}, {"bytes", 10}});
    w.event("artifact", {{"kind", "onnx-int8"}, {"path", m_dir.file("model_int8.onnx")}, {"bytes", 9}});
    w.finish(RunStatus::finished);

    RunWriter z(db());
    RunInfo zi;
    zi.id = "20260202-130000-zoo002";
    zi.name = "cnn-zoo";
    zi.config = {{"name", "cnn-zoo"}, {"model", {{"zoo", "cnn"}}}};
    m_zoo_run = z.begin_run(zi);
    z.finish(RunStatus::finished);
  }
  std::string db() const { return m_dir.file("lathe.db"); }
  /// The report's text from the Provenance heading to the next heading.
  static std::string provenance_of(const std::string& html) {
    const size_t at = html.find("Provenance</h2>");
    EXPECT_NE(at, std::string::npos);
    if (at == std::string::npos)
      return "";
    return html.substr(at, html.find("<h2", at) - at);
  }
  test::TempDir m_dir;
  std::string m_onnx_run, m_zoo_run;
};

TEST_F(ReportProvenance, SingleRunShowsTheOnnxSourceAndTheExportsWithTheirDigests) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("one.html");
  write_report(store, {m_onnx_run}, Format::html, path);
  const std::string p = provenance_of(read_file(path));
  EXPECT_NE(p.find("ONNX model (opset 17)"), std::string::npos) << p;
  EXPECT_NE(p.find("/data/resnet.onnx"), std::string::npos) << p;
  EXPECT_NE(p.find(kSourceSha), std::string::npos) << p;
  EXPECT_NE(p.find("ONNX f32"), std::string::npos) << p;
  EXPECT_NE(p.find(kOnnxSha), std::string::npos) << p;
  EXPECT_NE(p.find("ONNX INT8 (QDQ)"), std::string::npos) << p;
  EXPECT_NE(p.find(kQdqSha), std::string::npos) << p;
  EXPECT_LT(p.find(kSourceSha), p.find(kOnnxSha)) << "from before to";
}

TEST_F(ReportProvenance, ComparisonNamesEachRunsSource) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("both.html");
  write_report(store, {m_onnx_run, m_zoo_run}, Format::html, path);
  const std::string p = provenance_of(read_file(path));
  EXPECT_NE(p.find(kSourceSha), std::string::npos) << p;
  EXPECT_NE(p.find("zoo model cnn (initialised by the run)"), std::string::npos) << p;
  EXPECT_NE(p.find("resnet-int8"), std::string::npos) << p;
  EXPECT_NE(p.find("cnn-zoo"), std::string::npos) << p;
}

}  // namespace
}  // namespace lathe::report
