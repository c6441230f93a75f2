// Labelled image sets from folders of PNG/JPEG files: root/train/<class>/* and root/test/<class>/*,
// one subfolder per class, class names = the training split's subfolder names sorted (byte order),
// labels their positions. Each image is decoded, converted to 1 (grey) or 3 (RGB) channels and
// resized (bilinear, image_decode.h) to image_size x image_size; stored u8, C x H x W.
#pragma once

#include <string>

#include "engine/data/dataset.h"

namespace lathe {

/// One split: `folder`/<class>/<file> for each name in `class_names` that exists as a subfolder
/// (all of them when `require_every_class`). Files are read in sorted order; hidden files (".x")
/// are skipped; anything else not ending in .png, .jpg or .jpeg (any case) is refused, naming it.
/// `first` > 0 decodes only the first `first` images in that order (byte for byte what subset()
/// of the whole split keeps, source suffix included); every file name is still listed and checked,
/// but an image past them is not opened. 0 = every image.
Dataset load_image_split(const std::string& folder, const std::vector<std::string>& class_names, int64_t image_size,
                         int64_t channels, bool require_every_class, int64_t first = 0);

/// Both splits from `root` (train/ and test/), each cut to its first `train_first` / `test_first`
/// images (0 = all). DataError naming the folder or file for a missing split, a test class the
/// training split lacks, an empty training class, or an unreadable image (among those decoded).
TrainTest load_image_folder(const std::string& root, int64_t image_size, int64_t channels, int64_t train_first = 0,
                            int64_t test_first = 0);

}  // namespace lathe
