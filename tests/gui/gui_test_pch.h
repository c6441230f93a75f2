// The headers the GUI tests share, precompiled once for test_gui (tests/gui/CMakeLists.txt): gtest,
// json, the standard library and the Qt Widgets headers most test files include. Third-party only.
#pragma once

#include "tests/support/test_pch.h"

#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QString>
#include <QTimer>
#include <QWidget>
#include <qcustomplot.h>
