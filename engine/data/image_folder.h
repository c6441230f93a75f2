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
Dataset load_image_split(const std::string& folder, const std::vector<std::string>& class_names, int64_t image_size,
                         int64_t channels, bool require_every_class);

/// Both splits from `root` (train/ and test/). DataError naming the folder or file for a missing
/// split, a test class the training split lacks, an empty training class, or an unreadable image.
TrainTest load_image_folder(const std::string& root, int64_t image_size, int64_t channels);

}  // namespace lathe
