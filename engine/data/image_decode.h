// Decoding PNG (libpng) and JPEG (libjpeg-turbo) files into 8-bit pixels, and the two conversions an
// image folder needs: to 1 (grey) or 3 (RGB) channels and a bilinear resize. Claimed sizes are
// checked before any pixel buffer is allocated; unreadable files are lathe::DataErrors naming them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

/// Pixels row-major, channels interleaved (H x W x C), C = 1 (grey) or 3 (RGB).
struct DecodedImage {
  int64_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

/// The largest image decoded, in pixels (width x height): 64 megapixels.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

/// Decodes `path` by its leading bytes (PNG signature or JPEG SOI), whatever its extension. Grey
/// files give 1 channel and colour files 3; PNG alpha is composited on black, 16-bit PNGs are
/// reduced to 8 bits, palettes expanded. DataError naming the file for anything else, a corrupt
/// or truncated stream, or more than kMaxImagePixels pixels.
DecodedImage decode_image_file(const std::string& path);

/// `img` with `channels` (1 or 3) channels: grey from RGB is round(0.299 R + 0.587 G + 0.114 B)
/// (ITU-R BT.601, as PIL's convert("L")); RGB from grey repeats the value.
DecodedImage convert_channels(const DecodedImage& img, int64_t channels);

/// Bilinear resize to `height` x `width` with half-pixel centres (PyTorch's
/// interpolate(mode="bilinear", align_corners=False) without antialiasing, OpenCV's INTER_LINEAR):
/// source coordinate (x + 0.5) * in / out - 0.5, clamped to the image, values rounded to the nearest
/// integer. The same size returns the image unchanged.
DecodedImage resize_bilinear(const DecodedImage& img, int64_t height, int64_t width);

/// Writes a PNG (8-bit grey or RGB) or a baseline JPEG (`quality` 1..100); for tests and tools.
/// Throws lathe::DataError when the file cannot be written.
void write_png(const std::string& path, const DecodedImage& img);
void write_jpeg(const std::string& path, const DecodedImage& img, int quality = 95);

}  // namespace lathe
