// Bring your own data, end to end through lathe-cli: one tiny 3-channel set written at test time as
// an .npz (the test's own zip writer, one member deflated) and as a folder of lossless PNGs; both
// train the cnn to the end (with INT8 calibration and the ONNX export on C = 3 inputs), record their
// data (shape, classes, per-channel normalisation), and give the same accuracy to the last digit.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/data/image_decode.h"
#include "engine/data/npy_reader.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/numpy_writer.h"

namespace lathe::test {
namespace {

namespace fs = std::filesystem;

class CliByod : public Cli {
 protected:
  static constexpr int64_t kC = 3, kH = 8, kW = 8;
  /// Image i of class `cls`: a tint per class plus a per-image ramp, so the classes are learnable.
  static std::vector<uint8_t> image(int64_t i, int64_t cls) {
    std::vector<uint8_t> chw(static_cast<size_t>(kC * kH * kW));
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t p = 0; p < kH * kW; ++p)
        chw[static_cast<size_t>(c * kH * kW + p)] =
            static_cast<uint8_t>((c == cls ? 150 : 40) + (p * 7 + i * 13 + c * 5) % 90);
    return chw;
  }
  /// The same images as an .npz and as a PNG folder (train: n_train, test: n_test). The folder is
  /// read class by class, files in name order; the .npz holds the samples in that same order, so
  /// the two runs see identical data in identical order.
  void write_datasets(int64_t n_train, int64_t n_test) {
    std::vector<ZipMember> members;
    const char* splits[2] = {"train", "test"};
    const int64_t counts[2] = {n_train, n_test};
    for (int s = 0; s < 2; ++s) {
      std::vector<uint8_t> x;
      std::vector<int64_t> y;
      for (int64_t cls = 0; cls < 3; ++cls)
        for (int64_t k = cls; k < counts[s]; k += 3) {
          const std::vector<uint8_t> chw = image(s * 1000 + k, cls);
          x.insert(x.end(), chw.begin(), chw.end());
          y.push_back(cls);
          DecodedImage png{kW, kH, kC, std::vector<uint8_t>(chw.size())};
          for (int64_t c = 0; c < kC; ++c)
            for (int64_t p = 0; p < kH * kW; ++p)
              png.pixels[static_cast<size_t>(p * kC + c)] = chw[static_cast<size_t>(c * kH * kW + p)];
          const fs::path dir = m_dir / "folder" / splits[s] / ("class" + std::to_string(cls));
          fs::create_directories(dir);
          char name[32];
          std::snprintf(name, sizeof name, "%05lld.png", static_cast<long long>(k));
          write_png((dir / name).string(), png);
        }
      members.push_back({std::string("x_") + splits[s] + ".npy", npy_bytes(NpyDtype::u8, {counts[s], kC, kH, kW}, x),
                         s == 0});
      members.push_back({std::string("y_") + splits[s] + ".npy", npy_bytes(NpyDtype::s64, {counts[s]}, le_bytes(y))});
    }
    write_file_bytes((m_dir / "data.npz").string(), zip_bytes(members));
  }
  nlohmann::json show(const std::string& name) {
    const CmdResult r = run_cmd("--db " + db() + " show " + name + " --json");
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out);
  }
};

TEST_F(CliByod, TheSameDataAsNpzAndAsPngFolderTrainsToTheSameAccuracy) {
  write_datasets(60, 30);
  const std::string common = R"("model": {"zoo": "cnn"}, "train": {"epochs": 2, "batch_size": 16},
      "data": {"augment": {"shift_px": 1, "hflip": true}}, "output": {"onnx": true},
      "quant": {"mode": "ptq-static", "calib_samples": 20})";
  const std::string npz = write("npz.json", R"({"name": "npz", )" + common + "}");
  const std::string folder = write("folder.json", R"({"name": "folder", )" + common + "}");
  const CmdResult a = run_cmd("run " + npz + " " + out_dir() + " --set data.dataset=npz --set data.path=" +
                              (m_dir / "data.npz").string());
  ASSERT_EQ(a.code, 0) << a.out;
  const CmdResult b = run_cmd("run " + folder + " " + out_dir() + " --set data.dataset=folder --set data.path=" +
                              (m_dir / "folder").string() + " --set data.image_size=8 --set data.channels=3");
  ASSERT_EQ(b.code, 0) << b.out;

  const nlohmann::json sa = show("npz"), sb = show("folder");
  const nlohmann::json acc_a = sa["metrics"]["test/accuracy"]["last"], acc_b = sb["metrics"]["test/accuracy"]["last"];
  ASSERT_TRUE(acc_a.is_number()) << sa.dump();
  EXPECT_EQ(acc_a.get<double>(), acc_b.get<double>());  // to the last digit
  EXPECT_EQ(sa["metrics"]["train/loss"]["last"], sb["metrics"]["train/loss"]["last"]);
  EXPECT_GT(acc_a.get<double>(), 0.5) << "three tinted classes should be learnable in two epochs";

  // The data record: shape, classes and the per-channel normalisation of the training split.
  const std::string text = sb.dump();
  for (const char* word : {"\"class_names\"", "\"class0\"", "\"normalisation\"", "\"training split\""})
    EXPECT_NE(text.find(word), std::string::npos) << word << " not in " << text;
  // The run's model leaves as ONNX with a 3-channel input, from the run and again by export-model.
  const fs::path exported = m_dir / "folder.onnx";
  const CmdResult e = run_cmd("--db " + db() + " export-model folder -o " + exported.string());
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_GT(fs::file_size(exported), 0u);
}

TEST_F(CliByod, MalformedDataStopsTheRunWithExit2NamingTheFile) {
  write_datasets(6, 3);
  const std::string cfg = write("bad.json", R"({"name": "bad", "model": {"zoo": "mlp"}, "train": {"epochs": 1}})");
  // The npz with y_train one label short.
  std::vector<ZipMember> members = {
      {"x_train.npy", npy_bytes(NpyDtype::u8, {2, 1, 4, 4}, std::vector<uint8_t>(32, 7))},
      {"y_train.npy", npy_bytes(NpyDtype::s64, {1}, le_bytes(std::vector<int64_t>{0}))},
      {"x_test.npy", npy_bytes(NpyDtype::u8, {1, 1, 4, 4}, std::vector<uint8_t>(16, 7))},
      {"y_test.npy", npy_bytes(NpyDtype::s64, {1}, le_bytes(std::vector<int64_t>{0}))}};
  write_file_bytes((m_dir / "short.npz").string(), zip_bytes(members));
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir() + " --set data.dataset=npz --set data.path=" +
                              (m_dir / "short.npz").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("short.npz:y_train"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("count mismatch"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
  // A corrupt PNG in the folder.
  const fs::path bad = m_dir / "folder/train/class0/zz.png";
  write_file_bytes(bad.string(), {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0});
  const CmdResult f = run_cmd("run " + cfg + " " + out_dir() + " --set data.dataset=folder --set data.path=" +
                              (m_dir / "folder").string());
  EXPECT_EQ(f.code, 2) << f.out;
  EXPECT_NE(f.out.find("zz.png"), std::string::npos) << f.out;
  // A missing data.path is refused by the validator, naming the field.
  const CmdResult v = run_cmd("run " + cfg + " " + out_dir() + " --set data.dataset=folder");
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("data.path"), std::string::npos) << v.out;
  // The cnn cannot take 2x2 images: refused naming model.zoo.
  fs::remove(bad);
  const CmdResult z = run_cmd("run " + cfg + " " + out_dir() + " --set model.zoo=cnn --set data.dataset=folder --set data.path=" +
                              (m_dir / "folder").string() + " --set data.image_size=2");
  EXPECT_EQ(z.code, 2) << z.out;
  EXPECT_NE(z.out.find("model.zoo"), std::string::npos) << z.out;
  EXPECT_NE(z.out.find("2x2"), std::string::npos) << z.out;
}

}  // namespace
}  // namespace lathe::test
