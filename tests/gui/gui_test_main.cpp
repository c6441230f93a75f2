// main() of test_gui: a QApplication on the offscreen platform (unless QT_QPA_PLATFORM says
// otherwise), then GoogleTest.
#include <gtest/gtest.h>

#include <QApplication>

#include "widgets/common/offscreen_app.h"

int main(int argc, char** argv) {
  lathe::widgets::use_offscreen_platform();
  QApplication app(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
