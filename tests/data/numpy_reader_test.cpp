// .npy and .npz reading: exact round trips of arrays written by the test's own writers (the .npy
// header by hand or by npy_bytes, the zip by tests/support/numpy_writer.h, stored and deflated with
// zlib), and every malformed input refused with a DataError naming the file and what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>

#include "engine/data/array_dataset.h"
#include "engine/data/npy_reader.h"
#include "engine/data/npz_reader.h"
#include "tests/data/data_test_util.h"
#include "tests/support/numpy_writer.h"

namespace lathe {
namespace {

using test::expect_data_error;
using test::le_bytes;
using test::TempDir;
using test::write_file_bytes;
using test::ZipMember;

/// A .npy file with a hand-written header dict (version 1.0, padded to 64 bytes).
std::vector<uint8_t> npy_with_header(const std::string& dict, const std::vector<uint8_t>& data, int major = 1) {
  std::string h = dict;
  const size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  test::put16(b, static_cast<uint32_t>(h.size()));
  if (major != 1)
    test::put16(b, 0);
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

using test::ramp;

TEST(NpyReader, ReadsAHandWrittenUint8HeaderExactly) {
  TempDir dir;
  const auto data = ramp(2 * 3 * 4);
  write_file_bytes(dir.file("x.npy"), npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 4), }", data));
  const NpyArray a = read_npy(dir.file("x.npy"));
  EXPECT_EQ(a.header.dtype, NpyDtype::u8);
  EXPECT_EQ(a.header.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a.header.data_offset % 64, 0u);
  EXPECT_EQ(a.data, data);
}

TEST(NpyReader, ReadsVersion2And3HeadersAndEveryIntegerAndFloatType) {
  TempDir dir;
  const std::vector<int64_t> labels = {0, 7, -3, 1LL << 40};
  for (int major : {2, 3}) {
    write_file_bytes(dir.file("y.npy"),
                     npy_with_header("{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (4,)}", le_bytes(labels), major));
    const NpyArray a = read_npy(dir.file("y.npy"));
    ASSERT_EQ(a.header.shape, (std::vector<int64_t>{4}));
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(a.as_int(i), labels[static_cast<size_t>(i)]);
  }
  const std::vector<float> f = {0.0f, 0.25f, 1.0f, -2.5f};
  write_file_bytes(dir.file("f.npy"), npy_bytes(NpyDtype::f32, {2, 2}, le_bytes(f)));
  const NpyArray af = read_npy(dir.file("f.npy"));
  ASSERT_EQ(af.header.dtype, NpyDtype::f32);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(af.as_double(i), f[static_cast<size_t>(i)]);
  const std::vector<int32_t> i32 = {5, -1};
  write_file_bytes(dir.file("i.npy"), npy_bytes(NpyDtype::s32, {2}, le_bytes(i32)));
  EXPECT_EQ(read_npy(dir.file("i.npy")).as_int(1), -1);
  // A 0-d array and an empty one are well-formed too.
  write_file_bytes(dir.file("s.npy"), npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", le_bytes(std::vector<double>{3.5})));
  EXPECT_EQ(read_npy(dir.file("s.npy")).as_double(0), 3.5);
  write_file_bytes(dir.file("e.npy"), npy_bytes(NpyDtype::u8, {0, 5}, {}));
  EXPECT_EQ(read_npy(dir.file("e.npy")).header.count(), 0);
}

TEST(NpyReader, RefusesMalformedHeadersNamingTheFileAndTheProblem) {
  TempDir dir;
  const std::string p = dir.file("bad.npy");
  const auto six = ramp(6);
  auto refused = [&](const std::vector<uint8_t>& bytes, const std::vector<std::string>& words) {
    write_file_bytes(p, bytes);
    std::vector<std::string> w = words;
    w.push_back(p);
    expect_data_error([&] { read_npy(p); }, w);
  };
  std::vector<uint8_t> bad_magic = npy_bytes(NpyDtype::u8, {6}, six);
  bad_magic[1] = 'X';
  refused(bad_magic, {"magic"});
  refused({0x93, 'N', 'U'}, {"magic"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (1000, 1000)}", six),
          {"1000000 bytes", "6 follow", "truncated"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4096)}", six),
          {"more than 2^64"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", six), {"trailing"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3)}", six), {"fortran_order"});
  refused(npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", ramp(8)),
          {"unsupported descr '<c8'", "allowed"});
  refused(npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}", ramp(4)), {"big-endian"});
  refused(npy_with_header("{'descr': '|u1', 'shape': (6,)}", six), {"missing fortran_order"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (-6,)}", six), {"shape entry"});
  refused(npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (6,), 'x': 1}", six), {"unknown key 'x'"});
  std::vector<uint8_t> long_header = npy_bytes(NpyDtype::u8, {6}, six);
  long_header[8] = 0xff;  // header length 0x??ff: past the end of the file
  long_header[9] = 0x7f;
  refused(long_header, {"truncated"});
  std::vector<uint8_t> v4 = npy_bytes(NpyDtype::u8, {6}, six);
  v4[6] = 4;
  refused(v4, {"version 4.0"});
  expect_data_error([&] { read_npy(dir.file("missing.npy")); }, {"missing.npy", "cannot open"});
}

TEST(NpzReader, ReadsStoredAndDeflatedMembersExactly) {
  TempDir dir;
  const auto images = ramp(3 * 5 * 5);
  const std::vector<int64_t> labels = {2, 0, 1};
  const std::string path = dir.file("d.npz");
  write_file_bytes(path, test::zip_bytes({{"x.npy", npy_bytes(NpyDtype::u8, {3, 5, 5}, images), false},
                                          {"y.npy", npy_bytes(NpyDtype::s64, {3}, le_bytes(labels)), true}}));
  const NpzArchive npz(path);
  EXPECT_EQ(npz.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(npz.read("x").data, images);
  const NpyArray y = npz.read("y");
  ASSERT_EQ(y.header.shape, (std::vector<int64_t>{3}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(y.as_int(i), labels[static_cast<size_t>(i)]);
  expect_data_error([&] { npz.read("x_train"); }, {path, "no array 'x_train'", "it holds: x, y"});
}

TEST(NpzReader, RefusesCorruptArchivesNamingTheMember) {
  TempDir dir;
  const auto member = npy_bytes(NpyDtype::u8, {4, 4}, ramp(16));
  const std::string p = dir.file("bad.npz");
  // A stored member claiming more bytes than it holds: refused before allocating.
  write_file_bytes(p, test::zip_bytes({{"x.npy", member, false, 0x7ffffff0}}));
  expect_data_error([&] { NpzArchive(p).read("x"); }, {"bad.npz:x.npy", "claims 2147483632 bytes"});
  // A deflated member claiming more than deflate can expand to.
  write_file_bytes(p, test::zip_bytes({{"x.npy", member, true, int64_t{1} << 31}}));
  expect_data_error([&] { NpzArchive(p).read("x"); }, {"bad.npz:x.npy", "corrupt archive"});
  // A stored member claiming 2 GiB of compressed and uncompressed bytes in a small archive (fuzz_npz
  // found it allocated in full): refused naming both sizes, before allocating.
  write_file_bytes(p, test::zip_bytes({{"x.npy", member, false, 0x7ffffff0, false, 0x7ffffff0}}));
  expect_data_error([&] { NpzArchive(p).read("x"); },
                    {"bad.npz:x.npy", "claims 2147483632 compressed bytes", "the archive holds only"});
  // A wrong CRC.
  write_file_bytes(p, test::zip_bytes({{"x.npy", member, true, -1, true}}));
  expect_data_error([&] { NpzArchive(p).read("x"); }, {"bad.npz:x.npy"});
  // A bad .npy inside names the member.
  std::vector<uint8_t> bad = member;
  bad[0] = 0;
  write_file_bytes(p, test::zip_bytes({{"x.npy", bad, false}}));
  expect_data_error([&] { NpzArchive(p).read("x"); }, {"bad.npz:x.npy", "magic"});
  // Not a zip at all.
  write_file_bytes(p, member);
  expect_data_error([&] { NpzArchive{p}; }, {"bad.npz", "cannot open"});
}

TEST(NumpyDataset, BuildsNchwAndNhwDatasetsAndCountsClasses) {
  TempDir dir;
  const auto x_train = ramp(4 * 3 * 2 * 2);
  const std::vector<int32_t> y_train = {0, 4, 2, 4};
  const std::vector<float> x_test = {0.f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.f, 0.f};
  const std::vector<uint8_t> y_test = {3};
  const std::string path = dir.file("d.npz");
  write_file_bytes(path, test::zip_bytes({
                             {"x_train.npy", npy_bytes(NpyDtype::u8, {4, 3, 2, 2}, x_train), true},
                             {"y_train.npy", npy_bytes(NpyDtype::s32, {4}, le_bytes(y_train)), false},
                             {"x_test.npy", npy_bytes(NpyDtype::u8, {1, 3, 2, 2}, ramp(12)), false},
                             {"y_test.npy", npy_bytes(NpyDtype::u8, {1}, y_test), true},
                         }));
  const TrainTest tt = load_numpy_dataset(path);
  EXPECT_EQ(tt.train.count, 4);
  EXPECT_EQ(tt.train.channels, 3);
  EXPECT_EQ(tt.train.rows, 2);
  EXPECT_EQ(tt.train.num_classes, 5);  // largest label + 1
  EXPECT_EQ(tt.test.num_classes, 5);
  EXPECT_EQ(tt.train.images, x_train);
  EXPECT_EQ(tt.train.labels, (std::vector<int32_t>{0, 4, 2, 4}));
  EXPECT_EQ(tt.test.labels, (std::vector<int32_t>{3}));

  // N,H,W float32 from a folder of .npy files.
  const std::string folder = dir.file("npy");
  std::filesystem::create_directories(folder);
  write_file_bytes(folder + "/x_train.npy", npy_bytes(NpyDtype::f32, {3, 2, 2}, le_bytes(x_test)));
  write_file_bytes(folder + "/y_train.npy", npy_bytes(NpyDtype::s64, {3}, le_bytes(std::vector<int64_t>{0, 1, 1})));
  write_file_bytes(folder + "/x_test.npy", npy_bytes(NpyDtype::f32, {1, 2, 2}, le_bytes(std::vector<float>{0, 1, 0, 1})));
  write_file_bytes(folder + "/y_test.npy", npy_bytes(NpyDtype::s64, {1}, le_bytes(std::vector<int64_t>{1})));
  const TrainTest f = load_numpy_dataset(folder, 3);
  EXPECT_EQ(f.train.channels, 1);
  EXPECT_EQ(f.train.num_classes, 3);
  EXPECT_TRUE(f.train.is_float());
  EXPECT_EQ(f.train.float_images, x_test);
}

TEST(NumpyDataset, RefusesWrongLabelsShapesAndTypes) {
  TempDir dir;
  const NpyArray x = parse_npy(npy_bytes(NpyDtype::u8, {3, 2, 2}, ramp(12)), "x");
  const NpyArray y2 = parse_npy(npy_bytes(NpyDtype::s64, {2}, le_bytes(std::vector<int64_t>{0, 1})), "y");
  expect_data_error([&] { dataset_from_arrays(x, "x", y2, "y"); }, {"count mismatch", "3 images", "2 labels"});
  const NpyArray neg = parse_npy(npy_bytes(NpyDtype::s64, {3}, le_bytes(std::vector<int64_t>{0, -1, 1})), "y");
  expect_data_error([&] { dataset_from_arrays(x, "x", neg, "y"); }, {"label -1 at index 1"});
  const NpyArray big = parse_npy(npy_bytes(NpyDtype::s64, {3}, le_bytes(std::vector<int64_t>{0, 5, 1})), "y");
  expect_data_error([&] { dataset_from_arrays(x, "x", big, "y", 5); }, {"label 5 at index 1", "[0, 5)"});
  const NpyArray fl = parse_npy(npy_bytes(NpyDtype::f32, {3}, le_bytes(std::vector<float>{0, 1, 1})), "y");
  expect_data_error([&] { dataset_from_arrays(x, "x", fl, "y"); }, {"labels of dtype float32"});
  const NpyArray x16 = parse_npy(npy_bytes(NpyDtype::u16, {3, 2, 2}, ramp(24)), "x");
  const NpyArray y3 = parse_npy(npy_bytes(NpyDtype::s64, {3}, le_bytes(std::vector<int64_t>{0, 1, 1})), "y");
  expect_data_error([&] { dataset_from_arrays(x16, "x", y3, "y"); }, {"dtype uint16", "uint8", "float32"});
  const NpyArray x2d = parse_npy(npy_bytes(NpyDtype::u8, {3, 4}, ramp(12)), "x");
  expect_data_error([&] { dataset_from_arrays(x2d, "x", y3, "y"); }, {"N,H,W", "N,C,H,W"});
  const NpyArray nhwc = parse_npy(npy_bytes(NpyDtype::u8, {3, 8, 8, 3}, ramp(3 * 8 * 8 * 3)), "x");
  expect_data_error([&] { dataset_from_arrays(nhwc, "x", y3, "y"); }, {"channels-last", "transpose"});
  const NpyArray nan = parse_npy(npy_bytes(NpyDtype::f32, {3, 1, 1}, le_bytes(std::vector<float>{0, NAN, 1})), "x");
  expect_data_error([&] { dataset_from_arrays(nan, "x", y3, "y"); }, {"element 1", "finite"});
  expect_data_error([&] { load_numpy_dataset(dir.file("none.npz")); }, {"none.npz", "does not exist"});
}

// fuzz_npy regression: as_int of a float element that no int64 holds (NaN, infinities, 1e30) was
// a plain cast, undefined behaviour (UBSan: "-nan is outside the range of representable values").
TEST(NpyReader, AsIntOfFloatsTruncatesSaturatesAndMapsNanToZero) {
  const std::vector<float> f = {-2.75f, 3.5f, NAN, INFINITY, -INFINITY, 1e30f, -1e30f};
  const NpyArray a = parse_npy(npy_bytes(NpyDtype::f32, {7}, le_bytes(f)), "f");
  const std::vector<int64_t> want = {-2, 3, 0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN};
  for (int64_t i = 0; i < 7; ++i)
    EXPECT_EQ(a.as_int(i), want[static_cast<size_t>(i)]) << "element " << i;
  const NpyArray d = parse_npy(npy_bytes(NpyDtype::f64, {2}, le_bytes(std::vector<double>{-NAN, 9.3e18})), "d");
  EXPECT_EQ(d.as_int(0), 0);
  EXPECT_EQ(d.as_int(1), INT64_MAX);
}

// fuzz_npy regressions: an empty array (a 0 in its shape) whose other dimensions multiply past
// int64 holds 0 bytes and reads as 0 elements, without the overflow UBSan reported in count(); as
// images it is refused (the image size is not bounded by the file when N = 0).
TEST(NpyReader, AnEmptyArrayWithHugeOtherDimensionsHasZeroElements) {
  TempDir dir;
  write_file_bytes(dir.file("e.npy"),
                   npy_with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (100000000000000000, "
                                   "100000000000000000, 0), }",
                                   {}));
  const NpyArray a = read_npy(dir.file("e.npy"));
  EXPECT_EQ(a.header.count(), 0);
  EXPECT_EQ(a.header.data_bytes(), 0u);
  EXPECT_TRUE(a.data.empty());
  const NpyArray x = parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, "
                                               "100000000000000000, 100000000000000000, 100000000000000000), }",
                                               {}),
                               "x");
  const NpyArray y = parse_npy(npy_bytes(NpyDtype::s64, {0}, {}), "y");
  expect_data_error([&] { dataset_from_arrays(x, "x", y, "y"); }, {"'x'", "2^40"});
  // An empty array of plausible images is still a (0-image) dataset; the run refuses it later.
  const NpyArray x0 = parse_npy(npy_bytes(NpyDtype::u8, {0, 3, 2, 2}, {}), "x");
  EXPECT_EQ(dataset_from_arrays(x0, "x", y, "y").count, 0);
}

}  // namespace
}  // namespace lathe
