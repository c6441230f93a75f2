// Walks an image-folder dataset (train/ and test/, one subfolder per class) and decodes it.
#include "engine/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/image_decode.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

bool is_image_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* ext : {".png", ".jpg", ".jpeg"}) {
    const std::string e = ext;
    if (lower.size() > e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0)
      return true;
  }
  return false;
}

std::vector<std::string> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.')
      continue;
    if (it->is_directory(ec) == directories)
      out.push_back(name);
  }
  if (ec)
    throw DataError("image folder '" + dir.string() + "': cannot list: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Dataset load_image_split(const std::string& folder, const std::vector<std::string>& class_names, int64_t image_size,
                         int64_t channels, bool require_every_class, int64_t first) {
  LATHE_CHECK(image_size >= 1 && (channels == 1 || channels == 3) && first >= 0, "load_image_split: size ", image_size,
              ", channels ", channels, ", first ", first);
  Dataset ds;
  ds.channels = channels;
  ds.rows = ds.cols = image_size;
  ds.num_classes = static_cast<int>(class_names.size());
  ds.class_names = class_names;
  ds.source = folder;
  const int64_t per = ds.pixels_per_image(), plane = ds.plane();
  std::error_code ec;
  int64_t listed = 0;  // image files in the split, decoded or not
  for (size_t label = 0; label < class_names.size(); ++label) {
    const fs::path dir = fs::path(folder) / class_names[label];
    if (!fs::is_directory(dir, ec)) {
      if (require_every_class)
        throw DataError("image folder '" + folder + "': no subfolder for class '" + class_names[label] + "'");
      continue;
    }
    const std::vector<std::string> files = sorted_entries(dir, false);
    if (files.empty() && require_every_class)
      throw DataError("image folder '" + dir.string() + "' holds no images; every class needs at least one");
    for (const std::string& name : files) {
      const std::string path = (dir / name).string();
      if (!is_image_name(name))
        throw DataError("image folder: '" + path + "' is not an image file; allowed: .png, .jpg, .jpeg");
      if (first > 0 && listed++ >= first)
        continue;  // past the samples kept: named and checked above, never decoded
      const DecodedImage img =
          resize_bilinear(convert_channels(decode_image_file(path), channels), image_size, image_size);
      const size_t at = ds.images.size();
      ds.images.resize(at + static_cast<size_t>(per));
      for (int64_t c = 0; c < channels; ++c)  // H x W x C -> C x H x W
        for (int64_t p = 0; p < plane; ++p)
          ds.images[at + static_cast<size_t>(c * plane + p)] = img.pixels[static_cast<size_t>(p * channels + c)];
      ds.labels.push_back(static_cast<int32_t>(label));
      ++ds.count;
    }
  }
  if (first > 0 && ds.count < listed)  // as subset() names the samples it keeps
    ds.source += " (first " + std::to_string(ds.count) + ")";
  return ds;
}

TrainTest load_image_folder(const std::string& root, int64_t image_size, int64_t channels, int64_t train_first,
                            int64_t test_first) {
  std::error_code ec;
  const fs::path train = fs::path(root) / "train", test = fs::path(root) / "test";
  for (const fs::path& p : {train, test})
    if (!fs::is_directory(p, ec))
      throw DataError("data.path: the image folder '" + root + "' has no " + p.filename().string() +
                      "/ subfolder; dataset \"folder\" reads root/train/<class>/*.png|jpg and root/test/<class>/*");
  const std::vector<std::string> classes = sorted_entries(train, true);
  if (classes.empty())
    throw DataError("image folder '" + train.string() + "' has no class subfolders");
  for (const std::string& c : sorted_entries(test, true))
    if (!std::binary_search(classes.begin(), classes.end(), c))
      throw DataError("image folder '" + test.string() + "' has class '" + c + "', which '" + train.string() +
                      "' lacks; the test classes must be training classes");
  TrainTest tt;
  tt.train = load_image_split(train.string(), classes, image_size, channels, true, train_first);
  tt.test = load_image_split(test.string(), classes, image_size, channels, false, test_first);
  return tt;
}

}  // namespace lathe
