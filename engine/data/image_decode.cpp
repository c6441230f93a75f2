// PNG through libpng's simplified API, JPEG through libjpeg's (setjmp error handling kept in plain C
// frames, so no C++ object is ever skipped by longjmp), plus channel conversion and bilinear resize.
#include "engine/data/image_decode.h"

#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "engine/core/error.h"

namespace lathe {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DataError("image '" + path + "': cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw DataError("image '" + path + "': read error");
  return bytes;
}

void check_size(const std::string& path, int64_t width, int64_t height) {
  if (width < 1 || height < 1 || width > kMaxImagePixels || height > kMaxImagePixels ||
      width * height > kMaxImagePixels)
    throw DataError("image '" + path + "': its header claims " + std::to_string(width) + " x " +
                    std::to_string(height) + " pixels; allowed 1 to " + std::to_string(kMaxImagePixels) +
                    " pixels in all");
}

DecodedImage decode_png(const std::string& path, const std::vector<uint8_t>& bytes) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    throw DataError("image '" + path + "': corrupt PNG: " + image.message);
  const bool colour = (image.format & PNG_FORMAT_FLAG_COLOR) != 0;
  try {
    check_size(path, image.width, image.height);
  } catch (...) {
    png_image_free(&image);
    throw;
  }
  image.format = colour ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  DecodedImage out;
  out.width = image.width;
  out.height = image.height;
  out.channels = colour ? 3 : 1;
  out.pixels.assign(PNG_IMAGE_SIZE(image), 0);  // zeros: alpha is composited onto black
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr))
    throw DataError("image '" + path + "': corrupt PNG: " + image.message);
  return out;
}

// ---- JPEG: everything between setjmp and longjmp is plain C data.
struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_silence(j_common_ptr, int) {}  // warnings (e.g. extraneous bytes) are not errors

struct JpegResult {
  unsigned char* pixels;  // malloc'd, or null
  long width, height, channels;
  int status;  // 0 ok, 1 decode error, 2 too large
};

/// Decodes in C style; on any failure returns a status and frees what it allocated.
void decode_jpeg_raw(const unsigned char* data, unsigned long size, JpegResult* r, JpegError* err) {
  jpeg_decompress_struct cinfo;
  r->pixels = nullptr;
  r->status = 1;
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_fail;
  err->mgr.emit_message = jpeg_silence;
  err->message[0] = 0;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::free(r->pixels);
    r->pixels = nullptr;
    return;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, size);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  r->width = static_cast<long>(cinfo.image_width);
  r->height = static_cast<long>(cinfo.image_height);
  r->channels = cinfo.num_components == 1 ? 1 : 3;
  if (r->width < 1 || r->height < 1 || r->width * r->height > kMaxImagePixels) {
    r->status = 2;
    jpeg_destroy_decompress(&cinfo);
    return;
  }
  jpeg_start_decompress(&cinfo);
  const size_t stride = static_cast<size_t>(r->width) * static_cast<size_t>(r->channels);
  r->pixels = static_cast<unsigned char*>(std::malloc(stride * static_cast<size_t>(r->height)));
  if (!r->pixels) {
    jpeg_destroy_decompress(&cinfo);
    return;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = r->pixels + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  r->status = 0;
}

DecodedImage decode_jpeg(const std::string& path, const std::vector<uint8_t>& bytes) {
  JpegError err;
  JpegResult r{};
  decode_jpeg_raw(bytes.data(), static_cast<unsigned long>(bytes.size()), &r, &err);
  if (r.status == 2)
    check_size(path, r.width, r.height);  // throws with the claimed size
  if (r.status != 0)
    throw DataError("image '" + path + "': corrupt JPEG: " + std::string(err.message));
  DecodedImage out;
  out.width = r.width;
  out.height = r.height;
  out.channels = r.channels;
  out.pixels.assign(r.pixels, r.pixels + r.width * r.height * r.channels);
  std::free(r.pixels);
  return out;
}

}  // namespace

DecodedImage decode_image_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_all(path);
  if (bytes.size() >= 8 && png_sig_cmp(bytes.data(), 0, 8) == 0)
    return decode_png(path, bytes);
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
    return decode_jpeg(path, bytes);
  throw DataError("image '" + path + "': neither a PNG nor a JPEG file (" + std::to_string(bytes.size()) +
                  " bytes; checked by its first bytes, not its name)");
}

DecodedImage convert_channels(const DecodedImage& img, int64_t channels) {
  LATHE_CHECK(channels == 1 || channels == 3, "convert_channels: channels must be 1 or 3, got ", channels);
  LATHE_CHECK(img.channels == 1 || img.channels == 3, "convert_channels: image has ", img.channels, " channels");
  if (img.channels == channels)
    return img;
  DecodedImage out;
  out.width = img.width;
  out.height = img.height;
  out.channels = channels;
  const int64_t n = img.width * img.height;
  out.pixels.resize(static_cast<size_t>(n * channels));
  for (int64_t i = 0; i < n; ++i) {
    if (channels == 1) {
      const uint8_t* p = &img.pixels[static_cast<size_t>(3 * i)];
      // Integer form of 0.299 R + 0.587 G + 0.114 B rounded half up (PIL's weights, x 1000).
      out.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
    } else {
      std::fill_n(&out.pixels[static_cast<size_t>(3 * i)], 3, img.pixels[static_cast<size_t>(i)]);
    }
  }
  return out;
}

DecodedImage resize_bilinear(const DecodedImage& img, int64_t height, int64_t width) {
  LATHE_CHECK(height >= 1 && width >= 1, "resize_bilinear: target ", height, " x ", width);
  if (img.height == height && img.width == width)
    return img;
  DecodedImage out;
  out.width = width;
  out.height = height;
  out.channels = img.channels;
  out.pixels.resize(static_cast<size_t>(width * height * img.channels));
  // Source coordinate and weight of each output column / row (half-pixel centres, clamped).
  auto taps = [](int64_t out_n, int64_t in_n, std::vector<int64_t>& lo, std::vector<int64_t>& hi,
                 std::vector<double>& frac) {
    const double scale = static_cast<double>(in_n) / static_cast<double>(out_n);
    for (int64_t o = 0; o < out_n; ++o) {
      const double src = std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0, static_cast<double>(in_n - 1));
      const auto l = static_cast<int64_t>(std::floor(src));
      lo.push_back(l);
      hi.push_back(std::min(l + 1, in_n - 1));
      frac.push_back(src - static_cast<double>(l));
    }
  };
  std::vector<int64_t> x0, x1, y0, y1;
  std::vector<double> fx, fy;
  taps(width, img.width, x0, x1, fx);
  taps(height, img.height, y0, y1, fy);
  const int64_t c = img.channels;
  auto at = [&](int64_t y, int64_t x, int64_t k) {
    return static_cast<double>(img.pixels[static_cast<size_t>((y * img.width + x) * c + k)]);
  };
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t k = 0; k < c; ++k) {
        const double top = at(y0[y], x0[x], k) * (1 - fx[x]) + at(y0[y], x1[x], k) * fx[x];
        const double bottom = at(y1[y], x0[x], k) * (1 - fx[x]) + at(y1[y], x1[x], k) * fx[x];
        const double v = top * (1 - fy[y]) + bottom * fy[y];
        out.pixels[static_cast<size_t>((y * width + x) * c + k)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
  return out;
}

void write_png(const std::string& path, const DecodedImage& img) {
  LATHE_CHECK(img.channels == 1 || img.channels == 3, "write_png: ", img.channels, " channels");
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(img.width);
  image.height = static_cast<png_uint_32>(img.height);
  image.format = img.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  if (!png_image_write_to_file(&image, path.c_str(), 0, img.pixels.data(), 0, nullptr))
    throw DataError("writing PNG '" + path + "': " + image.message);
}

void write_jpeg(const std::string& path, const DecodedImage& img, int quality) {
  LATHE_CHECK(img.channels == 1 || img.channels == 3, "write_jpeg: ", img.channels, " channels");
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    throw DataError("writing JPEG '" + path + "': " + std::strerror(errno));
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);  // writing our own well-formed buffer: libjpeg's default exit is fine
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = static_cast<JDIMENSION>(img.width);
  cinfo.image_height = static_cast<JDIMENSION>(img.height);
  cinfo.input_components = static_cast<int>(img.channels);
  cinfo.in_color_space = img.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(img.width * img.channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(img.pixels.data() + stride * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  if (std::fclose(f) != 0)
    throw DataError("writing JPEG '" + path + "': " + std::strerror(errno));
}

}  // namespace lathe
